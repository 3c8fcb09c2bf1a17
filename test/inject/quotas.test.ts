import t, { type Test } from 'tap'
import { request } from 'undici'
import type { Config } from '../../src/config.js'
import { openDatabase } from '../../src/db/sqlite/client.js'
import { isPostgresUrl } from '../../src/lib/database-url.js'
import { postgresClient } from '../helpers/backends.js'
import { cli } from '../helpers/cli.js'
import { injectServer, type InjectServer } from '../helpers/inject.js'
import { openSession } from '../helpers/mcp.js'
import { defaultOrganization } from '../helpers/seed.js'
import { callToEnd, failureOf, okData } from '../helpers/tools.js'

/**
 * Per-organization quotas (issue 29; docs/decisions/quotas.md), on both backends: each quota refused with a message
 * that names it, its value, the setting and what to do, with details {quota, limit, usage, setting}; then raised with
 * `service-mcp quotas set` and accepted. N creates at once at the apps quota: exactly the limit succeed. /metrics
 * shows the highest usage ratio and the organizations at their limit.
 */

t.setTimeout(120_000)

interface QuotaFailure {
  code: string
  message: string
  details: { quota: string; limit: number; usage: number; setting: string }
}

async function quotaServer(t: Test, config: Partial<Config>) {
  // The tool windows would refuse the bursts long before a quota: this file tests quotas, not rate limits.
  const server = await injectServer(t, { config: { metrics: true, rateLimitToolFactor: 100, rateLimitApiKeyMember: 10_000, rateLimitOrganization: 10_000, ...config } })
  const session = await openSession(server.mcpUrl, server.apiKey)
  let id = 0
  const call = async (name: string, args: Record<string, unknown>) => (await callToEnd(server.mcpUrl, session.headers, name, args, ++id)).result
  // The operator runs the CLI with the server's settings: what an organization without its own value follows.
  const settings = { SERVICE_QUOTA_APPS: server.config.quotaApps, SERVICE_QUOTA_ENV_VARS_PER_APP: server.config.quotaEnvVarsPerApp, SERVICE_QUOTA_CONCURRENT_DEPLOYMENTS: server.config.quotaConcurrentDeployments, SERVICE_QUOTA_DEPLOYMENT_OUTPUT_MB: server.config.quotaDeploymentOutputMb }
  const env = { ...server.cliEnv, ...Object.fromEntries(Object.entries(settings).map(([k, v]) => [k, String(v)])) }
  const quotas = (...args: string[]) => cli(['quotas', ...args], env)
  const org = await defaultOrganization(server)
  return { server, call, quotas, org }
}

/** A QUOTA_EXCEEDED tool failure of `quota`. */
function refused(t: Test, result: any, quota: string): QuotaFailure {
  const failure = failureOf(t, result, 'QUOTA_EXCEEDED') as QuotaFailure
  t.equal(failure.details?.quota, quota, `refused by the ${quota} quota`)
  return failure
}

async function metricValue(server: InjectServer, metric: string, quota: string): Promise<number> {
  const res = await request(`${server.url}/metrics`)
  const text = await res.body.text()
  const line = text.split('\n').find((l) => l.startsWith(`${metric}{quota="${quota}"}`))
  if (!line) throw new Error(`no ${metric}{quota="${quota}"} in /metrics`)
  return Number(line.split(' ').at(-1))
}

/** Raw SQL on the server's database: stored output is written by the runner as lines arrive, which no test here runs. */
async function rawSql(t: Test, dbPath: string): Promise<(query: string, params?: unknown[]) => Promise<void>> {
  if (isPostgresUrl(dbPath)) {
    const client = await postgresClient(t, dbPath)
    return async (query, params = []) => {
      let i = 0
      await client.query(query.replace(/\?/g, () => `$${++i}`), params)
    }
  }
  const handle = openDatabase(dbPath)
  t.teardown(() => handle.close())
  return async (query, params = []) => void handle.sqlite.prepare(query).run(...params)
}

t.test('apps: N creates at once at the quota, exactly the limit succeed; refused with its message; raised with the CLI; metrics', async (t) => {
  const { server, call, quotas, org } = await quotaServer(t, { quotaApps: 3 })
  const results = await Promise.all(Array.from({ length: 8 }, (_, i) => call('service_apps_create', { name: `burst-${i}` })))
  const ok = results.filter((r) => r.isError === false)
  t.equal(ok.length, 3, 'exactly the limit get in')
  t.equal(await server.app.repos.organizationQuotas.usage('apps', org.id), 3, 'and exactly the limit are stored')
  const failures = results.filter((r) => r.isError === true).map((r) => refused(t, r, 'apps'))
  t.equal(failures.length, 5, 'every other one is refused')
  const failure = failures[0]!
  t.strictSame(failure.details, { quota: 'apps', limit: 3, usage: 3, setting: 'SERVICE_QUOTA_APPS' })
  t.match(failure.message, /^Quota apps reached: this organization may have 3 apps \(the server's setting SERVICE_QUOTA_APPS\) and has 3 apps\./)
  t.match(failure.message, /service_apps_delete/, 'says what the member can free')
  t.match(failure.message, /service-mcp quotas set default apps <value>/, 'and how the operator raises it')

  t.equal(await metricValue(server, 'service_quota_usage_ratio_max', 'apps'), 1)
  t.equal(await metricValue(server, 'service_quota_organizations_at_limit', 'apps'), 1)
  t.equal(await metricValue(server, 'service_quota_usage_ratio_max', 'env_vars_per_app'), 0, 'a quota nobody uses')

  const set = await quotas('set', 'default', 'apps', '4')
  t.equal(set.code, 0, set.stderr)
  t.match(set.stdout, /^default: quota apps is 4 apps \(was the setting SERVICE_QUOTA_APPS = 3\)/)
  okData(t, await call('service_apps_create', { name: 'after-raise' }))
  const again = refused(t, await call('service_apps_create', { name: 'one-too-many' }), 'apps')
  t.strictSame(again.details, { quota: 'apps', limit: 4, usage: 4, setting: 'SERVICE_QUOTA_APPS' })
  t.match(again.message, /this organization's own value \(the server's setting is SERVICE_QUOTA_APPS\)/)

  t.equal((await quotas('set', 'default', 'apps', '8')).code, 0)
  t.equal(await metricValue(server, 'service_quota_usage_ratio_max', 'apps'), 0.5, '4 of 8')
  t.equal(await metricValue(server, 'service_quota_organizations_at_limit', 'apps'), 0)

  const list = await quotas('list', '--org', 'default')
  t.equal(list.code, 0, list.stderr)
  t.match(list.stdout, /^default\s+apps\s+8\s+organization\s+4\s+apps$/m)
  t.match(list.stdout, /^default\s+env_vars_per_app\s+200\s+SERVICE_QUOTA_ENV_VARS_PER_APP\s+0\s+env vars \(fullest app\)$/m)

  const reset = await quotas('reset', 'default', 'apps')
  t.equal(reset.code, 0, reset.stderr)
  t.match(reset.stdout, /follows the setting SERVICE_QUOTA_APPS again \(3; was 8\)/)
  t.equal(await metricValue(server, 'service_quota_organizations_at_limit', 'apps'), 1, 'over the setting again')
  refused(t, await call('service_apps_create', { name: 'over' }), 'apps')

  const audited = await server.app.repos.audit.page(org.id, 10)
  const changes = audited.items.filter((e) => e.action.startsWith('quota.'))
  t.strictSame(changes.map((e) => [e.action, e.credentialKind, e.targetId, (e.details as any).value]), [
    ['quota.reset', 'cli', 'apps', null],
    ['quota.set', 'cli', 'apps', 8],
    ['quota.set', 'cli', 'apps', 4],
  ], 'each change is audited as the CLI\'s')

  const bad = await quotas('set', 'default', 'disk', '5')
  t.equal(bad.code, 2)
  t.match(bad.stderr, /quota must be one of apps, env_vars_per_app, concurrent_deployments, deployment_output_mb/)
  t.equal((await quotas('set', 'default', 'apps', '-1')).code, 2, 'a negative value is refused')
})

t.test('env vars per app: a new name refused at the quota (in the browser too, before anyone is asked), a value always replaced', async (t) => {
  const { call, quotas } = await quotaServer(t, { quotaEnvVarsPerApp: 2 })
  const app = okData(t, await call('service_apps_create', { name: 'envy' })).app
  okData(t, await call('service_env_set', { app_id: app.id, name: 'A', value: '1' }))
  okData(t, await call('service_env_set', { app_id: app.id, name: 'B', value: '2' }))
  const failure = refused(t, await call('service_env_set', { app_id: app.id, name: 'C', value: '3' }), 'env_vars_per_app')
  t.strictSame(failure.details, { quota: 'env_vars_per_app', limit: 2, usage: 2, setting: 'SERVICE_QUOTA_ENV_VARS_PER_APP' })
  t.match(failure.message, /this app may have 2 env vars .* service_env_unset/)
  t.equal(okData(t, await call('service_env_set', { app_id: app.id, name: 'A', value: 'new' })).created, false, 'replacing a value is allowed')
  const other = okData(t, await call('service_apps_create', { name: 'other' })).app
  t.equal(okData(t, await call('service_env_set', { app_id: other.id, name: 'C', value: '3' })).created, true, 'another app has its own quota')
  const burst = await Promise.all(['D', 'E', 'F', 'G'].map((name) => call('service_env_set', { app_id: other.id, name, value: 'x' })))
  t.equal(burst.filter((r) => r.isError === false).length, 1, 'new names at once for the last place: exactly one gets it')
  refused(t, await call('service_env_set_in_browser', { app_id: app.id, name: 'C' }), 'env_vars_per_app')

  t.equal((await quotas('set', 'default', 'env_vars_per_app', '3')).code, 0)
  t.equal(okData(t, await call('service_env_set', { app_id: app.id, name: 'C', value: '3' })).created, true, 'accepted once raised')
})

t.test('deployments: refused before the confirmation at the concurrent and stored-output quotas; the runner checks too; raised with the CLI', async (t) => {
  const { server, call, quotas, org } = await quotaServer(t, { quotaConcurrentDeployments: 1, quotaDeploymentOutputMb: 1 })
  const { repos } = server.app
  const busy = okData(t, await call('service_apps_create', { name: 'busy' })).app
  const idle = okData(t, await call('service_apps_create', { name: 'idle' })).app
  // A succeeded deploy of `idle` to roll back to, and a run of `busy` still queued (nothing runs in this test).
  const done = await repos.deployments.create({ organizationId: org.id, appId: idle.id, kind: 'deploy', pipeline: 'default', createdBy: null })
  await repos.deployments.finish(done.id, 'succeeded', Date.now(), 0, 'succeeded')
  const queued = await repos.deployments.create({ organizationId: org.id, appId: busy.id, kind: 'deploy', pipeline: 'default', createdBy: null })

  // The session declares no elicitation: a call that passes the quotas fails at the confirmation (CAPABILITY_REQUIRED).
  const deploy = refused(t, await call('service_deployments_create', { app_id: idle.id }), 'concurrent_deployments')
  t.strictSame(deploy.details, { quota: 'concurrent_deployments', limit: 1, usage: 1, setting: 'SERVICE_QUOTA_CONCURRENT_DEPLOYMENTS' })
  t.match(deploy.message, /service_deployments_cancel/)
  refused(t, await call('service_deployments_rollback', { app_id: idle.id, to_deployment_id: done.id }), 'concurrent_deployments')
  await t.rejects(server.app.pipelines.start({ organizationId: org.id, appId: idle.id, kind: 'deploy', createdBy: null }), { code: 'QUOTA_EXCEEDED' }, 'the runner refuses a start that skipped the tool')

  t.equal((await quotas('set', 'default', 'concurrent_deployments', '2')).code, 0)
  failureOf(t, await call('service_deployments_create', { app_id: idle.id }), 'CAPABILITY_REQUIRED')

  // 1 MiB of output stored by the queued run's organization: at the quota, no run starts.
  const sql = await rawSql(t, server.dbPath)
  await sql('UPDATE deployments SET output_bytes = ? WHERE id = ?', [1_048_576, queued.id])
  const output = refused(t, await call('service_deployments_create', { app_id: idle.id }), 'deployment_output_mb')
  t.strictSame(output.details, { quota: 'deployment_output_mb', limit: 1, usage: 1, setting: 'SERVICE_QUOTA_DEPLOYMENT_OUTPUT_MB' })
  t.match(output.message, /holds 1 MB of stored deployment output/)
  t.match(output.message, /retention/, 'says how to free some')
  refused(t, await call('service_deployments_rollback', { app_id: idle.id, to_deployment_id: done.id }), 'deployment_output_mb')
  t.equal(await metricValue(server, 'service_quota_usage_ratio_max', 'deployment_output_mb'), 1)

  t.equal((await quotas('set', 'default', 'deployment_output_mb', '0')).code, 0, '0 = unlimited')
  failureOf(t, await call('service_deployments_rollback', { app_id: idle.id, to_deployment_id: done.id }), 'CAPABILITY_REQUIRED')
  t.equal(await metricValue(server, 'service_quota_usage_ratio_max', 'deployment_output_mb'), 0, 'an unlimited organization is left out')
})

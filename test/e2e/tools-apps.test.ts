import t, { type Test } from 'tap'
import { newId } from '../../src/lib/crypto.js'
import { appTools } from '../../src/plugins/tools/builtin/apps.js'
import { envTools } from '../../src/plugins/tools/builtin/env.js'
import { builtinTools } from '../../src/plugins/tools/builtin/index.js'
import type { ToolDefinition } from '../../src/plugins/tools/define.js'
import { answerRequest, elicitationOn, openLiveCall, readToEnd } from '../helpers/confirm.js'
import { callTool, openSession, post, type RpcReply } from '../helpers/mcp.js'
import { createMember, defaultOrganization } from '../helpers/seed.js'
import { startServer, type TestServer } from '../helpers/server.js'
import { messagesOf } from '../helpers/stream.js'
import { failureOf, okData, resultOf } from '../helpers/tools.js'

/** The catalog with the app and env tools, once each (they may already be part of builtinTools). */
const TOOLS = [...new Map<string, ToolDefinition<any, any>>([...builtinTools, ...appTools, ...envTools].map((d) => [d.name, d])).values()]
const PIPELINES = { default: { argv: [process.execPath, '-e', 'process.exit(0)'] }, staging: { argv: [process.execPath, '-e', 'process.exit(0)'] } }
const ELICIT = { elicitation: {} }

let nextId = 1000
const rid = () => ++nextId

async function serve(t: Test): Promise<TestServer> {
  return startServer(t, { tools: TOOLS, config: { pipelines: PIPELINES } })
}

function failure(t: Test, result: any, code: string): { code: string; message: string } {
  const err = failureOf(t, result, code)
  t.notOk('structuredContent' in result, 'a failure carries no structuredContent')
  return err
}

async function call(t: Test, server: TestServer, headers: Record<string, string>, name: string, args: Record<string, unknown>): Promise<any> {
  return resultOf(t, await post(server.mcpUrl, callTool(name, args, rid()), headers))
}

/**
 * Calls a confirmation-gated tool on a live SSE stream, answers its elicitation/create with `answer` (a JSON-RPC
 * result) on the same session, and returns the elicitation request and the tool result.
 */
async function confirmed(
  t: Test,
  server: TestServer,
  headers: Record<string, string>,
  name: string,
  args: Record<string, unknown>,
  answer: Record<string, unknown>,
): Promise<{ request: any; result: any }> {
  const id = rid()
  const live = await openLiveCall(t, server.mcpUrl, headers, callTool(name, args, id))
  t.equal(live.status, 200)
  t.equal(live.headers['content-type'], 'text/event-stream', 'a confirmation-gated call is answered as SSE')
  const request = await elicitationOn(live)
  t.notOk(messagesOf(live).some((m) => m.id === id), 'no tool result before the answer')
  const reply = await answerRequest(server.mcpUrl, headers, request.id, answer)
  t.equal(reply.status, 202, 'the answer is accepted with 202')
  const { responses } = await readToEnd(live, id)
  t.ok(live.endedByServer, 'the server ends the stream after the result')
  t.equal(responses.length, 1, 'one tool result on the stream')
  return { request, result: responses[0]?.result }
}

function checkConfirmRequest(t: Test, request: any, message: string): void {
  t.equal(request.jsonrpc, '2.0')
  t.ok(typeof request.id === 'number' || typeof request.id === 'string', 'the request has an id')
  t.equal(request.params.mode, 'form')
  t.equal(request.params.message, message)
  const schema = request.params.requestedSchema
  t.equal(schema.type, 'object')
  t.equal(schema.properties.confirm.type, 'boolean')
  t.strictSame(schema.required, ['confirm'])
}

async function finishedDeployments(server: TestServer, organizationId: string, appId: string, n: number): Promise<string[]> {
  const repos = server.app.repos
  const ids: string[] = []
  for (let i = 0; i < n; i++) {
    const d = await repos.deployments.create({ organizationId, appId, kind: 'deploy', pipeline: 'default', createdBy: null })
    await repos.deployments.finish(d.id, 'succeeded', Date.now(), 0, 'exit 0')
    ids.push(d.id)
  }
  return ids
}

const APP_KEYS = ['created_at', 'description', 'id', 'name', 'pipeline', 'updated_at']

t.test('the tools are listed with their declarations', async (t) => {
  const server = await serve(t)
  const { headers } = await openSession(server.mcpUrl, server.apiKey)
  const list = await post(server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }, headers)
  const byName = new Map<string, any>(list.json.result.tools.map((x: any) => [x.name, x]))
  for (const name of ['service_apps_get', 'service_apps_create', 'service_apps_update', 'service_apps_delete']) t.ok(byName.has(name), `${name} listed`)
  const del = byName.get('service_apps_delete')
  t.equal(del.annotations.destructiveHint, true)
  t.equal(del._meta['service/confirmation'], true)
  t.equal(del._meta['service/role'], 'admin')
  t.equal(byName.get('service_apps_get')._meta['service/scope'], 'mcp:read')
  t.equal(byName.get('service_apps_create')._meta['service/role'], 'developer')
  t.strictSame(byName.get('service_apps_create')._meta['service/rate_limit'], { limit: 10, window_seconds: 60 })
  t.match(byName.get('service_apps_get').description, /never returned/)

  const viewer = await createMember(server, { role: 'viewer' })
  const v = await openSession(server.mcpUrl, viewer.key)
  const viewerList = await post(server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }, v.headers)
  const viewerNames = viewerList.json.result.tools.map((x: any) => x.name)
  t.ok(viewerNames.includes('service_apps_get'))
  t.notOk(viewerNames.includes('service_apps_create'), 'a viewer does not see service_apps_create')
  failure(t, await call(t, server, v.headers, 'service_apps_create', { name: 'nope' }), 'PERMISSION_DENIED')

  const developer = await createMember(server, { role: 'developer' })
  const d = await openSession(server.mcpUrl, developer.key, '2025-11-25', ELICIT)
  const app = okData(t, await call(t, server, d.headers, 'service_apps_create', { name: 'dev-app' })).app
  failure(t, await call(t, server, d.headers, 'service_apps_delete', { app_id: app.id }), 'PERMISSION_DENIED')
  t.ok(await server.app.repos.apps.byId((await defaultOrganization(server)).id, app.id), 'a developer cannot delete')
})

t.test('create, get, update and list round trip', async (t) => {
  const server = await serve(t)
  const org = await defaultOrganization(server)
  const { headers } = await openSession(server.mcpUrl, server.apiKey)

  const created = okData(t, await call(t, server, headers, 'service_apps_create', { name: 'billing', description: 'Invoices', pipeline: 'staging' })).app
  t.strictSame(Object.keys(created).sort(), APP_KEYS)
  t.match(created.id, /^app_[0-9a-z]{26}$/)
  t.equal(created.name, 'billing')
  t.equal(created.description, 'Invoices')
  t.equal(created.pipeline, 'staging')
  t.match(created.created_at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
  t.equal(created.created_at, created.updated_at)
  const row = await server.app.repos.apps.byId(org.id, created.id)
  t.equal(row?.pipeline, 'staging', 'stored with its pipeline')
  t.equal(row?.createdBy, (await server.app.repos.users.byEmail('owner@example.com'))?.id, 'created by the caller')

  const plain = okData(t, await call(t, server, headers, 'service_apps_create', { name: 'web' })).app
  t.equal(plain.description, '', 'description defaults to empty')
  t.equal(plain.pipeline, 'default', 'pipeline defaults to default')

  const got = okData(t, await call(t, server, headers, 'service_apps_get', { app_id: created.id }))
  t.strictSame(got, { app: created, env: [] })

  await new Promise((r) => setTimeout(r, 5))
  const updated = okData(t, await call(t, server, headers, 'service_apps_update', { app_id: created.id, name: 'billing-v2', pipeline: 'default' })).app
  t.equal(updated.id, created.id)
  t.equal(updated.name, 'billing-v2')
  t.equal(updated.description, 'Invoices', 'description unchanged')
  t.equal(updated.pipeline, 'default')
  t.equal(updated.created_at, created.created_at)
  t.ok(updated.updated_at > created.updated_at, 'updated_at moves')

  const described = okData(t, await call(t, server, headers, 'service_apps_update', { app_id: created.id, description: '' })).app
  t.equal(described.description, '', 'an empty description clears it')
  t.equal(described.name, 'billing-v2')
  const same = okData(t, await call(t, server, headers, 'service_apps_update', { app_id: created.id, name: 'billing-v2' })).app
  t.equal(same.name, 'billing-v2', 'renaming to its own name is no conflict')

  t.strictSame(okData(t, await call(t, server, headers, 'service_apps_get', { app_id: created.id })).app, same)
  const list = okData(t, await call(t, server, headers, 'service_apps_list', {}))
  t.strictSame(list.apps, [same, plain], 'list shows the same app objects, pipeline included')
  for (const a of list.apps) t.strictSame(Object.keys(a).sort(), APP_KEYS)

  // A viewer reads.
  const viewer = await createMember(server, { role: 'viewer', scopes: ['mcp:read'] })
  const v = await openSession(server.mcpUrl, viewer.key, '2025-06-18')
  t.strictSame(okData(t, await call(t, server, v.headers, 'service_apps_get', { app_id: plain.id })).app, plain)
})

t.test('names, pipelines and conflicts', async (t) => {
  const server = await serve(t)
  const { headers } = await openSession(server.mcpUrl, server.apiKey)
  const first = okData(t, await call(t, server, headers, 'service_apps_create', { name: 'api' })).app
  const second = okData(t, await call(t, server, headers, 'service_apps_create', { name: 'worker' })).app

  const dup = failure(t, await call(t, server, headers, 'service_apps_create', { name: 'api' }), 'CONFLICT')
  t.match(dup.message, /api/)
  failure(t, await call(t, server, headers, 'service_apps_update', { app_id: second.id, name: 'api' }), 'CONFLICT')
  t.equal((await server.app.repos.apps.byId((await defaultOrganization(server)).id, second.id))?.name, 'worker', 'not renamed')

  // The same name in another organization is fine.
  const other = await server.app.repos.organizations.create({ slug: 'other', name: 'Other' })
  const outsider = await createMember(server, { role: 'developer', organizationId: other.id })
  const o = await openSession(server.mcpUrl, outsider.key)
  t.equal(okData(t, await call(t, server, o.headers, 'service_apps_create', { name: 'api' })).app.name, 'api', 'names are unique per organization')

  const unknown = failure(t, await call(t, server, headers, 'service_apps_create', { name: 'fresh', pipeline: 'production' }), 'INVALID_ARGUMENTS')
  t.match(unknown.message, /production/)
  t.match(unknown.message, /default, staging/, 'names the configured pipelines')
  failure(t, await call(t, server, headers, 'service_apps_create', { name: 'fresh', pipeline: 'constructor' }), 'INVALID_ARGUMENTS')
  failure(t, await call(t, server, headers, 'service_apps_update', { app_id: first.id, pipeline: 'production' }), 'INVALID_ARGUMENTS')
  t.equal((await server.app.repos.apps.byId((await defaultOrganization(server)).id, first.id))?.pipeline, 'default', 'pipeline unchanged')
  t.notOk((await server.app.repos.apps.page((await defaultOrganization(server)).id, 100)).items.some((a) => a.name === 'fresh'), 'nothing created')

  for (const name of ['', 'Upper', '-lead', 'under_score', 'with space', 'dot.ted', 'a'.repeat(64), 'é']) {
    failure(t, await call(t, server, headers, 'service_apps_create', { name }), 'INVALID_ARGUMENTS')
    failure(t, await call(t, server, headers, 'service_apps_update', { app_id: first.id, name }), 'INVALID_ARGUMENTS')
  }
  t.equal(okData(t, await call(t, server, headers, 'service_apps_create', { name: 'a'.repeat(63) })).app.name.length, 63, '63 characters is fine')
  t.equal(okData(t, await call(t, server, headers, 'service_apps_create', { name: '0-x' })).app.name, '0-x')
  for (const args of [{}, { name: 'x', extra: 1 }, { name: 'x', description: 'd'.repeat(501) }, { name: 7 }, { name: 'x', pipeline: 'Bad!' }]) {
    failure(t, await call(t, server, headers, 'service_apps_create', args), 'INVALID_ARGUMENTS')
  }
  t.equal(okData(t, await call(t, server, headers, 'service_apps_create', { name: 'long', description: 'd'.repeat(500) })).app.description.length, 500)

  const nothing = failure(t, await call(t, server, headers, 'service_apps_update', { app_id: first.id }), 'INVALID_ARGUMENTS')
  t.match(nothing.message, /at least one/)
  for (const args of [{ name: 'x' }, { app_id: 'app_nope', name: 'x' }, { app_id: first.id, description: 'd'.repeat(501) }]) {
    failure(t, await call(t, server, headers, 'service_apps_update', args), 'INVALID_ARGUMENTS')
  }
  for (const tool of ['service_apps_get', 'service_apps_delete']) {
    for (const args of [{}, { app_id: '' }, { app_id: 'app_../x' }, { app_id: first.id, x: 1 }]) {
      failure(t, await call(t, server, headers, tool, args), 'INVALID_ARGUMENTS')
    }
  }

  // Before 2025-11-25, invalid arguments are a JSON-RPC error, including the handler's own checks.
  const old = await openSession(server.mcpUrl, server.apiKey, '2025-06-18')
  const res = await post(server.mcpUrl, callTool('service_apps_create', { name: 'fresh', pipeline: 'production' }, 5), old.headers)
  t.equal(res.json.error.code, -32602)
  t.equal(res.json.error.data.code, 'INVALID_ARGUMENTS')
})

t.test('an app of another organization is not found, exactly like an absent one', async (t) => {
  const server = await serve(t)
  const repos = server.app.repos
  const other = await repos.organizations.create({ slug: 'other', name: 'Other' })
  const theirs = await repos.apps.create({ organizationId: other.id, name: 'secret-project', description: 'theirs' })
  await repos.envVars.set({ organizationId: other.id, appId: theirs.id, name: 'TOKEN', ciphertext: 'v1.x.y.z', userId: null })
  const absent = newId('app')
  const { headers } = await openSession(server.mcpUrl, server.apiKey, '2025-11-25', ELICIT)

  const cases: Array<[string, (id: string) => Record<string, unknown>]> = [
    ['service_apps_get', (id) => ({ app_id: id })],
    ['service_apps_update', (id) => ({ app_id: id, name: 'mine-now' })],
    ['service_apps_update', (id) => ({ app_id: id, description: 'changed' })],
    ['service_apps_delete', (id) => ({ app_id: id })],
    ['service_env_set', (id) => ({ app_id: id, name: 'TOKEN', value: 'overwritten' })],
    ['service_env_unset', (id) => ({ app_id: id, name: 'TOKEN' })],
  ]
  for (const [tool, args] of cases) {
    const foreignReply = await post(server.mcpUrl, callTool(tool, args(theirs.id), rid()), headers)
    const absentReply = await post(server.mcpUrl, callTool(tool, args(absent), rid()), headers)
    t.notOk(foreignReply.messages.some((m) => m.method === 'elicitation/create'), `${tool}: nobody is asked`)
    const foreign = resultOf(t, foreignReply)
    failure(t, foreign, 'RESOURCE_NOT_FOUND')
    t.strictSame(foreign, resultOf(t, absentReply), `${tool}: the same result as for an absent id`)
  }

  const after = await repos.apps.byId(other.id, theirs.id)
  t.equal(after?.name, 'secret-project', 'their app is untouched')
  t.equal(after?.description, 'theirs')
  t.strictSame(await repos.envVars.ciphertexts(other.id, theirs.id), [{ name: 'TOKEN', ciphertext: 'v1.x.y.z' }], 'their env var is untouched')
})

t.test('delete', async (t) => {
  const server = await serve(t)
  const repos = server.app.repos
  const org = await defaultOrganization(server)

  t.test('accepted: the app, its env vars and deployments are gone', async (t) => {
    const { headers } = await openSession(server.mcpUrl, server.apiKey, '2025-11-25', ELICIT)
    const app = okData(t, await call(t, server, headers, 'service_apps_create', { name: 'billing' })).app
    okData(t, await call(t, server, headers, 'service_env_set', { app_id: app.id, name: 'DB_URL', value: 'postgres://x' }))
    const deps = await finishedDeployments(server, org.id, app.id, 2)

    const { request, result } = await confirmed(t, server, headers, 'service_apps_delete', { app_id: app.id }, { action: 'accept', content: { confirm: true } })
    checkConfirmRequest(t, request, `Delete app billing (${app.id}) and its 2 deployments?`)
    t.strictSame(okData(t, result), { deleted: true, app_id: app.id, name: 'billing', deployments_deleted: 2 })
    t.equal(await repos.apps.byId(org.id, app.id), undefined, 'the app is gone')
    t.strictSame(await repos.envVars.list(org.id, app.id), [], 'its env vars are gone')
    for (const id of deps) t.equal(await repos.deployments.byId(org.id, id), undefined, `deployment ${id} is gone`)
    failure(t, await call(t, server, headers, 'service_apps_get', { app_id: app.id }), 'RESOURCE_NOT_FOUND')

    const again = await post(server.mcpUrl, callTool('service_apps_delete', { app_id: app.id }, rid()), headers)
    failure(t, resultOf(t, again), 'RESOURCE_NOT_FOUND')
    t.notOk(again.messages.some((m) => m.method === 'elicitation/create'), 'an absent app is refused before asking')
  })

  t.test('the message counts one deployment in the singular', async (t) => {
    const { headers } = await openSession(server.mcpUrl, server.apiKey, '2025-11-25', ELICIT)
    const app = okData(t, await call(t, server, headers, 'service_apps_create', { name: 'single' })).app
    await finishedDeployments(server, org.id, app.id, 1)
    const { request, result } = await confirmed(t, server, headers, 'service_apps_delete', { app_id: app.id }, { action: 'accept', content: { confirm: true } })
    t.equal(request.params.message, `Delete app single (${app.id}) and its 1 deployment?`)
    t.equal(okData(t, result).deployments_deleted, 1)
  })

  t.test('declined, cancelled or not confirmed: nothing is deleted', async (t) => {
    const { headers } = await openSession(server.mcpUrl, server.apiKey, '2025-11-25', ELICIT)
    const app = okData(t, await call(t, server, headers, 'service_apps_create', { name: 'keeper' })).app
    for (const answer of [{ action: 'decline' }, { action: 'cancel' }, { action: 'accept', content: { confirm: false } }]) {
      const { request, result } = await confirmed(t, server, headers, 'service_apps_delete', { app_id: app.id }, answer)
      checkConfirmRequest(t, request, `Delete app keeper (${app.id}) and its 0 deployments?`)
      failure(t, result, 'ELICITATION_DENIED')
      t.ok(await repos.apps.byId(org.id, app.id), `${JSON.stringify(answer)}: the app still exists`)
    }
  })

  t.test('a client without the elicitation capability', async (t) => {
    const { headers } = await openSession(server.mcpUrl, server.apiKey, '2025-11-25')
    const app = okData(t, await call(t, server, headers, 'service_apps_create', { name: 'no-elicit' })).app
    const reply = await post(server.mcpUrl, callTool('service_apps_delete', { app_id: app.id }, rid()), headers)
    t.notOk(reply.messages.some((m) => m.method === 'elicitation/create'))
    failure(t, resultOf(t, reply), 'CAPABILITY_REQUIRED')
    t.ok(await repos.apps.byId(org.id, app.id), 'the app still exists')
  })

  t.test('a client that accepts only application/json', async (t) => {
    const { headers } = await openSession(server.mcpUrl, server.apiKey, '2025-11-25', ELICIT)
    const app = okData(t, await call(t, server, headers, 'service_apps_create', { name: 'json-only' })).app
    const reply = await post(server.mcpUrl, callTool('service_apps_delete', { app_id: app.id }, rid()), { ...headers, accept: 'application/json' })
    t.match(String(reply.headers['content-type']), /^application\/json/)
    failure(t, resultOf(t, reply), 'CAPABILITY_REQUIRED')
    t.ok(await repos.apps.byId(org.id, app.id), 'the app still exists')
  })

  t.test('refused while a deployment is queued or running', async (t) => {
    const { headers } = await openSession(server.mcpUrl, server.apiKey, '2025-11-25', ELICIT)
    const app = okData(t, await call(t, server, headers, 'service_apps_create', { name: 'busy' })).app
    const dep = await repos.deployments.create({ organizationId: org.id, appId: app.id, kind: 'deploy', pipeline: 'default', createdBy: null })
    for (const status of ['queued', 'running']) {
      if (status === 'running') await repos.deployments.markRunning(dep.id, Date.now())
      const reply = await post(server.mcpUrl, callTool('service_apps_delete', { app_id: app.id }, rid()), headers)
      t.notOk(reply.messages.some((m) => m.method === 'elicitation/create'), `${status}: nobody is asked`)
      const err = failure(t, resultOf(t, reply), 'CONFLICT')
      t.match(err.message, new RegExp(`${status}.*${dep.id}`))
      t.ok(await repos.apps.byId(org.id, app.id), `${status}: the app still exists`)
    }
    await repos.deployments.finish(dep.id, 'failed', Date.now(), 1, 'exit 1')
    const { result } = await confirmed(t, server, headers, 'service_apps_delete', { app_id: app.id }, { action: 'accept', content: { confirm: true } })
    t.equal(okData(t, result).deployments_deleted, 1, 'deleted once the deployment finished')
  })
})

t.test('the audit log', async (t) => {
  const server = await serve(t)
  const org = await defaultOrganization(server)
  const { headers } = await openSession(server.mcpUrl, server.apiKey, '2025-11-25', ELICIT)
  const SECRET = 'sup3r-s3cret-value-' + newId('x')
  const app = okData(t, await call(t, server, headers, 'service_apps_create', { name: 'audited', description: 'watched' })).app
  okData(t, await call(t, server, headers, 'service_env_set', { app_id: app.id, name: 'API_TOKEN', value: SECRET }))
  failure(t, await call(t, server, headers, 'service_apps_create', { name: 'audited' }), 'CONFLICT')
  const { result } = await confirmed(t, server, headers, 'service_apps_delete', { app_id: app.id }, { action: 'decline' })
  failure(t, result, 'ELICITATION_DENIED')

  const items = (await server.app.repos.audit.page(org.id, 50)).items
  const created = items.find((e) => e.action === 'service_apps_create' && e.outcome === 'succeeded')
  t.ok(created, 'a succeeded service_apps_create entry')
  t.equal(created?.targetType, 'app')
  t.equal(created?.targetId, app.id)
  const conflict = items.find((e) => e.action === 'service_apps_create' && e.outcome === 'failed')
  t.match(conflict?.details, { error: 'CONFLICT' }, 'the duplicate is a failed entry')
  const set = items.find((e) => e.action === 'service_env_set')
  t.equal(set?.outcome, 'succeeded')
  t.equal(set?.targetType, 'env_var')
  t.equal(set?.targetId, `${app.id}/API_TOKEN`)
  const declined = items.find((e) => e.action === 'service_apps_delete.confirmation')
  t.equal(declined?.outcome, 'declined', 'a declined service_apps_delete.confirmation entry')
  t.notOk(items.some((e) => e.action === 'service_apps_delete' && e.outcome === 'succeeded'), 'no delete succeeded')
  t.notOk(JSON.stringify(items).includes(SECRET), 'no env value anywhere in the audit log')
})

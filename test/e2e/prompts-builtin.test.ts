/**
 * The built-in prompts (src/plugins/prompts/builtin): `review_failed_deployment` (a deployment's facts, its app and its
 * log embedded as resources) and `summarize_recent_activity` (the audit log and deployments, admin only), on legacy
 * sessions and stateless 2026-07-28 requests: exact descriptors and messages, visibility by scope ∩ role, absent and
 * foreign ids answered alike, organization isolation, and completion of their arguments.
 */
import t from 'tap'
import type { Deployment } from '../../src/db/repos/deployments.js'
import { legacyClient, logText, modernClient, otherOrganization, seedApp, seedDeployment, serve, storedLines } from '../helpers/builtin-catalog.js'
import { callToEnd } from '../helpers/tools.js'
import { createMember, defaultOrganization } from '../helpers/seed.js'
import { OWNER_EMAIL, type TestServer } from '../helpers/server.js'

const iso = (ms: number) => new Date(ms).toISOString()
const appUri = (id: string) => `service://apps/${id}`
const logUri = (id: string) => `service://deployments/${id}/log`

const REVIEW = {
  name: 'review_failed_deployment',
  title: 'Review a failed deployment',
  description: 'Asks why a deployment of your organization failed and how to fix it, with its status, outcome and exit code, its app (JSON with the names of its environment variables) and its log (the last 200 lines) embedded. A deployment that did not fail is rendered too, saying its status.',
  arguments: [{ name: 'deployment_id', title: 'Deployment', description: 'Id of a deployment of your organization (dep_…); completion offers failed, interrupted and cancelled ones first', required: true }],
}
const ACTIVITY = {
  name: 'summarize_recent_activity',
  title: 'Summarize recent activity',
  description: 'Asks for a summary of what happened lately in your organization, or in one app: who changed what, deployments and their outcomes, denials and failures, and what needs attention. Embeds the latest 50 audit log entries and 20 deployments. Needs the admin role, like the audit log.',
  arguments: [{ name: 'app_id', title: 'App', description: 'Only what concerns this app of your organization (optional)', required: false }],
}
const untitled = (p: typeof REVIEW | typeof ACTIVITY) => {
  const { title: _t, arguments: args, ...rest } = p
  return { ...rest, arguments: args.map(({ title: _a, ...a }) => a) }
}

const CAUSE = 'Explain why, quoting the log lines that show the cause, and say what to change to fix it: the app\'s code or configuration, its environment variables (only their names are shown), or the pipeline. If the log does not show the cause, say what to look at next.'

/** The facts block of the first message, as the prompt documents it. */
function facts(d: Deployment, appName: string): string {
  const when = (ms: number | null) => (ms === null ? 'not yet' : iso(ms))
  return [
    `Deployment: ${d.id}`,
    `App: ${appName} (${d.appId})`,
    `Kind: ${d.kind}`,
    `Pipeline: ${d.pipeline}`,
    `Status: ${d.status}`,
    `Outcome: ${d.outcome ?? 'none yet'}`,
    `Exit code: ${d.exitCode ?? 'none'}`,
    `Created: ${iso(d.createdAt)}; started: ${when(d.startedAt)}; finished: ${when(d.finishedAt)}`,
  ].join('\n')
}

async function appJson(server: TestServer, appId: string): Promise<string> {
  const repos = server.app.repos
  const app = (await repos.apps.byId((await defaultOrganization(server)).id, appId))!
  const env = (await repos.envVars.list(app.organizationId, app.id)).map((v) => ({ name: v.name, created_at: iso(v.createdAt), updated_at: iso(v.updatedAt) }))
  return JSON.stringify({ app: { id: app.id, name: app.name, description: app.description, pipeline: app.pipeline, created_at: iso(app.createdAt), updated_at: iso(app.updatedAt) }, env })
}

const getPrompt = (c: { rpc(m: string, p?: Record<string, unknown>): Promise<any> }, name: string, args: Record<string, string>) => c.rpc('prompts/get', { name, arguments: args })

t.test('prompts/list: exact descriptors by role and scope, in every revision and in 2026-07-28', async (t) => {
  const server = await serve(t)
  const owner = await legacyClient(server, server.apiKey)
  t.strictSame((await owner.rpc('prompts/list')).result, { prompts: [REVIEW, ACTIVITY] }, 'owner: both')
  const expected = { viewer: [REVIEW], developer: [REVIEW], admin: [REVIEW, ACTIVITY] } as const
  for (const role of ['viewer', 'developer', 'admin'] as const) {
    const member = await createMember(server, { role, scopes: ['mcp:read'] })
    t.strictSame((await (await legacyClient(server, member.key)).rpc('prompts/list')).result.prompts, expected[role], `${role} with mcp:read`)
    t.strictSame((await modernClient(server, member.key).rpc('prompts/list')).result.prompts, expected[role], `${role} with mcp:read, 2026-07-28`)
  }
  const writeOnly = await createMember(server, { role: 'owner', scopes: ['mcp:write'] })
  t.strictSame((await (await legacyClient(server, writeOnly.key)).rpc('prompts/list')).result.prompts, [], 'without mcp:read: none')
  const old = await legacyClient(server, server.apiKey, '2025-03-26')
  t.strictSame((await old.rpc('prompts/list')).result.prompts, [untitled(REVIEW), untitled(ACTIVITY)], '2025-03-26: no titles')
  const modern = await modernClient(server, server.apiKey).rpc('prompts/list')
  t.strictSame(modern.result.prompts, [REVIEW, ACTIVITY])
  t.equal(modern.result.cacheScope, 'private')
  t.equal(modern.result.ttlMs, 60_000)
})

t.test('review_failed_deployment: the request and facts, the app and the log embedded, in both eras', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'alpha', { description: 'Front end', env: ['API_URL'] })
  const d = await seedDeployment(server, app)
  const expected = {
    description: `Review of the deploy ${d.id} of alpha (failed)`,
    messages: [
      { role: 'user', content: { type: 'text', text: `The deploy ${d.id} of alpha failed. ${CAUSE}\n\n${facts(d, 'alpha')}\n\nThe app and the deployment's log follow.` } },
      { role: 'user', content: { type: 'resource', resource: { uri: appUri(app.id), mimeType: 'application/json', text: await appJson(server, app.id) } } },
      {
        role: 'user',
        content: {
          type: 'resource',
          resource: {
            uri: logUri(d.id),
            mimeType: 'text/plain',
            text: '2026-01-02T03:04:05.000Z [system] started deploy of alpha with pipeline default\n2026-01-02T03:04:06.000Z [stdout] building\n2026-01-02T03:04:07.000Z [stderr] boom\n2026-01-02T03:04:08.000Z [system] failed: the pipeline exited with code 3\n',
          },
        },
      },
    ],
  }
  const legacy = await getPrompt(await legacyClient(server, server.apiKey), REVIEW.name, { deployment_id: d.id })
  t.strictSame(legacy.result, expected, 'a session')
  const old = await getPrompt(await legacyClient(server, server.apiKey, '2025-03-26'), REVIEW.name, { deployment_id: d.id })
  t.strictSame(old.result, expected, '2025-03-26 has embedded resources too')
  const modern = await getPrompt(modernClient(server, server.apiKey), REVIEW.name, { deployment_id: d.id })
  const { resultType, _meta, ...rest } = modern.result
  t.strictSame(rest, expected, '2026-07-28')
  t.equal(resultType, 'complete')
  t.match(_meta, { 'io.modelcontextprotocol/serverInfo': { name: 'service-mcp' } })

  // What the prompt embeds is what the resources read.
  const s = await legacyClient(server, server.apiKey)
  t.equal((await s.rpc('resources/read', { uri: appUri(app.id) })).result.contents[0].text, expected.messages[1]!.content.resource!.text)
  t.equal((await s.rpc('resources/read', { uri: logUri(d.id) })).result.contents[0].text, expected.messages[2]!.content.resource!.text)
  // A viewer with mcp:read may use it (deployments are viewer-readable).
  const viewer = await createMember(server, { role: 'viewer', scopes: ['mcp:read'] })
  t.strictSame((await getPrompt(await legacyClient(server, viewer.key), REVIEW.name, { deployment_id: d.id })).result, expected, 'a viewer gets the same')
})

t.test('review_failed_deployment: a deployment that did not fail is rendered, saying how it stands', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'beta')
  const s = await legacyClient(server, server.apiKey)
  const cases = [
    ['succeeded', `The deploy %s of beta did not fail: it succeeded. Review its log for warnings or anything that could make a later deployment fail.`],
    ['cancelled', `The deploy %s of beta did not fail: it was cancelled. Say what it was doing when it was stopped, and whether anything in the log points to a problem before the cancellation.`],
    ['interrupted', `The deploy %s of beta was interrupted: the server stopped while it ran. Say how far it got, whether anything in the log points to a problem of its own, and whether it is safe to deploy again.`],
    ['running', `The deploy %s of beta has not ended: it is running. Its log so far is attached; say whether anything in it already points to a failure.`],
  ] as const
  for (const [status, sentence] of cases) {
    const d = await seedDeployment(server, app, { status, lines: [['stdout', `a ${status} run`]] })
    const got = (await getPrompt(s, REVIEW.name, { deployment_id: d.id })).result
    t.equal(got.description, `Review of the deploy ${d.id} of beta (${status})`, status)
    t.equal(got.messages[0].content.text, `${sentence.replace('%s', d.id)}\n\n${facts(d, 'beta')}\n\nThe app and the deployment's log follow.`, `${status}: the request fits the status`)
    t.equal(got.messages[2].content.resource.text, `2026-01-02T03:04:05.000Z [stdout] a ${status} run\n`, `${status}: its log`)
  }
})

t.test('review_failed_deployment embeds the last 200 lines of a long log, saying how many came before', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'verbose')
  const d = await seedDeployment(server, app, { lines: Array.from({ length: 250 }, (_, i) => ['stdout', `line ${i}`] as ['stdout', string]) })
  const got = (await getPrompt(await legacyClient(server, server.apiKey), REVIEW.name, { deployment_id: d.id })).result
  const text: string = got.messages[2].content.resource.text
  const lines = await storedLines(server, d.id)
  t.equal(text, '[50 earlier lines not shown: service_deployments_logs returns every line]\n' + logText(lines.slice(50)))
})

t.test('review_failed_deployment: absent and foreign ids are one -32602; arguments are checked', async (t) => {
  const server = await serve(t)
  const b = await otherOrganization(server)
  const foreign = await seedDeployment(server, b.app)
  const notFound = { code: -32602, message: 'No deployment with this id in your organization', data: { code: 'INVALID_PARAMS', details: { argument: 'deployment_id' }, action: 'Fix the params listed in details and retry' } }
  for (const [era, c] of [['session', await legacyClient(server, server.apiKey)], ['2026-07-28', modernClient(server, server.apiKey)]] as const) {
    const absent = await getPrompt(c, REVIEW.name, { deployment_id: 'dep_01aaaaaaaaaaaaaaaaaaaaaaaa' })
    const other = await getPrompt(c, REVIEW.name, { deployment_id: foreign.id })
    t.strictSame(absent.error, notFound, `${era}: an absent id`)
    t.strictSame(other.error, notFound, `${era}: another organization's id, the very same answer`)
    t.equal(other.httpStatus, 200)
    const missing = await getPrompt(c, REVIEW.name, {})
    t.strictSame(missing.error, { code: -32602, message: 'Prompt review_failed_deployment needs deployment_id', data: { code: 'INVALID_PARAMS', details: { missing: ['deployment_id'] }, action: 'Fix the params listed in details and retry' } }, `${era}: the required argument`)
    const unknown = await getPrompt(c, REVIEW.name, { deployment_id: foreign.id, verbose: 'yes' })
    t.equal(unknown.error.code, -32602, `${era}: an argument it does not have`)
    t.strictSame(unknown.error.data.details, { unknown: ['verbose'] })
  }
  // Org B's member reviews its own deployment, never org A's.
  const a = await seedDeployment(server, await seedApp(server, 'alpha'))
  const theirs = await legacyClient(server, b.member.key)
  t.equal((await getPrompt(theirs, REVIEW.name, { deployment_id: foreign.id })).result.messages[2].content.resource.uri, logUri(foreign.id))
  t.strictSame((await getPrompt(theirs, REVIEW.name, { deployment_id: a.id })).error, notFound)
})

t.test('summarize_recent_activity: the audit log and the deployments as lines, for the organization or one app; admin only', async (t) => {
  const server = await serve(t)
  const s = await legacyClient(server, server.apiKey)
  const created = async (name: string, id: number) => (await callToEnd(server.mcpUrl, s.headers, 'service_apps_create', { name }, id)).result.structuredContent.app
  const web = await created('web', 11)
  const api = await created('api', 12)
  await callToEnd(server.mcpUrl, s.headers, 'service_env_set', { app_id: web.id, name: 'API_URL', value: 'https://secret.example' }, 13)
  const viewer = await createMember(server, { role: 'viewer' })
  const denied = await callToEnd(server.mcpUrl, (await legacyClient(server, viewer.key)).headers, 'service_apps_create', { name: 'nope' }, 14)
  t.equal(denied.result.isError, true, 'a viewer\'s write is denied (and audited)')
  const webRun = await seedDeployment(server, (await server.app.repos.apps.byId((await defaultOrganization(server)).id, web.id))!)
  const apiRun = await seedDeployment(server, (await server.app.repos.apps.byId((await defaultOrganization(server)).id, api.id))!, { status: 'succeeded', outcome: 'succeeded: the pipeline exited with code 0' })
  const org = await defaultOrganization(server)
  const audit = (await server.app.repos.audit.page(org.id, 10)).items
  t.equal(audit.length, 4)
  const [deniedEntry, envEntry, apiEntry, webEntry] = audit as [typeof audit[0], typeof audit[0], typeof audit[0], typeof audit[0]]
  const lines = {
    denied: `${iso(deniedEntry.at)} ${viewer.user.email} (api_key) service_apps_create: denied {"request_id":14,"reason":"role","role":"viewer","required":"developer"}`,
    env: `${iso(envEntry.at)} ${OWNER_EMAIL} (api_key) service_env_set env_var ${web.id}/API_URL: succeeded {"request_id":13,"created":true}`,
    api: `${iso(apiEntry.at)} ${OWNER_EMAIL} (api_key) service_apps_create app ${api.id}: succeeded {"request_id":12,"name":"api"}`,
    web: `${iso(webEntry.at)} ${OWNER_EMAIL} (api_key) service_apps_create app ${web.id}: succeeded {"request_id":11,"name":"web"}`,
  }
  const deployments = {
    api: `${iso(apiRun.createdAt)} ${apiRun.id} deploy of api: succeeded: the pipeline exited with code 0`,
    web: `${iso(webRun.createdAt)} ${webRun.id} deploy of web: failed: the pipeline exited with code 3`,
  }
  const orgName = `${org.name} (${org.slug})`
  const request = (scope: string) => `Summarize the recent activity of ${scope} for an operator, from the audit log and the deployments below. Group it by what happened: changes to apps and environment variables (who, when), deployments and rollbacks with their outcomes, and confirmations declined, denials and failures. Then list what needs attention (failed or interrupted deployments, repeated denials, anything unusual), most urgent first. Use only what is below; say so when it is empty.`

  const whole = {
    description: `Recent activity of organization ${orgName}`,
    messages: [
      { role: 'user', content: { type: 'text', text: request(`organization ${orgName}`) } },
      { role: 'user', content: { type: 'text', text: ['Audit log, newest first (the latest 4):', lines.denied, lines.env, lines.api, lines.web].join('\n') } },
      { role: 'user', content: { type: 'text', text: ['Deployments, newest first (the latest 2):', deployments.api, deployments.web].join('\n') } },
    ],
  }
  t.strictSame((await getPrompt(s, ACTIVITY.name, {})).result, whole, 'the whole organization')
  t.notMatch(JSON.stringify(whole), /secret\.example/, 'never an env var value (the audit log has none)')
  const modern = (await getPrompt(modernClient(server, server.apiKey), ACTIVITY.name, {})).result
  t.strictSame(modern.messages, whole.messages, 'the same on a stateless request')

  const scope = `app web (${web.id}) of organization ${orgName}`
  t.strictSame((await getPrompt(s, ACTIVITY.name, { app_id: web.id })).result, {
    description: `Recent activity of ${scope}`,
    messages: [
      { role: 'user', content: { type: 'text', text: request(scope) } },
      { role: 'user', content: { type: 'text', text: ['Audit log entries about web, newest first (2, from the latest 4 entries of the organization):', lines.env, lines.web].join('\n') } },
      { role: 'user', content: { type: 'text', text: ['Deployments, newest first (the latest 1):', deployments.web].join('\n') } },
    ],
  }, 'one app: its own entries (the app, its env vars) and deployments')
  t.strictSame((await getPrompt(s, ACTIVITY.name, { app_id: '' })).result, whole, 'an empty app_id means the organization')

  const b = await otherOrganization(server, 'admin')
  const appNotFound = { code: -32602, message: 'No app with this id in your organization', data: { code: 'INVALID_PARAMS', details: { argument: 'app_id' }, action: 'Fix the params listed in details and retry' } }
  t.strictSame((await getPrompt(s, ACTIVITY.name, { app_id: 'app_01aaaaaaaaaaaaaaaaaaaaaaaa' })).error, appNotFound, 'an absent app')
  t.strictSame((await getPrompt(s, ACTIVITY.name, { app_id: b.app.id })).error, appNotFound, 'another organization\'s app: the same')

  const theirs = (await getPrompt(await legacyClient(server, b.member.key), ACTIVITY.name, {})).result
  t.strictSame(theirs.messages[1].content.text, 'Audit log, newest first (the latest 0):\n(none)', 'org B sees none of org A\'s audit log')
  t.strictSame(theirs.messages[2].content.text, 'Deployments, newest first (the latest 0):\n(none)', 'nor its deployments')

  const unknownPrompt = { code: -32602, message: `Unknown prompt: ${ACTIVITY.name}`, data: { code: 'INVALID_PARAMS', details: { name: ACTIVITY.name }, action: 'Fix the params listed in details and retry' } }
  for (const role of ['viewer', 'developer'] as const) {
    const member = await createMember(server, { role })
    t.strictSame((await getPrompt(await legacyClient(server, member.key), ACTIVITY.name, {})).error, unknownPrompt, `${role}: an unknown prompt`)
    t.strictSame((await getPrompt(modernClient(server, member.key), ACTIVITY.name, {})).error, unknownPrompt, `${role}: an unknown prompt (2026-07-28)`)
  }
  const readless = await createMember(server, { role: 'owner', scopes: ['mcp:write'] })
  t.strictSame((await getPrompt(await legacyClient(server, readless.key), ACTIVITY.name, {})).error, unknownPrompt, 'an owner without mcp:read: unknown too')
})

t.test('completion of prompt arguments: the caller\'s organization only, failed deployments first, hidden prompts unknown', async (t) => {
  const server = await serve(t)
  const web = await seedApp(server, 'web')
  const api = await seedApp(server, 'api')
  const failed = await seedDeployment(server, web)
  const succeeded = await seedDeployment(server, web, { status: 'succeeded' })
  const interrupted = await seedDeployment(server, api, { status: 'interrupted' })
  const b = await otherOrganization(server, 'admin')
  const bRun = await seedDeployment(server, b.app)
  const complete = (c: { rpc(m: string, p?: Record<string, unknown>): Promise<any> }, name: string, argument: string, value: string) =>
    c.rpc('completion/complete', { ref: { type: 'ref/prompt', name }, argument: { name: argument, value } })

  for (const [era, c] of [['session', await legacyClient(server, server.apiKey)], ['2026-07-28', modernClient(server, server.apiKey)]] as const) {
    t.strictSame((await complete(c, REVIEW.name, 'deployment_id', '')).result.completion, { values: [interrupted.id, failed.id, succeeded.id], total: 3, hasMore: false }, `${era}: unsuccessful first, each group newest first`)
    t.strictSame((await complete(c, REVIEW.name, 'deployment_id', 'WE')).result.completion, { values: [failed.id, succeeded.id], total: 2, hasMore: false }, `${era}: by app name`)
    t.strictSame((await complete(c, REVIEW.name, 'deployment_id', bRun.id)).result.completion, { values: [], total: 0, hasMore: false }, `${era}: never another organization's`)
    t.strictSame((await complete(c, ACTIVITY.name, 'app_id', '')).result.completion, { values: [api.id, web.id], total: 2, hasMore: false }, `${era}: apps, by name`)
    t.strictSame((await complete(c, ACTIVITY.name, 'app_id', 'a')).result.completion, { values: [api.id, web.id], total: 2, hasMore: false }, `${era}: app api by name first, then every id (app_…) by id`)
    t.strictSame((await complete(c, ACTIVITY.name, 'app_id', 'W')).result.completion, { values: [web.id], total: 1, hasMore: false }, `${era}: by name, ignoring case`)
    const noArg = await complete(c, REVIEW.name, 'app_id', '')
    t.strictSame(noArg.error, { code: -32602, message: 'Prompt review_failed_deployment has no argument app_id', data: { code: 'INVALID_PARAMS', details: { argument: 'app_id' }, action: 'Fix the params listed in details and retry' } }, `${era}: an argument the prompt does not have`)
  }
  const theirs = await legacyClient(server, b.member.key)
  t.strictSame((await complete(theirs, REVIEW.name, 'deployment_id', '')).result.completion, { values: [bRun.id], total: 1, hasMore: false }, 'org B: its own deployment')
  t.strictSame((await complete(theirs, ACTIVITY.name, 'app_id', '')).result.completion, { values: [b.app.id], total: 1, hasMore: false }, 'org B: its own app')

  const viewer = await createMember(server, { role: 'viewer', scopes: ['mcp:read'] })
  const v = await legacyClient(server, viewer.key)
  t.strictSame((await complete(v, REVIEW.name, 'deployment_id', 'web')).result.completion.values, [failed.id, succeeded.id], 'a viewer completes the prompt it sees')
  t.strictSame((await complete(v, ACTIVITY.name, 'app_id', '')).error, { code: -32602, message: `Unknown prompt: ${ACTIVITY.name}`, data: { code: 'INVALID_PARAMS', details: { name: ACTIVITY.name }, action: 'Fix the params listed in details and retry' } }, 'but not the admin prompt: unknown to it')
})

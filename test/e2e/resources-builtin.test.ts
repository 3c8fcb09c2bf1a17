/**
 * The built-in resources (src/plugins/resources/builtin): `service://apps/{app_id}` and
 * `service://deployments/{deployment_id}/log`, on legacy sessions and on stateless 2026-07-28 requests: templates,
 * lists, reads, completions of their variables, absent and foreign ids answered alike, visibility by scope ∩ role,
 * organization isolation, and the notifications a running deployment causes (`notifications/resources/updated` on a
 * session's GET stream for subscribers and on `subscriptions/listen` streams, coalesced; list changes).
 */
import t, { type Test } from 'tap'
import { appResource } from '../../src/plugins/resources/builtin/apps.js'
import { deploymentLogResource } from '../../src/plugins/resources/builtin/deployment-log.js'
import {
  legacyClient,
  logText,
  modernClient,
  otherOrganization,
  seedApp,
  seedDeployment,
  serve,
  storedLines,
} from '../helpers/builtin-catalog.js'
import { callToEnd } from '../helpers/tools.js'
import { answerOf, confirmAnswer, ELICITING, modernCall, modernLive, SUBSCRIPTION_ID_KEY } from '../helpers/modern.js'
import { createMember } from '../helpers/seed.js'
import type { TestServer } from '../helpers/server.js'
import { ManualClock } from '../helpers/clock.js'
import { messagesOf, openLive, sleep, until, type LiveStream } from '../helpers/stream.js'

const APP_TEMPLATE = 'service://apps/{app_id}'
const LOG_TEMPLATE = 'service://deployments/{deployment_id}/log'
const appUri = (id: string) => `service://apps/${id}`
const logUri = (id: string) => `service://deployments/${id}/log`
const iso = (ms: number) => new Date(ms).toISOString()

const TEMPLATES = [
  { uriTemplate: APP_TEMPLATE, name: 'app', title: 'App', description: appResource.description, mimeType: 'application/json' },
  { uriTemplate: LOG_TEMPLATE, name: 'deployment_log', title: 'Deployment log', description: deploymentLogResource.description, mimeType: 'text/plain' },
]

/** Org A: two apps (alpha with a description and an env var), a failed deploy of alpha, then a succeeded one of beta. */
async function seedOrgA(server: TestServer) {
  const alpha = await seedApp(server, 'alpha', { description: 'Front end', env: ['API_URL'] })
  const beta = await seedApp(server, 'beta')
  const failed = await seedDeployment(server, alpha)
  const succeeded = await seedDeployment(server, beta, { status: 'succeeded', outcome: 'succeeded: the pipeline exited with code 0', lines: [['system', 'started deploy of beta with pipeline default'], ['stdout', 'beta is live'], ['system', 'succeeded: the pipeline exited with code 0']] })
  return { alpha, beta, failed, succeeded }
}

function appEntry(app: { id: string; name: string; description: string }) {
  return { uri: appUri(app.id), name: app.name, title: `App ${app.name}`, ...(app.description ? { description: app.description } : {}), mimeType: 'application/json' }
}

function logEntry(d: { id: string; createdAt: number; outcome: string | null; status: string }, appName: string) {
  return {
    uri: logUri(d.id),
    name: `${appName} deploy ${d.id}`,
    title: `Log of deploy ${d.id} of ${appName}`,
    description: `Output of the deploy of ${appName} created ${iso(d.createdAt)}: ${d.outcome ?? d.status}`,
    mimeType: 'text/plain',
  }
}

/** A session's standalone GET stream, read live. */
async function getStream(t: Test, server: TestServer, headers: Record<string, string>): Promise<LiveStream> {
  const live = await openLive(server.mcpUrl, { method: 'GET', headers: { ...headers, accept: 'text/event-stream' } })
  t.teardown(() => live.close())
  t.equal(live.status, 200, 'the GET stream is open')
  return live
}

const MARKER = { jsonrpc: '2.0' as const, method: 'notifications/tools/list_changed' }

/**
 * Waits until a marker the server sends now on the session's GET stream has arrived: events arrive in order, so
 * whatever the server sent on that stream before is there to check (instead of sleeping and hoping it was).
 */
async function allSentSoFar(t: Test, server: TestServer, session: { sessionId: string }, live: LiveStream): Promise<void> {
  const before = messagesOf(live).filter((m) => m.method === MARKER.method).length
  t.ok(server.app.sessionStreams.notify(session.sessionId, MARKER), 'a marker is sent on the GET stream')
  await live.waitFor(() => messagesOf(live).filter((m) => m.method === MARKER.method).length > before, 5000, 'the marker')
}

const updatesOf = (live: LiveStream) => messagesOf(live).filter((m) => m.method === 'notifications/resources/updated')
const listChangesOf = (live: LiveStream) => messagesOf(live).filter((m) => m.method === 'notifications/resources/list_changed')

/** Starts a run of `app`'s pipeline the way the deployment tools do (the runner), without a client attached. */
async function run(server: TestServer, app: { id: string; organizationId: string }) {
  return server.app.pipelines.start({ organizationId: app.organizationId, appId: app.id, kind: 'deploy', createdBy: null })
}

t.test('templates and lists: exact entries in every revision and in 2026-07-28', async (t) => {
  const server = await serve(t)
  const { alpha, beta, failed, succeeded } = await seedOrgA(server)
  const expected = [appEntry(alpha), appEntry(beta), logEntry(succeeded, 'beta'), logEntry(failed, 'alpha')]

  const s = await legacyClient(server, server.apiKey)
  const templates = await s.rpc('resources/templates/list')
  t.strictSame(templates.result, { resourceTemplates: TEMPLATES }, 'the two templates, apps first')
  t.match(deploymentLogResource.description, /"<ISO time> \[<stream>\] <text>"/, 'the log template states its line format')
  t.match(deploymentLogResource.description, /the 20 most recent deployments/, 'and how many deployments it lists')
  const list = await s.rpc('resources/list')
  t.strictSame(list.result, { resources: expected }, 'apps oldest first, then the logs of the recent deployments, newest first')

  const old = await legacyClient(server, server.apiKey, '2025-03-26')
  const oldTemplates = await old.rpc('resources/templates/list')
  t.strictSame(oldTemplates.result.resourceTemplates, TEMPLATES.map(({ title: _t, ...rest }) => rest), '2025-03-26: no titles')
  const oldList = await old.rpc('resources/list')
  t.strictSame(oldList.result.resources, expected.map(({ title: _t, ...rest }) => rest), '2025-03-26: no titles')

  const m = modernClient(server, server.apiKey)
  const modernTemplates = await m.rpc('resources/templates/list')
  t.strictSame(modernTemplates.result.resourceTemplates, TEMPLATES)
  t.equal(modernTemplates.result.resultType, 'complete')
  const modernList = await m.rpc('resources/list')
  t.strictSame(modernList.result.resources, expected, 'the same list on a stateless request')
  t.equal(modernList.result.cacheScope, 'private', 'a list depends on the caller')
  t.equal(modernList.result.ttlMs, 60_000)
})

t.test('the deployment log list is bounded to the 20 most recent deployments', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'busy')
  // One after another, as before: all[0] is the oldest.
  const all = []
  for (let i = 0; i < 23; i++) all.push(await seedDeployment(server, app, { status: 'succeeded', lines: [['stdout', 'ok']] }))
  const s = await legacyClient(server, server.apiKey)
  const list = await s.rpc('resources/list')
  const logs = list.result.resources.filter((r: any) => r.uri.startsWith('service://deployments/'))
  t.strictSame(logs.map((r: any) => r.uri), all.slice(-20).reverse().map((d) => logUri(d.id)), 'the 20 newest, newest first')
  // An older one is not listed but still reads.
  const read = await s.rpc('resources/read', { uri: logUri(all[0]!.id) })
  t.equal(read.result.contents[0].text, logText(await storedLines(server, all[0]!.id)))
})

t.test('reads: an app is what service_apps_get returns; a log is its stored lines, in order, in the stated format', async (t) => {
  const server = await serve(t)
  const { alpha, failed } = await seedOrgA(server)
  const s = await legacyClient(server, server.apiKey)

  const got = await callToEnd(server.mcpUrl, s.headers, 'service_apps_get', { app_id: alpha.id }, 7)
  const read = await s.rpc('resources/read', { uri: appUri(alpha.id) })
  t.equal(read.result.contents.length, 1)
  t.strictSame(read.result.contents[0], { uri: appUri(alpha.id), mimeType: 'application/json', text: JSON.stringify(got.result.structuredContent) }, 'the tool\'s very view, as JSON text')
  t.strictSame(JSON.parse(read.result.contents[0].text).env.map((e: any) => e.name), ['API_URL'], 'env var names only')
  t.notMatch(read.result.contents[0].text, /value-of-API_URL/, 'never a value')

  const log = await s.rpc('resources/read', { uri: logUri(failed.id) })
  t.strictSame(log.result.contents, [{
    uri: logUri(failed.id),
    mimeType: 'text/plain',
    text: '2026-01-02T03:04:05.000Z [system] started deploy of alpha with pipeline default\n' +
      '2026-01-02T03:04:06.000Z [stdout] building\n' +
      '2026-01-02T03:04:07.000Z [stderr] boom\n' +
      '2026-01-02T03:04:08.000Z [system] failed: the pipeline exited with code 3\n',
  }], 'one line per stored line: time, [stream], text')

  const m = modernClient(server, server.apiKey)
  const modernApp = await m.rpc('resources/read', { uri: appUri(alpha.id) })
  t.strictSame(modernApp.result.contents, read.result.contents, 'the same contents on a stateless request')
  t.equal(modernApp.result.cacheScope, 'private')
  t.equal(modernApp.result.ttlMs, 0, 'read again each time (SERVICE_READ_TTL_MS)')
  const modernLog = await m.rpc('resources/read', { uri: logUri(failed.id) })
  t.strictSame(modernLog.result.contents, log.result.contents)

  // A deployment still running reads as far as it got; a queued one with no output is empty text.
  const running = await seedDeployment(server, alpha, { status: 'running', lines: [['system', 'started deploy of alpha with pipeline default']] })
  const partial = await s.rpc('resources/read', { uri: logUri(running.id) })
  t.equal(partial.result.contents[0].text, '2026-01-02T03:04:05.000Z [system] started deploy of alpha with pipeline default\n')
})

t.test('a log longer than 10 000 lines gives the last 10 000 and says how many came before', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'verbose')
  const lines = Array.from({ length: 10_003 }, (_, i) => ['stdout', `line ${i}`] as ['stdout', string])
  const d = await seedDeployment(server, app, { status: 'succeeded', lines })
  const s = await legacyClient(server, server.apiKey)
  const text: string = (await s.rpc('resources/read', { uri: logUri(d.id) })).result.contents[0].text
  const out = text.split('\n')
  t.equal(out[0], '[3 earlier lines not shown: service_deployments_logs returns every line]')
  t.equal(out[1], '2026-01-02T03:04:08.000Z [stdout] line 3', 'then the lines from the fourth on')
  t.equal(out.at(-2), `${iso(Date.UTC(2026, 0, 2, 3, 4, 5) + 10_002_000)} [stdout] line 10002`, 'to the last')
  t.equal(out.length, 10_002, 'the marker, 10 000 lines, and the final newline')
})

t.test('absent and foreign ids are one answer: same code, same message, same data (but the URI asked)', async (t) => {
  const server = await serve(t)
  const { alpha } = await seedOrgA(server)
  const b = await otherOrganization(server)
  const foreignDeployment = await seedDeployment(server, b.app)
  const s = await legacyClient(server, server.apiKey)
  const m = modernClient(server, server.apiKey)
  const shape = (answer: any, uri: string) => JSON.parse(JSON.stringify(answer.error).split(uri).join('<uri>'))

  const pairs: Array<[string, string]> = [
    [appUri('app_01aaaaaaaaaaaaaaaaaaaaaaaa'), appUri(b.app.id)],
    [logUri('dep_01aaaaaaaaaaaaaaaaaaaaaaaa'), logUri(foreignDeployment.id)],
  ]
  for (const [absent, foreign] of pairs) {
    const [la, lf, ma, mf] = [await s.rpc('resources/read', { uri: absent }), await s.rpc('resources/read', { uri: foreign }), await m.rpc('resources/read', { uri: absent }), await m.rpc('resources/read', { uri: foreign })]
    t.strictSame(la.error, { code: -32002, message: `Resource not found: ${absent}`, data: { uri: absent, code: 'RESOURCE_NOT_FOUND', action: 'List the resources to find a valid id' } }, 'session: -32002 naming the URI')
    t.strictSame(shape(lf, foreign), shape(la, absent), 'session: a foreign id is answered exactly like an absent one')
    t.equal(ma.error.code, -32602, '2026-07-28: -32602 (SEP-2164)')
    t.equal(ma.httpStatus, 200)
    t.strictSame(ma.error.data, { uri: absent, code: 'RESOURCE_NOT_FOUND', action: 'List the resources to find a valid id' })
    t.strictSame(shape(mf, foreign), shape(ma, absent), '2026-07-28: the same')
  }
  // Neither is a URI this server has (no template matches): the same answer again.
  for (const uri of ['service://apps/', 'service://apps/a/b', 'service://nothing/x']) {
    const answer = await s.rpc('resources/read', { uri })
    t.strictSame(answer.error, { code: -32002, message: `Resource not found: ${uri}`, data: { uri, code: 'RESOURCE_NOT_FOUND', action: 'List the resources to find a valid id' } }, uri)
  }
  // A deleted app is gone from reads and lists.
  await server.app.repos.apps.delete(alpha.organizationId, alpha.id)
  t.equal((await s.rpc('resources/read', { uri: appUri(alpha.id) })).error.code, -32002)
  t.notOk((await s.rpc('resources/list')).result.resources.some((r: any) => r.uri === appUri(alpha.id)))
})

t.test('visibility is scope ∩ role: without mcp:read nothing is listed, read, completed or followed', async (t) => {
  const server = await serve(t)
  const { alpha, failed } = await seedOrgA(server)
  const ownerList = (await (await legacyClient(server, server.apiKey)).rpc('resources/list')).result.resources

  const writeOnly = await createMember(server, { role: 'owner', scopes: ['mcp:write'] })
  for (const [era, c] of [['session', await legacyClient(server, writeOnly.key)], ['2026-07-28', modernClient(server, writeOnly.key)]] as const) {
    t.strictSame((await c.rpc('resources/templates/list')).result.resourceTemplates, [], `${era}: no templates`)
    t.strictSame((await c.rpc('resources/list')).result.resources, [], `${era}: no resources`)
    const read = await c.rpc('resources/read', { uri: appUri(alpha.id) })
    t.equal(read.error.data.code, 'RESOURCE_NOT_FOUND', `${era}: a read is not found`)
    const complete = await c.rpc('completion/complete', { ref: { type: 'ref/resource', uri: APP_TEMPLATE }, argument: { name: 'app_id', value: '' } })
    t.strictSame(complete.error, { code: -32602, message: `Unknown resource template: ${APP_TEMPLATE}`, data: { code: 'INVALID_PARAMS', details: { uri: APP_TEMPLATE }, action: 'Fix the params listed in details and retry' } }, `${era}: the template is unknown to it`)
  }
  const s = await legacyClient(server, writeOnly.key)
  t.equal((await s.rpc('resources/subscribe', { uri: logUri(failed.id) })).error.code, -32002, 'nor can it subscribe')

  // Every role reads apps and deployments (docs/decisions/tool-catalog.md: the read tools are viewer): a viewer sees
  // what an owner sees.
  for (const role of ['viewer', 'developer', 'admin'] as const) {
    const member = await createMember(server, { role, scopes: ['mcp:read'] })
    const c = await legacyClient(server, member.key)
    t.strictSame((await c.rpc('resources/templates/list')).result.resourceTemplates, TEMPLATES, `${role}: both templates`)
    t.strictSame((await c.rpc('resources/list')).result.resources, ownerList, `${role}: the owner's list`)
    t.equal((await c.rpc('resources/read', { uri: logUri(failed.id) })).result.contents[0].uri, logUri(failed.id), `${role}: reads a log`)
  }
})

t.test('organization isolation: org B never lists, reads or completes org A\'s apps and deployments', async (t) => {
  const server = await serve(t)
  const a = await seedOrgA(server)
  const b = await otherOrganization(server)
  const bDeployment = await seedDeployment(server, b.app)
  for (const [era, c] of [['session', await legacyClient(server, b.member.key)], ['2026-07-28', modernClient(server, b.member.key)]] as const) {
    const list = await c.rpc('resources/list')
    t.strictSame(list.result.resources, [appEntry(b.app), logEntry(bDeployment, 'gamma')], `${era}: only its own app and deployment`)
    for (const uri of [appUri(a.alpha.id), logUri(a.failed.id)]) {
      t.equal((await c.rpc('resources/read', { uri })).error.data.code, 'RESOURCE_NOT_FOUND', `${era}: ${uri} is not found`)
    }
    const complete = (name: string, uri: string, value: string) => c.rpc('completion/complete', { ref: { type: 'ref/resource', uri }, argument: { name, value } })
    t.strictSame((await complete('app_id', APP_TEMPLATE, '')).result.completion, { values: [b.app.id], total: 1, hasMore: false }, `${era}: its one app`)
    t.strictSame((await complete('app_id', APP_TEMPLATE, 'alp')).result.completion, { values: [], total: 0, hasMore: false }, `${era}: nothing by org A's app name`)
    t.strictSame((await complete('app_id', APP_TEMPLATE, a.alpha.id)).result.completion, { values: [], total: 0, hasMore: false }, `${era}: nothing by org A's app id`)
    t.strictSame((await complete('deployment_id', LOG_TEMPLATE, '')).result.completion, { values: [bDeployment.id], total: 1, hasMore: false }, `${era}: its one deployment`)
    t.strictSame((await complete('deployment_id', LOG_TEMPLATE, a.failed.id)).result.completion, { values: [], total: 0, hasMore: false }, `${era}: not org A's full deployment id`)
  }
})

t.test('completions of app and deployment ids: by app name, then by id prefix; bounded to 100 with total and hasMore', async (t) => {
  const server = await serve(t)
  const { alpha, beta, failed, succeeded } = await seedOrgA(server)
  const c = await legacyClient(server, server.apiKey)
  const complete = async (name: string, uri: string, value: string) => (await c.rpc('completion/complete', { ref: { type: 'ref/resource', uri }, argument: { name, value } })).result.completion

  t.strictSame(await complete('app_id', APP_TEMPLATE, ''), { values: [alpha.id, beta.id], total: 2, hasMore: false }, 'every app, by name')
  t.strictSame(await complete('app_id', APP_TEMPLATE, alpha.id.slice(0, alpha.id.length - 3)), { values: [alpha.id], total: 1, hasMore: false }, 'by id prefix')
  t.strictSame(await complete('app_id', APP_TEMPLATE, 'BE'), { values: [beta.id], total: 1, hasMore: false }, 'by name prefix, ignoring case')
  t.strictSame(await complete('app_id', APP_TEMPLATE, 'zeta'), { values: [], total: 0, hasMore: false })
  t.strictSame(await complete('deployment_id', LOG_TEMPLATE, ''), { values: [succeeded.id, failed.id], total: 2, hasMore: false }, 'deployments newest first')
  t.strictSame(await complete('deployment_id', LOG_TEMPLATE, 'alp'), { values: [failed.id], total: 1, hasMore: false }, 'by app name')
  t.strictSame(await complete('deployment_id', LOG_TEMPLATE, failed.id), { values: [failed.id], total: 1, hasMore: false }, 'a full id')

  const bad = await c.rpc('completion/complete', { ref: { type: 'ref/resource', uri: APP_TEMPLATE }, argument: { name: 'deployment_id', value: '' } })
  t.equal(bad.error.code, -32602, 'a variable the template does not have')
  const unknown = await c.rpc('completion/complete', { ref: { type: 'ref/resource', uri: 'service://apps/{id}' }, argument: { name: 'id', value: '' } })
  t.equal(unknown.error.code, -32602, 'a template the server does not have')

  for (let i = 0; i < 105; i++) await seedApp(server, `bulk-${String(i).padStart(3, '0')}`)
  const many = await complete('app_id', APP_TEMPLATE, 'app_')
  t.equal(many.values.length, 100, 'at most 100 values')
  t.equal(many.total, 107)
  t.equal(many.hasMore, true)
  t.strictSame(many.values.slice(0, 2), [alpha.id, beta.id], 'by id: oldest first')
  const byName = await complete('app_id', APP_TEMPLATE, '')
  t.strictSame(byName.values.slice(0, 3), [alpha.id, beta.id, (await server.app.repos.apps.page(alpha.organizationId, 200)).items.find((a) => a.name === 'bulk-000')!.id], 'by name: alpha, beta, bulk-000…')
  const named = await complete('app_id', APP_TEMPLATE, 'bulk-10')
  t.equal(named.total, 5, 'bulk-100 … bulk-104 by name')
  const stored = (await server.app.repos.apps.page(alpha.organizationId, 200)).items
  t.strictSame(named.values, [...Array(5).keys()].map((i) => stored.find((a) => a.name === `bulk-10${i}`)!.id), 'in name order')

  const m = modernClient(server, server.apiKey)
  const modern = await m.rpc('completion/complete', { ref: { type: 'ref/resource', uri: APP_TEMPLATE }, argument: { name: 'app_id', value: 'BE' } })
  t.strictSame(modern.result.completion, { values: [beta.id], total: 1, hasMore: false }, 'the same on a stateless request')
})

t.test('sessions: a subscriber hears notifications/resources/updated on its GET stream; others do not', async (t) => {
  const server = await serve(t, { resourceUpdateIntervalMs: 50 })
  const { failed } = await seedOrgA(server)
  const late = await seedApp(server, 'late', { pipeline: 'late' })
  const b = await otherOrganization(server)

  const subscriber = await legacyClient(server, server.apiKey)
  const bystander = await legacyClient(server, (await createMember(server, { role: 'viewer', scopes: ['mcp:read'] })).key)
  const elsewhere = await legacyClient(server, server.apiKey)
  const foreign = await legacyClient(server, b.member.key)
  const streams = {
    subscriber: await getStream(t, server, subscriber.headers),
    bystander: await getStream(t, server, bystander.headers),
    elsewhere: await getStream(t, server, elsewhere.headers),
    foreign: await getStream(t, server, foreign.headers),
  }
  t.strictSame((await elsewhere.rpc('resources/subscribe', { uri: logUri(failed.id) })).result, {}, 'subscribed to another log')

  const handle = await run(server, late) // waits 300 ms before any output of its own
  const uri = logUri(handle.deployment.id)
  t.strictSame((await subscriber.rpc('resources/subscribe', { uri })).result, {}, 'subscribe answers an empty result')
  t.equal((await foreign.rpc('resources/subscribe', { uri })).error?.code, -32002, 'org B may not subscribe to the same URI: it names nothing it can read')
  const final = await handle.done
  t.equal(final.status, 'failed')
  await streams.subscriber.waitFor(() => updatesOf(streams.subscriber).length >= 1, 3000, 'notifications/resources/updated')
  await sleep(150)
  const updates = updatesOf(streams.subscriber)
  t.ok(updates.length >= 1, 'at least one update while it ran and ended')
  t.ok(updates.every((m) => JSON.stringify(m) === JSON.stringify({ jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri } })), 'each names the log\'s URI, nothing else')
  const text: string = (await subscriber.rpc('resources/read', { uri })).result.contents[0].text
  t.match(text, /\[stdout\] building\n.*\[stderr\] boom\n.*\[system\] failed: the pipeline exited with code 3\n$/s, 'after the last update the log is complete')
  t.equal(text, logText(await storedLines(server, handle.deployment.id)))

  t.strictSame(updatesOf(streams.bystander), [], 'a session that did not subscribe hears no update')
  t.strictSame(updatesOf(streams.elsewhere), [], 'a session subscribed to another log hears none for this one')
  t.strictSame(updatesOf(streams.foreign), [], 'another organization\'s session hears none, subscribed or not')
  t.ok(listChangesOf(streams.bystander).length >= 1, 'the organization\'s sessions hear resources/list_changed (a new deployment log)')
  t.strictSame(listChangesOf(streams.foreign), [], 'other organizations do not')

  // Unsubscribed before the run speaks: nothing for it.
  const second = await run(server, late)
  const secondUri = logUri(second.deployment.id)
  await subscriber.rpc('resources/subscribe', { uri: secondUri })
  t.strictSame((await subscriber.rpc('resources/unsubscribe', { uri: secondUri })).result, {})
  const before = updatesOf(streams.subscriber).length
  await second.done
  await allSentSoFar(t, server, subscriber, streams.subscriber)
  t.equal(updatesOf(streams.subscriber).length, before, 'no update after unsubscribing')
})

t.test('updates are coalesced: many lines, few announcements; the end is announced at once', async (t) => {
  // The interval is timed by the server's clock (docs/decisions/clock.md), which only the test moves: an announcement
  // that waited for the interval to end would never come unless the test moved the clock.
  await t.test('a long interval: one announcement for the whole run, at its end, and nothing after', async (t) => {
    const INTERVAL_MS = 60_000
    const clock = new ManualClock()
    const server = await serve(t, { resourceUpdateIntervalMs: INTERVAL_MS }, { clock })
    const app = await seedApp(server, 'late', { pipeline: 'late' })
    const s = await legacyClient(server, server.apiKey)
    const live = await getStream(t, server, s.headers)
    const handle = await run(server, app)
    const uri = logUri(handle.deployment.id)
    // The start line is stored (and announced) a round trip after the run starts on PostgreSQL: subscribed only then.
    await until(async () => (await storedLines(server, handle.deployment.id)).length >= 1, 2000, 'the start line stored')
    await s.rpc('resources/subscribe', { uri }) // after the announcement of the start line, before the output
    await handle.done
    await live.waitFor(() => updatesOf(live).length >= 1, 5000, 'the announcement of the end, with no interval passed on the server\'s clock')
    await allSentSoFar(t, server, s, live)
    t.equal(updatesOf(live).length, 1, 'one announcement for the output lines and the end')
    await clock.advance(INTERVAL_MS)
    await allSentSoFar(t, server, s, live)
    t.equal(updatesOf(live).length, 1, 'the output lines and the end made one announcement, and the interval\'s timer was dropped')
    t.equal((await storedLines(server, handle.deployment.id)).length, 4, 'for four stored lines')
  })

  await t.test('a short interval: announcements keep coming while the log grows, fewer than its lines', async (t) => {
    const server = await serve(t, { resourceUpdateIntervalMs: 60 })
    const app = await seedApp(server, 'drip', { pipeline: 'drip' })
    const s = await legacyClient(server, server.apiKey)
    const live = await getStream(t, server, s.headers)
    const handle = await run(server, app)
    const uri = logUri(handle.deployment.id)
    await s.rpc('resources/subscribe', { uri })
    const final = await handle.done
    const whileRunning = updatesOf(live).length
    await sleep(150)
    const lines = (await storedLines(server, handle.deployment.id)).length
    t.equal(final.status, 'succeeded')
    t.equal(lines, 14, 'start, 12 lines, outcome')
    t.ok(whileRunning >= 3, `updates arrived while it ran (${whileRunning})`)
    t.ok(updatesOf(live).length < lines, `fewer announcements (${updatesOf(live).length}) than lines (${lines})`)
  })
})

t.test('2026-07-28: subscriptions/listen with resourceSubscriptions hears the log grow; other organizations do not', async (t) => {
  const server = await serve(t, { resourceUpdateIntervalMs: 50 })
  const app = await seedApp(server, 'late', { pipeline: 'late' })
  const b = await otherOrganization(server)
  const writeOnly = await createMember(server, { role: 'owner', scopes: ['mcp:write'] })
  const handle = await run(server, app)
  const uri = logUri(handle.deployment.id)

  const listen = async (key: string, id: string) => {
    const live = await modernLive(server.mcpUrl, key, 'subscriptions/listen', { notifications: { resourceSubscriptions: [uri, 'service://nothing/1'], resourcesListChanged: true } }, { id })
    t.teardown(() => live.close())
    await live.waitFor(() => messagesOf(live).length >= 1, 3000, 'the acknowledgement')
    return live
  }
  const mine = await listen(server.apiKey, 'mine')
  const theirs = await listen(b.member.key, 'theirs')
  const blind = await listen(writeOnly.key, 'blind')
  t.strictSame(messagesOf(mine)[0].params.notifications, { resourcesListChanged: true, resourceSubscriptions: [uri] }, 'the log is honoured, a URI nothing serves is not')
  t.strictSame(messagesOf(blind)[0].params.notifications, { resourcesListChanged: true }, 'without mcp:read the log is left out')

  await handle.done
  await mine.waitFor(() => messagesOf(mine).some((m) => m.method === 'notifications/resources/updated'), 3000, 'notifications/resources/updated')
  await mine.waitFor(() => messagesOf(mine).some((m) => m.method === 'notifications/resources/list_changed'), 3000, 'notifications/resources/list_changed (the run ended)')
  await sleep(150)
  const updated = messagesOf(mine).filter((m) => m.method === 'notifications/resources/updated')
  t.ok(updated.length >= 1)
  t.ok(updated.every((m) => m.params.uri === uri && m.params._meta[SUBSCRIPTION_ID_KEY] === 'mine'), 'each names the log and the subscription')
  t.strictSame(Object.keys(updated[0].params).sort(), ['_meta', 'uri'])
  t.notOk(messagesOf(theirs).some((m) => m.method === 'notifications/resources/updated' || m.method === 'notifications/resources/list_changed'), 'org B hears nothing of org A\'s run')
  t.notOk(messagesOf(blind).some((m) => m.method === 'notifications/resources/updated'), 'nor does a caller that cannot read it')
})

t.test('announcements of app changes: created, changed, env vars, deleted; to the organization only', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'late', { pipeline: 'late' })
  const alpha = await seedApp(server, 'alpha')
  const b = await otherOrganization(server)
  const s = await legacyClient(server, server.apiKey)
  const other = await legacyClient(server, b.member.key)
  const live = await getStream(t, server, s.headers)
  const otherLive = await getStream(t, server, other.headers)
  await s.rpc('resources/subscribe', { uri: appUri(alpha.id) })
  t.equal((await other.rpc('resources/subscribe', { uri: appUri(alpha.id) })).error?.code, -32002, 'org B may not subscribe to org A\'s app')
  /** Whether `count` grows past `before` within a short wait. */
  const grows = (count: () => number, before: number) => until(() => count() > before, 500, 'an announcement').then(() => true, () => false)
  const changes = () => listChangesOf(live).length
  const appUpdates = () => updatesOf(live).filter((m) => m.params.uri === appUri(alpha.id)).length

  const handle = await run(server, app)
  await live.waitFor(() => listChangesOf(live).length >= 1, 3000, 'resources/list_changed for the new deployment')
  t.strictSame(listChangesOf(live)[0], { jsonrpc: '2.0', method: 'notifications/resources/list_changed' }, 'a new deployment (its log is listed)')
  await handle.done
  await sleep(100)

  let before = changes()
  const created = await callToEnd(server.mcpUrl, s.headers, 'service_apps_create', { name: 'fresh' }, 9)
  t.equal(created.result.isError, false)
  t.ok(await grows(changes, before), 'service_apps_create: resources/list_changed')
  t.ok((await s.rpc('resources/list')).result.resources.some((r: any) => r.uri === appUri(created.result.structuredContent.app.id)), 'and the next list shows the app')

  before = changes()
  let updatesBefore = appUpdates()
  t.equal((await callToEnd(server.mcpUrl, s.headers, 'service_apps_update', { app_id: alpha.id, description: 'Renamed things' }, 10)).result.isError, false)
  t.ok(await grows(appUpdates, updatesBefore), 'service_apps_update: resources/updated for the app\'s subscribers')
  t.ok(await grows(changes, before), 'service_apps_update: resources/list_changed (its entry changed)')

  updatesBefore = appUpdates()
  t.equal((await callToEnd(server.mcpUrl, s.headers, 'service_env_set', { app_id: alpha.id, name: 'TOKEN', value: 'x' }, 11)).result.isError, false)
  t.ok(await grows(appUpdates, updatesBefore), 'service_env_set: resources/updated (the app shows its env var names)')

  before = changes()
  updatesBefore = appUpdates()
  const asked = answerOf(await modernCall(server.mcpUrl, server.apiKey, 'service_apps_delete', { app_id: alpha.id }, { capabilities: ELICITING, id: 12 }), 12)
  t.equal(asked.result.resultType, 'input_required')
  const deleted = answerOf(await modernCall(server.mcpUrl, server.apiKey, 'service_apps_delete', { app_id: alpha.id }, { capabilities: ELICITING, id: 13, extra: { requestState: asked.result.requestState, inputResponses: { confirm: confirmAnswer() } } }), 13)
  t.equal(deleted.result.isError, false, 'deleted (2026-07-28 confirmation)')
  t.ok(await grows(changes, before), 'service_apps_delete: resources/list_changed')
  t.ok(await grows(appUpdates, updatesBefore), 'service_apps_delete: resources/updated (a subscriber reads it again and finds it gone)')

  t.strictSame(listChangesOf(otherLive), [], 'org B heard no list change')
  t.strictSame(updatesOf(otherLive), [], 'nor an update, though it asked to subscribe to the URI')
})

import t, { type Test } from 'tap'
import { legacyClient, otherOrganization, seedApp, seedDeployment } from '../helpers/builtin-catalog.js'
import { injectServer, type InjectServer } from '../helpers/inject.js'
import { createMember, defaultOrganization } from '../helpers/seed.js'
import { until } from '../helpers/stream.js'

// resources/subscribe in a session (2025 revisions) checks what resources/read checks, once, when it is asked: the
// URI must name something the caller may read now. Absent and foreign ids get one answer (RESOURCE_NOT_FOUND, -32002,
// the same message), like a URI nothing serves. After subscribing, each update is delivered only while the member may
// still read it (docs/decisions/subscriptions.md): a removed member hears nothing more. The listen acknowledgement
// (2026-07-28) needs an open stream: test/e2e/subscription-readability.test.ts.

const appUri = (id: string) => `service://apps/${id}`
const logUri = (id: string) => `service://deployments/${id}/log`

/** The JSON-RPC error resources/read answers for `uri` when it names nothing the caller may read. */
const notFound = (uri: string) => ({ code: -32002, message: `Resource not found: ${uri}`, data: { uri, code: 'RESOURCE_NOT_FOUND' } })

/** An error's code, message, URI and service code: what a client could compare between two answers. */
function shapeOf(error: any) {
  return { code: error?.code, message: error?.message, data: { uri: error?.data?.uri, code: error?.data?.code } }
}

async function orgA(server: InjectServer) {
  const app = await seedApp(server, 'alpha')
  const deployment = await seedDeployment(server, app)
  return { app, deployment }
}

/** Every notifications/resources/updated the server hands a session's GET stream, by session id. */
function recordUpdates(server: InjectServer): Map<string, string[]> {
  const seen = new Map<string, string[]>()
  const streams = server.app.sessionStreams
  const notify = streams.notify.bind(streams)
  streams.notify = (sessionId, message) => {
    if ('method' in message && message.method === 'notifications/resources/updated') {
      seen.set(sessionId, [...(seen.get(sessionId) ?? []), String((message.params as { uri: string }).uri)])
    }
    return notify(sessionId, message)
  }
  return seen
}

/**
 * Waits until `witness` (a session opened after the others, still allowed to read) has heard `count` updates. Each
 * update checks the sessions in the order they were opened, with reads answered in the order they are made: once the
 * witness is told, every earlier session's check has been decided.
 */
async function heardBy(seen: Map<string, string[]>, witness: { sessionId: string }, count: number): Promise<void> {
  await until(() => (seen.get(witness.sessionId)?.length ?? 0) >= count, 5000, `the witness's update ${count}`)
}

t.test('own app and own deployment log: subscribed', async (t) => {
  const server = await injectServer(t)
  const { app, deployment } = await orgA(server)
  const s = await legacyClient(server, server.apiKey)
  t.strictSame((await s.rpc('resources/subscribe', { uri: appUri(app.id) })).result, {}, 'own app')
  t.strictSame((await s.rpc('resources/subscribe', { uri: logUri(deployment.id) })).result, {}, 'own deployment log')
  const viewer = await legacyClient(server, (await createMember(server, { role: 'viewer', scopes: ['mcp:read'] })).key)
  t.strictSame((await viewer.rpc('resources/subscribe', { uri: appUri(app.id) })).result, {}, 'a viewer of the organization too')
})

t.test('foreign and absent ids: one answer, RESOURCE_NOT_FOUND (-32002), as resources/read gives', async (t) => {
  const server = await injectServer(t)
  const b = await otherOrganization(server)
  const foreignDeployment = await seedDeployment(server, b.app)
  await orgA(server)
  const s = await legacyClient(server, server.apiKey)
  const cases: Array<[string, string]> = [
    ['another organization\'s app', appUri(b.app.id)],
    ['another organization\'s deployment log', logUri(foreignDeployment.id)],
    ['an absent app id', appUri('app_doesnotexist')],
    ['an absent deployment id', logUri('dep_doesnotexist')],
    ['a URI nothing serves', 'service://nothing/here'],
  ]
  for (const [label, uri] of cases) {
    const subscribed = await s.rpc('resources/subscribe', { uri })
    t.strictSame(shapeOf(subscribed.error), notFound(uri), `${label}: RESOURCE_NOT_FOUND, -32002`)
    t.strictSame(shapeOf(subscribed.error), shapeOf((await s.rpc('resources/read', { uri })).error), `${label}: what resources/read answers`)
  }
  // The owner of the other organization subscribes to its own app: the refusal above is about the caller, not the URI.
  const owner = await legacyClient(server, b.member.key)
  t.strictSame((await owner.rpc('resources/subscribe', { uri: appUri(b.app.id) })).result, {}, 'its own member may subscribe')
  t.strictSame((await owner.rpc('resources/subscribe', { uri: logUri(foreignDeployment.id) })).result, {}, 'and to its log')
})

t.test('a refused subscription delivers nothing; unsubscribing from it is harmless', async (t) => {
  const server = await injectServer(t)
  const b = await otherOrganization(server)
  const seen = recordUpdates(server)
  const s = await legacyClient(server, server.apiKey)
  t.equal((await s.rpc('resources/subscribe', { uri: appUri(b.app.id) })).error?.code, -32002)
  const witness = await legacyClient(server, b.member.key)
  await witness.rpc('resources/subscribe', { uri: appUri(b.app.id) })
  server.app.resources.updated(appUri(b.app.id), null) // even announced to every organization
  await heardBy(seen, witness, 1)
  t.strictSame(seen.get(s.sessionId) ?? [], [], 'no update for the refused URI')
  t.strictSame((await s.rpc('resources/unsubscribe', { uri: appUri(b.app.id) })).result, {}, 'unsubscribe of what was never subscribed: {}')
})

async function subscribedMember(t: Test) {
  const server = await injectServer(t)
  const org = await defaultOrganization(server)
  const { app } = await orgA(server)
  const member = await createMember(server, { role: 'developer' })
  const seen = recordUpdates(server)
  const s = await legacyClient(server, member.key)
  const witness = await legacyClient(server, server.apiKey)
  t.strictSame((await s.rpc('resources/subscribe', { uri: appUri(app.id) })).result, {}, 'subscribed while a member')
  await witness.rpc('resources/subscribe', { uri: appUri(app.id) })
  server.app.resources.updated(appUri(app.id), org.id)
  await heardBy(seen, witness, 1)
  t.strictSame(seen.get(s.sessionId), [appUri(app.id)], 'the update while a member')
  return { server, org, app, member, seen, s, witness }
}

t.test('a removed member hears no update afterwards', async (t) => {
  const { server, org, app, member, seen, s, witness } = await subscribedMember(t)
  t.ok(await server.app.repos.memberships.remove(member.user.id, org.id), 'the membership is removed')
  server.app.resources.updated(appUri(app.id), org.id)
  await heardBy(seen, witness, 2)
  t.strictSame(seen.get(s.sessionId), [appUri(app.id)], 'no update after the removal')
})

/**
 * The confirmation state table of interface.md ("Confirmation (elicitation) of a protected tool call"), row by row, over
 * real sockets: the tools/call SSE stream is read live, and answers to elicitation/create are POSTed while it is open.
 */
import t, { type Test } from 'tap'
import { builtinTools } from '../../src/plugins/tools/builtin/index.js'
import type { Config } from '../../src/config.js'
import { answerRequest, decision, elicitationOn, elicitingSession, isAnswerTo, isElicitation, openLiveCall, readToEnd } from '../helpers/confirm.js'
import { callTool, initializeMessage, openSession, post, type RpcReply } from '../helpers/mcp.js'
import { createKey, createMember, defaultOrganization, ownerMembership } from '../helpers/seed.js'
import { ManualClock } from '../helpers/clock.js'
import { startServer, type TestServer } from '../helpers/server.js'
import { messagesOf, sleep, type LiveStream } from '../helpers/stream.js'

const PIPELINES = { default: { argv: [process.execPath, '-e', 'process.exit(0)'] } }
const ELICIT = { elicitation: {} }
const ACCEPT = decision()

let nextId = 5000
const rid = () => ++nextId

async function serve(t: Test, config: Partial<Config> = {}, clock?: ManualClock): Promise<TestServer> {
  return startServer(t, { tools: builtinTools, config: { pipelines: PIPELINES, ...config }, ...(clock ? { clock } : {}) })
}

/** How long a question waits for the client's answer, on a manual clock: only moving the clock ends the wait. */
const ELICIT_MS = 10_000

/** True while the server awaits the client's answer to an elicitation/create (the dispatcher's call table). */
function awaitingAnswer(server: TestServer): boolean {
  return [...server.app.rpc.pendingRequestMethods()].includes('elicitation/create')
}

/** An app in the default organization with `deployments` finished deployments. */
async function seedApp(server: TestServer, name: string, deployments = 0) {
  const repos = server.app.repos
  const organizationId = (await defaultOrganization(server)).id
  const app = await repos.apps.create({ organizationId, name })
  for (let i = 0; i < deployments; i++) {
    const d = await repos.deployments.create({ organizationId, appId: app.id, kind: 'deploy', pipeline: 'default', createdBy: null })
    await repos.deployments.finish(d.id, 'succeeded', Date.now(), 0, 'exit 0')
  }
  return app
}

async function appExists(server: TestServer, appId: string): Promise<boolean> {
  return (await server.app.repos.apps.byId((await defaultOrganization(server)).id, appId)) !== undefined
}

async function confirmations(server: TestServer, toolName = 'service_apps_delete') {
  return (await server.app.repos.audit.page((await defaultOrganization(server)).id, 100, undefined, `${toolName}.confirmation`)).items
}


/** A tools/call on a live SSE stream. */
async function openCall(t: Test, server: TestServer, headers: Record<string, string>, name: string, args: Record<string, unknown>, id: number | string): Promise<LiveStream> {
  const live = await openLiveCall(t, server.mcpUrl, headers, callTool(name, args, id))
  t.equal(live.status, 200, 'the call is answered 200')
  t.equal(live.headers['content-type'], 'text/event-stream', 'a confirmation-gated call is answered as SSE')
  return live
}

/** service_apps_delete on a live SSE stream, up to its elicitation/create: the call's id, its stream and the request. */
async function askDelete(t: Test, server: TestServer, headers: Record<string, string>, appId: string) {
  const id = rid()
  const live = await openCall(t, server, headers, 'service_apps_delete', { app_id: appId }, id)
  return { id, live, request: await elicitationOn(live) }
}

/** Waits for the call's response and the end of the stream; returns the tool result and every message. */
async function resultOn(t: Test, live: LiveStream, id: number | string): Promise<{ result: any; messages: any[] }> {
  const { messages, responses } = await readToEnd(live, id)
  t.ok(live.endedByServer, 'the server ends the stream after the response')
  t.equal(responses.length, 1, 'one response to the call')
  t.equal(messages.at(-1), responses[0], 'the response is the last message')
  return { result: responses[0]?.result, messages }
}

/** POSTs a JSON-RPC answer to the server's request `id`. */
function answer(server: TestServer, headers: Record<string, string>, id: unknown, result: unknown): Promise<RpcReply> {
  return answerRequest(server.mcpUrl, headers, id, result)
}

/** A refused answer: HTTP 400 with the JSON-RPC invalid-request error, id null. */
function refused(t: Test, reply: RpcReply, what: string): void {
  t.equal(reply.status, 400, `${what}: HTTP 400`)
  t.equal(reply.json?.jsonrpc, '2.0', `${what}: a JSON-RPC error body`)
  t.equal(reply.json?.id, null, `${what}: id null`)
  t.equal(reply.json?.error?.code, -32600, `${what}: -32600`)
  t.equal(reply.json?.error?.data?.code, 'INVALID_REQUEST', `${what}: INVALID_REQUEST`)
}

/** The call is still waiting: no response on its open stream. */
async function stillWaiting(t: Test, live: LiveStream, id: number | string, what: string): Promise<void> {
  await sleep(50)
  t.notOk(messagesOf(live).some(isAnswerTo(id)), `${what}: the call has no response yet`)
  t.notOk(live.endedByServer, `${what}: the stream stays open`)
}

/**
 * Accepting answers to the pending request from `others` are refused (400); the borrower's credential on the asking
 * session (`sessionId`) is turned away (404, returned); the call keeps waiting.
 */
async function refusedElsewhere(
  t: Test,
  server: TestServer,
  pending: { id: number | string; live: LiveStream; request: any },
  sessionId: string,
  cases: { others: Array<[Record<string, string>, string]>; borrower: [Record<string, string>, string]; waiting: string },
): Promise<RpcReply> {
  for (const [headers, what] of cases.others) refused(t, await answer(server, headers, pending.request.id, ACCEPT), what)
  const [headers, what] = cases.borrower
  const borrowed = await answer(server, { ...headers, 'mcp-session-id': sessionId }, pending.request.id, ACCEPT)
  t.equal(borrowed.status, 404, what)
  await stillWaiting(t, pending.live, pending.id, cases.waiting)
  return borrowed
}

function ok(t: Test, result: any): any {
  t.equal(result?.isError, false, 'not a tool failure')
  return result.structuredContent
}

function failure(t: Test, result: any, code: string): { code: string; message: string } {
  t.equal(result?.isError, true, `a tool failure (${code})`)
  const err = JSON.parse(result.content[0].text)
  t.equal(err.code, code, `code ${code}`)
  return err
}

/** A server with the app `target` whose service_apps_delete waits for the owner's answer on one session. */
async function deleteAwaitingAnswer(t: Test) {
  const server = await serve(t)
  const app = await seedApp(server, 'target')
  const { headers } = await elicitingSession(server)
  return { server, app, headers, ...(await askDelete(t, server, headers, app.id)) }
}

/** Calls service_apps_delete, answers its elicitation with `result`, and returns what happened. */
async function deleteAnswered(t: Test, server: TestServer, headers: Record<string, string>, appId: string, result: unknown) {
  const { id, live, request } = await askDelete(t, server, headers, appId)
  const reply = await answer(server, headers, request.id, result)
  t.equal(reply.status, 202, 'the answer is accepted with 202')
  t.equal(reply.text, '', 'with no body')
  return { request, ...(await resultOn(t, live, id)) }
}

t.test('tool call received → elicitation/create on the call stream → awaiting user: the request, and the stream stays open', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'billing', 14)
  const { headers } = await elicitingSession(server)
  const { id, live, request } = await askDelete(t, server, headers, app.id)

  t.equal(request.jsonrpc, '2.0')
  t.ok(Number.isInteger(request.id) || typeof request.id === 'string', 'a server-chosen id')
  t.notOk('error' in request || 'result' in request, 'a request, not a response')
  t.equal(request.params.mode, 'form')
  t.equal(request.params.message, `Delete app billing (${app.id}) and its 14 deployments?`, 'the message names the app and its deployment count')
  const schema = request.params.requestedSchema
  t.equal(schema.type, 'object')
  t.strictSame(Object.keys(schema.properties), ['confirm'], 'one field: confirm')
  t.equal(schema.properties.confirm.type, 'boolean')
  t.type(schema.properties.confirm.title, 'string')
  t.type(schema.properties.confirm.description, 'string')
  t.strictSame(schema.required, ['confirm'])

  await sleep(200)
  t.notOk(messagesOf(live).some(isAnswerTo(id)), 'no response while awaiting the user')
  t.notOk(live.endedByServer, 'the stream stays open')
  t.ok(await appExists(server, app.id), 'nothing deleted yet')
  t.strictSame(await confirmations(server), [], 'nothing audited yet')

  // Finish the exchange so the server has nothing pending at teardown.
  t.equal((await answer(server, headers, request.id, { action: 'decline' })).status, 202)
  failure(t, (await resultOn(t, live, id)).result, 'ELICITATION_DENIED')
})

t.test('awaiting user → accept (confirm true) → running: the tool executes', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'doomed', 2)
  const { headers } = await elicitingSession(server)
  const { request, result, messages } = await deleteAnswered(t, server, headers, app.id, ACCEPT)
  t.equal(request.params.message, `Delete app doomed (${app.id}) and its 2 deployments?`)
  t.strictSame(ok(t, result), { deleted: true, app_id: app.id, name: 'doomed', deployments_deleted: 2 })
  t.notOk(await appExists(server, app.id), 'the app is gone')
  t.ok(messages.findIndex(isElicitation) >= 0 && messages.findIndex(isElicitation) < messages.length - 1, 'the request came before the result')

  const entries = await confirmations(server)
  t.equal(entries.length, 1, 'one confirmation entry')
  t.equal(entries[0]?.outcome, 'confirmed')
  t.match(entries[0]?.details, { message: request.params.message })
  const deleted = (await server.app.repos.audit.page((await defaultOrganization(server)).id, 100, undefined, 'service_apps_delete')).items
  t.equal(deleted[0]?.outcome, 'succeeded', 'then the delete itself succeeded')
  t.equal(deleted[0]?.targetId, app.id)
})

t.test('awaiting user → decline → not executed: ELICITATION_DENIED', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'keeper', 1)
  const { headers } = await elicitingSession(server)
  const { result } = await deleteAnswered(t, server, headers, app.id, { action: 'decline' })
  failure(t, result, 'ELICITATION_DENIED')
  t.ok(await appExists(server, app.id), 'the app is still there')
  const entries = await confirmations(server)
  t.equal(entries.length, 1)
  t.equal(entries[0]?.outcome, 'declined')
  t.match(entries[0]?.details, { action: 'decline' })
  t.notOk((await server.app.repos.audit.page((await defaultOrganization(server)).id, 100, undefined, 'service_apps_delete')).items.length, 'no delete entry')
})

t.test('awaiting user → cancel → not executed: ELICITATION_DENIED', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'keeper')
  const { headers } = await elicitingSession(server)
  const { result } = await deleteAnswered(t, server, headers, app.id, { action: 'cancel' })
  failure(t, result, 'ELICITATION_DENIED')
  t.ok(await appExists(server, app.id), 'the app is still there')
  t.match((await confirmations(server))[0], { outcome: 'declined', details: { action: 'cancel' } })
})

t.test('awaiting user → accept with confirm false → not executed: ELICITATION_DENIED', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'keeper')
  const { headers } = await elicitingSession(server)
  const { result } = await deleteAnswered(t, server, headers, app.id, { action: 'accept', content: { confirm: false } })
  failure(t, result, 'ELICITATION_DENIED')
  t.ok(await appExists(server, app.id), 'the app is still there')
  t.match((await confirmations(server))[0], { outcome: 'declined', details: { action: 'accept', confirm: false } })
})

t.test('awaiting user → a JSON-RPC error answer (the client could not show it) → ELICITATION_DENIED', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'keeper')
  const { headers } = await elicitingSession(server)
  const { id, live, request } = await askDelete(t, server, headers, app.id)
  const reply = await post(server.mcpUrl, { jsonrpc: '2.0', id: request.id, error: { code: -32602, message: 'Client does not support form-mode elicitation requests' } }, headers)
  t.equal(reply.status, 202, 'an error answer is accepted')
  failure(t, (await resultOn(t, live, id)).result, 'ELICITATION_DENIED')
  t.ok(await appExists(server, app.id), 'the app is still there')
  t.equal((await confirmations(server))[0]?.outcome, 'declined')
})

t.test('awaiting user → prompt times out → not executed: notifications/cancelled, then ELICITATION_TIMEOUT', async (t) => {
  const clock = new ManualClock()
  const server = await serve(t, { elicitationTimeoutMs: ELICIT_MS }, clock)
  const app = await seedApp(server, 'slowpoke', 3)
  const { headers } = await elicitingSession(server)
  const { id, live, request } = await askDelete(t, server, headers, app.id)
  await clock.advance(ELICIT_MS - 1)
  t.ok(awaitingAnswer(server), 'still waiting 1 ms before the timeout')
  await clock.advance(1)
  const { result, messages } = await resultOn(t, live, id)
  t.notOk(awaitingAnswer(server), 'withdrawn at the timeout')

  const cancelled = messages.filter((m) => m.method === 'notifications/cancelled')
  t.equal(cancelled.length, 1, 'one notifications/cancelled on the call stream')
  t.equal(cancelled[0]?.params.requestId, request.id, 'for the elicitation request')
  t.type(cancelled[0]?.params.reason, 'string')
  t.notOk('id' in (cancelled[0] ?? {}), 'a notification (no id)')
  const order = [messages.findIndex(isElicitation), messages.indexOf(cancelled[0]), messages.findIndex(isAnswerTo(id))]
  t.ok(order[0]! < order[1]! && order[1]! < order[2]!, 'elicitation/create, then notifications/cancelled, then the result')

  failure(t, result, 'ELICITATION_TIMEOUT')
  t.ok(await appExists(server, app.id), 'the app is still there')
  t.equal((await confirmations(server))[0]?.outcome, 'timed_out', 'audited as timed_out')

  refused(t, await answer(server, headers, request.id, ACCEPT), 'a late answer')
  t.ok(await appExists(server, app.id), 'a late accept changes nothing')
})

t.test('tool call received → client lacks the elicitation capability → not executed: CAPABILITY_REQUIRED', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'keeper')
  for (const [version, capabilities] of [['2025-11-25', {}], ['2025-06-18', { roots: {} }], ['2025-03-26', {}]] as const) {
    const { headers } = await openSession(server.mcpUrl, server.apiKey, version, capabilities)
    const reply = await post(server.mcpUrl, callTool('service_apps_delete', { app_id: app.id }, rid()), headers)
    t.equal(reply.status, 200)
    const messages = reply.json ? [reply.json] : reply.messages
    t.notOk(messages.some(isElicitation), `${version}: no elicitation/create is sent`)
    const response = messages.filter((m) => 'result' in m || 'error' in m)
    t.equal(response.length, 1, `${version}: one response`)
    failure(t, response[0]?.result, 'CAPABILITY_REQUIRED')
  }
  t.ok(await appExists(server, app.id), 'nothing executed')
  t.strictSame(await confirmations(server), [], 'nobody was asked')
  t.notOk((await server.app.repos.audit.page((await defaultOrganization(server)).id, 100, undefined, 'service_apps_delete')).items.length, 'no delete entry')
})

t.test('a client that accepts only application/json cannot be asked: CAPABILITY_REQUIRED', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'keeper')
  const { headers } = await elicitingSession(server)
  for (const [tool, args] of [['service_apps_delete', { app_id: app.id }], ['service_env_unset', { app_id: app.id, name: 'KEPT' }]] as const) {
    if (tool === 'service_env_unset') await server.app.repos.envVars.set({ organizationId: (await defaultOrganization(server)).id, appId: app.id, name: 'KEPT', ciphertext: 'v1.x.y.z', userId: null })
    const reply = await post(server.mcpUrl, callTool(tool, args, rid()), { ...headers, accept: 'application/json' })
    t.equal(reply.status, 200)
    t.match(String(reply.headers['content-type']), /^application\/json/, `${tool}: answered as JSON`)
    const err = failure(t, reply.json.result, 'CAPABILITY_REQUIRED')
    t.match(err.message, /text\/event-stream/, 'the message says what to accept')
  }
  t.ok(await appExists(server, app.id), 'the app is still there')
  t.ok(await server.app.repos.envVars.exists((await defaultOrganization(server)).id, app.id, 'KEPT'), 'the env var is still there')
  t.strictSame(await confirmations(server), [], 'nobody was asked')
})

t.test('before notifications/initialized nobody is asked: CAPABILITY_REQUIRED', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'keeper')
  const init = await post(server.mcpUrl, initializeMessage('2025-11-25', ELICIT), { authorization: `Bearer ${server.apiKey}` })
  t.equal(init.status, 200)
  const headers = { authorization: `Bearer ${server.apiKey}`, 'mcp-session-id': String(init.headers['mcp-session-id']), 'mcp-protocol-version': '2025-11-25' }

  const reply = await post(server.mcpUrl, callTool('service_apps_delete', { app_id: app.id }, rid()), headers)
  t.equal(reply.status, 200)
  t.notOk(reply.messages.some(isElicitation), 'no elicitation/create before initialized')
  const err = failure(t, reply.messages.find((m) => 'result' in m)?.result, 'CAPABILITY_REQUIRED')
  t.match(err.message, /notifications\/initialized/)
  t.ok(await appExists(server, app.id), 'nothing executed')

  t.equal((await post(server.mcpUrl, { jsonrpc: '2.0', method: 'notifications/initialized' }, headers)).status, 202)
  const { result } = await deleteAnswered(t, server, headers, app.id, ACCEPT)
  ok(t, result)
  t.notOk(await appExists(server, app.id), 'after initialized the same call is asked and runs')
})

t.test('an answer with an unknown id is refused (400) and the wait goes on', async (t) => {
  const { server, app, headers, id, live, request } = await deleteAwaitingAnswer(t)

  refused(t, await answer(server, headers, typeof request.id === 'number' ? request.id + 1000 : `${request.id}x`, ACCEPT), 'unknown id')
  refused(t, await answer(server, headers, String(request.id), ACCEPT), 'the id as a string is another id')
  refused(t, await answer(server, headers, id, ACCEPT), 'the tool call\'s own id')
  await stillWaiting(t, live, id, 'after unknown ids')
  t.ok(await appExists(server, app.id), 'nothing ran')

  t.equal((await answer(server, headers, request.id, ACCEPT)).status, 202, 'then the right id is accepted')
  ok(t, (await resultOn(t, live, id)).result)
  t.notOk(await appExists(server, app.id), 'and the tool ran')
  refused(t, await answer(server, headers, request.id, ACCEPT), 'a second answer')
})

t.test('an answer from another session of the same member is refused (400) and the wait goes on', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'target')
  const mine = await elicitingSession(server)
  const sameKey = await elicitingSession(server)
  const otherKey = await createKey(server, (await ownerMembership(server)).id)
  const sameMemberOtherKey = await elicitingSession(server, otherKey.key)
  const { id, live, request } = await askDelete(t, server, mine.headers, app.id)

  const borrowed = await refusedElsewhere(t, server, { id, live, request }, mine.sessionId, {
    others: [[sameKey.headers, 'another session, same key'], [sameMemberOtherKey.headers, 'another session, another key of the same member']],
    borrower: [sameMemberOtherKey.headers, 'the session cannot be used with another credential'],
    waiting: 'after answers from elsewhere',
  })
  t.equal(borrowed.json?.error?.code, 'SESSION_NOT_FOUND')
  t.ok(await appExists(server, app.id), 'nothing ran')

  t.equal((await answer(server, mine.headers, request.id, { action: 'decline' })).status, 202, 'the right session answers')
  failure(t, (await resultOn(t, live, id)).result, 'ELICITATION_DENIED')
  t.ok(await appExists(server, app.id), 'declined: the app stays')
})

t.test('an answer from another member is refused (400) and the wait goes on', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'target')
  const mine = await elicitingSession(server)
  const colleague = await createMember(server, { role: 'admin' })
  const theirs = await elicitingSession(server, colleague.key)
  const other = await server.app.repos.organizations.create({ slug: 'other', name: 'Other' })
  const outsider = await createMember(server, { role: 'owner', organizationId: other.id })
  const outside = await elicitingSession(server, outsider.key)
  const { id, live, request } = await askDelete(t, server, mine.headers, app.id)

  await refusedElsewhere(t, server, { id, live, request }, mine.sessionId, {
    others: [[theirs.headers, 'a member of the same organization'], [outside.headers, 'a member of another organization']],
    borrower: [theirs.headers, 'another member cannot use the session'],
    waiting: 'after answers from other members',
  })
  t.ok(await appExists(server, app.id), 'nothing ran')

  t.equal((await answer(server, mine.headers, request.id, ACCEPT)).status, 202)
  ok(t, (await resultOn(t, live, id)).result)
  t.notOk(await appExists(server, app.id), 'the member who was asked confirmed it')
})

t.test('an answer that does not match the request is refused (400) and the wait goes on', async (t) => {
  const { server, app, headers, id, live, request } = await deleteAwaitingAnswer(t)

  const bad: Array<[string, unknown]> = [
    ['no action', {}],
    ['action maybe', { action: 'maybe' }],
    ['action ACCEPT', { action: 'ACCEPT', content: { confirm: true } }],
    ['action a number', { action: 1 }],
    ['accept without content', { action: 'accept' }],
    ['accept with empty content', { action: 'accept', content: {} }],
    ['accept with confirm "yes"', { action: 'accept', content: { confirm: 'yes' } }],
    ['accept with confirm "true"', { action: 'accept', content: { confirm: 'true' } }],
    ['accept with confirm 1', { action: 'accept', content: { confirm: 1 } }],
    ['accept with confirm null', { action: 'accept', content: { confirm: null } }],
    ['accept with content an array', { action: 'accept', content: [true] }],
    ['accept with content a string', { action: 'accept', content: 'yes' }],
    ['accept with a nested extra field', { action: 'accept', content: { confirm: true, extra: { deep: 1 } } }],
    ['decline with content null', { action: 'decline', content: null }],
    ['result not an object', 'accept'],
    ['result null', null],
  ]
  for (const [what, result] of bad) {
    const reply = await answer(server, headers, request.id, result)
    refused(t, reply, what)
  }
  const maybe = await answer(server, headers, request.id, { action: 'maybe' })
  t.match(maybe.json.error.message, /\/action/, 'the refusal names what is wrong')
  const yes = await answer(server, headers, request.id, { action: 'accept', content: { confirm: 'yes' } })
  t.match(yes.json.error.message, /\/content\/confirm must be a boolean/)
  await stillWaiting(t, live, id, 'after malformed answers')
  t.ok(await appExists(server, app.id), 'nothing ran')
  t.strictSame(await confirmations(server), [], 'a refused answer is not an outcome')

  // Other well-typed fields next to confirm are fine.
  t.equal((await answer(server, headers, request.id, { action: 'accept', content: { confirm: true, note: 'ok' }, _meta: {} })).status, 202, 'then a valid answer is accepted')
  ok(t, (await resultOn(t, live, id)).result)
  t.notOk(await appExists(server, app.id), 'and the tool ran')
  t.equal((await confirmations(server))[0]?.outcome, 'confirmed')
})

t.test('service_env_unset: declined keeps the variable, accepted removes it; both audited', async (t) => {
  const server = await serve(t)
  const org = await defaultOrganization(server)
  const app = await seedApp(server, 'web')
  await server.app.repos.envVars.set({ organizationId: org.id, appId: app.id, name: 'GONE', ciphertext: 'v1.x.y.z', userId: null })
  const { headers } = await elicitingSession(server)

  for (const [result, removed] of [[{ action: 'decline' }, false], [{ action: 'accept', content: { confirm: 'no' } }, null], [ACCEPT, true]] as const) {
    const id = rid()
    const live = await openCall(t, server, headers, 'service_env_unset', { app_id: app.id, name: 'GONE' }, id)
    const request = await elicitationOn(live)
    t.equal(request.params.mode, 'form')
    t.equal(request.params.message, `Remove env var GONE from app web (${app.id})?`)
    t.strictSame(request.params.requestedSchema.required, ['confirm'])
    const reply = await answer(server, headers, request.id, result)
    if (removed === null) {
      refused(t, reply, 'confirm "no"')
      await stillWaiting(t, live, id, 'after a malformed answer')
      t.equal((await answer(server, headers, request.id, { action: 'cancel' })).status, 202)
      failure(t, (await resultOn(t, live, id)).result, 'ELICITATION_DENIED')
      continue
    }
    t.equal(reply.status, 202)
    const outcome = (await resultOn(t, live, id)).result
    if (removed) t.strictSame(ok(t, outcome), { app_id: app.id, name: 'GONE', removed: true })
    else failure(t, outcome, 'ELICITATION_DENIED')
    t.equal(await server.app.repos.envVars.exists(org.id, app.id, 'GONE'), !removed, removed ? 'removed' : 'still set')
  }
  t.strictSame((await confirmations(server, 'service_env_unset')).map((e) => e.outcome).reverse(), ['declined', 'declined', 'confirmed'])
})

t.test('the audit log holds confirmed, declined and timed_out entries with who, what and the call id', async (t) => {
  const clock = new ManualClock()
  const server = await serve(t, { elicitationTimeoutMs: ELICIT_MS }, clock)
  const { headers } = await elicitingSession(server)
  const apps = [await seedApp(server, 'one'), await seedApp(server, 'two'), await seedApp(server, 'three')]
  const ids: Array<number | string> = []
  for (const [i, result] of [ACCEPT, { action: 'decline' }, undefined].entries()) {
    const { id, live, request } = await askDelete(t, server, headers, apps[i]!.id)
    ids.push(id)
    if (result) t.equal((await answer(server, headers, request.id, result)).status, 202)
    else await clock.advance(ELICIT_MS) // nobody answers: the question times out
    await resultOn(t, live, id)
  }
  const entries = (await confirmations(server)).reverse()
  t.strictSame(entries.map((e) => e.outcome), ['confirmed', 'declined', 'timed_out'])
  const membership = await ownerMembership(server)
  for (const [i, e] of entries.entries()) {
    t.equal(e.membershipId, membership.id, `${e.outcome}: the member`)
    t.equal(e.organizationId, (await defaultOrganization(server)).id, `${e.outcome}: the organization`)
    t.equal(e.credentialKind, 'api_key', `${e.outcome}: the credential kind`)
    t.match(e.details, { request_id: ids[i], message: `Delete app ${apps[i]!.name} (${apps[i]!.id}) and its 0 deployments?` }, `${e.outcome}: the call id and the message`)
  }
  t.notOk(await appExists(server, apps[0]!.id), 'confirmed: deleted')
  t.ok(await appExists(server, apps[1]!.id), 'declined: kept')
  t.ok(await appExists(server, apps[2]!.id), 'timed out: kept')
})

import t, { type Test } from 'tap'
import { builtinTools } from '../../src/plugins/tools/builtin/index.js'
import { chatty } from '../helpers/chatty.js'
import { ACCEPT_BOTH, callTool, openSession, parseSse, post } from '../helpers/mcp.js'
import { defaultOrganization } from '../helpers/seed.js'
import { ManualClock } from '../helpers/clock.js'
import { startServer, type TestServer } from '../helpers/server.js'
import { openLive, until, type LiveStream } from '../helpers/stream.js'

const messages = (text: string) => parseSse(text).events.filter((e) => e.data !== '').map((e) => ({ id: e.id, msg: JSON.parse(e.data) }))
const primingId = (text: string) => parseSse(text).events.find((e) => e.data === '')?.id
const streamOf = (eventId: string) => eventId.split(':')[0]!

/**
 * Waits (within a bound that only limits a failing run) until the server holds the session's stream in the state
 * `state` says: these tests decide by what the server did, never by how long they slept.
 */
function streamState(server: TestServer, sessionId: string, streamId: string, state: 'detached' | 'ended', what: string): Promise<true> {
  return until(() => {
    const stream = server.app.sessionStreams.find(sessionId, streamId)
    return stream !== undefined && (state === 'ended' ? stream.closed : !stream.attached)
  }, 5000, what)
}

const MARKER = { jsonrpc: '2.0' as const, method: 'notifications/tools/list_changed' }

/**
 * What a standalone GET stream of the session received before a marker the server sends on it now: events arrive in
 * order, so anything replayed on it by mistake would have come first.
 */
async function beforeMarker(t: Test, server: TestServer, sessionId: string, live: LiveStream): Promise<unknown[]> {
  t.ok(server.app.sessionStreams.notify(sessionId, MARKER), 'the session has a standalone stream to send on')
  const text = await live.waitFor((x) => x.includes(MARKER.method), 5000, 'the marker')
  return messages(text).map((m) => m.msg).filter((m) => m.method !== MARKER.method)
}

t.test('a confirmation interrupted by a dropped connection is resumed with Last-Event-ID and answered', async (t) => {
  const server = await startServer(t)
  const app = await server.app.repos.apps.create({ organizationId: (await defaultOrganization(server)).id, name: 'resumable' })
  const { headers, sessionId } = await openSession(server.mcpUrl, server.apiKey, '2025-11-25', { elicitation: {} })
  const call = await openLive(server.mcpUrl, { method: 'POST', headers: { ...headers, 'content-type': 'application/json', accept: ACCEPT_BOTH }, body: JSON.stringify(callTool('service_apps_delete', { app_id: app.id }, 'del-1')) })
  await call.waitFor((text) => text.includes('elicitation/create'), 5000, 'the confirmation request')
  const first = call.text()
  const priming = primingId(first)
  t.match(priming, /^[A-Za-z0-9_-]+:0$/, 'the call stream was primed')
  call.close() // the connection drops before the user answers
  await streamState(server, sessionId, streamOf(priming!), 'detached', 'the server to see the connection drop')

  const resumed = await openLive(server.mcpUrl, { method: 'GET', headers: { ...headers, accept: 'text/event-stream', 'last-event-id': priming! } })
  t.teardown(() => resumed.close())
  t.equal(resumed.status, 200)
  const replayed = await resumed.waitFor((text) => text.includes('elicitation/create'), 5000, 'the replayed confirmation request')
  const request = messages(replayed).find((m) => m.msg.method === 'elicitation/create')!
  t.equal(request.id, messages(first).find((m) => m.msg.method === 'elicitation/create')!.id, 'the same event, with the same id')
  const answer = await post(server.mcpUrl, { jsonrpc: '2.0', id: request.msg.id, result: { action: 'accept', content: { confirm: true } } }, headers)
  t.equal(answer.status, 202, 'the answer is accepted')
  const all = await resumed.ended(5000)
  const result = messages(all).find((m) => m.msg.id === 'del-1')
  t.equal(result?.msg.result?.isError, false, 'the tool result arrives on the resumed stream')
  t.equal(await server.app.repos.apps.byId(app.organizationId, app.id), undefined, 'and the app is deleted')
})

t.test('a call that ended while the client was away is read back, and only what was missed is replayed', async (t) => {
  const server = await startServer(t, { tools: [...builtinTools, chatty] })
  const { headers, sessionId } = await openSession(server.mcpUrl, server.apiKey)
  const call = await openLive(server.mcpUrl, { method: 'POST', headers: { ...headers, 'content-type': 'application/json', accept: 'text/event-stream' }, body: JSON.stringify(callTool('test_chatty', { count: 4, gapMs: 40 }, 'c-1')) })
  await call.waitFor((text) => text.includes('"line":2'), 5000, 'two lines')
  const seen = messages(call.text())
  const lastSeen = seen.at(-1)!.id!
  call.close()
  await streamState(server, sessionId, streamOf(lastSeen), 'ended', 'the call to finish while nobody listens')

  const resumed = await openLive(server.mcpUrl, { method: 'GET', headers: { ...headers, accept: 'text/event-stream', 'last-event-id': lastSeen } })
  const rest = messages(await resumed.ended(5000))
  t.ok(resumed.endedByServer, 'the finished stream ends after the replay')
  t.notOk(rest.some((m) => seen.some((s) => s.id === m.id)), 'nothing already received is sent again')
  t.same(rest.filter((m) => m.msg.method === 'notifications/message').map((m) => m.msg.params.data.line), [3, 4].filter((n) => n > seen.filter((s) => s.msg.method === 'notifications/message').length))
  t.same(rest.at(-1)?.msg, { jsonrpc: '2.0', id: 'c-1', result: { content: [{ type: 'text', text: '{"done":4}' }], isError: false, structuredContent: { done: 4 } } }, 'the result comes last')

  // Replayed to its end, the stream is no longer kept: asking again (SDK v1 does after an error answer) opens the
  // standalone stream, which stays open, rather than an empty replay that ends at once, over and over.
  t.equal(server.app.sessionStreams.find(sessionId, streamOf(lastSeen)), undefined, 'replayed to its end, the stream is no longer kept')
  const again = await openLive(server.mcpUrl, { method: 'GET', headers: { ...headers, accept: 'text/event-stream', 'last-event-id': lastSeen } })
  t.teardown(() => again.close())
  t.equal(again.status, 200)
  t.strictSame(await beforeMarker(t, server, sessionId, again), [], 'the standalone stream replays nothing')
  t.notOk(again.endedByServer, 'and stays open')
})

t.test('the replay buffer is bounded; another session cannot resume the stream', async (t) => {
  const server = await startServer(t, { tools: [...builtinTools, chatty], config: { sseReplayEvents: 2 } })
  const { headers, sessionId } = await openSession(server.mcpUrl, server.apiKey)
  const other = await openSession(server.mcpUrl, server.apiKey)
  const call = await openLive(server.mcpUrl, { method: 'POST', headers: { ...headers, 'content-type': 'application/json', accept: 'text/event-stream' }, body: JSON.stringify(callTool('test_chatty', { count: 5, gapMs: 30 }, 'c-2')) })
  await call.waitFor((text) => text.includes('"line":1'), 5000, 'the first line')
  const stream = messages(call.text())[0]!.id!.split(':')[0]!
  call.close()
  await streamState(server, sessionId, stream, 'ended', 'the call to finish while nobody listens')

  const foreign = await openLive(server.mcpUrl, { method: 'GET', headers: { ...other.headers, accept: 'text/event-stream', 'last-event-id': `${stream}:0` } })
  t.teardown(() => foreign.close())
  t.equal(foreign.status, 200, 'another session gets its own standalone stream')
  t.strictSame(await beforeMarker(t, server, other.sessionId, foreign), [], 'and none of the events')
  foreign.close()

  const resumed = await openLive(server.mcpUrl, { method: 'GET', headers: { ...headers, accept: 'text/event-stream', 'last-event-id': `${stream}:0` } })
  const replayed = messages(await resumed.ended(5000))
  t.equal(replayed.length, 2, 'only the last two events were kept')
  t.equal(replayed[0]?.msg.params?.data?.line, 5)
  t.equal(replayed[1]?.msg.id, 'c-2', 'the last one is the result')
})

// How long an ended stream stays resumable (SERVICE_SSE_RETAIN_MS) is decided by the server's clock: moved here to the
// instant before and at the end of the retention, whatever the time the call took.
t.test('an ended stream whose client was away is kept for sseRetainMs, then forgotten', async (t) => {
  const retainMs = 300_000
  const clock = new ManualClock()
  const server = await startServer(t, { clock, tools: [...builtinTools, chatty], config: { sseRetainMs: retainMs, sessionIdleMs: 10 * retainMs } })
  const { headers, sessionId } = await openSession(server.mcpUrl, server.apiKey)
  const call = await openLive(server.mcpUrl, { method: 'POST', headers: { ...headers, 'content-type': 'application/json', accept: 'text/event-stream' }, body: JSON.stringify(callTool('test_chatty', { count: 3, gapMs: 1 }, 'c-3')) })
  await call.waitFor((text) => text.includes('"line":1'), 5000, 'the first line')
  const stream = streamOf(messages(call.text())[0]!.id!)
  call.close()
  await streamState(server, sessionId, stream, 'ended', 'the call to finish while nobody listens')

  await clock.advance(retainMs - 1)
  t.ok(server.app.sessionStreams.find(sessionId, stream), 'kept 1 ms before its retention ends')
  await clock.advance(1)
  t.equal(server.app.sessionStreams.find(sessionId, stream), undefined, 'forgotten when its retention ends')
  t.notOk(server.app.sessionStreams.holds(sessionId), 'the session holds no stream any more')

  const late = await openLive(server.mcpUrl, { method: 'GET', headers: { ...headers, accept: 'text/event-stream', 'last-event-id': `${stream}:0` } })
  t.teardown(() => late.close())
  t.equal(late.status, 200, 'asked for afterwards: the standalone stream')
  t.strictSame(await beforeMarker(t, server, sessionId, late), [], 'with none of the forgotten events')
})

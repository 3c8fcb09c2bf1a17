import t, { type Test } from 'tap'
import { callTool, initializeMessage, openSession, post, type SseEvent } from '../helpers/mcp.js'
import { ManualClock } from '../helpers/clock.js'
import { startServer } from '../helpers/server.js'
import { countOccurrences, openLive } from '../helpers/stream.js'
import { visibleCatalog } from '../helpers/catalog.js'

const VERSIONS = ['2025-03-26', '2025-06-18', '2025-11-25'] as const
const EVENT_ID = /^([A-Za-z0-9_-]+):(\d+)$/

interface SseAnswer {
  status: number
  headers: Record<string, string | string[] | undefined>
  events: SseEvent[]
  comments: string[]
  messages: any[]
}

/** POSTs with Accept: text/event-stream only and reads the stream until the server ends it (fails instead of hanging). */
async function postSse(t: Test, url: string, body: unknown, headers: Record<string, string>): Promise<SseAnswer> {
  const live = await openLive(url, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify(body),
  })
  t.teardown(() => live.close())
  await live.ended(3000)
  t.ok(live.endedByServer, 'the server ends the stream after the response')
  const { events, comments } = live.parsed()
  const messages = events.filter((e) => e.data !== '').map((e) => JSON.parse(e.data))
  return { status: live.status, headers: live.headers, events, comments, messages }
}

function checkSseFrame(t: Test, answer: SseAnswer, sessionId: string, id: unknown, version: string): any {
  t.equal(answer.status, 200)
  t.equal(answer.headers['content-type'], 'text/event-stream')
  t.equal(answer.headers['cache-control'], 'no-cache, no-transform')
  t.equal(answer.headers['x-accel-buffering'], 'no')
  t.equal(answer.headers['mcp-session-id'], sessionId, 'the stream names its session')
  const withData = answer.events.filter((e) => e.data !== '')
  if (version < '2025-11-25') t.equal(withData.length, answer.events.length, `${version}: no event with empty data (no priming event)`)
  t.ok(withData.length >= 1, 'at least one message event')
  let stream: string | undefined
  let lastSeq = 0
  const priming = answer.events.filter((e) => e.data === '')
  if (version >= '2025-11-25') {
    t.equal(priming.length, 1, `${version}: one priming event`)
    t.equal(answer.events[0], priming[0], 'the priming event comes first')
    t.match(priming[0]?.id ?? '', /^[A-Za-z0-9_-]+:0$/, 'it carries an id with sequence 0, for Last-Event-ID')
  }
  for (const e of withData) {
    t.equal(e.event, 'message', 'event name is message')
    const m = EVENT_ID.exec(e.id ?? '')
    t.ok(m, `event id ${e.id} is <stream>:<seq>`)
    if (!m) continue
    stream ??= m[1]
    t.equal(m[1], stream, 'one stream id per stream')
    t.ok(Number(m[2]) > lastSeq, 'sequence numbers increase')
    lastSeq = Number(m[2])
  }
  const responses = answer.messages.filter((msg) => 'result' in msg || 'error' in msg)
  t.equal(responses.length, 1, 'exactly one response on the stream')
  t.strictSame(responses[0]?.id, id, 'the response carries the request id')
  t.equal(answer.messages.at(-1)?.id, id, 'the response is the last message')
  return responses[0]
}

for (const version of VERSIONS) {
  t.test(`tools over JSON and SSE in a ${version} session`, async (t) => {
    const server = await startServer(t)
    const { headers, sessionId } = await openSession(server.mcpUrl, server.apiKey, version)
    const structured = version >= '2025-06-18'
    const jsonOnly = { ...headers, accept: 'application/json' }

    // tools/list
    const listJson = await post(server.mcpUrl, { jsonrpc: '2.0', id: 'l1', method: 'tools/list', params: {} }, jsonOnly)
    t.equal(listJson.status, 200)
    t.match(String(listJson.headers['content-type']), /^application\/json/)
    t.equal(listJson.json.id, 'l1')
    const tools = listJson.json.result.tools as Array<Record<string, any>>
    t.strictSame(tools.map((x) => x.name), visibleCatalog('owner'))
    for (const tool of tools) {
      t.equal(tool.inputSchema.type, 'object')
      t.equal('outputSchema' in tool, structured, `${tool.name}: outputSchema only from 2025-06-18`)
      t.equal('title' in tool, structured, `${tool.name}: top-level title only from 2025-06-18`)
    }

    const listSse = checkSseFrame(t, await postSse(t, server.mcpUrl, { jsonrpc: '2.0', id: 'l2', method: 'tools/list', params: {} }, headers), sessionId, 'l2', version)
    t.strictSame(listSse.result, listJson.json.result, 'the same catalog over SSE')

    // service_whoami
    const whoJson = await post(server.mcpUrl, callTool('service_whoami', {}, 10), jsonOnly)
    t.equal(whoJson.status, 200)
    t.match(String(whoJson.headers['content-type']), /^application\/json/)
    t.equal(whoJson.json.id, 10)
    const who = whoJson.json.result
    t.equal(who.isError, false)
    t.equal(who.content[0].type, 'text')
    const whoData = JSON.parse(who.content[0].text)
    t.equal(whoData.user.email, 'owner@example.com')
    t.equal(whoData.organization.slug, 'default')
    t.equal(whoData.role, 'owner')
    t.strictSame(whoData.scopes, ['mcp:read', 'mcp:write'])
    t.equal(whoData.credential.kind, 'api_key')
    if (structured) t.strictSame(who.structuredContent, whoData, 'structuredContent equals the text content')
    else t.notOk('structuredContent' in who, 'no structuredContent before 2025-06-18')

    const whoSse = checkSseFrame(t, await postSse(t, server.mcpUrl, callTool('service_whoami', {}, 11), headers), sessionId, 11, version)
    t.strictSame(whoSse.result, who, 'the same result over SSE')

    // service_apps_list
    const appsJson = await post(server.mcpUrl, callTool('service_apps_list', {}, 20), jsonOnly)
    t.equal(appsJson.status, 200)
    t.strictSame(JSON.parse(appsJson.json.result.content[0].text), { apps: [], next_cursor: null })
    if (structured) t.strictSame(appsJson.json.result.structuredContent, { apps: [], next_cursor: null })
    else t.notOk('structuredContent' in appsJson.json.result)

    const appsSse = checkSseFrame(t, await postSse(t, server.mcpUrl, callTool('service_apps_list', {}, 21), headers), sessionId, 21, version)
    t.strictSame(appsSse.result, appsJson.json.result)

    // Accept with both types: a plain call is answered as JSON.
    const both = await post(server.mcpUrl, callTool('service_whoami', {}, 30), headers)
    t.match(String(both.headers['content-type']), /^application\/json/, 'both accepted: JSON for a plain call')
    t.equal(both.json.id, 30)

    // JSON-RPC errors on an SSE-only request come on the stream.
    const unknown = checkSseFrame(t, await postSse(t, server.mcpUrl, { jsonrpc: '2.0', id: 40, method: 'nope' }, headers), sessionId, 40, version)
    t.equal(unknown.error.code, -32601)
  })
}

t.test('initialize over SSE', async (t) => {
  const server = await startServer(t)
  const live = await openLive(server.mcpUrl, {
    method: 'POST',
    headers: { authorization: `Bearer ${server.apiKey}`, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify(initializeMessage('2025-06-18', {}, 'init')),
  })
  t.teardown(() => live.close())
  await live.ended(3000)
  t.ok(live.endedByServer)
  t.equal(live.status, 200)
  t.equal(live.headers['content-type'], 'text/event-stream')
  const sessionId = String(live.headers['mcp-session-id'])
  t.match(sessionId, /^[0-9a-f-]{36}$/)
  t.match(live.headers['x-request-id'], /^[0-9a-f-]{36}$/)
  t.match(live.headers['x-service-mcp-version'], /^\d{4}-\d{2}-\d{2}$/)
  const messages = live.parsed().events.filter((e) => e.data !== '').map((e) => JSON.parse(e.data))
  t.equal(messages.length, 1)
  t.equal(messages[0].id, 'init')
  t.equal(messages[0].result.protocolVersion, '2025-06-18')
  const ping = await post(server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'ping' }, { authorization: `Bearer ${server.apiKey}`, 'mcp-session-id': sessionId })
  t.equal(ping.status, 200, 'the session created over SSE is usable')
})

// The heartbeats' interval is the server's clock's (docs/decisions/clock.md): the test moves it by one interval per beat.
t.test('heartbeats on an idle GET stream', async (t) => {
  const HEARTBEAT_MS = 25_000
  const clock = new ManualClock()
  const server = await startServer(t, { clock, config: { heartbeatMs: HEARTBEAT_MS } })
  const { headers } = await openSession(server.mcpUrl, server.apiKey)
  const live = await openLive(server.mcpUrl, { method: 'GET', headers: { ...headers, accept: 'text/event-stream' } })
  t.teardown(() => live.close())
  t.equal(live.status, 200)
  t.equal(live.headers['content-type'], 'text/event-stream')
  t.equal(live.headers['cache-control'], 'no-cache, no-transform')
  t.equal(live.headers['x-accel-buffering'], 'no')
  t.match(live.headers['x-request-id'], /^[0-9a-f-]{36}$/)
  t.match(live.headers['x-service-mcp-version'], /^\d{4}-\d{2}-\d{2}$/)

  await clock.advance(HEARTBEAT_MS)
  await live.waitFor((s) => countOccurrences(s, ': heartbeat\n\n') === 1, 5000, 'the heartbeat of the first interval')
  await clock.advance(HEARTBEAT_MS)
  const text = await live.waitFor((s) => countOccurrences(s, ': heartbeat\n\n') === 2, 5000, 'the heartbeat of the second')
  t.equal(countOccurrences(text, ': heartbeat\n\n'), 2, 'one heartbeat comment per interval')
  t.strictSame(live.parsed().events, [], 'nothing but comments on an idle stream')
  t.ok(live.parsed().comments.every((c) => c === 'heartbeat'), 'every comment is a heartbeat')
  t.notOk(live.endedByServer, 'the stream stays open')
  live.close()

  const replaced = await openLive(server.mcpUrl, { method: 'GET', headers: { ...headers, accept: 'text/event-stream' } })
  t.teardown(() => replaced.close())
  const replacement = await openLive(server.mcpUrl, { method: 'GET', headers: { ...headers, accept: 'text/event-stream' } })
  t.teardown(() => replacement.close())
  await replaced.ended(1000)
  t.ok(replaced.endedByServer, 'a second GET stream replaces the first')
  await clock.advance(HEARTBEAT_MS)
  await replacement.waitFor((s) => s.includes(': heartbeat'), 5000, 'a heartbeat on the replacement')
  replacement.close()

  const still = await post(server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'ping' }, headers)
  t.equal(still.status, 200, 'the session is fine after its streams closed')
})

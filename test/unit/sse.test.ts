import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { request } from 'undici'
import { formatEvent, HEARTBEAT_FRAME, HeartbeatRegistry, newStreamId, SSE_HEADERS, SseStream } from '../../src/lib/sse.js'
import { ManualClock } from '../helpers/clock.js'
import { parseSse } from '../helpers/mcp.js'

/** A real HTTP server whose single handler is supplied per test; closed at teardown. */
async function serve(t: Test, handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ url: string; server: Server }> {
  const server = createServer(handler)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => {
    server.closeAllConnections()
    server.close(() => resolve())
  }))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, server }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

t.test('formatEvent', async (t) => {
  t.equal(formatEvent('s:1', '{"a":1}'), 'id: s:1\nevent: message\ndata: {"a":1}\n\n')
  t.equal(formatEvent(null, '{}'), 'event: message\ndata: {}\n\n', 'no id line without an id')
  const parsed = parseSse(formatEvent('abc:7', JSON.stringify({ jsonrpc: '2.0', id: 1, result: {} })))
  t.same(parsed.events, [{ id: 'abc:7', event: 'message', data: '{"jsonrpc":"2.0","id":1,"result":{}}' }])
  t.equal(HEARTBEAT_FRAME, ': heartbeat\n\n')
  t.same(parseSse(HEARTBEAT_FRAME), { events: [], comments: ['heartbeat'] })
})

t.test('newStreamId is short, url-safe and random', async (t) => {
  const ids = new Set(Array.from({ length: 200 }, () => newStreamId()))
  t.equal(ids.size, 200)
  t.ok([...ids].every((id) => /^[A-Za-z0-9_-]{8}$/.test(id)), 'eight base64url characters')
})

t.test('SseStream over a real response', async (t) => {
  const results: { ids: Array<string | null>; afterEnd?: string | null; closedBefore?: boolean; closedAfter?: boolean; closeFired: number; lateListener: number } = { ids: [], closeFired: 0, lateListener: 0 }
  let handled!: () => void
  const done = new Promise<void>((resolve) => (handled = resolve))
  const { url } = await serve(t, (_req, res) => {
    const stream = new SseStream(res, 'strm')
    t.equal(stream.id, 'strm')
    stream.onClose(() => results.closeFired++)
    stream.open({ 'x-service-mcp-version': '2026-11-21', 'mcp-session-id': 'sess', 'x-undefined': undefined, 'cache-control': 'public' })
    results.closedBefore = stream.closed
    results.ids.push(stream.send({ jsonrpc: '2.0', method: 'notifications/message', params: { n: 1 } }))
    results.ids.push(stream.send({ jsonrpc: '2.0', method: 'notifications/message', params: { n: 2 } }))
    results.ids.push(stream.send({ jsonrpc: '2.0', id: 1, result: { text: 'line\nbreak' } }))
    stream.end()
    results.closedAfter = stream.closed
    results.afterEnd = stream.send({ jsonrpc: '2.0', method: 'late' })
    stream.heartbeat() // must not throw or write after end
    stream.end() // idempotent
    stream.onClose(() => results.lateListener++)
    handled()
  })
  const res = await request(url)
  const text = await res.body.text()
  await done
  t.equal(res.statusCode, 200)
  t.equal(res.headers['content-type'], 'text/event-stream')
  t.equal(res.headers['cache-control'], 'no-cache, no-transform', 'the SSE cache header wins over a caller header')
  t.equal(res.headers['x-accel-buffering'], 'no')
  t.equal(res.headers['x-service-mcp-version'], '2026-11-21', 'caller headers are kept')
  t.equal(res.headers['mcp-session-id'], 'sess')
  t.notOk('x-undefined' in res.headers, 'undefined headers are dropped')

  t.same(results.ids, ['strm:1', 'strm:2', 'strm:3'], 'ids are <stream>:<seq>, increasing from 1')
  t.equal(results.closedBefore, false)
  t.equal(results.closedAfter, true)
  t.equal(results.afterEnd, null, 'send after end returns null')
  t.equal(results.closeFired, 1, 'onClose fires once')
  t.equal(results.lateListener, 1, 'a listener added after close fires at once')

  const { events, comments } = parseSse(text)
  t.same(comments, [])
  t.same(events.map((e) => e.id), ['strm:1', 'strm:2', 'strm:3'])
  t.ok(events.every((e) => e.event === 'message'))
  const messages = events.map((e) => JSON.parse(e.data))
  t.same(messages.map((m) => m.params?.n ?? m.result?.text), [1, 2, 'line\nbreak'], 'one JSON message per data line, newlines escaped')
  t.notOk(text.includes('late'), 'nothing is written after end')
})

t.test('onClose fires when the client goes away', async (t) => {
  let stream: SseStream | undefined
  let closed = 0
  const opened = new Promise<void>((resolve) => {
    void serve(t, (_req, res) => {
      stream = new SseStream(res)
      stream.onClose(() => closed++)
      stream.open({})
      stream.send({ jsonrpc: '2.0', method: 'notifications/message', params: { hello: true } })
      resolve()
    }).then(({ url }) => {
      const ac = new AbortController()
      request(url, { signal: ac.signal }).then(async (res) => {
        for await (const _chunk of res.body) {
          ac.abort()
          break
        }
      }, () => {})
    })
  })
  await opened
  for (let i = 0; i < 100 && closed === 0; i++) await sleep(10)
  t.equal(closed, 1, 'close listener fired on disconnect')
  t.equal(stream?.closed, true)
  t.equal(stream?.send({ jsonrpc: '2.0', method: 'notifications/message', params: { after: 'disconnect' } }), null)
  // Stream ids without an explicit id are generated and distinct per stream.
  t.match(stream?.id, /^[A-Za-z0-9_-]{8}$/)
})

// The registry's timer is the clock it is given (docs/decisions/clock.md): a manual one here, so the number of beats
// is the number of intervals the test moves it by, whatever the machine's load.
const BEAT_MS = 15_000

/** Reads a response's body to its end. */
function readAll(res: Awaited<ReturnType<typeof request>>): Promise<string> {
  return (async () => {
    let text = ''
    for await (const chunk of res.body) text += String(chunk)
    return text
  })()
}

const beatsIn = (text: string) => parseSse(text).comments.filter((c) => c === 'heartbeat').length

t.test('HeartbeatRegistry', async (t) => {
  const clock = new ManualClock()
  const registry = new HeartbeatRegistry(BEAT_MS, clock)
  t.teardown(() => registry.stop())
  const streams: SseStream[] = []
  const { url } = await serve(t, (_req, res) => {
    const s = new SseStream(res)
    s.open({})
    registry.add(s)
    streams.push(s)
  })
  t.equal(clock.pendingTimers, 0, 'no timer while no stream is open')
  const reading = readAll(await request(url))
  for (let i = 0; i < 100 && streams.length === 0; i++) await sleep(5)
  t.equal(registry.size, 1, 'the stream is tracked')
  t.equal(clock.pendingTimers, 1, 'one timer')
  await clock.advance(BEAT_MS - 1)
  await clock.advance(1)
  await clock.advance(2 * BEAT_MS)
  const stream = streams[0]!
  stream.send({ jsonrpc: '2.0', method: 'x' })
  stream.end()
  const text = await reading
  const { comments, events } = parseSse(text)
  t.equal(beatsIn(text), 3, 'one heartbeat per interval')
  t.ok(comments.every((c) => c === 'heartbeat'))
  t.equal(events.length, 1, 'heartbeats do not disturb events')
  t.ok(text.includes(': heartbeat\n\n'))
  t.equal(registry.size, 0, 'a closed stream is no longer tracked')
  await clock.advance(BEAT_MS)
  t.equal(clock.pendingTimers, 0, 'the timer stops at the first beat with no stream')

  // A stream added after the timer idled out gets heartbeats again.
  const reading2 = readAll(await request(url))
  for (let i = 0; i < 100 && streams.length < 2; i++) await sleep(5)
  t.equal(registry.size, 1)
  t.equal(clock.pendingTimers, 1, 'the timer starts again')
  await clock.advance(BEAT_MS)
  streams[1]!.end()
  t.equal(beatsIn(await reading2), 1, 'heartbeats resume for a new stream')
  t.equal(registry.size, 0)
})

t.test('HeartbeatRegistry.stop stops writing', async (t) => {
  const clock = new ManualClock()
  const registry = new HeartbeatRegistry(BEAT_MS, clock)
  let stream: SseStream | undefined
  const { url } = await serve(t, (_req, res) => {
    stream = new SseStream(res)
    stream.open({})
    registry.add(stream)
  })
  const reading = readAll(await request(url))
  for (let i = 0; i < 100 && !stream; i++) await sleep(5)
  await clock.advance(BEAT_MS)
  registry.stop()
  t.equal(clock.pendingTimers, 0, 'the timer is cancelled')
  await clock.advance(10 * BEAT_MS)
  stream!.end()
  t.equal(beatsIn(await reading), 1, 'the beat before stop, none after')
})

t.test('SSE_HEADERS', async (t) => {
  t.match(SSE_HEADERS, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache, no-transform', 'x-accel-buffering': 'no' })
})

import t, { type Test } from 'tap'
import { request } from 'undici'
import { builtinTools, defineTool } from '../../src/index.js'
import type { RequestId } from '../../src/rpc/types.js'
import { callTool, openSession, post } from '../helpers/mcp.js'
import { startServer } from '../helpers/server.js'
import { openLive, sleep, type LiveStream } from '../helpers/stream.js'

interface CallRecord {
  started: Promise<void>
  outcome: Promise<{ how: 'aborted' | 'timeout'; reason?: string }>
}

/** A tool that waits until its call is cancelled (or `ms`, default 5 s); each call is recorded by request id. */
function waitingTool() {
  const calls = new Map<RequestId, CallRecord>()
  const tool = defineTool<{ ms?: number }>({
    name: 'test_wait',
    title: 'Wait',
    description: 'Waits until cancelled or until ms elapse.',
    inputSchema: { type: 'object', additionalProperties: false, properties: { ms: { type: 'integer', minimum: 1, maximum: 5000 } } },
    scope: 'mcp:read',
    role: 'viewer',
    handler(args, ctx) {
      let markStarted!: () => void
      let settle!: (v: { how: 'aborted' | 'timeout'; reason?: string }) => void
      const record: CallRecord = {
        started: new Promise((r) => { markStarted = r }),
        outcome: new Promise((r) => { settle = r }),
      }
      calls.set(ctx.requestId, record)
      markStarted()
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          settle({ how: 'timeout' })
          resolve({ waited: args.ms ?? 5000 })
        }, args.ms ?? 5000)
        ctx.signal.addEventListener('abort', () => {
          clearTimeout(timer)
          const reason = ctx.signal.reason instanceof Error ? ctx.signal.reason.message : String(ctx.signal.reason)
          settle({ how: 'aborted', reason })
          resolve({ waited: 0 })
        }, { once: true })
      })
    },
  })
  return { tool, calls }
}

async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms) }),
    ])
  } finally {
    clearTimeout(timer)
  }
}

async function startCall(t: Test, mcpUrl: string, headers: Record<string, string>, id: RequestId, args: Record<string, unknown> = {}): Promise<LiveStream> {
  const live = await openLive(mcpUrl, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify(callTool('test_wait', args, id)),
  })
  t.teardown(() => live.close())
  t.equal(live.status, 200, 'the call opened an SSE stream')
  t.equal(live.headers['content-type'], 'text/event-stream')
  return live
}

function messagesOf(live: LiveStream): any[] {
  return live.parsed().events.filter((e) => e.data !== '').map((e) => JSON.parse(e.data))
}

function cancel(requestId: RequestId, reason?: string) {
  return { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId, ...(reason ? { reason } : {}) } }
}

t.test('notifications/cancelled aborts a running call and its stream ends without a response', async (t) => {
  const { tool, calls } = waitingTool()
  const server = await startServer(t, { tools: [...builtinTools, tool] })
  const { headers } = await openSession(server.mcpUrl, server.apiKey)

  const live = await startCall(t, server.mcpUrl, headers, 'slow-1')
  await waitFor(calls, 'slow-1')

  const started = Date.now()
  const res = await post(server.mcpUrl, cancel('slow-1', 'user gave up'), headers)
  t.equal(res.status, 202)
  t.equal(res.text, '')

  const outcome = await within(calls.get('slow-1')!.outcome, 2000, 'the handler to see the abort')
  t.equal(outcome.how, 'aborted', 'the handler saw its signal abort')
  t.equal(outcome.reason, 'user gave up', 'with the client reason')

  await live.ended(2000)
  t.ok(live.endedByServer, 'the server ended the stream')
  t.ok(Date.now() - started < 2000, 'promptly, not after the tool timeout')
  const messages = messagesOf(live)
  t.strictSame(messages.filter((m) => m.id === 'slow-1'), [], 'no response for the cancelled request')
  t.strictSame(messages.filter((m) => 'result' in m || 'error' in m), [], 'no response at all on the stream')

  const again = await post(server.mcpUrl, callTool('test_wait', { ms: 10 }, 'slow-1'), headers)
  t.equal(again.status, 200, 'the id is free again after the cancellation')
  t.equal(again.json.result.isError, false)
  t.strictSame(JSON.parse(again.json.result.content[0].text), { waited: 10 })
})

t.test('a call that is not cancelled answers on its stream', async (t) => {
  const { tool, calls } = waitingTool()
  const server = await startServer(t, { tools: [...builtinTools, tool] })
  const { headers } = await openSession(server.mcpUrl, server.apiKey)

  const live = await startCall(t, server.mcpUrl, headers, 7, { ms: 300 })
  await waitFor(calls, 7)
  const other = await post(server.mcpUrl, cancel(8), headers)
  t.equal(other.status, 202, 'cancelling an unknown id is accepted and ignored')

  await live.ended(3000)
  t.ok(live.endedByServer)
  t.equal((await calls.get(7)!.outcome).how, 'timeout', 'the call was not aborted by a cancel for another id')
  const messages = messagesOf(live)
  t.equal(messages.length, 1)
  t.equal(messages[0].id, 7)
  t.equal(messages[0].result.isError, false)
  t.strictSame(JSON.parse(messages[0].result.content[0].text), { waited: 300 })
})

t.test('a cancel from another session does not abort the call', async (t) => {
  const { tool, calls } = waitingTool()
  const server = await startServer(t, { tools: [...builtinTools, tool] })
  const mine = await openSession(server.mcpUrl, server.apiKey)
  const theirs = await openSession(server.mcpUrl, server.apiKey)

  const live = await startCall(t, server.mcpUrl, mine.headers, 'x')
  await waitFor(calls, 'x')
  t.equal((await post(server.mcpUrl, cancel('x'), theirs.headers)).status, 202)
  await sleep(150)
  t.notOk(live.endedByServer, 'the stream is still open')
  t.strictSame(messagesOf(live), [])

  t.equal((await post(server.mcpUrl, cancel('x'), mine.headers)).status, 202)
  t.equal((await within(calls.get('x')!.outcome, 2000, 'the abort')).how, 'aborted')
  await live.ended(2000)
  t.ok(live.endedByServer)
  t.strictSame(messagesOf(live).filter((m) => m.id === 'x'), [])
})

t.test('closing the session aborts its running calls', async (t) => {
  const { tool, calls } = waitingTool()
  const server = await startServer(t, { tools: [...builtinTools, tool] })
  const { headers, sessionId } = await openSession(server.mcpUrl, server.apiKey)
  const live = await startCall(t, server.mcpUrl, headers, 1)
  await waitFor(calls, 1)
  const res = await request(server.mcpUrl, { method: 'DELETE', headers: { authorization: headers.authorization!, 'mcp-session-id': sessionId } })
  await res.body.text()
  t.equal(res.statusCode, 204)
  t.equal((await within(calls.get(1)!.outcome, 2000, 'the abort')).how, 'aborted')
  await live.ended(2000)
  t.ok(live.endedByServer)
  t.strictSame(messagesOf(live).filter((m) => m.id === 1), [])
})

/** Resolves once the handler of call `id` has started; rejects after 2 s. */
async function waitFor(calls: Map<RequestId, CallRecord>, id: RequestId): Promise<void> {
  const deadline = Date.now() + 2000
  while (!calls.has(id)) {
    if (Date.now() > deadline) throw new Error(`the handler of call ${JSON.stringify(id)} did not start`)
    await sleep(5)
  }
  await calls.get(id)!.started
}

/**
 * The embedding API (README "Adding your own tools") on both eras: custom tools written once with defineTool work
 * unchanged on a legacy session (2025-11-25) and on a stateless 2026-07-28 request. The ToolContext tells them which
 * era they run in (era, protocolVersion, session), and progress(), log(), confirm(), signal behave as the README and
 * src/plugins/tools/define.ts say on each.
 */
import t, { type Test } from 'tap'
import { request } from 'undici'
import {
  builtinTools,
  CancelledByClient,
  ClientDisconnected,
  defineTool,
  fail,
  SessionEnded,
  TaskCancelled,
  type ToolContext,
} from '../../src/index.js'
import { decision, confirmCall, elicitingSession, isAnswerTo, isElicitation, openLiveCall, readToEnd } from '../helpers/confirm.js'
import { callTool, openSession, post } from '../helpers/mcp.js'
import { answerOf, confirmAnswer, ELICITING, MODERN, modernCall, modernLive, modernPost, WITH_TASKS } from '../helpers/modern.js'
import { defaultOrganization } from '../helpers/seed.js'
import { startServer, type TestServer } from '../helpers/server.js'
import { callToEnd, failureOf } from '../helpers/tools.js'
import { messagesOf, openLive, sleep, until } from '../helpers/stream.js'

const LOG_LEVEL = 'io.modelcontextprotocol/logLevel'

/** What a handler saw of its context. */
interface Seen {
  era: ToolContext['era']
  protocolVersion: ToolContext['protocolVersion']
  session: string | null
}

function seenOf(ctx: ToolContext): Seen {
  return { era: ctx.era, protocolVersion: ctx.protocolVersion, session: ctx.session === null ? null : ctx.session.id }
}

/** Every custom tool of this file, with the records their handlers keep. */
function customTools() {
  const seen: Seen[] = []
  const echo = defineTool<{ text: string }, { text: string; length: number }>({
    name: 'team_echo',
    title: 'Echo',
    description: 'Returns its input and its length.',
    inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'], additionalProperties: false },
    outputSchema: { type: 'object', properties: { text: { type: 'string' }, length: { type: 'integer' } }, required: ['text', 'length'] },
    scope: 'mcp:read',
    role: 'viewer',
    annotations: { readOnlyHint: true },
    handler(args, ctx) {
      seen.push(seenOf(ctx))
      return { text: args.text, length: args.text.length }
    },
  })

  const chatty = defineTool<{ steps: number }, { steps: number }>({
    name: 'team_chatty',
    title: 'Chatty',
    description: 'Sends progress and log lines, then answers.',
    inputSchema: { type: 'object', properties: { steps: { type: 'integer', minimum: 1, maximum: 10 } }, required: ['steps'], additionalProperties: false },
    outputSchema: { type: 'object', properties: { steps: { type: 'integer' } }, required: ['steps'] },
    scope: 'mcp:read',
    role: 'viewer',
    handler(args, ctx) {
      for (let i = 1; i <= args.steps; i++) {
        ctx.progress(i, args.steps, `step ${i}`)
        ctx.log('info', { step: i }, 'team')
        ctx.log('debug', { step: i, detail: true }, 'team') // below an `info` threshold: never sent
      }
      return { steps: args.steps }
    },
  })

  let confirmedRuns = 0
  const confirmed = defineTool<{ what: string }, { done: string; run: number }>({
    name: 'team_confirmed',
    title: 'Confirmed',
    description: 'Asks once, then counts a run.',
    inputSchema: { type: 'object', properties: { what: { type: 'string' } }, required: ['what'], additionalProperties: false },
    outputSchema: { type: 'object', properties: { done: { type: 'string' }, run: { type: 'integer' } }, required: ['done', 'run'] },
    scope: 'mcp:read',
    role: 'viewer',
    confirm: true,
    async handler(args, ctx) {
      await ctx.confirm('Really do X?')
      confirmedRuns++
      return { done: args.what, run: confirmedRuns }
    },
  })

  let twiceRuns = 0
  const twice = defineTool<{ what: string }, { done: string }>({
    name: 'team_twice',
    title: 'Asks twice',
    description: 'Asks, asks again, then counts a run.',
    inputSchema: { type: 'object', properties: { what: { type: 'string' } }, required: ['what'], additionalProperties: false },
    outputSchema: { type: 'object', properties: { done: { type: 'string' } }, required: ['done'] },
    scope: 'mcp:read',
    role: 'viewer',
    confirm: true,
    async handler(args, ctx) {
      await ctx.confirm('Really do X?')
      await ctx.confirm('Really, really do X? It cannot be undone.')
      twiceRuns++
      return { done: args.what }
    },
  })

  /** Reasons the waiting tool's signal was aborted with, by request id. */
  const aborts = new Map<string, unknown>()
  const waiting = defineTool<{ ms: number }, { waited: boolean }>({
    name: 'team_wait',
    title: 'Wait',
    description: 'Waits until its call is cancelled (or ms elapse).',
    inputSchema: { type: 'object', properties: { ms: { type: 'integer', minimum: 1, maximum: 10000 } }, required: ['ms'], additionalProperties: false },
    outputSchema: { type: 'object', properties: { waited: { type: 'boolean' } }, required: ['waited'] },
    scope: 'mcp:read',
    role: 'viewer',
    handler(args, ctx) {
      // One progress notification so the answer opens as a stream at once (the client sees the call is running).
      ctx.progress(1, undefined, 'waiting')
      return new Promise((resolve) => {
        const timer = setTimeout(() => resolve({ waited: true }), args.ms)
        ctx.signal.addEventListener('abort', () => {
          clearTimeout(timer)
          aborts.set(String(ctx.requestId), ctx.signal.reason)
          resolve({ waited: false })
        }, { once: true })
      })
    },
  })

  /** The long-running tool's runs: what its context did after it became a task. */
  const longRuns: Array<{ seen: Seen; sent: number; threw: unknown; reason?: unknown; ended: boolean }> = []
  const long = defineTool<{ tickMs: number }, { ticks: number }>({
    name: 'team_long',
    title: 'Long',
    description: 'Streams progress and log lines until cancelled.',
    inputSchema: { type: 'object', properties: { tickMs: { type: 'integer', minimum: 1, maximum: 1000 } }, required: ['tickMs'], additionalProperties: false },
    outputSchema: { type: 'object', properties: { ticks: { type: 'integer' } }, required: ['ticks'] },
    scope: 'mcp:read',
    role: 'viewer',
    longRunning: true,
    async handler(args, ctx) {
      const run: (typeof longRuns)[number] = { seen: seenOf(ctx), sent: 0, threw: undefined, ended: false }
      longRuns.push(run)
      try {
        while (!ctx.signal.aborted) {
          try {
            ctx.progress(run.sent + 1, undefined, `tick ${run.sent + 1}`)
            ctx.log('info', { tick: run.sent + 1 }, 'team')
          } catch (err) {
            run.threw = err
          }
          run.sent++
          if (run.sent >= 500) return { ticks: run.sent } // never reached within a test: a safety stop
          await sleep(args.tickMs)
        }
        run.reason = ctx.signal.reason
        throw fail('OPERATION_CANCELLED')
      } finally {
        run.ended = true
      }
    },
  })

  return {
    tools: [...builtinTools, echo, chatty, confirmed, twice, waiting, long],
    seen,
    confirmedRuns: () => confirmedRuns,
    twiceRuns: () => twiceRuns,
    aborts,
    longRuns,
  }
}

async function serve(t: Test) {
  const custom = customTools()
  // Small poll interval and confirmation timeout: nothing here waits on them, but nothing may be slow either.
  const server = await startServer(t, { tools: custom.tools, config: { taskPollIntervalMs: 50, heartbeatMs: 60_000 } })
  return { server, ...custom }
}

async function confirmationAudit(server: TestServer, tool: string) {
  return (await server.app.repos.audit.page((await defaultOrganization(server)).id, 100, undefined, `${tool}.confirmation`)).items
}

/** Polls an async probe every 20 ms until it returns a value; rejects after `ms`. */
async function poll<T>(probe: () => Promise<T | undefined>, ms: number, what: string): Promise<T> {
  const deadline = Date.now() + ms
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await sleep(20)
  }
}

let nextId = 100
const rid = () => ++nextId

t.test('a plain custom tool: the same result on both eras, and its context names the era', async (t) => {
  const { server, seen } = await serve(t)

  const session = await openSession(server.mcpUrl, server.apiKey)
  const legacy = await callToEnd(server.mcpUrl, session.headers, 'team_echo', { text: 'héllo' }, 1)
  const modernReply = await modernCall(server.mcpUrl, server.apiKey, 'team_echo', { text: 'héllo' })
  t.equal(modernReply.status, 200)
  t.match(String(modernReply.headers['content-type']), /^application\/json/, 'a quick modern call is answered as JSON')
  t.equal(modernReply.headers['mcp-session-id'], undefined, 'no session on the modern answer')
  const modern = answerOf(modernReply)?.result

  t.strictSame(legacy.result.structuredContent, { text: 'héllo', length: 5 })
  t.strictSame(modern?.structuredContent, legacy.result.structuredContent, 'the same structuredContent on both eras')
  t.strictSame(modern?.content, legacy.result.content, 'the same text content')
  t.equal(modern?.isError, false)
  t.equal(legacy.result.isError, false)
  t.equal(modern?.resultType, 'complete', 'the modern encoder adds resultType')
  t.notOk('resultType' in legacy.result, 'a legacy result has no resultType')

  t.equal(seen.length, 2, 'the handler ran once per call')
  t.strictSame(seen[0], { era: 'legacy', protocolVersion: '2025-11-25', session: session.sessionId }, 'legacy: era, revision and the session')
  t.strictSame(seen[1], { era: 'modern', protocolVersion: MODERN, session: null }, 'modern: era, revision, and no session')

  // An older session revision is reported as such.
  const old = await openSession(server.mcpUrl, server.apiKey, '2025-06-18')
  await callToEnd(server.mcpUrl, old.headers, 'team_echo', { text: 'x' }, 2)
  t.strictSame(seen[2], { era: 'legacy', protocolVersion: '2025-06-18', session: old.sessionId })
})

t.test('progress() and log(): on the call\'s stream in a session, on the SSE answer of a modern request', async (t) => {
  const { server } = await serve(t)

  // Session: logging/setLevel info, and a progress token on the call.
  const session = await openSession(server.mcpUrl, server.apiKey)
  const level = await post(server.mcpUrl, { jsonrpc: '2.0', id: 'lvl', method: 'logging/setLevel', params: { level: 'info' } }, session.headers)
  t.equal(level.status, 200)
  t.strictSame(level.json?.result, {}, 'logging/setLevel answered')
  const legacy = await post(server.mcpUrl, { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'team_chatty', arguments: { steps: 3 }, _meta: { progressToken: 'lp' } } }, session.headers)
  t.equal(legacy.status, 200)
  t.equal(legacy.headers['content-type'], 'text/event-stream', 'the session call answers on its own SSE stream')
  const legacyProgress = legacy.messages.filter((m) => m.method === 'notifications/progress').map((m) => m.params)
  const legacyLogs = legacy.messages.filter((m) => m.method === 'notifications/message').map((m) => m.params)
  t.strictSame(legacyProgress, [1, 2, 3].map((i) => ({ progressToken: 'lp', progress: i, total: 3, message: `step ${i}` })), 'progress with the call\'s token, increasing')
  t.strictSame(legacyLogs, [1, 2, 3].map((i) => ({ level: 'info', logger: 'team', data: { step: i } })), 'info lines, none below the session level')
  t.strictSame(legacy.messages.at(-1)?.result?.structuredContent, { steps: 3 }, 'the response ends the stream')

  // Modern: progressToken and logLevel in _meta.
  const modern = await modernCall(server.mcpUrl, server.apiKey, 'team_chatty', { steps: 3 }, { meta: { progressToken: 'mp', [LOG_LEVEL]: 'info' }, id: 8 })
  t.equal(modern.status, 200)
  t.equal(modern.headers['content-type'], 'text/event-stream', 'the modern answer became a stream with its first notification')
  t.equal(modern.headers['mcp-session-id'], undefined)
  t.notOk(modern.text.split('\n').some((line) => line.startsWith('id:')), 'a modern stream carries no event ids')
  const modernProgress = modern.messages.filter((m) => m.method === 'notifications/progress').map((m) => m.params)
  const modernLogs = modern.messages.filter((m) => m.method === 'notifications/message').map((m) => m.params)
  t.strictSame(modernProgress, [1, 2, 3].map((i) => ({ progressToken: 'mp', progress: i, total: 3, message: `step ${i}` })), 'the same progress on the modern answer')
  t.strictSame(modernLogs, legacyLogs, 'the same log lines on the modern answer')
  const answer = answerOf(modern, 8)
  t.equal(modern.messages.at(-1), answer, 'the response is the last message')
  t.strictSame(answer?.result?.structuredContent, { steps: 3 })
  t.equal(answer?.result?.resultType, 'complete')

  // Modern with debug: the debug lines too.
  const debug = await modernCall(server.mcpUrl, server.apiKey, 'team_chatty', { steps: 1 }, { meta: { [LOG_LEVEL]: 'debug' }, id: 9 })
  t.strictSame(debug.messages.filter((m) => m.method === 'notifications/message').map((m) => m.params), [
    { level: 'info', logger: 'team', data: { step: 1 } },
    { level: 'debug', logger: 'team', data: { step: 1, detail: true } },
  ], 'the request\'s own level is the threshold')
  t.strictSame(debug.messages.filter((m) => m.method === 'notifications/progress'), [], 'no progress without a progressToken')

  // Modern without logLevel: progress only, never a log message.
  const quiet = await modernCall(server.mcpUrl, server.apiKey, 'team_chatty', { steps: 2 }, { meta: { progressToken: 'q' }, id: 10 })
  t.equal(quiet.headers['content-type'], 'text/event-stream')
  t.equal(quiet.messages.filter((m) => m.method === 'notifications/progress').length, 2, 'progress still flows')
  t.strictSame(quiet.messages.filter((m) => m.method === 'notifications/message'), [], 'no log messages without logLevel')

  // Modern with neither: a plain JSON answer.
  const plain = await modernCall(server.mcpUrl, server.apiKey, 'team_chatty', { steps: 2 }, { id: 11 })
  t.match(String(plain.headers['content-type']), /^application\/json/, 'nothing to stream: JSON')
  t.strictSame(plain.json?.result?.structuredContent, { steps: 2 })
})

t.test('confirm(): elicitation/create in a session, input_required and a retry on a modern request; runs once', async (t) => {
  const { server, confirmedRuns, twiceRuns } = await serve(t)

  // Legacy: accept runs it once.
  const session = await elicitingSession(server)
  const id1 = rid()
  const accepted = await confirmCall(t, server.mcpUrl, session.headers, callTool('team_confirmed', { what: 'legacy' }, id1), decision())
  t.equal(accepted.request.params.message, 'Really do X?', 'the session is asked the tool\'s own message')
  t.equal(accepted.request.params.mode, 'form')
  t.strictSame(accepted.request.params.requestedSchema.required, ['confirm'])
  t.equal(accepted.request.params.requestedSchema.properties.confirm.type, 'boolean')
  t.equal(accepted.reply.status, 202, 'the answer is accepted')
  const legacyEnd = await readToEnd(accepted.live, id1)
  t.equal(legacyEnd.responses.length, 1)
  t.strictSame(legacyEnd.responses[0]?.result?.structuredContent, { done: 'legacy', run: 1 })
  t.equal(confirmedRuns(), 1, 'the legacy confirmation ran the tool once')

  // Legacy: decline runs nothing.
  const id2 = rid()
  const declined = await confirmCall(t, server.mcpUrl, session.headers, callTool('team_confirmed', { what: 'no' }, id2), decision('decline'))
  const declinedEnd = await readToEnd(declined.live, id2)
  failureOf(t, declinedEnd.responses[0]?.result, 'ELICITATION_DENIED')
  t.equal(confirmedRuns(), 1, 'declining in a session runs nothing')

  // Modern: round 1 asks, round 2 runs once.
  const round1 = await modernCall(server.mcpUrl, server.apiKey, 'team_confirmed', { what: 'modern' }, { capabilities: ELICITING, id: 1 })
  t.equal(round1.status, 200)
  const asked = answerOf(round1, 1)?.result
  t.equal(asked?.resultType, 'input_required')
  t.strictSame(Object.keys(asked?.inputRequests ?? {}), ['confirm'], 'one input request, key confirm')
  t.equal(asked?.inputRequests?.confirm?.method, 'elicitation/create')
  t.equal(asked?.inputRequests?.confirm?.params?.message, 'Really do X?', 'the same message as in a session')
  t.strictSame(asked?.inputRequests?.confirm?.params?.requestedSchema, accepted.request.params.requestedSchema, 'the same form as in a session')
  t.type(asked?.requestState, 'string')
  t.equal(confirmedRuns(), 1, 'round 1 runs nothing')
  const round2 = await modernCall(server.mcpUrl, server.apiKey, 'team_confirmed', { what: 'modern' }, {
    capabilities: ELICITING, id: 2, extra: { requestState: asked.requestState, inputResponses: { confirm: confirmAnswer() } },
  })
  t.equal(round2.status, 200)
  const done = answerOf(round2, 2)?.result
  t.equal(done?.resultType, 'complete')
  t.strictSame(done?.structuredContent, { done: 'modern', run: 2 })
  t.equal(confirmedRuns(), 2, 'the modern retry ran the tool once')

  // Modern: decline runs nothing.
  const ask = answerOf(await modernCall(server.mcpUrl, server.apiKey, 'team_confirmed', { what: 'nope' }, { capabilities: ELICITING, id: 3 }), 3)?.result
  t.equal(ask?.resultType, 'input_required')
  const no = await modernCall(server.mcpUrl, server.apiKey, 'team_confirmed', { what: 'nope' }, {
    capabilities: ELICITING, id: 4, extra: { requestState: ask.requestState, inputResponses: { confirm: confirmAnswer('decline') } },
  })
  const noResult = answerOf(no, 4)?.result
  failureOf(t, noResult, 'ELICITATION_DENIED')
  t.equal(noResult?.resultType, 'complete')
  t.equal(confirmedRuns(), 2, 'declining on a modern request runs nothing')

  // Modern: a client that did not declare elicitation cannot be asked (-32021), nothing runs.
  const undeclared = await modernCall(server.mcpUrl, server.apiKey, 'team_confirmed', { what: 'x' }, { id: 5 })
  t.equal(undeclared.status, 400)
  t.equal(undeclared.json?.id, 5)
  t.equal(undeclared.json?.error?.code, -32021)
  t.strictSame(undeclared.json?.error?.data?.requiredCapabilities, { elicitation: {} })
  t.equal(undeclared.json?.error?.data?.code, 'MISSING_CLIENT_CAPABILITY')
  t.equal(confirmedRuns(), 2)

  const outcomes = (await confirmationAudit(server, 'team_confirmed')).map((e) => e.outcome).sort()
  t.strictSame(outcomes, ['confirmed', 'confirmed', 'declined', 'declined'], 'each answer on each era is audited')

  // A tool asking twice: two rounds on the modern path (confirm, then confirm_2), one run.
  const a1 = answerOf(await modernCall(server.mcpUrl, server.apiKey, 'team_twice', { what: 'both' }, { capabilities: ELICITING, id: 11 }), 11)?.result
  t.equal(a1?.resultType, 'input_required')
  t.strictSame(Object.keys(a1?.inputRequests ?? {}), ['confirm'])
  t.equal(a1?.inputRequests?.confirm?.params?.message, 'Really do X?')
  const a2 = answerOf(await modernCall(server.mcpUrl, server.apiKey, 'team_twice', { what: 'both' }, {
    capabilities: ELICITING, id: 12, extra: { requestState: a1.requestState, inputResponses: { confirm: confirmAnswer() } },
  }), 12)?.result
  t.equal(a2?.resultType, 'input_required', 'the second question is a second round')
  t.strictSame(Object.keys(a2?.inputRequests ?? {}), ['confirm_2'], 'asked under a new key')
  t.equal(a2?.inputRequests?.confirm_2?.params?.message, 'Really, really do X? It cannot be undone.')
  t.not(a2?.requestState, a1.requestState, 'a new requestState')
  t.equal(twiceRuns(), 0, 'nothing ran after one answer')
  const a3 = answerOf(await modernCall(server.mcpUrl, server.apiKey, 'team_twice', { what: 'both' }, {
    capabilities: ELICITING, id: 13, extra: { requestState: a2.requestState, inputResponses: { confirm_2: confirmAnswer() } },
  }), 13)?.result
  t.equal(a3?.resultType, 'complete')
  t.strictSame(a3?.structuredContent, { done: 'both' })
  t.equal(twiceRuns(), 1, 'ran once after both answers')
  t.strictSame((await confirmationAudit(server, 'team_twice')).map((e) => e.outcome), ['confirmed', 'confirmed'], 'both answers audited once each')

  // The same tool in a session: two elicitation/create on the one stream, one run.
  const id3 = rid()
  const first = await confirmCall(t, server.mcpUrl, session.headers, callTool('team_twice', { what: 'session' }, id3), decision())
  t.equal(first.request.params.message, 'Really do X?')
  const second = await until(() => messagesOf(first.live).filter((m) => m.method === 'elicitation/create')[1], 5000, 'the second elicitation/create')
  t.equal(second.params.message, 'Really, really do X? It cannot be undone.')
  const answered = await post(server.mcpUrl, { jsonrpc: '2.0', id: second.id, result: decision() }, session.headers)
  t.equal(answered.status, 202)
  const end = await readToEnd(first.live, id3)
  t.strictSame(end.responses[0]?.result?.structuredContent, { done: 'session' })
  t.equal(twiceRuns(), 2)
})

t.test('cancellation reasons: CancelledByClient in a session, ClientDisconnected when a modern client closes', async (t) => {
  const { server, aborts } = await serve(t)

  // Session: notifications/cancelled.
  const session = await openSession(server.mcpUrl, server.apiKey)
  const live = await openLive(server.mcpUrl, {
    method: 'POST',
    headers: { ...session.headers, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 'legacy-wait', method: 'tools/call', params: { name: 'team_wait', arguments: { ms: 8000 }, _meta: { progressToken: 'w1' } } }),
  })
  t.teardown(() => live.close())
  t.equal(live.status, 200)
  await live.waitFor((text) => text.includes('notifications/progress'), 5000, 'the legacy call to start')
  const cancelled = await post(server.mcpUrl, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'legacy-wait', reason: 'user pressed stop' } }, session.headers)
  t.equal(cancelled.status, 202)
  const legacyReason = await until(() => aborts.get('legacy-wait'), 5000, 'the legacy handler to see the abort')
  t.type(legacyReason, CancelledByClient, 'notifications/cancelled: CancelledByClient')
  t.notOk(legacyReason instanceof TaskCancelled, 'not a task cancellation')
  t.notOk(legacyReason instanceof SessionEnded)
  t.equal((legacyReason as Error).name, 'CancelledByClient')
  await live.ended(5000)
  t.notOk(messagesOf(live).some((m) => m.id === 'legacy-wait'), 'no response for a cancelled call')

  // Modern: the client closes the connection.
  const modern = await modernLive(server.mcpUrl, server.apiKey, 'tools/call', { name: 'team_wait', arguments: { ms: 8000 } }, { meta: { progressToken: 'w2' }, id: 'modern-wait' })
  t.teardown(() => modern.close())
  t.equal(modern.status, 200)
  t.equal(modern.headers['content-type'], 'text/event-stream')
  await modern.waitFor((text) => text.includes('notifications/progress'), 5000, 'the modern call to start')
  t.notOk(aborts.has('modern-wait'), 'still running while the connection is open')
  modern.close()
  const modernReason = await until(() => aborts.get('modern-wait'), 5000, 'the modern handler to see the abort')
  t.type(modernReason, ClientDisconnected, 'a closed connection: ClientDisconnected')
  t.notOk(modernReason instanceof CancelledByClient, 'not a client cancellation message')
  t.equal((modernReason as Error).name, 'ClientDisconnected')

  // Session ending under a call: SessionEnded (README).
  const doomed = await openSession(server.mcpUrl, server.apiKey)
  const third = await openLive(server.mcpUrl, {
    method: 'POST',
    headers: { ...doomed.headers, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 'ended-wait', method: 'tools/call', params: { name: 'team_wait', arguments: { ms: 8000 }, _meta: { progressToken: 'w3' } } }),
  })
  t.teardown(() => third.close())
  await third.waitFor((text) => text.includes('notifications/progress'), 5000, 'the third call to start')
  const del = await request(server.mcpUrl, { method: 'DELETE', headers: doomed.headers })
  await del.body.text()
  t.equal(del.statusCode, 204)
  const endedReason = await until(() => aborts.get('ended-wait'), 5000, 'the handler to see the session end')
  t.type(endedReason, SessionEnded, 'DELETE of the session: SessionEnded')
})

t.test('a long-running custom tool becomes a task at once; tasks/cancel aborts it with TaskCancelled', async (t) => {
  const { server, longRuns } = await serve(t)

  const created = await modernCall(server.mcpUrl, server.apiKey, 'team_long', { tickMs: 5 }, {
    capabilities: WITH_TASKS, id: 1, meta: { progressToken: 'tp', [LOG_LEVEL]: 'debug' },
  })
  t.equal(created.status, 200)
  t.match(String(created.headers['content-type']), /^application\/json/, 'the task handle is a JSON answer: no notifications were sent')
  const handle = created.json?.result
  t.equal(handle?.resultType, 'task', 'a task at once (no confirmation)')
  t.type(handle?.taskId, 'string')
  t.equal(handle?.status, 'working')
  t.equal(handle?.pollIntervalMs, 50)
  t.ok(Number.isFinite(Date.parse(handle?.createdAt)), 'createdAt is a date')

  // Let it tick a few times while it is a task: progress() and log() are dropped, without throwing.
  const run = await until(() => longRuns[0]?.sent !== undefined && longRuns[0].sent >= 3 && longRuns[0], 5000, 'the task to run a few ticks')
  t.strictSame(run.seen, { era: 'modern', protocolVersion: MODERN, session: null })
  t.equal(run.threw, undefined, 'progress() and log() did not throw')

  const before = await modernPost(server.mcpUrl, server.apiKey, 'tasks/get', { taskId: handle.taskId }, { capabilities: WITH_TASKS, id: 2 })
  t.equal(before.status, 200)
  t.equal(before.json?.result?.status, 'working')
  t.equal(before.json?.result?.resultType, 'complete')

  const cancel = await modernPost(server.mcpUrl, server.apiKey, 'tasks/cancel', { taskId: handle.taskId }, { capabilities: WITH_TASKS, id: 3 })
  t.equal(cancel.status, 200)
  t.equal(cancel.json?.result?.resultType, 'complete', 'tasks/cancel acknowledged')
  await until(() => run.ended, 5000, 'the handler to stop')
  t.type(run.reason, TaskCancelled, 'the signal was aborted with TaskCancelled')
  t.type(run.reason, CancelledByClient, 'which is a CancelledByClient')
  t.equal((run.reason as Error).name, 'TaskCancelled')
  t.equal(run.threw, undefined, 'no progress() or log() ever threw')
  t.ok(run.sent >= 3)

  const view = await poll(async () => {
    const r = await modernPost(server.mcpUrl, server.apiKey, 'tasks/get', { taskId: handle.taskId }, { capabilities: WITH_TASKS, id: 4 })
    return r.json?.result?.status !== 'working' ? r.json?.result : undefined
  }, 5000, 'the task to end')
  t.equal(view?.status, 'cancelled', 'the task is cancelled')
  t.equal(view?.result, undefined, 'a cancelled task carries no result')

  // Without the extension the same tool is an ordinary (streamed) call: not a task.
  const plain = await modernLive(server.mcpUrl, server.apiKey, 'tools/call', { name: 'team_long', arguments: { tickMs: 5 } }, { meta: { progressToken: 'np' }, id: 5 })
  t.teardown(() => plain.close())
  await plain.waitFor((text) => (text.match(/notifications\/progress/g) ?? []).length >= 2, 5000, 'progress on a non-task call')
  t.notOk(plain.text().includes('"resultType":"task"'))
  plain.close()
  await until(() => longRuns[1]?.ended, 5000, 'the non-task run to stop on disconnect')
  t.type(longRuns[1]?.reason, ClientDisconnected)
})

// Regression: a custom tool that throws any catalog code gets a tool result in both eras, INVALID_PARAMS included;
// only a malformed answer to a confirmation (the request's own fault) is a JSON-RPC -32602.
t.test('a tool throwing fail(INVALID_PARAMS) gets a tool result in both eras', async (t) => {
  const picky = defineTool<Record<string, never>, Record<string, never>>({
    name: 'team_picky',
    title: 'Picky',
    description: 'Always refuses.',
    inputSchema: { type: 'object', properties: {}, additionalProperties: false },
    scope: 'mcp:read',
    role: 'viewer',
    handler() {
      throw fail('INVALID_PARAMS', { message: 'not today' })
    },
  })
  const server = await startServer(t, { tools: [...builtinTools, picky] })
  const { headers } = await openSession(server.mcpUrl, server.apiKey)
  const legacy = await callToEnd(server.mcpUrl, headers, 'team_picky', {}, 1)
  t.equal(failureOf(t, legacy.result, 'INVALID_PARAMS').message, 'not today', 'session: a tool result')
  const modern = await modernCall(server.mcpUrl, server.apiKey, 'team_picky')
  t.equal(modern.status, 200)
  t.equal(failureOf(t, answerOf(modern).result, 'INVALID_PARAMS').message, 'not today', 'stateless: a tool result')
})

// Regression: the README writes failures as `fail('RESOURCE_NOT_FOUND')`, and a handler that wrote it without `throw`
// went on: it asked for the confirmation of a change to what it had just found absent. fail() throws now, and
// TypeScript knows it (`{ removed: note }` below compiles only because `note` cannot be undefined past the fail() line).
t.test('fail() written without throw stops the tool in both eras: the failure is the answer, nothing is asked', async (t) => {
  const notes = new Map([['kept', 'a note']])
  const remove = defineTool<{ name: string }, { removed: string }>({
    name: 'team_remove_note',
    title: 'Remove a note',
    description: 'Removes a note after asking.',
    inputSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'], additionalProperties: false },
    outputSchema: { type: 'object', properties: { removed: { type: 'string' } }, required: ['removed'] },
    scope: 'mcp:read',
    role: 'viewer',
    confirm: true,
    async handler(args, ctx) {
      const note = notes.get(args.name)
      if (note === undefined) fail('RESOURCE_NOT_FOUND', { message: `No note named ${args.name}` })
      await ctx.confirm(`Remove the note ${args.name}?`)
      notes.delete(args.name)
      return { removed: note }
    },
  })
  const server = await startServer(t, { tools: [...builtinTools, remove] })

  const session = await elicitingSession(server)
  const id = rid()
  const live = await openLiveCall(t, server.mcpUrl, session.headers, callTool('team_remove_note', { name: 'absent' }, id))
  // The first thing the call sends: its answer, or (the bug) the question.
  const first = await until(() => messagesOf(live).find((m) => isElicitation(m) || isAnswerTo(id)(m)), 5000, 'the call\'s answer')
  if (isElicitation(first)) return t.fail('session: the tool asked for a confirmation instead of failing')
  t.equal(failureOf(t, first.result, 'RESOURCE_NOT_FOUND').message, 'No note named absent', 'session: the failure is the answer')

  const modern = answerOf(await modernCall(server.mcpUrl, server.apiKey, 'team_remove_note', { name: 'absent' }, { capabilities: ELICITING }))?.result
  t.equal(modern?.resultType, 'complete', 'stateless: no input_required round')
  t.equal(failureOf(t, modern, 'RESOURCE_NOT_FOUND').message, 'No note named absent', 'stateless: the failure is the answer')

  // The same tool on a note that exists does ask: what stopped it above was fail().
  const asks = answerOf(await modernCall(server.mcpUrl, server.apiKey, 'team_remove_note', { name: 'kept' }, { capabilities: ELICITING }))?.result
  t.equal(asks?.resultType, 'input_required', 'a note that exists is asked about')
})

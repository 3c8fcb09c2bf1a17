// test-backends: own (processes on PostgreSQL and Redis)
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { builtinTools } from '../../src/plugins/tools/builtin/index.js'
import { chatty } from '../helpers/chatty.js'
import { appTools } from '../../src/plugins/tools/builtin/apps.js'
import type { ToolDefinition } from '../../src/plugins/tools/define.js'
import { postgresDatabase, redisKeys, redisPrefix, redisUrl } from '../helpers/backends.js'
import { answerRequest, decision, elicitingSession } from '../helpers/confirm.js'
import { callTool, openSession, parseSse } from '../helpers/mcp.js'
import { defaultOrganization } from '../helpers/seed.js'
import { startServer, type TestServer } from '../helpers/server.js'
import { openLive, until } from '../helpers/stream.js'

/**
 * A 2025 call stream resumed on another process than the one running the call, as a balancer without sticky sessions
 * sends a GET with Last-Event-ID anywhere (coordination/shared-streams.ts): the other process replays what the client
 * missed from Redis and follows the rest.
 */

const ENV_KEY = Buffer.alloc(32, 0x3d).toString('base64')

const TOOLS = [...new Map<string, ToolDefinition<any, any>>([...builtinTools, ...appTools, chatty].map((d) => [d.name, d])).values()]
const messages = (text: string) => parseSse(text).events.filter((e) => e.data !== '').map((e) => ({ id: e.id, msg: JSON.parse(e.data) }))
const lines = (ms: Array<{ msg: any }>) => ms.filter((m) => m.msg.method === 'notifications/message').map((m) => m.msg.params.data.line as number)

async function twoProcesses(t: { teardown(fn: () => unknown): void }, extra: Record<string, unknown> = {}): Promise<[TestServer, TestServer, string]> {
  const url = await postgresDatabase(t)
  const prefix = redisPrefix(t)
  const config = { envKey: ENV_KEY, redisUrl: redisUrl(), redisPrefix: prefix, ...extra }
  const a = await startServer(t, { dbPath: url, tools: TOOLS, config })
  const b = await startServer(t, { dbPath: url, tools: TOOLS, config })
  return [a, b, prefix]
}

function callOn(server: TestServer, headers: Record<string, string>, message: unknown) {
  return openLive(server.mcpUrl, { method: 'POST', headers: { ...headers, 'content-type': 'application/json', accept: 'text/event-stream' }, body: JSON.stringify(message) })
}

function resumeOn(server: TestServer, headers: Record<string, string>, lastEventId: string) {
  return openLive(server.mcpUrl, { method: 'GET', headers: { ...headers, accept: 'text/event-stream', 'last-event-id': lastEventId } })
}

t.test('a call stream dropped on A is resumed on B: the missed events, then the live ones, then the result', async (t) => {
  const [a, b, prefix] = await twoProcesses(t)
  const { headers } = await openSession(a.mcpUrl, a.apiKey)
  const call = await callOn(a, headers, callTool('test_chatty', { count: 8, gapMs: 80 }, 'c-1'))
  await call.waitFor((text) => text.includes('"line":2'), 5000, 'two lines')
  const seen = messages(call.text())
  call.close()
  t.ok((await redisKeys(prefix)).some((k) => k.startsWith(`${prefix}sse:`)), 'the call\'s events are kept in Redis')
  await sleep(120) // a line or two pass while nobody listens

  const resumed = await resumeOn(b, headers, seen.at(-1)!.id!)
  t.teardown(() => resumed.close())
  t.equal(resumed.status, 200)
  const rest = messages(await resumed.ended(8000))
  t.ok(resumed.endedByServer, 'B ends the stream once the call has answered')
  t.notOk(rest.some((m) => seen.some((s) => s.id === m.id)), 'nothing already received is sent again')
  t.same([...lines(seen), ...lines(rest)], [1, 2, 3, 4, 5, 6, 7, 8], 'every line exactly once, in order')
  t.same(rest.at(-1)?.msg, { jsonrpc: '2.0', id: 'c-1', result: { content: [{ type: 'text', text: '{"done":8}' }], isError: false, structuredContent: { done: 8 } } }, 'the result comes last')
  const seqs = rest.map((m) => Number(m.id!.split(':')[1]))
  t.same(seqs, [...seqs].sort((x, y) => x - y), 'event ids keep increasing, so the client can resume again from any of them')

  // Delivered to its end, the stream leaves Redis: asking again (SDK v1 does after an error answer) opens the
  // standalone stream rather than an empty replay that ends at once, over and over.
  await until(async () => !(await redisKeys(prefix)).some((k) => k.startsWith(`${prefix}sse:`)) || undefined, 2000, 'the delivered stream to leave Redis')
  const again = await resumeOn(b, headers, rest.at(-1)!.id!)
  await sleep(150)
  t.notOk(again.endedByServer, 'asked again, B opens the standalone stream, which stays open')
  t.equal(messages(again.text()).length, 0, 'and replays nothing')
  again.close()
})

t.test('a confirmation dropped on A is replayed by B and answered through B', async (t) => {
  const [a, b] = await twoProcesses(t)
  const app = await a.app.repos.apps.create({ organizationId: (await defaultOrganization(a)).id, name: 'resumed-elsewhere' })
  const { headers } = await elicitingSession(a)
  const call = await callOn(a, headers, callTool('service_apps_delete', { app_id: app.id }, 'del-1'))
  await call.waitFor((text) => text.includes('elicitation/create'), 5000, 'the confirmation request')
  const first = messages(call.text())
  const question = first.find((m) => m.msg.method === 'elicitation/create')!
  const priming = parseSse(call.text()).events.find((e) => e.data === '')!.id!
  call.close()

  const resumed = await resumeOn(b, headers, priming)
  t.teardown(() => resumed.close())
  await resumed.waitFor((text) => text.includes('elicitation/create'), 5000, 'the replayed confirmation request')
  const replayed = messages(resumed.text()).find((m) => m.msg.method === 'elicitation/create')!
  t.equal(replayed.id, question.id, 'the same event, with the same id')
  const answer = await answerRequest(b.mcpUrl, headers, replayed.msg.id, decision())
  t.equal(answer.status, 202, 'the answer is accepted by B and forwarded to A')
  const result = messages(await resumed.ended(5000)).find((m) => m.msg.id === 'del-1')
  t.equal(result?.msg.result?.isError, false, 'the tool result, sent by A, arrives on the stream B serves')
  t.equal(await b.app.repos.apps.byId(app.organizationId, app.id), undefined, 'the app is deleted')
})

t.test('another session cannot resume the stream on B', async (t) => {
  const [a, b] = await twoProcesses(t)
  const { headers } = await openSession(a.mcpUrl, a.apiKey)
  const other = await openSession(a.mcpUrl, a.apiKey)
  const call = await callOn(a, headers, callTool('test_chatty', { count: 3, gapMs: 30 }, 'c-2'))
  await call.waitFor((text) => text.includes('"line":1'), 5000, 'the first line')
  const stream = messages(call.text())[0]!.id!.split(':')[0]!
  call.close()

  const foreign = await resumeOn(b, other.headers, `${stream}:0`)
  await sleep(250)
  t.equal(foreign.status, 200, 'another session gets its own standalone stream')
  t.equal(messages(foreign.text()).length, 0, 'and none of the events')
  foreign.close()
  const own = await resumeOn(b, headers, `${stream}:0`)
  t.same(lines(messages(await own.ended(5000))), [1, 2, 3], 'the session itself gets them all')
})

t.test('a follower on B answers the unanswered call with an error once A\'s lease lapsed', async (t) => {
  const [a, b] = await twoProcesses(t, { leaseMs: 300 })
  const { headers } = await openSession(a.mcpUrl, a.apiKey)
  const call = await callOn(a, headers, callTool('test_chatty', { count: 100, gapMs: 50 }, 'c-3'))
  await call.waitFor((text) => text.includes('"line":1'), 5000, 'the first line')
  const seen = messages(call.text())
  call.close()

  const resumed = await resumeOn(b, headers, seen.at(-1)!.id!)
  t.teardown(() => resumed.close())
  await resumed.waitFor((text) => text.includes('"line":3'), 5000, 'live lines through B')
  // A stops renewing its lease and leaves the registry, as a process that died (its call keeps running here, but B
  // must no longer wait for it).
  await a.app.processes.stop()
  const rest = messages(await resumed.ended(5000))
  const error = rest.find((m) => m.msg.id === 'c-3')
  t.equal(error?.msg.error?.code, -32000, 'the call is answered with an error (SERVICE_UNAVAILABLE, as a call stopped by a shutdown)')
  t.match(error?.msg.error?.message, /stopped before it finished/, 'that says what happened')
  t.match(error?.id, /^[A-Za-z0-9_-]+:\d+$/, 'as an event with an id')
  t.ok(lines(rest).length < 100, 'before the call could have ended')
})

import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { builtinTools } from '../../src/plugins/tools/builtin/index.js'
import { chatty } from '../helpers/chatty.js'
import { ACCEPT_BOTH, callTool, openSession, parseSse, post } from '../helpers/mcp.js'
import { defaultOrganization } from '../helpers/seed.js'
import { startServer } from '../helpers/server.js'
import { openLive } from '../helpers/stream.js'

const messages = (text: string) => parseSse(text).events.filter((e) => e.data !== '').map((e) => ({ id: e.id, msg: JSON.parse(e.data) }))
const primingId = (text: string) => parseSse(text).events.find((e) => e.data === '')?.id

t.test('a confirmation interrupted by a dropped connection is resumed with Last-Event-ID and answered', async (t) => {
  const server = await startServer(t)
  const app = await server.app.repos.apps.create({ organizationId: (await defaultOrganization(server)).id, name: 'resumable' })
  const { headers } = await openSession(server.mcpUrl, server.apiKey, '2025-11-25', { elicitation: {} })
  const call = await openLive(server.mcpUrl, { method: 'POST', headers: { ...headers, 'content-type': 'application/json', accept: ACCEPT_BOTH }, body: JSON.stringify(callTool('service_apps_delete', { app_id: app.id }, 'del-1')) })
  await call.waitFor((text) => text.includes('elicitation/create'), 5000, 'the confirmation request')
  const first = call.text()
  const priming = primingId(first)
  t.match(priming, /^[A-Za-z0-9_-]+:0$/, 'the call stream was primed')
  call.close() // the connection drops before the user answers

  await sleep(50)
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
  const { headers } = await openSession(server.mcpUrl, server.apiKey)
  const call = await openLive(server.mcpUrl, { method: 'POST', headers: { ...headers, 'content-type': 'application/json', accept: 'text/event-stream' }, body: JSON.stringify(callTool('test_chatty', { count: 4, gapMs: 40 }, 'c-1')) })
  await call.waitFor((text) => text.includes('"line":2'), 5000, 'two lines')
  const seen = messages(call.text())
  const lastSeen = seen.at(-1)!.id!
  call.close()
  await sleep(300) // the call finishes while nobody listens

  const resumed = await openLive(server.mcpUrl, { method: 'GET', headers: { ...headers, accept: 'text/event-stream', 'last-event-id': lastSeen } })
  const rest = messages(await resumed.ended(5000))
  t.ok(resumed.endedByServer, 'the finished stream ends after the replay')
  t.notOk(rest.some((m) => seen.some((s) => s.id === m.id)), 'nothing already received is sent again')
  t.same(rest.filter((m) => m.msg.method === 'notifications/message').map((m) => m.msg.params.data.line), [3, 4].filter((n) => n > seen.filter((s) => s.msg.method === 'notifications/message').length))
  t.same(rest.at(-1)?.msg, { jsonrpc: '2.0', id: 'c-1', result: { content: [{ type: 'text', text: '{"done":4}' }], isError: false, structuredContent: { done: 4 } } }, 'the result comes last')

  // Replayed to its end, the stream is no longer kept: asking again (SDK v1 does after an error answer) opens the
  // standalone stream, which stays open, rather than an empty replay that ends at once, over and over.
  const again = await openLive(server.mcpUrl, { method: 'GET', headers: { ...headers, accept: 'text/event-stream', 'last-event-id': lastSeen } })
  await sleep(150)
  t.equal(again.status, 200)
  t.notOk(again.endedByServer, 'the standalone stream stays open')
  t.equal(messages(again.text()).length, 0, 'and replays nothing')
  again.close()
})

t.test('the replay buffer is bounded; another session cannot resume the stream', async (t) => {
  const server = await startServer(t, { tools: [...builtinTools, chatty], config: { sseReplayEvents: 2 } })
  const { headers } = await openSession(server.mcpUrl, server.apiKey)
  const other = await openSession(server.mcpUrl, server.apiKey)
  const call = await openLive(server.mcpUrl, { method: 'POST', headers: { ...headers, 'content-type': 'application/json', accept: 'text/event-stream' }, body: JSON.stringify(callTool('test_chatty', { count: 5, gapMs: 30 }, 'c-2')) })
  await call.waitFor((text) => text.includes('"line":1'), 5000, 'the first line')
  const stream = messages(call.text())[0]!.id!.split(':')[0]!
  call.close()
  await sleep(400)

  const foreign = await openLive(server.mcpUrl, { method: 'GET', headers: { ...other.headers, accept: 'text/event-stream', 'last-event-id': `${stream}:0` } })
  await sleep(100)
  t.equal(foreign.status, 200, 'another session gets its own standalone stream')
  t.equal(messages(foreign.text()).length, 0, 'and none of the events')
  foreign.close()

  const resumed = await openLive(server.mcpUrl, { method: 'GET', headers: { ...headers, accept: 'text/event-stream', 'last-event-id': `${stream}:0` } })
  const replayed = messages(await resumed.ended(5000))
  t.equal(replayed.length, 2, 'only the last two events were kept')
  t.equal(replayed[0]?.msg.params?.data?.line, 5)
  t.equal(replayed[1]?.msg.id, 'c-2', 'the last one is the result')
})

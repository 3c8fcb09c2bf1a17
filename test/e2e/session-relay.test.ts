// test-backends: own (processes on PostgreSQL and Redis)
import t from 'tap'
import { request } from 'undici'
import { builtinTools } from '../../src/plugins/tools/builtin/index.js'
import { appTools } from '../../src/plugins/tools/builtin/apps.js'
import type { ToolDefinition } from '../../src/plugins/tools/define.js'
import { postgresDatabase, redisPrefix, redisUrl } from '../helpers/backends.js'
import { answerRequest, decision, elicitationOn, elicitingSession, isAnswerTo, openLiveCall } from '../helpers/confirm.js'
import { callTool, post } from '../helpers/mcp.js'
import { defaultOrganization } from '../helpers/seed.js'
import { startServer, type TestServer } from '../helpers/server.js'
import { messagesOf, openLive, until } from '../helpers/stream.js'

/**
 * A 2025 session served by two processes on one database, as a load balancer without sticky sessions would: each
 * request of the session goes to either. What one process holds of the session (a question it awaits, a call it runs,
 * a GET stream it serves) is reached from the other through Redis (sessions/session-relay.ts).
 */

const ENV_KEY = Buffer.alloc(32, 0x2c).toString('base64')
const TOOLS = [...new Map<string, ToolDefinition<any, any>>([...builtinTools, ...appTools].map((d) => [d.name, d])).values()]
const PIPELINES = { default: { argv: [process.execPath, '-e', 'process.exit(0)'] } }
let nextId = 100
const rid = () => ++nextId

async function twoProcesses(t: { teardown(fn: () => unknown): void }): Promise<[TestServer, TestServer]> {
  const url = await postgresDatabase(t)
  const config = { envKey: ENV_KEY, redisUrl: redisUrl(), redisPrefix: redisPrefix(t), pipelines: PIPELINES }
  const a = await startServer(t, { dbPath: url, tools: TOOLS, config })
  const b = await startServer(t, { dbPath: url, tools: TOOLS, config })
  return [a, b]
}

async function seedApp(server: TestServer, name: string) {
  return server.app.repos.apps.create({ organizationId: (await defaultOrganization(server)).id, name })
}

t.test('a confirmation asked by one process is answered through the other', async (t) => {
  const [a, b] = await twoProcesses(t)
  const { headers } = await elicitingSession(a)
  const app = await seedApp(a, 'to-delete')
  const id = rid()
  const live = await openLiveCall(t, a.mcpUrl, headers, callTool('service_apps_delete', { app_id: app.id }, id))
  const request = await elicitationOn(live)
  t.match(request.id, new RegExp(`^\\d+\\.${a.app.coordination.processId}$`), 'the question names the process that asked it')

  const wrong = await answerRequest(b.mcpUrl, headers, `999.${a.app.coordination.processId}`, decision())
  t.equal(wrong.status, 400, 'an answer to nothing asked is refused, through the other process too')
  const reply = await answerRequest(b.mcpUrl, headers, request.id, decision())
  t.equal(reply.status, 202, 'the answer posted to B is accepted')
  await live.waitFor(() => messagesOf(live).some(isAnswerTo(id)), 5000, 'the call\'s answer')
  const answer = messagesOf(live).find(isAnswerTo(id))
  t.equal(answer.result.isError, false, 'the call ran on A once confirmed through B')
  t.equal(await a.app.repos.apps.byId(app.organizationId, app.id), undefined, 'the app is deleted')
  const again = await answerRequest(b.mcpUrl, headers, request.id, decision())
  t.equal(again.status, 400, 'a second answer is refused: the question was answered')
})

t.test('a cancellation sent to the other process stops the call where it runs', async (t) => {
  const [a, b] = await twoProcesses(t)
  const { headers } = await elicitingSession(a)
  const app = await seedApp(a, 'kept')
  const id = rid()
  const live = await openLiveCall(t, a.mcpUrl, headers, callTool('service_apps_delete', { app_id: app.id }, id))
  await elicitationOn(live)
  const cancelled = await post(b.mcpUrl, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'changed my mind' } }, headers)
  t.equal(cancelled.status, 202)
  await live.ended(5000)
  t.strictSame(messagesOf(live).filter(isAnswerTo(id)), [], 'the cancelled call gets no response')
  t.ok(await a.app.repos.apps.byId(app.organizationId, app.id), 'nothing was deleted')
})

t.test('settings, subscriptions and DELETE reach the process that holds the session', async (t) => {
  const [a, b] = await twoProcesses(t)
  const { sessionId, headers } = await elicitingSession(a)
  // The session's GET stream is served by A.
  const get = await openLive(a.mcpUrl, { method: 'GET', headers: { ...headers, accept: 'text/event-stream' } })
  t.teardown(() => get.close())
  t.equal(get.status, 200)

  t.equal((await post(b.mcpUrl, { jsonrpc: '2.0', id: rid(), method: 'logging/setLevel', params: { level: 'error' } }, headers)).status, 200)
  await until(() => a.app.sessions.inMemory(sessionId)?.logLevel === 'error', 5000, 'A to hear the new log level')
  t.pass('a log level set through B holds on A')

  // Subscribed through B; the resource changes through B; the update goes out on A's GET stream.
  const created = await post(b.mcpUrl, callTool('service_apps_create', { name: 'watched' }, rid()), headers)
  const appId = JSON.parse(created.json.result.content[0].text).app.id as string
  const uri = `service://apps/${appId}`
  const subscribed = await post(b.mcpUrl, { jsonrpc: '2.0', id: rid(), method: 'resources/subscribe', params: { uri } }, headers)
  t.equal(subscribed.status, 200, subscribed.text)
  await until(() => a.app.sessions.inMemory(sessionId)?.subscriptions?.uris.has(uri), 5000, 'A to hear the subscription')
  t.equal((await post(b.mcpUrl, callTool('service_apps_update', { app_id: appId, description: 'changed' }, rid()), headers)).status, 200)
  await get.waitFor(() => messagesOf(get).some((m) => m.method === 'notifications/resources/updated' && m.params.uri === uri), 5000, 'the update on A\'s GET stream')
  t.pass('an update made through B reaches the GET stream A serves')

  const deleted = await request(b.mcpUrl, { method: 'DELETE', headers })
  await deleted.body.dump()
  t.equal(deleted.statusCode, 204)
  await get.ended(5000)
  t.ok(get.endedByServer, 'A ended the GET stream of the session B closed')
  t.equal((await post(a.mcpUrl, { jsonrpc: '2.0', id: rid(), method: 'ping' }, headers)).status, 404, 'A no longer knows the session')
})

t.test('service_deployments_cancel on one process stops the run on the process that owns it', async (t) => {
  const url = await postgresDatabase(t)
  const slow = { argv: [process.execPath, '-e', 'setInterval(() => console.log("step"), 100)'] }
  const config = { envKey: ENV_KEY, redisUrl: redisUrl(), redisPrefix: redisPrefix(t), pipelines: { default: slow }, pipelineGraceMs: 200 }
  const a = await startServer(t, { dbPath: url, tools: TOOLS, config })
  const b = await startServer(t, { dbPath: url, tools: TOOLS, config })
  const app = await seedApp(a, 'long')
  const run = await a.app.pipelines.start({ organizationId: app.organizationId, appId: app.id, kind: 'deploy', createdBy: null })
  t.equal(run.deployment.owner, a.app.processes.id, 'A owns the run')
  const { headers } = await elicitingSession(b)
  const reply = await post(b.mcpUrl, callTool('service_deployments_cancel', { deployment_id: run.deployment.id }, rid()), headers)
  t.equal(reply.json.result.isError, false, reply.text)
  t.equal(JSON.parse(reply.json.result.content[0].text).status, 'cancelling')
  const final = await run.done
  t.equal(final.status, 'cancelled', 'the run on A ended cancelled')
})

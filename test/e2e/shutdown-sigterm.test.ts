// test-backends: sqlite-only (signals to `serve` processes on SQLite files it makes)
/**
 * What a client waiting on the server gets when `service-mcp serve` is stopped with SIGTERM, as a user sees it: the real
 * CLI process (through tsx), real sockets, and the official SDK clients (v1 for the 2025 sessions, v2 for 2026-07-28)
 * or raw requests where the SDKs cannot go (a resumed stream, the tasks extension).
 *
 * Every waiting call gets a final JSON-RPC answer before its stream ends, so an SDK's callTool settles at once rather
 * than at its own timeout: a deployment answers "interrupted", naming the deployment and how to check it after the
 * restart (service_deployments_get shows it interrupted); any other call still running is answered SERVICE_UNAVAILABLE.
 * The process exits 0 within the pipeline grace period plus a margin, and a second signal during the drain does not
 * cut the answers short. The last test does the same for an embedder's tool that ignores its signal (in process).
 */
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Client as V2Client, StreamableHTTPClientTransport as V2Transport } from '@modelcontextprotocol/client'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { CallToolResultSchema, ElicitRequestSchema, LoggingMessageNotificationSchema, McpError } from '@modelcontextprotocol/sdk/types.js'
import t, { type Test } from 'tap'
import { builtinTools, defineTool } from '../../src/index.js'
import { startServe, type Served } from '../helpers/cli.js'
import { confirmCall } from '../helpers/confirm.js'
import { ACCEPT_BOTH, callTool, openSession, parseSse, post } from '../helpers/mcp.js'
import { answerOf, confirmAnswer, modernCall, modernLive, modernPost, WITH_TASKS } from '../helpers/modern.js'
import { OWNER_PASSWORD, startServer } from '../helpers/server.js'
import { messagesOf, openLive, sleep, until, type LiveStream } from '../helpers/stream.js'
import { ROOT } from '../helpers/root.js'

t.setTimeout(90_000)

const API_KEY = 'service_mcp_' + 'E'.repeat(43)
const ENV_KEY = randomBytes(32).toString('base64')
const GRACE_MS = 300
/** How long after the signal the process must be gone: the grace period, the runner's margins, and slack for tsx. */
const EXIT_BOUND_MS = GRACE_MS + 4000
/** How soon a waiting call must settle after the signal: far below the SDKs' own 60 s request timeout. */
const ANSWER_BOUND_MS = 5000
const EXAMPLE = join(ROOT, 'scripts', 'pipelines', 'example.mjs')
/** A pipeline that ignores SIGTERM: only the supervisor's SIGKILL after the grace period ends it (a drain that lasts). */
const STUBBORN = "process.on('SIGTERM', () => console.log('ignoring SIGTERM')); console.log('started'); setInterval(() => console.log('tick'), 100)"
const DEP_ID = /dep_[0-9a-z]{26}/

interface Instance {
  served: Served
  /** Stops the process (if it still runs) and starts it again on the same database and settings. */
  restart(): Promise<Served>
}

/** `service-mcp serve` on a fresh database, with the example pipeline (`default`) and a stubborn one. */
async function serve(t: Test, extra: Record<string, string> = {}): Promise<Instance> {
  const dir = mkdtempSync(join(tmpdir(), 'service-mcp-sigterm-'))
  const configPath = join(dir, 'config.json')
  writeFileSync(configPath, JSON.stringify({
    pipelines: { default: { argv: [process.execPath, EXAMPLE] }, stubborn: { argv: [process.execPath, '-e', STUBBORN] } },
  }))
  const env = {
    SERVICE_DATABASE: join(dir, 'db.sqlite'),
    SERVICE_PORT: '0',
    SERVICE_LOG_LEVEL: 'info',
    SERVICE_CONFIG: configPath,
    SERVICE_ENV_KEY: ENV_KEY,
    SERVICE_PIPELINE_GRACE_MS: String(GRACE_MS),
    SERVICE_BOOTSTRAP_API_KEY: API_KEY,
    SERVICE_BOOTSTRAP_PASSWORD: OWNER_PASSWORD,
    ...extra,
  }
  const started: Served[] = []
  const start = async () => {
    const served = await startServe(env)
    started.push(served)
    return served
  }
  t.teardown(async () => {
    for (const s of started) s.child.kill('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  })
  const served = await start()
  return {
    served,
    async restart() {
      for (const s of started) s.child.kill('SIGKILL')
      await Promise.all(started.map((s) => s.exited))
      return start()
    },
  }
}

/** The process's exit, or null when it is still running after `ms`. */
function exitWithin(served: Served, ms: number) {
  return Promise.race([served.exited, sleep(ms).then(() => null)])
}

type Settled<T> = { value: T } | { error: unknown } | 'pending'

/** How `promise` ended within `ms` ('pending' when it had not). */
function settleWithin<T>(promise: Promise<T>, ms: number): Promise<Settled<T>> {
  return Promise.race([promise.then((value) => ({ value }), (error: unknown) => ({ error })), sleep(ms).then(() => 'pending' as const)])
}

/** The service error a failed tool result carries in its text content. */
function toolError(result: any): { code: string; message: string } {
  return JSON.parse(result?.content?.[0]?.text ?? '{}')
}

/** The checks every "deployment interrupted by the shutdown" answer passes, whichever era carried it. */
function interruptedAnswer(t: Test, result: any, deploymentId: string, app: string): void {
  t.equal(result?.isError, true, 'a tool error, not a success')
  const { code, message } = toolError(result)
  t.equal(code, 'OPERATION_FAILED')
  t.match(message, `Deployment ${deploymentId} of app ${app} was interrupted: the server stopped while it ran (a server shutdown`, 'it says the shutdown interrupted the deployment, naming it')
  t.match(message, `It is recorded as interrupted: once the server is back, service_deployments_get with deployment_id ${deploymentId} shows it`, 'and how to check it after the restart')
}

function sdkText(result: any): string {
  return result?.content?.[0]?.text ?? ''
}

/** A v1 SDK client (2025 sessions) with an API key; `version` pins the revision it asks for at initialize. */
function v1Client(t: Test, url: string, options: { version?: string; answer?: (message: string) => Promise<unknown> | unknown } = {}) {
  const fetchFn: typeof fetch = (input, init) => {
    if (options.version && typeof init?.body === 'string' && init.body.includes('"method":"initialize"')) {
      init = { ...init, body: init.body.replace(/"protocolVersion":"[^"]+"/, `"protocolVersion":"${options.version}"`) }
    }
    return fetch(input, init)
  }
  const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: fetchFn, requestInit: { headers: { Authorization: `Bearer ${API_KEY}` } } })
  const client = new Client({ name: 'sigterm-test', version: '1.0.0' }, { capabilities: { elicitation: {} } })
  const asked: string[] = []
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    asked.push(request.params.message)
    return (options.answer?.(request.params.message) ?? { action: 'accept', content: { confirm: true } }) as never
  })
  const lines: Array<{ deployment_id: string; line: string }> = []
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    if (n.params.logger === 'deployment') lines.push(n.params.data as { deployment_id: string; line: string })
  })
  client.onerror = () => {} // reconnection attempts to a stopped server
  t.teardown(() => client.close().catch(() => {}))
  return { client, transport, asked, lines }
}

/** An app on `pipeline` whose example pipeline pauses `stepMs` between steps (its env var, set through the tool). */
async function createSlowApp(client: Client, name: string, pipeline = 'default', stepMs = 3000): Promise<string> {
  const created = await client.callTool({ name: 'service_apps_create', arguments: { name, pipeline } })
  const appId = JSON.parse(sdkText(created)).app.id as string
  await client.callTool({ name: 'service_env_set', arguments: { app_id: appId, name: 'PIPELINE_STEP_MS', value: String(stepMs) } })
  return appId
}

t.test('SDK v1, 2025-11-25: the deployment answers "interrupted", a call waiting on a confirmation answers SERVICE_UNAVAILABLE, exit 0; the restarted server shows the deployment', async (t) => {
  const instance = await serve(t)
  const { served } = instance
  const { client, transport, asked, lines } = v1Client(t, served.url, {
    // The delete's confirmation is never answered: that call waits on the user when the server stops.
    answer: (message) => message.startsWith('Delete') ? new Promise(() => {}) : { action: 'accept', content: { confirm: true } },
  })
  await client.connect(transport)
  t.equal(transport.protocolVersion, '2025-11-25')
  const web = await createSlowApp(client, 'web')
  const doomed = JSON.parse(sdkText(await client.callTool({ name: 'service_apps_create', arguments: { name: 'doomed' } }))).app.id

  const deploying = client.callTool({ name: 'service_deployments_create', arguments: { app_id: web } }, CallToolResultSchema, { onprogress: () => {} })
  await until(() => lines.length >= 2, 10_000, 'the first deployment lines')
  const deploymentId = lines[0]!.deployment_id
  t.match(deploymentId, DEP_ID)
  const deleting = client.callTool({ name: 'service_apps_delete', arguments: { app_id: doomed } })
  await until(() => asked.some((m) => m.startsWith('Delete app doomed')), 5000, 'the delete confirmation')

  const stoppedAt = Date.now()
  served.child.kill('SIGTERM')
  const [deployed, deleted] = await Promise.all([settleWithin(deploying, ANSWER_BOUND_MS), settleWithin(deleting, ANSWER_BOUND_MS)])
  const answeredIn = Date.now() - stoppedAt
  t.not(deployed, 'pending', `the deployment call settles within ${ANSWER_BOUND_MS} ms`)
  t.not(deleted, 'pending', `the waiting delete call settles within ${ANSWER_BOUND_MS} ms`)
  t.ok(answeredIn < ANSWER_BOUND_MS, `both settled ${answeredIn} ms after SIGTERM`)

  t.ok(deployed !== 'pending' && 'value' in deployed, 'callTool resolves with a result')
  if (deployed !== 'pending' && 'value' in deployed) interruptedAnswer(t, deployed.value, deploymentId, 'web')

  t.ok(deleted !== 'pending' && 'error' in deleted, 'the delete call rejects with the server\'s JSON-RPC error')
  const err = deleted !== 'pending' && 'error' in deleted ? deleted.error as McpError : undefined
  t.ok(err instanceof McpError, 'an McpError')
  t.equal(err?.code, -32000, 'the generic server error of the 2025 revisions')
  t.equal((err?.data as { code?: string } | undefined)?.code, 'SERVICE_UNAVAILABLE')
  t.match(err?.message, 'The server is shutting down and stopped this tools/call service_apps_delete before it finished; call again once it is back')

  const exit = await exitWithin(served, EXIT_BOUND_MS)
  t.strictSame(exit, { code: 0, signal: null }, `exit code 0 within ${EXIT_BOUND_MS} ms${exit?.code ? `\nstderr: ${served.stderr()}` : ''}`)

  // After the restart: the deployment is recorded interrupted, as the answer said; the unconfirmed delete changed nothing.
  const again = await instance.restart()
  const second = v1Client(t, again.url)
  await second.client.connect(second.transport)
  const got = await second.client.callTool({ name: 'service_deployments_get', arguments: { deployment_id: deploymentId } })
  t.equal(got.isError, false)
  t.match((got.structuredContent as any).deployment, { id: deploymentId, app_id: web, status: 'interrupted', outcome: 'interrupted: the server stopped while it ran' })
  const stillThere = await second.client.callTool({ name: 'service_apps_get', arguments: { app_id: doomed } })
  t.equal(stillThere.isError, false, 'the app whose deletion was never confirmed still exists')
})

t.test('SDK v1, 2025-03-26: the deployment answers "interrupted"; a second signal during the drain does not cut it short', async (t) => {
  const { served } = await serve(t, { SERVICE_PIPELINE_GRACE_MS: '1000' })
  const { client, transport, lines } = v1Client(t, served.url, { version: '2025-03-26' })
  await client.connect(transport)
  t.equal(transport.protocolVersion, '2025-03-26', 'the session speaks 2025-03-26')
  const appId = JSON.parse(sdkText(await client.callTool({ name: 'service_apps_create', arguments: { name: 'stubborn', pipeline: 'stubborn' } }))).app.id
  const deploying = client.callTool({ name: 'service_deployments_create', arguments: { app_id: appId } })
  await until(() => lines.some((l) => l.line === 'tick'), 10_000, 'the pipeline running')
  const deploymentId = lines[0]!.deployment_id

  // The pipeline ignores SIGTERM: the drain lasts the grace period (1 s), and SIGINT arrives in the middle of it.
  const stoppedAt = Date.now()
  served.child.kill('SIGTERM')
  await sleep(200)
  served.child.kill('SIGINT')
  const deployed = await settleWithin(deploying, ANSWER_BOUND_MS)
  const answeredIn = Date.now() - stoppedAt
  t.ok(deployed !== 'pending' && 'value' in deployed, `callTool resolves with a result (${answeredIn} ms after SIGTERM)`)
  if (deployed !== 'pending' && 'value' in deployed) interruptedAnswer(t, deployed.value, deploymentId, 'stubborn')
  t.ok(answeredIn >= 1000, 'the answer came after the grace period: the second signal did not end the drain early')
  t.ok(lines.some((l) => l.line === 'ignoring SIGTERM'), 'the pipeline was asked to stop first')
  const exit = await exitWithin(served, EXIT_BOUND_MS + 1000)
  t.strictSame(exit, { code: 0, signal: null }, 'exit code 0')
  t.equal(served.stdout().split('\n').filter((l) => /"msg":"shutting down"/.test(l)).length, 1, 'one shutdown, logged once')
})

/** The SSE events of a live stream, with their ids. */
function eventsOf(live: LiveStream) {
  return parseSse(live.text()).events.filter((e) => e.data !== '').map((e) => ({ id: e.id, message: JSON.parse(e.data) }))
}

t.test('raw 2025-11-25 sessions: a stream resumed with Last-Event-ID carries the answer; a client away at the stop gets it by retrying its request id after the restart', async (t) => {
  const instance = await serve(t)
  const { served } = instance
  const url = served.url
  const seed = async (headers: Record<string, string>, name: string, id: number) => {
    const created = await post(url, callTool('service_apps_create', { name }, id), headers)
    const appId = JSON.parse(created.json.result.content[0].text).app.id as string
    await post(url, callTool('service_env_set', { app_id: appId, name: 'PIPELINE_STEP_MS', value: '3000' }, id + 1), headers)
    return appId
  }
  const a = await openSession(url, API_KEY, '2025-11-25', { elicitation: {} })
  const b = await openSession(url, API_KEY, '2025-11-25', { elicitation: {} })
  const resumedApp = await seed(a.headers, 'resumed', 1)
  const awayApp = await seed(b.headers, 'away', 1)

  const deploymentLine = (live: LiveStream) => eventsOf(live).find((e) => e.message.params?.logger === 'deployment')
  // Session a: its call stream drops, and the client resumes it before the stop.
  const first = await confirmCall(t, url, a.headers, callTool('service_deployments_create', { app_id: resumedApp }, 'dep-a'))
  await first.live.waitFor(() => deploymentLine(first.live) !== undefined, 10_000, 'a deployment line')
  const seen = deploymentLine(first.live)!
  const resumedId = seen.message.params.data.deployment_id as string
  first.live.close()
  await sleep(50)
  const resumed = await openLive(url, { method: 'GET', headers: { ...a.headers, accept: 'text/event-stream', 'last-event-id': seen.id! } })
  t.teardown(() => resumed.close())
  t.equal(resumed.status, 200, 'the call stream is resumed')

  // Session b: its call stream drops and nobody resumes it.
  const away = await confirmCall(t, url, b.headers, callTool('service_deployments_create', { app_id: awayApp }, 'dep-b'))
  await away.live.waitFor(() => deploymentLine(away.live) !== undefined, 10_000, 'a deployment line')
  const awayId = deploymentLine(away.live)!.message.params.data.deployment_id as string
  away.live.close()
  await sleep(50)

  served.child.kill('SIGTERM')
  await resumed.ended(ANSWER_BOUND_MS)
  t.ok(resumed.endedByServer, 'the resumed stream is ended by the server, not reset')
  const answers = eventsOf(resumed).filter((e) => e.message.id === 'dep-a')
  t.equal(answers.length, 1, 'the answer arrives on the resumed stream, once')
  interruptedAnswer(t, answers[0]?.message.result, resumedId, 'resumed')
  t.strictSame(await exitWithin(served, EXIT_BOUND_MS), { code: 0, signal: null }, 'exit code 0')

  // Sessions survive a restart, and a confirmed call's answer is kept per request id: the retry gets it, nothing runs.
  const again = await instance.restart()
  const retried = await post(again.url, callTool('service_deployments_create', { app_id: awayApp }, 'dep-b'), b.headers)
  t.equal(retried.status, 200)
  const retriedAnswer = retried.json ?? retried.messages.find((m) => m.id === 'dep-b')
  interruptedAnswer(t, retriedAnswer?.result, awayId, 'away')
  t.notOk(retried.messages.some((m) => m.method === 'elicitation/create'), 'nobody is asked again')
  const list = await post(again.url, callTool('service_deployments_list', { app_id: awayApp }, 9), b.headers)
  t.equal(JSON.parse(list.json.result.content[0].text).total, 1, 'and no second deployment ran')
})

t.test('SDK v2, 2026-07-28: the deployment answers "interrupted"; a subscriptions/listen ends gracefully', async (t) => {
  const { served } = await serve(t)
  const transport = new V2Transport(new URL(served.url), { requestInit: { headers: { Authorization: `Bearer ${API_KEY}` } } })
  const client = new V2Client({ name: 'sigterm-v2', version: '2.0.0' }, { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } } })
  client.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { confirm: true } }))
  const lines: Array<{ deployment_id: string }> = []
  client.setNotificationHandler('notifications/message', (n) => {
    if (n.params.logger === 'deployment') lines.push(n.params.data as { deployment_id: string })
  })
  client.onerror = () => {}
  t.teardown(() => client.close().catch(() => {}))
  await client.connect(transport)
  t.equal(client.getProtocolEra(), 'modern')
  const created = await client.callTool({ name: 'service_apps_create', arguments: { name: 'modern', pipeline: 'default' } })
  const appId = (created.structuredContent as { app: { id: string } }).app.id
  await client.callTool({ name: 'service_env_set', arguments: { app_id: appId, name: 'PIPELINE_STEP_MS', value: '3000' } })
  const sub = await client.listen({ toolsListChanged: true })

  const deploying = client.callTool({ name: 'service_deployments_create', arguments: { app_id: appId }, _meta: { 'io.modelcontextprotocol/logLevel': 'info' } })
  await until(() => lines.length >= 2, 10_000, 'the first deployment lines')
  const stoppedAt = Date.now()
  served.child.kill('SIGTERM')
  const deployed = await settleWithin(deploying, ANSWER_BOUND_MS)
  t.ok(deployed !== 'pending' && 'value' in deployed, `callTool resolves with a result (${Date.now() - stoppedAt} ms after SIGTERM)`)
  if (deployed !== 'pending' && 'value' in deployed) interruptedAnswer(t, deployed.value, lines[0]!.deployment_id, 'modern')
  t.equal(await Promise.race([sub.closed, sleep(ANSWER_BOUND_MS).then(() => 'pending')]), 'graceful', 'the listen ends with its result')
  t.strictSame(await exitWithin(served, EXIT_BOUND_MS), { code: 0, signal: null }, 'exit code 0')
})

t.test('2026-07-28 with the tasks extension: the task completes with the interrupted result, a listen hears it, tasks/get shows it after the restart', async (t) => {
  const instance = await serve(t)
  const url = instance.served.url
  const created = answerOf(await modernCall(url, API_KEY, 'service_apps_create', { name: 'tasked' }))
  const appId = created.result.structuredContent.app.id as string
  await modernCall(url, API_KEY, 'service_env_set', { app_id: appId, name: 'PIPELINE_STEP_MS', value: '3000' })
  const round1 = answerOf(await modernCall(url, API_KEY, 'service_deployments_create', { app_id: appId }, { capabilities: WITH_TASKS, id: 1 }), 1)
  t.equal(round1?.result?.resultType, 'input_required')
  const handle = answerOf(await modernCall(url, API_KEY, 'service_deployments_create', { app_id: appId }, {
    capabilities: WITH_TASKS, id: 2, extra: { requestState: round1.result.requestState, inputResponses: { confirm: confirmAnswer() } },
  }), 2)?.result
  t.equal(handle?.resultType, 'task', 'the confirmed call is a task')
  const taskId = handle.taskId as string

  const live = await modernLive(url, API_KEY, 'subscriptions/listen', { notifications: { taskIds: [taskId] } }, { capabilities: WITH_TASKS, id: 'tasks' })
  t.teardown(() => live.close())
  await live.waitFor(() => messagesOf(live).length >= 1, 3000, 'the acknowledgement')
  const running = await until(async () => {
    const page = answerOf(await modernCall(url, API_KEY, 'service_deployments_list', { app_id: appId }))
    const d = page?.result?.structuredContent?.deployments?.[0]
    return d?.status === 'running' ? d : undefined
  }, 10_000, 'the deployment running')

  instance.served.child.kill('SIGTERM')
  await live.ended(ANSWER_BOUND_MS)
  t.ok(live.endedByServer, 'the listen stream is ended by the server')
  const messages = messagesOf(live)
  const note = messages.find((m) => m.method === 'notifications/tasks' && m.params.taskId === taskId && m.params.status === 'completed')
  t.ok(note, 'notifications/tasks says the task completed, before the stream ends')
  interruptedAnswer(t, note?.params.result, running.id, 'tasked')
  t.ok(messages.some((m) => m.id === 'tasks' && m.result), 'the listen gets its result last')
  t.strictSame(await exitWithin(instance.served, EXIT_BOUND_MS), { code: 0, signal: null }, 'exit code 0')

  const again = await instance.restart()
  const got = await modernPost(again.url, API_KEY, 'tasks/get', { taskId }, { capabilities: WITH_TASKS })
  t.equal(got.json?.result?.status, 'completed', 'tasks/get after the restart: completed')
  interruptedAnswer(t, got.json?.result?.result, running.id, 'tasked')
  const dep = answerOf(await modernCall(again.url, API_KEY, 'service_deployments_get', { deployment_id: running.id }))
  t.equal(dep?.result?.structuredContent?.deployment?.status, 'interrupted')
})

t.test('in process: calls of an embedder\'s tool still running at the stop are answered SERVICE_UNAVAILABLE in both eras', async (t) => {
  const forever = new Promise<never>(() => {})
  // Ignores its signal: the transport answers for it.
  const stuck = defineTool<Record<string, never>, { done: boolean }>({
    name: 'test_stuck', title: 'Stuck', description: 'Never returns.', inputSchema: { type: 'object' },
    scope: 'mcp:read', role: 'viewer', longRunning: true, handler: () => forever,
  })
  // Heeds its signal: a client that takes only JSON gets its answer when the handler returns.
  const heeding = defineTool<Record<string, never>, { done: boolean }>({
    name: 'test_heeding', title: 'Heeding', description: 'Returns when aborted.', inputSchema: { type: 'object' },
    scope: 'mcp:read', role: 'viewer',
    handler: (_args, ctx) => new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason), { once: true })),
  })
  const server = await startServer(t, { tools: [...builtinTools, stuck, heeding] })
  const { headers } = await openSession(server.mcpUrl, server.apiKey)
  const legacySse = await openLive(server.mcpUrl, { method: 'POST', headers: { ...headers, 'content-type': 'application/json', accept: ACCEPT_BOTH }, body: JSON.stringify(callTool('test_stuck', {}, 's-1')) })
  t.teardown(() => legacySse.close())
  const legacyJson = post(server.mcpUrl, callTool('test_heeding', {}, 'j-1'), { ...headers, accept: 'application/json' })
  const modern = modernLive(server.mcpUrl, server.apiKey, 'tools/call', { name: 'test_stuck', arguments: {} }, { id: 'm-1' })
  await sleep(100) // all three are running

  await server.close()
  await legacySse.ended(2000)
  const sse = messagesOf(legacySse).find((m) => m.id === 's-1')
  t.equal(sse?.error?.code, -32000, 'the session call stream carries the error answer')
  t.equal(sse?.error?.data?.code, 'SERVICE_UNAVAILABLE')
  t.equal(sse?.error?.message, 'The server is shutting down and stopped this tools/call test_stuck before it finished; call again once it is back')
  t.ok(legacySse.endedByServer, 'then the stream ends')

  const json = await legacyJson
  t.equal(json.status, 200)
  t.equal(json.json?.id, 'j-1', 'a JSON-only client gets its answer as JSON')
  t.equal(json.json?.error?.data?.code, 'SERVICE_UNAVAILABLE')

  const m = await modern
  const body = await m.ended(2000)
  const answer = JSON.parse(body)
  t.equal(answer.id, 'm-1', 'the stateless request is answered (JSON)')
  t.equal(answer.error?.code, -31000, 'the application error code of 2026-07-28')
  t.equal(answer.error?.data?.code, 'SERVICE_UNAVAILABLE')
})

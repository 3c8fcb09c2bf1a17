import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import t, { type Test } from 'tap'
import { request } from 'undici'
import { builtinTools } from '../../src/index.js'
import { deploymentTools } from '../../src/plugins/tools/builtin/deployments.js'
import type { ToolDefinition } from '../../src/plugins/tools/define.js'
import { SecretBox } from '../../src/lib/secret-box.js'
import type { RequestId } from '../../src/rpc/types.js'
import { processGone } from '../helpers/cli.js'
import { answerAccepted, decision, elicitingSession, openLiveCall, readToEnd } from '../helpers/confirm.js'
import { callToEnd, toolError } from '../helpers/tools.js'
import { callTool, openSession, post } from '../helpers/mcp.js'
import { createMember, defaultOrganization } from '../helpers/seed.js'
import { startServer, tempDatabase, type TestServer } from '../helpers/server.js'
import { messagesOf, until, type LiveStream } from '../helpers/stream.js'
import { ROOT } from '../helpers/root.js'

// Set before any server starts: a pipeline must not see the server's environment. Taken away at the end, for the
// files that run after this one in the same process (scripts/run-tests.ts).
process.env.SERVICE_SECRET_TEST = 'server-only-secret'
t.teardown(() => void delete process.env.SERVICE_SECRET_TEST)

const ENV_KEY = randomBytes(32).toString('base64')
const BOX = new SecretBox(Buffer.from(ENV_KEY, 'base64'))
const EXAMPLE = join(ROOT, 'scripts', 'pipelines', 'example.mjs')
const node = (code: string) => ({ argv: [process.execPath, '-e', code] })
const PIPELINES = {
  default: { argv: [process.execPath, EXAMPLE] },
  failing: node("console.log('building'); console.error('boom'); process.exit(3)"),
  env: node("console.log('greeting=' + process.env.GREETING); console.log('secret=' + (process.env.SERVICE_SECRET_TEST ?? 'unset')); console.log('keys=' + Object.keys(process.env).sort().join(',')); console.log('node_options=' + (process.env.NODE_OPTIONS ?? ''))"),
  sleeper: node("console.log('pid=' + process.pid); setInterval(() => {}, 1000)"),
  stubborn: node("process.on('SIGTERM', () => console.log('ignoring SIGTERM')); console.log('pid=' + process.pid); setInterval(() => {}, 1000)"),
}
// Long enough that "it answers at once" and "still running" hold on a loaded machine: with 200 ms, CI's cancel answer
// came after the grace period. Only a pipeline that ignores SIGTERM waits it out.
const GRACE_MS = 2000
const DEP_ID = /dep_[0-9a-z]{26}/

/** Built-in tools plus the deployment tools, once each (still right when the built-ins include them). */
function catalog(): ToolDefinition<any, any>[] {
  const byName = new Map<string, ToolDefinition<any, any>>()
  for (const tool of [...builtinTools, ...deploymentTools]) if (!byName.has(tool.name)) byName.set(tool.name, tool)
  return [...byName.values()]
}

async function start(t: Test, dbPath?: string): Promise<TestServer> {
  return startServer(t, {
    tools: catalog(),
    ...(dbPath ? { dbPath } : {}),
    config: { envKey: ENV_KEY, pipelines: PIPELINES, pipelineGraceMs: GRACE_MS, heartbeatMs: 60_000 },
  })
}

async function seedApp(server: TestServer, name: string, options: { pipeline?: string; env?: Record<string, string>; organizationId?: string } = {}) {
  const repos = server.app.repos
  const organizationId = options.organizationId ?? (await defaultOrganization(server)).id
  const app = await repos.apps.create({ organizationId, name, pipeline: options.pipeline ?? 'default' })
  for (const [k, v] of Object.entries(options.env ?? {})) {
    await repos.envVars.set({ organizationId, appId: app.id, name: k, ciphertext: BOX.seal(v, `${app.id}\u0000${k}`), userId: null })
  }
  return app
}

function deploymentLogs(messages: any[]): Array<{ level: string; data: any }> {
  return messages.filter((m) => m.method === 'notifications/message' && m.params.logger === 'deployment').map((m) => m.params)
}

async function openCall(t: Test, server: TestServer, headers: Record<string, string>, name: string, args: Record<string, unknown>, id: RequestId, progressToken?: RequestId): Promise<LiveStream> {
  const message = callTool(name, args, id)
  const live = await openLiveCall(t, server.mcpUrl, headers, progressToken === undefined ? message : { ...message, params: { ...message.params, _meta: { progressToken } } })
  t.equal(live.status, 200)
  t.equal(live.headers['content-type'], 'text/event-stream', 'a long-running call is answered as SSE')
  return live
}

/** Reads the elicitation/create request off the call's stream and answers it; returns the request. */
function answer(t: Test, server: TestServer, headers: Record<string, string>, live: LiveStream, action: 'accept' | 'decline' = 'accept', confirm = true): Promise<any> {
  return answerAccepted(t, server.mcpUrl, headers, live, decision(action, confirm))
}

async function waitForLine(live: LiveStream, match: (line: string) => boolean, what: string): Promise<any> {
  await live.waitFor(() => deploymentLogs(messagesOf(live)).some((l) => match(l.data.line)), 5000, what)
  return deploymentLogs(messagesOf(live)).find((l) => match(l.data.line))!.data
}

/** A confirmed call from start to end: the elicitation, every message, and the response. */
async function confirmedCall(t: Test, server: TestServer, headers: Record<string, string>, name: string, args: Record<string, unknown>, id: RequestId, progressToken?: RequestId) {
  const live = await openCall(t, server, headers, name, args, id, progressToken)
  const elicitation = await answer(t, server, headers, live)
  const { messages, responses: [response] } = await readToEnd(live, id, 10_000)
  t.ok(live.endedByServer, 'the server ends the stream after the response')
  t.ok(response, 'the call is answered')
  t.equal(messages.at(-1), response, 'the response is the last message of the stream')
  return { elicitation, messages, result: response?.result, logs: deploymentLogs(messages) }
}

let rpcId = 10_000
/** A call read to its end (JSON, or SSE for tools that prefer a stream); returns the tool result and every message. */
function call(server: TestServer, headers: Record<string, string>, name: string, args: Record<string, unknown> = {}) {
  return callToEnd(server.mcpUrl, headers, name, args, rpcId++)
}

function payload(result: any): any {
  if (result.isError) throw new Error(`unexpected tool error: ${result.content[0].text}`)
  return result.structuredContent
}

const pidOf = (line: string) => Number(/^pid=(\d+)$/.exec(line)![1])

t.test('a deployment streams every line, ends succeeded, and reads back the same', async (t) => {
  const server = await start(t)
  const app = await seedApp(server, 'web', { env: { PIPELINE_STEP_MS: '5' } })
  const { headers } = await elicitingSession(server)

  const { elicitation, messages, result, logs } = await confirmedCall(t, server, headers, 'service_deployments_create', { app_id: app.id }, 'deploy-1', 'tok-1')
  t.equal(elicitation.params.mode, 'form')
  t.equal(elicitation.params.message, `Deploy app web (${app.id}) with pipeline default?`, 'the message names the exact effect')
  t.equal(elicitation.params.requestedSchema.properties.confirm.type, 'boolean')

  t.equal(result.isError, false)
  const dep = payload(result).deployment
  t.strictSame(JSON.parse(result.content[0].text), payload(result), 'text and structuredContent agree')
  t.match(dep, { app_id: app.id, kind: 'deploy', rollback_of: null, pipeline: 'default', status: 'succeeded', exit_code: 0 })
  t.match(dep.id, DEP_ID)
  for (const k of ['created_at', 'started_at', 'finished_at']) t.match(dep[k], /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, `${k} is ISO`)
  t.match(dep.outcome, /^succeeded/)

  // Every line as notifications/message (logger deployment), in order, then the result.
  t.ok(logs.length >= 10, `all lines arrived (${logs.length})`)
  t.strictSame(logs.map((l) => l.data.seq), logs.map((_, i) => i), 'seq 0, 1, 2, … without a gap')
  t.ok(logs.every((l) => l.level === 'info' && l.data.deployment_id === dep.id), 'level info, naming the deployment')
  const lines = logs.map((l) => l.data.line)
  t.equal(lines[0], 'started deploy of web with pipeline default')
  t.equal(logs[0]!.data.stream, 'system')
  t.ok(lines.includes(`Deploying web (${dep.id})`), 'the pipeline saw its deployment id')
  t.ok(lines.includes('[7/7] Checking health'))
  t.ok(lines.includes('web is live'))
  t.match(lines.at(-1), /^succeeded: /, 'the last line is the outcome')

  // Progress: one per line, strictly increasing, with the line as message.
  const progress = messages.filter((m) => m.method === 'notifications/progress').map((m) => m.params)
  t.equal(progress.length, logs.length, 'one progress notification per line')
  t.ok(progress.every((p) => p.progressToken === 'tok-1'), 'with the call\'s token')
  t.ok(progress.every((p, i) => i === 0 || p.progress > progress[i - 1].progress), 'progress strictly increases')
  t.strictSame(progress.map((p) => p.message), lines)

  // service_deployments_logs returns the same lines, page by page.
  const paged: any[] = []
  let cursor: string | null = null
  let pages = 0
  do {
    const data = payload((await call(server, headers, 'service_deployments_logs', { deployment_id: dep.id, limit: 4, ...(cursor ? { cursor } : {}) })).result)
    t.ok(data.lines.length <= 4)
    paged.push(...data.lines)
    cursor = data.next_cursor
    pages++
  } while (cursor !== null && pages < 20)
  t.equal(cursor, null, 'the last page has next_cursor null')
  t.equal(pages, Math.ceil(logs.length / 4))
  t.strictSame(paged.map(({ seq, stream, line }) => ({ seq, stream, line })), logs.map(({ data }) => ({ seq: data.seq, stream: data.stream, line: data.line })))
  t.ok(paged.every((l) => /Z$/.test(l.at)))
  const all = payload((await call(server, headers, 'service_deployments_logs', { deployment_id: dep.id })).result)
  t.strictSame(all.lines, paged, 'one page of 100 holds them all')
  t.equal(all.next_cursor, null)
  const bad = toolError((await call(server, headers, 'service_deployments_logs', { deployment_id: dep.id, cursor: 'bm9wZQ' })).result)
  t.equal(bad.code, 'INVALID_ARGUMENTS', 'a foreign cursor is refused')

  // service_deployments_get: the same deployment and its last lines.
  const got = payload((await call(server, headers, 'service_deployments_get', { deployment_id: dep.id })).result)
  t.strictSame(got.deployment, dep)
  t.strictSame(got.last_lines, paged.slice(-20))

  // service_deployments_list, with and without app_id.
  const listed = payload((await call(server, headers, 'service_deployments_list')).result)
  t.strictSame(listed, { deployments: [dep], total: 1, next_offset: null })
  t.strictSame(payload((await call(server, headers, 'service_deployments_list', { app_id: app.id })).result), listed)

  // The audit log has the confirmation and the deployment.
  const audit = (await server.app.repos.audit.page((await defaultOrganization(server)).id, 20)).items
  t.ok(audit.some((a) => a.action === 'service_deployments_create.confirmation' && a.outcome === 'confirmed'))
  t.ok(audit.some((a) => a.action === 'service_deployments_create' && a.outcome === 'succeeded' && a.targetType === 'deployment' && a.targetId === dep.id))
})

t.test('a failing pipeline is OPERATION_FAILED with its output stored; env vars reach the child, the server env does not', async (t) => {
  const server = await start(t)
  const { headers } = await elicitingSession(server)

  const broken = await seedApp(server, 'broken', { pipeline: 'failing' })
  const failed = await confirmedCall(t, server, headers, 'service_deployments_create', { app_id: broken.id }, 'fail-1')
  const err = toolError(failed.result)
  t.equal(err.code, 'OPERATION_FAILED')
  t.match(err.message, /^Deployment dep_[0-9a-z]{26} of app broken failed: the pipeline exited with code 3/)
  const depId = DEP_ID.exec(err.message)![0]
  t.ok(failed.logs.some((l) => l.data.stream === 'stderr' && l.data.line === 'boom'), 'the stderr line was streamed')
  const got = payload((await call(server, headers, 'service_deployments_get', { deployment_id: depId })).result)
  t.match(got.deployment, { id: depId, status: 'failed', exit_code: 3, outcome: 'failed: the pipeline exited with code 3' })
  t.ok(got.last_lines.some((l: any) => l.stream === 'stdout' && l.line === 'building'))
  t.ok(got.last_lines.some((l: any) => l.stream === 'stderr' && l.line === 'boom'), 'the stderr line is stored')
  const audit = (await server.app.repos.audit.page((await defaultOrganization(server)).id, 20)).items
  t.ok(audit.some((a) => a.action === 'service_deployments_create' && a.outcome === 'failed'), 'the failure is audited')

  const envy = await seedApp(server, 'envy', { pipeline: 'env', env: { GREETING: 'hello from the vault' } })
  const ok = await confirmedCall(t, server, headers, 'service_deployments_create', { app_id: envy.id }, 'env-1')
  t.equal(payload(ok.result).deployment.status, 'succeeded')
  const lines = ok.logs.map((l) => l.data.line)
  t.ok(lines.includes('greeting=hello from the vault'), 'the app env var reached the child, decrypted')
  t.ok(lines.includes('secret=unset'), 'the server\'s own environment did not')
  const keys = lines.find((l) => l.startsWith('keys='))!.slice(5).split(',')
  const allowed = ['PATH', 'HOME', 'LANG', 'LC_ALL', 'TZ', 'TMPDIR', 'SYSTEMROOT', 'GREETING', 'SERVICE_APP_ID', 'SERVICE_APP_NAME', 'SERVICE_DEPLOYMENT_ID', 'SERVICE_DEPLOYMENT_KIND', 'SERVICE_ANSWER_FD']
  // Under tap, @tapjs/processinfo wraps child_process.spawn and adds its own variables (and NODE_OPTIONS loading it).
  const tapOwn = (k: string) => k.startsWith('_TAPJS_PROCESSINFO_') || (k === 'NODE_OPTIONS' && /@tapjs[\\/]processinfo/.test(lines.find((l) => l.startsWith('node_options='))!))
  t.strictSame(keys.filter((k: string) => !allowed.includes(k) && !tapOwn(k)), [], 'nothing but the allowed variables')
  t.ok(keys.includes('SERVICE_DEPLOYMENT_ID'))
})

t.test('notifications/cancelled for the call kills the pipeline and no result is sent', async (t) => {
  const server = await start(t)
  const app = await seedApp(server, 'sleepy', { pipeline: 'sleeper' })
  const { headers } = await elicitingSession(server)

  const live = await openCall(t, server, headers, 'service_deployments_create', { app_id: app.id }, 'c-1', 'c-tok')
  await answer(t, server, headers, live)
  const first = await waitForLine(live, (l) => l.startsWith('pid='), 'the pid line')
  const pid = pidOf(first.line)
  t.notOk(processGone(pid), 'the pipeline runs')

  const cancel = await post(server.mcpUrl, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'c-1', reason: 'user gave up' } }, headers)
  t.equal(cancel.status, 202)
  await live.ended(3000)
  t.ok(live.endedByServer, 'the call\'s stream ends')
  const messages = messagesOf(live)
  t.strictSame(messages.filter((m) => 'result' in m || 'error' in m), [], 'no response for the cancelled call')
  t.notOk(deploymentLogs(messages).some((l) => /^cancelled/.test(l.data.line)), 'nothing is sent about the call after its cancellation')

  const row = await until(async () => {
    const d = await server.app.repos.deployments.byId((await defaultOrganization(server)).id, first.deployment_id)
    return d?.status === 'cancelled' ? d : undefined
  }, 3000, 'the cancelled status')
  t.equal(row.outcome, 'cancelled: cancelled by the client')
  t.ok(processGone(pid), 'the child process is gone (ESRCH)')
  const audit = (await server.app.repos.audit.page((await defaultOrganization(server)).id, 20)).items
  t.ok(audit.some((a) => a.action === 'service_deployments_create' && a.outcome === 'cancelled' && a.targetId === row.id), 'the cancellation is audited')

  const again = toolError((await call(server, headers, 'service_deployments_cancel', { deployment_id: row.id })).result)
  t.equal(again.code, 'CONFLICT', 'a finished deployment cannot be cancelled')
  t.match(again.message, /is cancelled/)
})

t.test('service_deployments_cancel from another session; a SIGTERM-ignoring pipeline is SIGKILLed after the grace period', async (t) => {
  const server = await start(t)
  const app = await seedApp(server, 'stubborn', { pipeline: 'stubborn' })
  const a = await elicitingSession(server)
  const b = await openSession(server.mcpUrl, server.apiKey)

  const live = await openCall(t, server, a.headers, 'service_deployments_create', { app_id: app.id }, 's-1')
  await answer(t, server, a.headers, live)
  const first = await waitForLine(live, (l) => l.startsWith('pid='), 'the pid line')
  const pid = pidOf(first.line)

  const started = Date.now()
  const res = payload((await call(server, b.headers, 'service_deployments_cancel', { deployment_id: first.deployment_id })).result)
  t.strictSame(res, { deployment_id: first.deployment_id, status: 'cancelling' }, 'it answers at once')
  t.ok(Date.now() - started < GRACE_MS, 'without waiting for the run to end')
  t.equal((await server.app.repos.deployments.byId((await defaultOrganization(server)).id, first.deployment_id))?.status, 'running', 'still running: SIGTERM is ignored')

  await live.ended(5000)
  const elapsed = Date.now() - started
  t.ok(elapsed >= GRACE_MS - 20, `SIGKILL came after the grace period (${elapsed} ms)`)
  const response = messagesOf(live).find((m) => m.id === 's-1')
  const err = toolError(response.result)
  t.equal(err.code, 'OPERATION_CANCELLED', 'the deploying client is told its deployment was cancelled')
  t.match(err.message, new RegExp(`^Deployment ${first.deployment_id} of app stubborn was cancelled: cancelled by user usr_`))
  t.ok(deploymentLogs(messagesOf(live)).some((l) => l.data.line === 'ignoring SIGTERM'), 'the pipeline got SIGTERM first')

  const got = payload((await call(server, b.headers, 'service_deployments_get', { deployment_id: first.deployment_id })).result)
  t.match(got.deployment, { status: 'cancelled', exit_code: null })
  t.match(got.deployment.outcome, /^cancelled: cancelled by user usr_\w+ with service_deployments_cancel$/)
  t.ok(got.last_lines.some((l: any) => l.line === 'ignoring SIGTERM'))
  t.ok(processGone(pid), 'the child process is gone (ESRCH)')
})

t.test('a declined confirmation runs nothing', async (t) => {
  const server = await start(t)
  const app = await seedApp(server, 'nope')
  const { headers } = await elicitingSession(server)

  for (const [id, action, confirm] of [['d-1', 'decline', true], ['d-2', 'accept', false]] as const) {
    const live = await openCall(t, server, headers, 'service_deployments_create', { app_id: app.id }, id)
    await answer(t, server, headers, live, action, confirm)
    await live.ended(3000)
    const response = messagesOf(live).find((m) => m.id === id)
    t.equal(toolError(response.result).code, 'ELICITATION_DENIED', `${action} confirm=${confirm}`)
    t.strictSame(deploymentLogs(messagesOf(live)), [], 'no output')
  }
  t.equal((await server.app.repos.deployments.list((await defaultOrganization(server)).id, { limit: 10, offset: 0 })).total, 0, 'no deployment row')

  // Without the elicitation capability nothing is asked and nothing runs either.
  const plain = await openSession(server.mcpUrl, server.apiKey)
  t.equal(toolError((await call(server, plain.headers, 'service_deployments_create', { app_id: app.id })).result).code, 'CAPABILITY_REQUIRED')
  t.equal((await server.app.repos.deployments.list((await defaultOrganization(server)).id, { limit: 10, offset: 0 })).total, 0)
})

t.test('a client that disconnects does not stop the run', async (t) => {
  const server = await start(t)
  const app = await seedApp(server, 'web2', { env: { PIPELINE_STEP_MS: '60' } })
  const { headers } = await elicitingSession(server)

  const live = await openCall(t, server, headers, 'service_deployments_create', { app_id: app.id }, 'gone-1')
  await answer(t, server, headers, live)
  const first = await waitForLine(live, (l) => l.startsWith('[1/7]'), 'the first step')
  live.close() // aborts the HTTP exchange mid-run

  const org = (await defaultOrganization(server)).id
  t.equal((await server.app.repos.deployments.byId(org, first.deployment_id))?.status, 'running')
  const row = await until(async () => {
    const d = await server.app.repos.deployments.byId(org, first.deployment_id)
    return d && d.status !== 'running' ? d : undefined
  }, 5000, 'the end of the run')
  t.equal(row.status, 'succeeded', 'the run finished')
  const logs = payload((await call(server, headers, 'service_deployments_logs', { deployment_id: row.id })).result)
  t.ok(logs.lines.some((l: any) => l.line === 'web2 is live'), 'its whole output is readable afterwards')
  t.match(logs.lines.at(-1).line, /^succeeded/)
  t.equal(logs.next_cursor, null)

  // Ending the session (DELETE) is not a cancellation either.
  const other = await elicitingSession(server)
  const live2 = await openCall(t, server, other.headers, 'service_deployments_create', { app_id: app.id }, 'gone-2')
  await answer(t, server, other.headers, live2)
  const second = await waitForLine(live2, (l) => l.startsWith('[1/7]'), 'the first step')
  const deleted = await request(server.mcpUrl, { method: 'DELETE', headers: other.headers })
  await deleted.body.dump()
  t.equal(deleted.statusCode, 204)
  await live2.ended(2000)
  const row2 = await until(async () => {
    const d = await server.app.repos.deployments.byId(org, second.deployment_id)
    return d && d.status !== 'running' ? d : undefined
  }, 5000, 'the end of the second run')
  t.equal(row2.status, 'succeeded', 'the run outlived its session')
})

t.test('runs in flight are interrupted on shutdown; rows left running are marked interrupted on start', async (t) => {
  const dbPath = tempDatabase(t)
  const first = await start(t, dbPath)
  const org = (await defaultOrganization(first)).id
  const app = await seedApp(first, 'live', { pipeline: 'sleeper' })
  const staleApp = await seedApp(first, 'stale')
  const stale = await first.app.repos.deployments.create({ organizationId: org, appId: staleApp.id, kind: 'deploy', pipeline: 'default', createdBy: null })
  await first.app.repos.deployments.markRunning(stale.id, Date.now())

  const { headers } = await elicitingSession(first)
  const live = await openCall(t, first, headers, 'service_deployments_create', { app_id: app.id }, 'r-1')
  await answer(t, first, headers, live)
  const line = await waitForLine(live, (l) => l.startsWith('pid='), 'the pid line')
  const pid = pidOf(line.line)

  await first.close()
  t.ok(processGone(pid), 'the pipeline was stopped with the server')
  await live.ended(2000)
  const cut = messagesOf(live).filter((m) => m.id === 'r-1')
  t.equal(cut.length, 1, 'the call cut by the shutdown is answered before its stream ends')
  t.match(JSON.parse(cut[0]?.result?.content?.[0]?.text ?? '{}').message, /was interrupted: the server stopped while it ran/)

  const db = new Database(dbPath, { readonly: true })
  const status = (id: string) => (db.prepare('select status from deployments where id = ?').get(id) as { status: string }).status
  t.equal(status(line.deployment_id), 'interrupted', 'the run in flight was recorded interrupted by the shutdown')
  t.equal(status(stale.id), 'running', 'a row this process did not run is left alone')
  db.close()

  const second = await start(t, dbPath)
  const { headers: h2 } = await openSession(second.mcpUrl, second.apiKey)
  const staleNow = payload((await call(second, h2, 'service_deployments_get', { deployment_id: stale.id })).result).deployment
  t.match(staleNow, { status: 'interrupted', outcome: 'interrupted: the server stopped while it ran' })
  t.type(staleNow.finished_at, 'string')
  const stopped = payload((await call(second, h2, 'service_deployments_get', { deployment_id: line.deployment_id })).result)
  t.equal(stopped.deployment.status, 'interrupted')
  t.equal(stopped.last_lines.at(-1).line, 'interrupted: the server stopped while it ran', 'the shutdown wrote the last line')

  // The app can be deployed again.
  const { headers: h3 } = await elicitingSession(second)
  const again = await seedApp(second, 'after-restart', { env: { PIPELINE_STEP_MS: '1' } })
  t.equal(payload((await confirmedCall(t, second, h3, 'service_deployments_create', { app_id: again.id }, 'r-2')).result).deployment.status, 'succeeded')
})

t.test('ids of another organization are not found; conflicts and roles', async (t) => {
  const server = await start(t)
  const repos = server.app.repos
  const org = (await defaultOrganization(server)).id
  const other = await repos.organizations.create({ slug: 'other', name: 'Other' })
  const theirApp = await seedApp(server, 'theirs', { organizationId: other.id })
  const theirDep = await repos.deployments.create({ organizationId: other.id, appId: theirApp.id, kind: 'deploy', pipeline: 'default', createdBy: null })
  await repos.deployments.markRunning(theirDep.id, Date.now())
  await repos.deployments.finish(theirDep.id, 'succeeded', Date.now(), 0, 'succeeded: the pipeline exited with code 0')
  const mine = await seedApp(server, 'mine')
  const { headers } = await elicitingSession(server)
  const absentDep = 'dep_' + '0'.repeat(26)
  const absentApp = 'app_' + '0'.repeat(26)

  const notFound = async (name: string, args: Record<string, unknown>, absent: Record<string, unknown>) => {
    const { result, messages } = await call(server, headers, name, args)
    const err = toolError(result)
    t.equal(err.code, 'RESOURCE_NOT_FOUND', `${name} ${JSON.stringify(args)}`)
    t.strictSame(err, toolError((await call(server, headers, name, absent)).result), `${name}: the same answer as for an absent id`)
    t.notOk(messages.some((m) => m.method === 'elicitation/create'), `${name}: nobody is asked`)
  }
  await notFound('service_deployments_get', { deployment_id: theirDep.id }, { deployment_id: absentDep })
  await notFound('service_deployments_logs', { deployment_id: theirDep.id }, { deployment_id: absentDep })
  await notFound('service_deployments_cancel', { deployment_id: theirDep.id }, { deployment_id: absentDep })
  await notFound('service_deployments_list', { app_id: theirApp.id }, { app_id: absentApp })
  await notFound('service_deployments_create', { app_id: theirApp.id }, { app_id: absentApp })
  await notFound('service_deployments_rollback', { app_id: theirApp.id }, { app_id: absentApp })
  await notFound('service_deployments_rollback', { app_id: mine.id, to_deployment_id: theirDep.id }, { app_id: mine.id, to_deployment_id: absentDep })
  t.strictSame(payload((await call(server, headers, 'service_deployments_list')).result), { deployments: [], total: 0, next_offset: null }, 'the list shows only the organization\'s deployments')
  t.equal((await repos.deployments.list(other.id, { limit: 10, offset: 0 })).total, 1, 'nothing was started for the other organization')

  // A run already active: CONFLICT before anyone is asked.
  const active = await repos.deployments.create({ organizationId: org, appId: mine.id, kind: 'deploy', pipeline: 'default', createdBy: null })
  const busy = await call(server, headers, 'service_deployments_create', { app_id: mine.id })
  t.equal(toolError(busy.result).code, 'CONFLICT')
  t.match(toolError(busy.result).message, active.id)
  t.notOk(busy.messages.some((m) => m.method === 'elicitation/create'), 'nobody is asked')
  await repos.deployments.finish(active.id, 'failed', Date.now(), 1, 'failed: the pipeline exited with code 1')

  // Roles: a developer deploys and cancels but does not roll back; a viewer only reads.
  const dev = await createMember(server, { role: 'developer' })
  const viewer = await createMember(server, { role: 'viewer' })
  const devSession = await openSession(server.mcpUrl, dev.key)
  const viewerSession = await openSession(server.mcpUrl, viewer.key)
  const names = async (h: Record<string, string>) => {
    const r = await post(server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }, h)
    return (r.json.result.tools as any[]).map((x) => x.name).filter((n: string) => n.startsWith('service_deployments_'))
  }
  t.strictSame(await names(devSession.headers), ['service_deployments_list', 'service_deployments_get', 'service_deployments_logs', 'service_deployments_create', 'service_deployments_cancel'])
  t.strictSame(await names(viewerSession.headers), ['service_deployments_list', 'service_deployments_get', 'service_deployments_logs'])
  t.equal(toolError((await call(server, devSession.headers, 'service_deployments_rollback', { app_id: mine.id })).result).code, 'PERMISSION_DENIED')
  t.equal(toolError((await call(server, viewerSession.headers, 'service_deployments_cancel', { deployment_id: active.id })).result).code, 'PERMISSION_DENIED')
  const annotations = (await post(server.mcpUrl, { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} }, headers)).json.result.tools
    .find((x: any) => x.name === 'service_deployments_rollback').annotations
  t.equal(annotations.destructiveHint, true, 'rollback is marked destructive')
})

t.test('rollback to the deploy before the current one', async (t) => {
  const server = await start(t)
  const repos = server.app.repos
  const org = (await defaultOrganization(server)).id
  const app = await seedApp(server, 'rb', { env: { PIPELINE_STEP_MS: '1' } })
  const sibling = await seedApp(server, 'sibling')
  const { headers } = await elicitingSession(server)

  const nothing = await call(server, headers, 'service_deployments_rollback', { app_id: app.id })
  t.strictSame(toolError(nothing.result), { code: 'CONFLICT', message: 'Nothing to roll back to: app rb has no succeeded deploy' })
  t.notOk(nothing.messages.some((m) => m.method === 'elicitation/create'), 'nobody is asked')

  const d1 = payload((await confirmedCall(t, server, headers, 'service_deployments_create', { app_id: app.id }, 'rb-d1')).result).deployment
  const onlyOne = toolError((await call(server, headers, 'service_deployments_rollback', { app_id: app.id })).result)
  t.equal(onlyOne.code, 'CONFLICT', 'the only succeeded deploy is the one running')
  t.equal(onlyOne.message, `Nothing to roll back to: app rb runs ${d1.id} and no deploy before it succeeded`)
  const d2 = payload((await confirmedCall(t, server, headers, 'service_deployments_create', { app_id: app.id }, 'rb-d2')).result).deployment

  const rb = await confirmedCall(t, server, headers, 'service_deployments_rollback', { app_id: app.id }, 'rb-1', 'rb-tok')
  t.equal(rb.elicitation.params.message, `Roll back app rb (${app.id}) to deployment ${d1.id} of ${d1.created_at}?`)
  const r1 = payload(rb.result).deployment
  t.match(r1, { app_id: app.id, kind: 'rollback', rollback_of: d1.id, status: 'succeeded', exit_code: 0 })
  t.ok(rb.logs.some((l) => l.data.line === `[1/4] Fetching the artifact of ${d1.id}`), 'the pipeline was told what to put back')
  t.ok(rb.messages.filter((m) => m.method === 'notifications/progress').length === rb.logs.length, 'a rollback streams progress too')
  t.ok((await repos.audit.page(org, 50)).items.some((a) => a.action === 'service_deployments_rollback' && a.outcome === 'succeeded' && a.targetId === r1.id))

  // d1 runs again; nothing succeeded before it, but an explicit target still works.
  t.equal(toolError((await call(server, headers, 'service_deployments_rollback', { app_id: app.id })).result).code, 'CONFLICT')
  const r2 = payload((await confirmedCall(t, server, headers, 'service_deployments_rollback', { app_id: app.id, to_deployment_id: d2.id }, 'rb-2')).result).deployment
  t.match(r2, { kind: 'rollback', rollback_of: d2.id, status: 'succeeded' })

  // Only a succeeded deploy of this app is a target.
  const failed = await repos.deployments.create({ organizationId: org, appId: app.id, kind: 'deploy', pipeline: 'default', createdBy: null })
  await repos.deployments.finish(failed.id, 'failed', Date.now(), 1, 'failed: the pipeline exited with code 1')
  t.equal(toolError((await call(server, headers, 'service_deployments_rollback', { app_id: app.id, to_deployment_id: failed.id })).result).code, 'CONFLICT')
  t.equal(toolError((await call(server, headers, 'service_deployments_rollback', { app_id: app.id, to_deployment_id: r1.id })).result).code, 'CONFLICT', 'not a rollback')
  t.equal(toolError((await call(server, headers, 'service_deployments_rollback', { app_id: sibling.id, to_deployment_id: d1.id })).result).code, 'INVALID_ARGUMENTS', 'not another app\'s')

  // Newest first with offset paging.
  const ids = [failed.id, r2.id, r1.id, d2.id, d1.id]
  const page1 = payload((await call(server, headers, 'service_deployments_list', { app_id: app.id, limit: 2 })).result)
  t.strictSame(page1.deployments.map((d: any) => d.id), ids.slice(0, 2))
  t.equal(page1.total, 5)
  t.equal(page1.next_offset, 2)
  const page3 = payload((await call(server, headers, 'service_deployments_list', { app_id: app.id, limit: 2, offset: 4 })).result)
  t.strictSame(page3.deployments.map((d: any) => d.id), ids.slice(4))
  t.equal(page3.next_offset, null)
  t.equal(payload((await call(server, headers, 'service_deployments_list', { app_id: sibling.id })).result).total, 0)

  // A cursor of one deployment's logs is refused on another.
  const c = payload((await call(server, headers, 'service_deployments_logs', { deployment_id: d1.id, limit: 1 })).result).next_cursor
  t.type(c, 'string')
  t.equal(toolError((await call(server, headers, 'service_deployments_logs', { deployment_id: d2.id, cursor: c })).result).code, 'INVALID_ARGUMENTS')
})

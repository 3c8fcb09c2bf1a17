/**
 * The tasks extension (io.modelcontextprotocol/tasks) on 2026-07-28 requests: a client declaring it gets a confirmed
 * deployment as a task handle (stored before the reply), follows it with tasks/get, stops it with tasks/cancel; only
 * its owner sees it; the methods need the extension and Mcp-Name; tasks a stopped server left working complete as
 * interrupted at the next start; expired tasks are gone.
 */
import t, { type Test } from 'tap'
import type { TestServer } from '../helpers/server.js'
import { tempDatabase } from '../helpers/server.js'
import { createKey, createMember, defaultOrganization, ownerMembership } from '../helpers/seed.js'
import { TASK_SWEEP_MS } from '../../src/plugins/tasks/index.js'
import { ManualClock } from '../helpers/clock.js'
import { until } from '../helpers/stream.js'
import { ELICITING, LOG_LEVEL_KEY, modernCall, modernPost, TASKS_EXTENSION, WITH_TASKS, type ModernOptions } from '../helpers/modern.js'
import { answered, ask, deploymentCount, deploymentRow, failureText, poll, seedApp, serveModern } from '../helpers/modern-runs.js'
import type { RpcReply } from '../helpers/mcp.js'

const TTL_MS = 60_000
const POLL_MS = 250
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/
const REQUIRES_TASKS = { extensions: { [TASKS_EXTENSION]: {} } }

function serve(t: Test, config: Record<string, unknown> = {}, dbPath?: string, clock?: ManualClock) {
  return serveModern(t, { taskTtlMs: TTL_MS, taskPollIntervalMs: POLL_MS, ...config }, dbPath, clock)
}

let ids = 0

/** Both rounds of a deployment as a task; returns the handle reply and the accepted state. */
async function startTask(t: Test, server: TestServer, appId: string, key = server.apiKey, options: ModernOptions = {}) {
  const args = { app_id: appId }
  const { result: round1, requestState } = await ask(t, server, key, 'service_deployments_create', args, { capabilities: WITH_TASKS })
  t.equal(round1.taskId, undefined, 'round 1 is no task yet')
  const id = `task-${++ids}`
  const reply = await modernCall(server.mcpUrl, key, 'service_deployments_create', args, { capabilities: WITH_TASKS, id, ...options, extra: answered(requestState) })
  t.equal(reply.status, 200, 'the accepted retry is HTTP 200')
  t.equal(reply.json?.result?.resultType, 'task', 'answered with a task handle')
  return { reply, handle: reply.json?.result, requestState, id, args }
}

function taskCall(server: TestServer, method: string, taskId: string, key = server.apiKey, options: ModernOptions = {}, extra: Record<string, unknown> = {}): Promise<RpcReply> {
  return modernPost(server.mcpUrl, key, method, { taskId, ...extra }, { capabilities: WITH_TASKS, id: `${method}-${++ids}`, ...options })
}

/** Polls tasks/get until the status is one of `statuses`; every answer on the way is checked to be a complete result. */
async function waitTask(t: Test, server: TestServer, taskId: string, statuses: string[], key = server.apiKey, ms = 8000): Promise<any> {
  let polls = 0
  let wrongType = 0
  const task = await poll(async () => {
    const reply = await taskCall(server, 'tasks/get', taskId, key)
    polls++
    if (reply.status !== 200 || reply.json?.result?.resultType !== 'complete') wrongType++
    const result = reply.json?.result
    return result && statuses.includes(result.status) ? result : undefined
  }, ms, `task ${taskId} to be ${statuses.join(' or ')}`)
  t.equal(wrongType, 0, `all ${polls} tasks/get answers are HTTP 200 with resultType complete`)
  return task
}

function rpcErrorOf(t: Test, reply: RpcReply, status: number, code: number, dataCode: string, what: string): any {
  t.equal(reply.status, status, `${what}: HTTP ${status}`)
  t.equal(reply.json?.error?.code, code, `${what}: ${code}`)
  t.equal(reply.json?.error?.data?.code, dataCode, `${what}: data.code ${dataCode}`)
  t.equal(reply.headers['mcp-session-id'], undefined)
  return reply.json?.error
}

t.test('server/discover advertises the tasks extension, not a tasks capability', async (t) => {
  const server = await serve(t)
  const reply = await modernPost(server.mcpUrl, server.apiKey, 'server/discover')
  t.equal(reply.status, 200)
  const caps = reply.json.result.capabilities
  t.strictSame(caps.extensions?.[TASKS_EXTENSION], {}, 'extensions["io.modelcontextprotocol/tasks"] is {}')
  t.notOk('tasks' in caps, 'no capabilities.tasks')
})

t.test('a confirmed deployment becomes a task: handle, immediate tasks/get, completion with the tool result', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'web', { PIPELINE_STEP_MS: '60' })
  const before = Date.now()
  // Progress token and log level are ignored: a task sends no notifications.
  const { reply, handle } = await startTask(t, server, app.id, server.apiKey, { meta: { progressToken: 'p', [LOG_LEVEL_KEY]: 'info' } })
  t.match(reply.headers['content-type'], /^application\/json/, 'the handle is a JSON answer (a task streams nothing)')
  t.equal(reply.headers['mcp-session-id'], undefined)
  t.type(handle.taskId, 'string')
  t.ok(handle.taskId.length >= 16, 'a high-entropy id')
  t.equal(handle.status, 'working')
  t.match(handle.createdAt, ISO)
  t.match(handle.lastUpdatedAt, ISO)
  t.ok(Date.parse(handle.createdAt) >= before - 5 && Date.parse(handle.createdAt) <= Date.now() + 5, 'createdAt is now')
  t.ok(Number.isInteger(handle.ttlMs), 'ttlMs is an integer')
  t.equal(handle.ttlMs, TTL_MS, 'ttlMs is config taskTtlMs')
  t.equal(handle.pollIntervalMs, POLL_MS, 'pollIntervalMs is config taskPollIntervalMs')
  for (const k of ['requestState', 'result', 'error', 'task', 'inputRequests', 'ttl', 'pollInterval']) t.notOk(k in handle, `no ${k} key`)

  // Durable before the reply: tasks/get right away.
  const now = await taskCall(server, 'tasks/get', handle.taskId, server.apiKey, { id: 'get-now' })
  t.equal(now.status, 200)
  t.match(now.headers['content-type'], /^application\/json/)
  t.match(now.json.result, { resultType: 'complete', taskId: handle.taskId, status: 'working', createdAt: handle.createdAt, ttlMs: TTL_MS, pollIntervalMs: POLL_MS })
  t.notOk('result' in now.json.result, 'a working task has no result')
  t.equal(now.json.id, 'get-now', 'the id is echoed')

  const done = await waitTask(t, server, handle.taskId, ['completed', 'failed', 'cancelled'])
  t.equal(done.status, 'completed')
  t.equal(done.resultType, 'complete')
  t.equal(done.statusMessage, 'completed')
  t.ok(Date.parse(done.lastUpdatedAt) >= Date.parse(done.createdAt), 'lastUpdatedAt moved on')
  t.notOk('error' in done)
  const result = done.result
  t.equal(result.resultType, 'complete', 'the tool result has resultType complete')
  t.equal(result.isError, false)
  t.match(result.structuredContent.deployment, { app_id: app.id, status: 'succeeded', exit_code: 0 })
  t.strictSame(JSON.parse(result.content[0].text), result.structuredContent)
  t.equal((await deploymentRow(server, result.structuredContent.deployment.id))?.status, 'succeeded')
  t.equal(await deploymentCount(server, app.id), 1)
})

t.test('replaying the accepted state returns the same task handle and starts nothing', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'once', { PIPELINE_STEP_MS: '40' })
  const { handle, requestState, id, args } = await startTask(t, server, app.id)
  const replay = (replayId: string) => modernCall(server.mcpUrl, server.apiKey, 'service_deployments_create', args, { capabilities: WITH_TASKS, id: replayId, extra: answered(requestState) })

  for (const replayId of [id, `${id}-new`]) {
    const again = await replay(replayId)
    t.equal(again.status, 200, `${replayId}: HTTP 200 while the task runs`)
    t.equal(again.json.result.resultType, 'task')
    t.equal(again.json.result.taskId, handle.taskId, `${replayId}: the same task`)
  }
  await waitTask(t, server, handle.taskId, ['completed'])
  const after = await replay(`${id}-after`)
  t.equal(after.json.result.taskId, handle.taskId, 'after completion: the same task handle (stored result)')
  t.equal(after.json.result.resultType, 'task')
  t.equal(after.json.result.status, 'completed', 'the handle shows where the task is now, not where it was')
  t.equal(after.json.result.createdAt, handle.createdAt)
  t.notOk('result' in after.json.result, 'a task handle carries no result: tasks/get does')
  t.equal(await deploymentCount(server, app.id), 1, 'no second deployment')
})

t.test('only long-running calls become tasks, and only for clients declaring the extension', async (t) => {
  const server = await serve(t)
  const whoami = await modernCall(server.mcpUrl, server.apiKey, 'service_whoami', {}, { capabilities: WITH_TASKS })
  t.equal(whoami.status, 200)
  t.equal(whoami.json.result.resultType, 'complete', 'service_whoami answers synchronously')
  t.notOk('taskId' in whoami.json.result)
  t.equal(whoami.json.result.structuredContent.role, 'owner')

  const app = await seedApp(server, 'sync', { PIPELINE_STEP_MS: '1' })
  const args = { app_id: app.id }
  const { requestState } = await ask(t, server, server.apiKey, 'service_deployments_create', args, { capabilities: ELICITING })
  const plain = await modernCall(server.mcpUrl, server.apiKey, 'service_deployments_create', args, { capabilities: ELICITING, id: 'plain', extra: answered(requestState) })
  t.match(plain.headers['content-type'], /^application\/json/)
  t.equal(plain.json.result.resultType, 'complete', 'without the extension: the synchronous result')
  t.notOk('taskId' in plain.json.result)
  t.equal(plain.json.result.structuredContent.deployment.status, 'succeeded')

  const { requestState: s2 } = await ask(t, server, server.apiKey, 'service_deployments_create', args, { capabilities: ELICITING })
  const streamed = await modernCall(server.mcpUrl, server.apiKey, 'service_deployments_create', args, { capabilities: ELICITING, id: 'streamed', meta: { progressToken: 1 }, extra: answered(s2) })
  t.equal(streamed.headers['content-type'], 'text/event-stream')
  const response = streamed.messages.find((m) => m.id === 'streamed')
  t.equal(response.result.resultType, 'complete')
  t.notOk('taskId' in response.result)
  t.ok(streamed.messages.some((m) => m.method === 'notifications/progress'), 'streamed with progress')
})

t.test('tasks/cancel acknowledges, stops the pipeline, and the task ends cancelled', async (t) => {
  const server = await serve(t)
  const org = (await defaultOrganization(server)).id
  const app = await seedApp(server, 'slow', { PIPELINE_STEP_MS: '5000' })
  const { handle } = await startTask(t, server, app.id)
  const running = await poll(async () => {
    const d = await server.app.repos.deployments.active(org, app.id)
    return d?.status === 'running' ? d : undefined
  }, 5000, 'the pipeline to run')
  // Past its first step, the pipeline has its SIGTERM handler in place.
  await poll(async () => (await server.app.repos.deployments.lines(running.id, 100)).items.some((l) => l.line.startsWith('[1/7]')) || undefined, 5000, 'the first step')

  const ack = await taskCall(server, 'tasks/cancel', handle.taskId)
  t.equal(ack.status, 200)
  t.equal(ack.json.result.resultType, 'complete')
  t.strictSame(Object.keys(ack.json.result).sort(), ['_meta', 'resultType'], 'an empty ack: no task fields')

  const row = await poll(async () => {
    const d = await deploymentRow(server, running.id)
    return d?.status === 'cancelled' ? d : undefined
  }, 4000, 'the deployment to be cancelled')
  t.equal(row.outcome, 'cancelled: cancelled by the client', 'the pipeline was stopped')
  const lines = (await server.app.repos.deployments.lines(running.id, 100)).items.map((l) => l.line)
  t.ok(lines.includes('Received SIGTERM: stopping, nothing was switched'), 'the pipeline got SIGTERM')

  const task = await waitTask(t, server, handle.taskId, ['cancelled', 'completed', 'failed'])
  t.equal(task.status, 'cancelled')
  t.equal(task.statusMessage, 'cancelled with tasks/cancel')
  t.notOk('result' in task, 'a cancelled task has no result')

  const again = await taskCall(server, 'tasks/cancel', handle.taskId)
  t.equal(again.status, 200)
  t.strictSame(Object.keys(again.json.result).sort(), ['_meta', 'resultType'], 'cancelling a terminal task is acknowledged again')
  t.equal((await taskCall(server, 'tasks/get', handle.taskId)).json.result.status, 'cancelled', 'and changes nothing')

  const audit = (await server.app.repos.audit.page(org, 20)).items
  const entry = audit.find((a) => a.action === 'service_deployments_create' && a.outcome === 'cancelled')
  t.ok(entry, 'the cancellation is audited')
  t.equal(entry?.targetId, running.id)
  t.match(entry?.details, { by: 'tasks/cancel', app_id: app.id })
})

t.test('a failing pipeline completes the task with an isError result', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'broken', { PIPELINE_STEP_MS: '1', PIPELINE_FAIL_AT: '2' })
  const { handle } = await startTask(t, server, app.id)
  const task = await waitTask(t, server, handle.taskId, ['completed', 'failed', 'cancelled'])
  t.equal(task.status, 'completed', 'completed, not failed (failed is for JSON-RPC errors)')
  t.equal(task.statusMessage, 'completed with a tool error (OPERATION_FAILED)')
  t.notOk('error' in task)
  t.equal(task.result.isError, true)
  t.equal(task.result.resultType, 'complete')
  const err = failureText(task.result)!
  t.equal(err.code, 'OPERATION_FAILED')
  t.match(err.message, /^Deployment dep_[0-9a-z]{26} of app broken failed: the pipeline exited with code 1/)
})

t.test('tasks/* errors: unknown and foreign ids, capability, Mcp-Name, removed methods', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'mine', { PIPELINE_STEP_MS: '1' })
  const { handle } = await startTask(t, server, app.id)
  const taskId = handle.taskId as string

  const unknown = await taskCall(server, 'tasks/get', 'no-such-task-id-0000', server.apiKey, { id: 77 })
  const unknownErr = rpcErrorOf(t, unknown, 200, -32602, 'INVALID_PARAMS', 'unknown id')
  t.equal(unknown.json.id, 77, 'the id is echoed')

  const colleague = await createMember(server, { role: 'admin' })
  const otherOrg = await server.app.repos.organizations.create({ slug: 'elsewhere', name: 'Elsewhere' })
  const stranger = await createMember(server, { role: 'owner', organizationId: otherOrg.id })
  for (const [who, key] of [['a member of the same organization', colleague.key], ['a member of another organization', stranger.key]] as const) {
    for (const method of ['tasks/get', 'tasks/cancel', 'tasks/update']) {
      const reply = await taskCall(server, method, taskId, key, {}, method === 'tasks/update' ? { inputResponses: {} } : {})
      const err = rpcErrorOf(t, reply, 200, -32602, 'INVALID_PARAMS', `${method} by ${who}`)
      t.equal(err?.message, unknownErr.message, `${method} by ${who}: the same answer as an unknown id`)
    }
  }
  t.equal((await taskCall(server, 'tasks/get', taskId)).json.result.taskId, taskId, 'the owner still reads it')

  for (const method of ['tasks/get', 'tasks/cancel', 'tasks/update']) {
    const reply = await taskCall(server, method, taskId, server.apiKey, { capabilities: ELICITING, id: `no-ext-${method}` }, method === 'tasks/update' ? { inputResponses: {} } : {})
    const err = rpcErrorOf(t, reply, 400, -32021, 'MISSING_CLIENT_CAPABILITY', `${method} without the extension`)
    t.strictSame(err?.data?.requiredCapabilities, REQUIRES_TASKS, 'requiredCapabilities names the extension')
    t.equal(reply.json.id, `no-ext-${method}`, 'the id is echoed')
  }

  const differing = await taskCall(server, 'tasks/get', taskId, server.apiKey, { headers: { 'mcp-name': 'another-task' } })
  rpcErrorOf(t, differing, 400, -32020, 'HEADER_MISMATCH', 'Mcp-Name differing from taskId')
  const missing = await taskCall(server, 'tasks/get', taskId, server.apiKey, { headers: { 'mcp-name': undefined } })
  rpcErrorOf(t, missing, 400, -32020, 'HEADER_MISMATCH', 'Mcp-Name missing')
  const cancelMissing = await taskCall(server, 'tasks/cancel', taskId, server.apiKey, { headers: { 'mcp-name': undefined } })
  rpcErrorOf(t, cancelMissing, 400, -32020, 'HEADER_MISMATCH', 'tasks/cancel without Mcp-Name')
  const encoded = await taskCall(server, 'tasks/get', taskId, server.apiKey, { headers: { 'mcp-name': `=?base64?${Buffer.from(taskId).toString('base64')}?=` } })
  t.equal(encoded.json?.result?.taskId, taskId, 'a base64-sentinel Mcp-Name equal to taskId is accepted')

  const update = await taskCall(server, 'tasks/update', taskId, server.apiKey, {}, { inputResponses: { whatever: { action: 'accept' } } })
  t.equal(update.status, 200)
  t.strictSame(Object.keys(update.json.result).sort(), ['_meta', 'resultType'], 'tasks/update is acknowledged')
  t.equal(update.json.result.resultType, 'complete')
  const badUpdate = await taskCall(server, 'tasks/update', taskId)
  rpcErrorOf(t, badUpdate, 200, -32602, 'INVALID_PARAMS', 'tasks/update without inputResponses')

  for (const method of ['tasks/result', 'tasks/list']) {
    const reply = await modernPost(server.mcpUrl, server.apiKey, method, method === 'tasks/result' ? { taskId } : {}, { capabilities: WITH_TASKS, id: method })
    rpcErrorOf(t, reply, 404, -32601, 'METHOD_NOT_FOUND', method)
    t.equal(reply.json.id, method, 'the id is echoed')
  }
})

t.test('tasks/cancel needs the tool\'s scope and role', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'guarded', { PIPELINE_STEP_MS: '3000' })
  const { handle } = await startTask(t, server, app.id)

  const viewer = await createMember(server, { role: 'viewer' })
  const byViewer = await taskCall(server, 'tasks/cancel', handle.taskId, viewer.key)
  rpcErrorOf(t, byViewer, 200, -32602, 'INVALID_PARAMS', 'a viewer cancelling the owner\'s task (not theirs)')

  const readOnly = await createKey(server, (await ownerMembership(server)).id, ['mcp:read'])
  const byReadOnly = await taskCall(server, 'tasks/cancel', handle.taskId, readOnly.key)
  t.equal(byReadOnly.status, 403, 'the owner\'s read-only key: 403')
  t.equal(byReadOnly.json?.error?.code, 'INSUFFICIENT_SCOPE', 'service body')
  t.type(byReadOnly.json?.error?.message, 'string')
  t.match(String(byReadOnly.headers['www-authenticate'] ?? ''), /insufficient_scope/, 'with a WWW-Authenticate challenge')
  t.equal((await taskCall(server, 'tasks/get', handle.taskId, readOnly.key)).json.result.status, 'working', 'the read-only key may read it; it still runs')

  // A developer whose role drops to viewer may no longer stop its own deployment.
  const dev = await createMember(server, { role: 'developer' })
  const devApp = await seedApp(server, 'devs', { PIPELINE_STEP_MS: '3000' })
  const { handle: devTask } = await startTask(t, server, devApp.id, dev.key)
  await server.app.repos.memberships.upsert({ userId: dev.user.id, organizationId: dev.membership.organizationId, role: 'viewer' })
  const demoted = await taskCall(server, 'tasks/cancel', devTask.taskId, dev.key)
  rpcErrorOf(t, demoted, 200, -31000, 'PERMISSION_DENIED', 'a demoted member cancelling its task')
  t.equal((await taskCall(server, 'tasks/get', devTask.taskId, dev.key)).json.result.status, 'working', 'it still runs')

  const byOwner = await taskCall(server, 'tasks/cancel', handle.taskId)
  t.equal(byOwner.status, 200, 'the owner with a read-write key cancels')
  t.equal((await waitTask(t, server, handle.taskId, ['cancelled', 'completed'])).status, 'cancelled')
})

t.test('after a restart, tasks left working are completed as interrupted', async (t) => {
  const dbPath = tempDatabase(t)
  const first = await serve(t, {}, dbPath)
  const org = (await defaultOrganization(first)).id
  const app = await seedApp(first, 'long', { PIPELINE_STEP_MS: '10000' })
  const { handle } = await startTask(t, first, app.id)
  const running = await poll(async () => {
    const d = await first.app.repos.deployments.active(org, app.id)
    return d?.status === 'running' ? d : undefined
  }, 5000, 'the pipeline to run')
  // A crash leaves a task working with no process behind it.
  const owner = await ownerMembership(first)
  const now = Date.now()
  const crashed = await first.app.repos.tasks.create({
    id: 'crashedTask0123456789AB', membershipId: owner.id, organizationId: org, tool: 'service_deployments_create',
    status: 'working', statusMessage: 'service_deployments_create is running', createdAt: now, updatedAt: now, expiresAt: now + TTL_MS,
  })

  await first.close()
  const second = await serve(t, {}, dbPath)

  const cut = (await taskCall(second, 'tasks/get', handle.taskId)).json.result
  t.equal(cut.resultType, 'complete')
  t.equal(cut.status, 'completed', 'the task cut by the clean shutdown is completed')
  t.equal(cut.result.isError, true)
  const cutErr = failureText(cut.result)!
  t.equal(cutErr.code, 'OPERATION_FAILED')
  t.match(cutErr.message, new RegExp(`^Deployment ${running.id} of app long was interrupted`), 'it says the deployment was interrupted')
  t.equal((await deploymentRow(second, running.id))?.status, 'interrupted')

  const lost = (await taskCall(second, 'tasks/get', crashed.id)).json.result
  t.equal(lost.status, 'completed', 'the task a crash left working is completed at start')
  t.match(lost.statusMessage, /interrupted/)
  t.equal(lost.result.isError, true)
  t.equal(lost.result.resultType, 'complete')
  const lostErr = failureText(lost.result)!
  t.equal(lostErr.code, 'OPERATION_FAILED')
  t.match(lostErr.message, /restarted while this service_deployments_create call was in progress/)
})

// The task's lifetime is decided by the server's clock (docs/decisions/clock.md): the test moves it to the instant
// before and at the end of the TTL, whatever the time the pipeline or the requests took.
t.test('an expired task is gone', async (t) => {
  const clock = new ManualClock()
  const server = await serve(t, {}, undefined, clock)
  const app = await seedApp(server, 'brief', { PIPELINE_STEP_MS: '1' })
  const { handle } = await startTask(t, server, app.id)
  t.equal(handle.ttlMs, TTL_MS)
  t.equal(Date.parse(handle.createdAt), clock.now(), 'created at the server\'s now')
  await clock.advance(TTL_MS - 1)
  t.equal((await taskCall(server, 'tasks/get', handle.taskId)).json?.result?.taskId, handle.taskId, 'readable 1 ms before its TTL ends')
  await clock.advance(1)
  rpcErrorOf(t, await taskCall(server, 'tasks/get', handle.taskId), 200, -32602, 'INVALID_PARAMS', 'tasks/get after ttlMs')
  rpcErrorOf(t, await taskCall(server, 'tasks/cancel', handle.taskId), 200, -32602, 'INVALID_PARAMS', 'tasks/cancel after ttlMs')

  // Expired and ended, its row is purged by the sweep (every 10 minutes of the server's clock since it started).
  const row = () => server.app.repos.tasks.byId(handle.taskId, 0)
  await until(async () => (await row())?.status === 'completed', 10_000, 'the task to complete (its pipeline runs in real time)')
  await clock.advance(TASK_SWEEP_MS - TTL_MS - 1)
  t.ok(await row(), 'the expired row is kept until the sweep')
  await clock.advance(1)
  t.equal(await row(), undefined, 'the sweep purged it')
})

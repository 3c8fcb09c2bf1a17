/**
 * Long-running deployments on stateless 2026-07-28 requests without the tasks extension: the confirmed retry streams
 * the run (notifications/message only with a logLevel, notifications/progress only with a progressToken, JSON when it
 * has neither), a closed connection does not stop the run and leaves the at-most-once record to finish, cancellation
 * and failures are tool results, rollbacks confirm and run the same way, and one app runs one deployment at a time
 * whichever era started it.
 */
import t, { type Test } from 'tap'
import { callToEnd, toolError } from '../helpers/tools.js'
import { answerAccepted, decision, elicitingSession, openLiveCall } from '../helpers/confirm.js'
import { callTool } from '../helpers/mcp.js'
import { ELICITING, LOG_LEVEL_KEY, modernCall, modernLive, SERVER_INFO_KEY } from '../helpers/modern.js'
import {
  answered,
  ask,
  DEP_ID,
  deploymentCount,
  deploymentLogs,
  deploymentRow,
  failureText,
  poll,
  progressOf,
  seedApp,
  seedSucceeded,
  serveModern,
} from '../helpers/modern-runs.js'
import { defaultOrganization, ownerMembership } from '../helpers/seed.js'
import type { TestServer } from '../helpers/server.js'
import { messagesOf, type LiveStream } from '../helpers/stream.js'

const LOG_INFO = { [LOG_LEVEL_KEY]: 'info' }

/** The confirmed retry, opened live (its answer read while it runs). */
async function liveRetry(t: Test, server: TestServer, tool: string, args: Record<string, unknown>, requestState: string, id: string | number, meta: Record<string, unknown> = {}): Promise<LiveStream> {
  const live = await modernLive(server.mcpUrl, server.apiKey, 'tools/call', { name: tool, arguments: args, ...answered(requestState) }, { capabilities: ELICITING, id, meta })
  t.teardown(() => live.close())
  return live
}

/** Waits for a deployment log line matching `match` on a live answer; returns its data. */
async function lineOn(live: LiveStream, match: (line: string) => boolean, what: string): Promise<any> {
  await live.waitFor(() => deploymentLogs(messagesOf(live)).some((l) => match(l.data.line)), 8000, what)
  return deploymentLogs(messagesOf(live)).find((l) => match(l.data.line))!.data
}

function responseOf(messages: any[], id: string | number): any {
  return messages.find((m) => m.id === id && ('result' in m || 'error' in m))
}

async function sameStored(t: Test, server: TestServer, depId: string, logs: any[]) {
  const stored = (await server.app.repos.deployments.lines(depId, 500)).items
  t.strictSame(stored.map((l) => ({ seq: l.seq, stream: l.stream, line: l.line })), logs.map((l) => ({ seq: l.data.seq, stream: l.data.stream, line: l.data.line })), 'the streamed lines are the stored lines')
}

t.test('the confirmed retry with progressToken and logLevel info streams every line and progress, then the result', async (t) => {
  const server = await serveModern(t)
  const app = await seedApp(server, 'web', { PIPELINE_STEP_MS: '5' })

  const { result: asked, requestState, reply: round1 } = await ask(t, server, server.apiKey, 'service_deployments_create', { app_id: app.id })
  t.match(round1.headers['content-type'], /^application\/json/, 'round 1 is a JSON answer')
  t.equal(asked.inputRequests.confirm.method, 'elicitation/create')
  t.equal(asked.inputRequests.confirm.params.message, `Deploy app web (${app.id}) with pipeline default?`)
  t.equal(asked.inputRequests.confirm.params.requestedSchema.properties.confirm.type, 'boolean')
  t.equal(await deploymentCount(server), 0, 'round 1 runs nothing')

  const live = await liveRetry(t, server, 'service_deployments_create', { app_id: app.id }, requestState, 'deploy-2', { progressToken: 'tok-1', ...LOG_INFO })
  t.equal(live.status, 200)
  t.equal(live.headers['content-type'], 'text/event-stream', 'answered as SSE')
  t.equal(live.headers['x-accel-buffering'], 'no')
  t.equal(live.headers['mcp-session-id'], undefined, 'no Mcp-Session-Id')
  await live.ended(10_000)
  t.ok(live.endedByServer, 'the server ends the stream after the response')

  t.notMatch(live.text(), /^id:/m, 'no id: lines')
  const messages = messagesOf(live)
  const response = responseOf(messages, 'deploy-2')
  t.ok(response, 'the call is answered')
  t.equal(messages.at(-1), response, 'the response is the last message')
  t.equal(messages.filter((m) => 'id' in m).length, 1, 'one response, no server requests')
  const result = response.result
  t.equal(result.resultType, 'complete')
  t.equal(result.isError, false)
  t.match(result._meta?.[SERVER_INFO_KEY], { name: 'service-mcp' })
  const dep = result.structuredContent.deployment
  t.match(dep, { app_id: app.id, kind: 'deploy', status: 'succeeded', exit_code: 0 })
  t.match(dep.id, DEP_ID)
  t.strictSame(JSON.parse(result.content[0].text), result.structuredContent)

  const logs = deploymentLogs(messages)
  t.ok(logs.length >= 10, `every line arrived (${logs.length})`)
  t.ok(logs.every((l) => l.level === 'info' && l.logger === 'deployment'), 'level info, logger deployment')
  t.ok(logs.every((l) => Object.keys(l.data).sort().join() === 'deployment_id,line,seq,stream'), 'data is {deployment_id, seq, stream, line}')
  t.ok(logs.every((l) => l.data.deployment_id === dep.id), 'each names the deployment')
  t.strictSame(logs.map((l) => l.data.seq), logs.map((_, i) => i), 'in order, without a gap')
  t.equal(logs[0].data.line, 'started deploy of web with pipeline default')
  t.ok(logs.some((l) => l.data.line === 'web is live'))
  t.match(logs.at(-1).data.line, /^succeeded: /)
  await sameStored(t, server, dep.id, logs)

  const progress = progressOf(messages)
  t.equal(progress.length, logs.length, 'one progress per line')
  t.ok(progress.every((p) => p.progressToken === 'tok-1'), 'for the request\'s token')
  t.ok(progress.every((p, i) => i === 0 || p.progress > progress[i - 1].progress), 'strictly increasing')
  t.strictSame(progress.map((p) => p.message), logs.map((l) => l.data.line))
  const notes = messages.filter((m) => !('id' in m)).map((m) => m.method)
  t.strictSame([...new Set(notes)].sort(), ['notifications/message', 'notifications/progress'], 'nothing but log lines and progress')

  t.equal(await deploymentCount(server), 1, 'one deployment')
  const audit = (await server.app.repos.audit.page((await defaultOrganization(server)).id, 20)).items
  t.ok(audit.some((a) => a.action === 'service_deployments_create.confirmation' && a.outcome === 'confirmed'), 'the confirmation is audited')
  t.ok(audit.some((a) => a.action === 'service_deployments_create' && a.outcome === 'succeeded' && a.targetId === dep.id), 'the deployment is audited')
})

t.test('notifications follow the request: progress needs a token, log lines a logLevel, and neither means JSON', async (t) => {
  const server = await serveModern(t)
  const app = await seedApp(server, 'quick', { PIPELINE_STEP_MS: '1' })
  const args = { app_id: app.id }
  let n = 0
  const deploy = async (meta: Record<string, unknown>) => {
    const { requestState } = await ask(t, server, server.apiKey, 'service_deployments_create', args)
    const id = `run-${++n}`
    const reply = await modernCall(server.mcpUrl, server.apiKey, 'service_deployments_create', args, { capabilities: ELICITING, id, meta, extra: answered(requestState) })
    t.equal(reply.status, 200)
    t.equal(reply.headers['mcp-session-id'], undefined, 'no Mcp-Session-Id')
    const response = reply.json ?? responseOf(reply.messages, id)
    t.equal(response?.result?.structuredContent?.deployment?.status, 'succeeded', 'the deployment succeeded')
    t.equal(response?.result?.resultType, 'complete')
    return { reply, response }
  }

  await t.test('progressToken without logLevel: progress only', async (t) => {
    const { reply } = await deploy({ progressToken: 7 })
    t.equal(reply.headers['content-type'], 'text/event-stream')
    t.equal(deploymentLogs(reply.messages).length, 0, 'no notifications/message')
    t.equal(reply.messages.filter((m) => m.method === 'notifications/message').length, 0, 'no notifications/message at all')
    const progress = progressOf(reply.messages)
    t.ok(progress.length >= 10, `progress arrived (${progress.length})`)
    t.ok(progress.every((p) => p.progressToken === 7), 'numeric token echoed')
    t.ok(progress.every((p, i) => i === 0 || p.progress > progress[i - 1].progress), 'strictly increasing')
  })

  await t.test('logLevel without progressToken: log lines only', async (t) => {
    const { reply } = await deploy(LOG_INFO)
    t.equal(reply.headers['content-type'], 'text/event-stream')
    t.equal(progressOf(reply.messages).length, 0, 'no progress')
    const logs = deploymentLogs(reply.messages)
    t.ok(logs.length >= 10, `log lines arrived (${logs.length})`)
    t.strictSame(logs.map((l) => l.data.seq), logs.map((_, i) => i))
  })

  await t.test('neither: a plain JSON answer', async (t) => {
    const { reply } = await deploy({})
    t.match(reply.headers['content-type'], /^application\/json/)
    t.equal(reply.json.id, 'run-3')
    t.equal(reply.messages.length, 0)
  })

  await t.test('logLevel warning drops the info lines', async (t) => {
    const { reply } = await deploy({ progressToken: 'w', [LOG_LEVEL_KEY]: 'warning' })
    t.equal(reply.headers['content-type'], 'text/event-stream', 'progress still streams')
    t.ok(progressOf(reply.messages).length >= 10)
    t.equal(reply.messages.filter((m) => m.method === 'notifications/message').length, 0, 'no info line passes a warning threshold')
    const { reply: alone } = await deploy({ [LOG_LEVEL_KEY]: 'warning' })
    t.match(alone.headers['content-type'], /^application\/json/, 'with nothing to send, the answer is JSON')
  })

  await t.test('logLevel debug lets the info lines through', async (t) => {
    const { reply } = await deploy({ [LOG_LEVEL_KEY]: 'debug' })
    t.ok(deploymentLogs(reply.messages).length >= 10)
  })
  t.equal(await deploymentCount(server, app.id), 6, 'one deployment per confirmed retry')
})

t.test('closing the connection mid-run does not stop the deployment; the confirmation then replays its stored result', async (t) => {
  const server = await serveModern(t)
  const app = await seedApp(server, 'web2', { PIPELINE_STEP_MS: '100' })
  const args = { app_id: app.id }
  const { requestState } = await ask(t, server, server.apiKey, 'service_deployments_create', args)
  const op = (await server.app.requestStates.open(requestState))?.op as string
  t.type(op, 'string', 'the state names an operation')
  const owner = await ownerMembership(server)
  const key = { sessionId: '-', membershipId: owner.id, organizationId: owner.organizationId, requestId: `op:${op}` }

  const live = await liveRetry(t, server, 'service_deployments_create', args, requestState, 'gone-1', { progressToken: 'g', ...LOG_INFO })
  const first = await lineOn(live, (l) => l.startsWith('[1/7]'), 'the first step')
  t.equal((await server.app.repos.idempotency.get(key, Date.now()))?.status, 'running', 'the operation is recorded running')

  // A replay of the accepted state while the run goes on: 409, nothing starts.
  const during = await modernCall(server.mcpUrl, server.apiKey, 'service_deployments_create', args, { capabilities: ELICITING, id: 'gone-during', extra: answered(requestState) })
  t.equal(during.status, 409, 'a replay while running is a 409')
  t.equal(during.json?.error?.code, 'IDEMPOTENCY_CONFLICT', 'service body')
  t.type(during.json?.error?.action, 'string')

  const seen = live.text().length
  live.close()
  t.equal((await deploymentRow(server, first.deployment_id))?.status, 'running', 'still running after the close')

  const done = await poll(async () => {
    const reply = await modernCall(server.mcpUrl, server.apiKey, 'service_deployments_get', { deployment_id: first.deployment_id })
    const d = reply.json?.result?.structuredContent?.deployment
    return d && d.status !== 'running' && d.status !== 'queued' ? d : undefined
  }, 8000, 'the end of the run')
  t.equal(done.status, 'succeeded', 'the run finished')
  t.equal(live.text().length, seen, 'nothing more was received for the closed request')
  t.notOk(live.endedByServer)
  const stored = (await server.app.repos.deployments.lines(first.deployment_id, 500)).items.map((l) => l.line)
  t.ok(stored.includes('web2 is live'), 'the whole output is stored')

  const record = await poll(async () => {
    const r = await server.app.repos.idempotency.get(key, Date.now())
    return r?.status === 'finished' ? r : undefined
  }, 3000, 'the record to finish')
  t.equal(record.tool, 'service_deployments_create')
  t.match(record.result, { isError: false, structuredContent: { deployment: { id: first.deployment_id, status: 'succeeded' } } }, 'it holds the tool result')

  for (const [id, meta] of [['gone-2', {}], ['gone-3', { progressToken: 'again', ...LOG_INFO }]] as const) {
    const replay = await modernCall(server.mcpUrl, server.apiKey, 'service_deployments_create', args, { capabilities: ELICITING, id, meta, extra: answered(requestState) })
    t.equal(replay.status, 200)
    t.match(replay.headers['content-type'], /^application\/json/, `${id}: nothing runs, so nothing streams`)
    t.equal(replay.json.id, id)
    t.match(replay.json.result, { resultType: 'complete', isError: false, structuredContent: { deployment: { id: first.deployment_id, status: 'succeeded' } } }, `${id}: the stored result`)
  }
  t.equal(await deploymentCount(server, app.id), 1, 'no second deployment')
  const confirmations = (await server.app.repos.audit.page((await defaultOrganization(server)).id, 50)).items.filter((a) => a.action === 'service_deployments_create.confirmation')
  t.equal(confirmations.length, 1, 'a replay is not a new confirmation')
})

t.test('service_deployments_cancel stops a deployment another modern request runs', async (t) => {
  const server = await serveModern(t)
  const app = await seedApp(server, 'slow', { PIPELINE_STEP_MS: '5000' })
  const args = { app_id: app.id }
  const { requestState } = await ask(t, server, server.apiKey, 'service_deployments_create', args)
  const live = await liveRetry(t, server, 'service_deployments_create', args, requestState, 'c-1', LOG_INFO)
  const first = await lineOn(live, (l) => l.startsWith('[1/7]'), 'the first step')

  const cancel = await modernCall(server.mcpUrl, server.apiKey, 'service_deployments_cancel', { deployment_id: first.deployment_id }, { id: 'c-2' })
  t.equal(cancel.status, 200)
  t.match(cancel.headers['content-type'], /^application\/json/)
  t.strictSame(cancel.json.result.structuredContent, { deployment_id: first.deployment_id, status: 'cancelling' })
  t.equal(cancel.json.result.resultType, 'complete')

  await live.ended(5000)
  t.ok(live.endedByServer)
  const response = responseOf(messagesOf(live), 'c-1')
  const err = toolError(response.result)
  t.equal(err.code, 'OPERATION_CANCELLED', 'the deploying request is told')
  t.match(err.message, new RegExp(`^Deployment ${first.deployment_id} of app slow was cancelled`))
  t.equal(response.result.resultType, 'complete')
  t.ok(deploymentLogs(messagesOf(live)).some((l) => l.data.line === 'Received SIGTERM: stopping, nothing was switched'), 'the pipeline got SIGTERM')

  const row = await poll(async () => {
    const d = await deploymentRow(server, first.deployment_id)
    return d?.status === 'cancelled' ? d : undefined
  }, 3000, 'the cancelled status')
  t.match(row.outcome, /^cancelled: cancelled by user usr_\w+ with service_deployments_cancel$/)
  const got = await modernCall(server.mcpUrl, server.apiKey, 'service_deployments_get', { deployment_id: first.deployment_id })
  t.equal(got.json.result.structuredContent.deployment.status, 'cancelled')
})

t.test('a failing pipeline is an OPERATION_FAILED tool result naming the deployment', async (t) => {
  const server = await serveModern(t)
  const cases = [
    { app: await seedApp(server, 'fail-at-3', { PIPELINE_STEP_MS: '1', PIPELINE_FAIL_AT: '3' }), lastOut: '[3/7] Building', err: 'Step 3 failed: Building' },
    { app: await seedApp(server, 'broken', {}, { pipeline: 'broken' }), lastOut: 'building', err: 'boom' },
  ]
  for (const c of cases) {
    const args = { app_id: c.app.id }
    const { requestState } = await ask(t, server, server.apiKey, 'service_deployments_create', args)
    const reply = await modernCall(server.mcpUrl, server.apiKey, 'service_deployments_create', args, { capabilities: ELICITING, id: `f-${c.app.name}`, meta: LOG_INFO, extra: answered(requestState) })
    t.equal(reply.status, 200)
    const response = responseOf(reply.messages, `f-${c.app.name}`)
    t.equal(response?.result?.isError, true, `${c.app.name}: a tool failure, not a JSON-RPC error`)
    t.equal(response.result.resultType, 'complete')
    const err = failureText(response.result)!
    t.equal(err.code, 'OPERATION_FAILED')
    t.match(err.message, new RegExp(`^Deployment dep_[0-9a-z]{26} of app ${c.app.name} failed: the pipeline exited with code 1`))
    const depId = DEP_ID.exec(err.message)![0]
    t.match(err.message, `service_deployments_logs with deployment_id ${depId}`, 'it says where the output is')
    t.match(await deploymentRow(server, depId), { status: 'failed', exitCode: 1 })
    const logs = deploymentLogs(reply.messages)
    t.ok(logs.some((l) => l.data.stream === 'stderr' && l.data.line === c.err), 'the stderr line was streamed')
    t.ok(logs.some((l) => l.data.line === c.lastOut))
    t.match(logs.at(-1).data.line, /^failed: the pipeline exited with code 1$/)
  }
  const audit = (await server.app.repos.audit.page((await defaultOrganization(server)).id, 50)).items
  t.equal(audit.filter((a) => a.action === 'service_deployments_create' && a.outcome === 'failed').length, 2, 'each failure is audited')
})

t.test('service_deployments_rollback asks with the exact effect, then runs the rollback', async (t) => {
  const server = await serveModern(t)
  const app = await seedApp(server, 'roll', { PIPELINE_STEP_MS: '1' })
  const target = await seedSucceeded(server, app.id)
  const args = { app_id: app.id, to_deployment_id: target.id }

  const { result: asked, requestState } = await ask(t, server, server.apiKey, 'service_deployments_rollback', args)
  t.equal(asked.inputRequests.confirm.params.message, `Roll back app roll (${app.id}) to deployment ${target.id} of ${new Date(target.createdAt).toISOString()}?`)
  t.strictSame(asked.inputRequests.confirm.params.requestedSchema.required, ['confirm'])
  t.equal(await deploymentCount(server, app.id), 1, 'round 1 runs nothing')

  // The state is bound to these arguments: without to_deployment_id it is another call.
  const other = await modernCall(server.mcpUrl, server.apiKey, 'service_deployments_rollback', { app_id: app.id }, { capabilities: ELICITING, id: 'rb-other', extra: answered(requestState) })
  t.equal(other.status, 200)
  t.equal(other.json?.error?.code, -32602, 'other arguments: -32602')
  t.equal(await deploymentCount(server, app.id), 1)

  const live = await liveRetry(t, server, 'service_deployments_rollback', args, requestState, 'rb-1', { progressToken: 'rb', ...LOG_INFO })
  t.equal(live.headers['content-type'], 'text/event-stream')
  await live.ended(8000)
  const messages = messagesOf(live)
  const response = responseOf(messages, 'rb-1')
  t.equal(messages.at(-1), response)
  t.equal(response.result.resultType, 'complete')
  const dep = response.result.structuredContent.deployment
  t.match(dep, { app_id: app.id, kind: 'rollback', rollback_of: target.id, status: 'succeeded' })
  const lines = deploymentLogs(messages).map((l) => l.data.line)
  t.equal(lines[0], 'started rollback of roll with pipeline default')
  t.ok(lines.includes(`[1/4] Fetching the artifact of ${target.id}`), 'the pipeline saw its target')
  t.ok(progressOf(messages).length === lines.length, 'one progress per line')
  t.equal(await deploymentCount(server, app.id), 2)
  const audit = (await server.app.repos.audit.page((await defaultOrganization(server)).id, 20)).items
  t.ok(audit.some((a) => a.action === 'service_deployments_rollback.confirmation' && a.outcome === 'confirmed'))
})

t.test('one run per app across eras: legacy and modern deployments of the same app conflict', async (t) => {
  const server = await serveModern(t)
  const app = await seedApp(server, 'shared', { PIPELINE_STEP_MS: '80' })
  const args = { app_id: app.id }
  const { headers } = await elicitingSession(server)

  // A modern request's deployment runs; a legacy session tries the same app.
  const { requestState } = await ask(t, server, server.apiKey, 'service_deployments_create', args)
  const live = await liveRetry(t, server, 'service_deployments_create', args, requestState, 'm-1', LOG_INFO)
  const first = await lineOn(live, (l) => l.startsWith('[1/7]'), 'the first step')
  const { result, messages } = await callToEnd(server.mcpUrl, headers, 'service_deployments_create', args, 'l-1')
  const err = toolError(result)
  t.equal(err.code, 'CONFLICT', 'the legacy deployment is refused')
  t.match(err.message, first.deployment_id, 'naming the running deployment')
  t.notOk(messages.some((m) => m.method === 'elicitation/create'), 'nobody is asked')
  await live.ended(8000)
  t.equal(responseOf(messagesOf(live), 'm-1')?.result?.structuredContent?.deployment?.status, 'succeeded', 'the modern run was not disturbed')
  t.equal(await deploymentCount(server, app.id), 1)

  // The other way round: a legacy deployment runs; a modern request is refused before it is even asked.
  const call = callTool('service_deployments_create', args, 'l-2')
  const legacy = await openLiveCall(t, server.mcpUrl, headers, { ...call, params: { ...call.params, _meta: { progressToken: 'l' } } })
  await answerAccepted(t, server.mcpUrl, headers, legacy, decision())
  await legacy.waitFor(() => messagesOf(legacy).some((m) => m.method === 'notifications/progress' && /^\[1\/7\]/.test(m.params.message)), 8000, 'the legacy first step')
  const modern = await modernCall(server.mcpUrl, server.apiKey, 'service_deployments_create', args, { capabilities: ELICITING, id: 'm-2' })
  t.equal(modern.status, 200)
  t.not(modern.json.result.resultType, 'input_required', 'not asked')
  t.equal(toolError(modern.json.result).code, 'CONFLICT', 'the modern deployment is refused')
  t.equal(modern.json.result.resultType, 'complete')
  await legacy.ended(8000)
  t.equal(await deploymentCount(server, app.id), 2, 'two runs, one after the other')
})

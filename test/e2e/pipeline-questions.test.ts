/**
 * A pipeline that asks before switching traffic (the example pipeline with ASK_BEFORE_SWITCH=1; docs/tools.md): in a
 * session the question is an elicitation/create on the call's stream after the confirmation, and yes lets the run
 * succeed while no fails it with the pipeline's line; in a task it is the task's input request answered with
 * tasks/update; a stateless call that is not a task is never asked (answered no, said in the log); a question nobody
 * answers in time is no (injected clock), and one still waiting when the run ends is withdrawn. Every answer is audited
 * as `<tool>.pipeline_question`.
 */
import t, { type Test } from 'tap'
import { answerRequest, decision, elicitingSession, isElicitation, openLiveCall, readToEnd } from '../helpers/confirm.js'
import { ManualClock } from '../helpers/clock.js'
import { callTool } from '../helpers/mcp.js'
import { ELICITING, modernCall, modernPost, WITH_TASKS } from '../helpers/modern.js'
import { answered, ask, failureText, poll, seedApp, serveModern } from '../helpers/modern-runs.js'
import { defaultOrganization } from '../helpers/seed.js'
import { callToEnd } from '../helpers/tools.js'
import type { TestServer } from '../helpers/server.js'
import { messagesOf, type LiveStream } from '../helpers/stream.js'

const ASKING = { PIPELINE_STEP_MS: '1', ASK_BEFORE_SWITCH: '1' }
const TOOL = 'service_deployments_create'

/** The stored lines of the app's one deployment, as `stream: line`. */
async function storedLines(server: TestServer, deploymentId: string): Promise<string[]> {
  return (await server.app.repos.deployments.lines(deploymentId, 500)).items.map((l) => `${l.stream}: ${l.line}`)
}

async function pipelineAudits(server: TestServer) {
  const items = (await server.app.repos.audit.page((await defaultOrganization(server)).id, 50)).items
  return items.filter((a) => a.action === `${TOOL}.pipeline_question`)
}

/** The `n`th elicitation/create on the call's stream (1: the confirmation, 2: the pipeline's question). */
async function nthElicitation(live: LiveStream, n: number): Promise<any> {
  await live.waitFor(() => messagesOf(live).filter(isElicitation).length >= n, 8000, `elicitation/create #${n}`)
  return messagesOf(live).filter(isElicitation)[n - 1]
}

/** A session deploy of an asking app, confirmed; returns the live call and the pipeline's question once asked. */
async function deployAsked(t: Test, server: TestServer, id: string) {
  const app = await seedApp(server, 'web', ASKING)
  const { headers } = await elicitingSession(server)
  const live = await openLiveCall(t, server.mcpUrl, headers, callTool(TOOL, { app_id: app.id }, id))
  const confirmation = await nthElicitation(live, 1)
  t.equal((await answerRequest(server.mcpUrl, headers, confirmation.id, decision())).status, 202, 'the deploy is confirmed')
  const question = await nthElicitation(live, 2)
  return { app, headers, live, question }
}

function deploymentIdOf(question: any): string {
  return /^Deployment (dep_[0-9a-z]+) of app /.exec(question.params.message)![1]!
}

t.test('in a session: the question arrives after the confirmation, and yes lets the run switch traffic', async (t) => {
  const server = await serveModern(t)
  const { app, headers, live, question } = await deployAsked(t, server, 'deploy-yes')
  const depId = deploymentIdOf(question)
  t.equal(question.params.mode, 'form')
  t.equal(question.params.message, `Deployment ${depId} of app web asks: Switch traffic to ${depId}?`)
  t.same(question.params.requestedSchema, { type: 'object', properties: { yes: { type: 'boolean', title: 'Yes', description: 'Check to answer yes; the pipeline is told no otherwise' } }, required: ['yes'] })
  t.equal((await answerRequest(server.mcpUrl, headers, question.id, { action: 'accept', content: { yes: true } })).status, 202)

  const { responses: [response] } = await readToEnd(live, 'deploy-yes', 10_000)
  t.equal(response?.result?.isError, false, 'the deployment succeeded')
  t.match(response.result.structuredContent.deployment, { id: depId, app_id: app.id, status: 'succeeded' })
  const lines = await storedLines(server, depId)
  const asked = lines.indexOf(`system: pipeline asks: Switch traffic to ${depId}?`)
  t.ok(asked > 0, 'the question is a system line')
  t.match(lines[asked + 1], /^system: answer: yes \(answered by user usr_/, 'then who answered')
  t.equal(lines[asked + 2], 'stdout: [6/7] Switching traffic', 'then the pipeline switches')
  t.notOk(lines.some((l) => l.includes('::service-mcp::ask')), 'the marker line is not stored as output')
  const [audit] = await pipelineAudits(server)
  t.match(audit, { outcome: 'confirmed', targetType: 'deployment', targetId: depId })
  t.match(audit!.details, { question: `Switch traffic to ${depId}?`, answer: 'yes', app_id: app.id })
})

t.test('in a session: no fails the deployment with the pipeline\'s line, and nothing is switched', async (t) => {
  const server = await serveModern(t)
  const { headers, live, question } = await deployAsked(t, server, 'deploy-no')
  const depId = deploymentIdOf(question)
  t.equal((await answerRequest(server.mcpUrl, headers, question.id, { action: 'accept', content: { yes: false } })).status, 202)

  const { responses: [response] } = await readToEnd(live, 'deploy-no', 10_000)
  const failure = failureText(response?.result)
  t.equal(failure?.code, 'OPERATION_FAILED')
  t.match(failure?.message, `Deployment ${depId} of app web failed: the pipeline exited with code 1`)
  const lines = await storedLines(server, depId)
  t.match(lines.find((l) => l.startsWith('system: answer:')), /^system: answer: no \(answered by user usr_/)
  t.ok(lines.includes(`stderr: Not confirmed: traffic not switched to ${depId}`), 'the pipeline says why')
  t.notOk(lines.includes('stdout: [6/7] Switching traffic'), 'traffic was not switched')
  t.match((await pipelineAudits(server))[0], { outcome: 'declined', details: { answer: 'no' } })
})

t.test('in a session: a question nobody answers in time is no (injected clock)', async (t) => {
  const clock = new ManualClock()
  const server = await serveModern(t, { elicitationTimeoutMs: 30_000 }, undefined, clock)
  const { live, question } = await deployAsked(t, server, 'deploy-late')
  const depId = deploymentIdOf(question)
  await clock.advance(29_999)
  t.equal((await server.app.repos.deployments.byId((await defaultOrganization(server)).id, depId))?.status, 'running', 'still waiting just before the timeout')
  await clock.advance(1)
  const { responses: [response] } = await readToEnd(live, 'deploy-late', 10_000)
  t.equal(failureText(response?.result)?.code, 'OPERATION_FAILED')
  t.ok((await storedLines(server, depId)).includes('system: answer: no (no answer in time)'))
  t.match((await pipelineAudits(server))[0], { outcome: 'timed_out', details: { answer: 'no' } })
})

t.test('in a session: a question still waiting when the run ends is withdrawn', async (t) => {
  const server = await serveModern(t)
  const { headers, live, question } = await deployAsked(t, server, 'deploy-stopped')
  const depId = deploymentIdOf(question)
  const cancel = await callToEnd(server.mcpUrl, headers, 'service_deployments_cancel', { deployment_id: depId }, 'cancel-1')
  t.equal(cancel.result?.structuredContent?.status, 'cancelling')

  const { messages, responses: [response] } = await readToEnd(live, 'deploy-stopped', 10_000)
  t.equal(failureText(response?.result)?.code, 'OPERATION_CANCELLED', 'the run was cancelled')
  const withdrawn = messages.findIndex((m) => m.method === 'notifications/cancelled' && m.params.requestId === question.id)
  t.ok(withdrawn >= 0, 'the client is told the question is withdrawn')
  t.ok(withdrawn < messages.indexOf(response), 'before the call is answered')
  t.match((await pipelineAudits(server))[0], { outcome: 'cancelled', details: { answer: 'no', why: 'the run ended before an answer came' } })
})

/** A deploy of an asking app as a task, followed until its pipeline asks; returns the task, its question, and tasks/get. */
async function askingTask(t: Test, server: TestServer) {
  const app = await seedApp(server, 'web', ASKING)
  const args = { app_id: app.id }
  const { requestState } = await ask(t, server, server.apiKey, TOOL, args, { capabilities: WITH_TASKS })
  const started = await modernCall(server.mcpUrl, server.apiKey, TOOL, args, { capabilities: WITH_TASKS, id: `task-${app.id}`, extra: answered(requestState) })
  const taskId = started.json?.result?.taskId
  t.type(taskId, 'string', 'a task handle')
  let n = 0
  const get = async () => (await modernPost(server.mcpUrl, server.apiKey, 'tasks/get', { taskId }, { capabilities: WITH_TASKS, id: `get-${++n}` })).json?.result
  const waiting = await poll(async () => {
    const task = await get()
    return task?.status === 'input_required' ? task : undefined
  }, 8000, 'the task to ask')
  const ended = () => poll(async () => {
    const task = await get()
    return ['completed', 'failed', 'cancelled'].includes(task?.status) ? task : undefined
  }, 8000, 'the task to end')
  return { taskId, waiting, ended }
}

t.test('as a task (2026-07-28): the task turns input_required, and tasks/update yes completes it', async (t) => {
  const server = await serveModern(t)
  const { taskId, waiting, ended } = await askingTask(t, server)
  t.same(Object.keys(waiting.inputRequests), ['1.pipeline_question'])
  const request = waiting.inputRequests['1.pipeline_question']
  t.equal(request.method, 'elicitation/create')
  t.match(request.params.message, /^Deployment dep_[0-9a-z]+ of app web asks: Switch traffic to dep_[0-9a-z]+\?$/)

  const update = await modernPost(server.mcpUrl, server.apiKey, 'tasks/update', { taskId, inputResponses: { '1.pipeline_question': { action: 'accept', content: { yes: true } } } }, { capabilities: WITH_TASKS, id: 'update-1' })
  t.equal(update.status, 200)
  const done = await ended()
  t.equal(done.status, 'completed')
  t.equal(done.result.isError, false)
  const depId = done.result.structuredContent.deployment.id
  t.equal(done.result.structuredContent.deployment.status, 'succeeded')
  t.match((await storedLines(server, depId)).find((l) => l.startsWith('system: answer:')), /^system: answer: yes \(answered by user usr_/)
  t.match((await pipelineAudits(server))[0], { outcome: 'confirmed', targetId: depId })
})

t.test('as a task: a run that ends while its question waits completes the task, and the question is given up', async (t) => {
  const server = await serveModern(t)
  const { waiting, ended } = await askingTask(t, server)
  const depId = /^Deployment (dep_[0-9a-z]+)/.exec(waiting.inputRequests['1.pipeline_question'].params.message)![1]!
  const cancel = await modernCall(server.mcpUrl, server.apiKey, 'service_deployments_cancel', { deployment_id: depId }, { id: 'cancel-task-run' })
  t.equal(cancel.json?.result?.structuredContent?.status, 'cancelling')
  const done = await ended()
  t.equal(done.status, 'completed')
  t.equal(failureText(done.result)?.code, 'OPERATION_CANCELLED')
  t.match((await pipelineAudits(server))[0], { outcome: 'cancelled', targetId: depId, details: { why: 'the run ended before an answer came' } })
})

t.test('a stateless 2026-07-28 call that is not a task is not asked: the pipeline is told no, and the log says how to be asked', async (t) => {
  const server = await serveModern(t)
  const app = await seedApp(server, 'web', ASKING)
  const args = { app_id: app.id }
  const { requestState } = await ask(t, server, server.apiKey, TOOL, args)
  const reply = await modernCall(server.mcpUrl, server.apiKey, TOOL, args, { capabilities: ELICITING, id: 'stateless-1', extra: answered(requestState) })
  const result = reply.json?.result ?? reply.messages.find((m) => m.id === 'stateless-1')?.result
  t.notOk(reply.messages?.some?.((m: any) => m.method === 'elicitation/create'), 'nothing is asked on the stream')
  t.equal(result?.resultType, 'complete', 'the call is not turned into an input_required round')
  const failure = failureText(result)
  t.equal(failure?.code, 'OPERATION_FAILED')
  const depId = /Deployment (dep_[0-9a-z]+)/.exec(failure!.message)![1]!
  const lines = await storedLines(server, depId)
  t.ok(lines.includes('system: answer: no (not asked: a 2026-07-28 call that is not a task cannot be asked while it runs; call with the tasks extension to be asked)'))
  t.ok(lines.includes(`stderr: Not confirmed: traffic not switched to ${depId}`))
  t.match((await pipelineAudits(server))[0], { outcome: 'denied', targetId: depId, details: { answer: 'no' } })
})

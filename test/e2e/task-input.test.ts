/**
 * Input requests inside a running task (docs/decisions/tasks.md), with an embedder's tool on the injected clock: the
 * answers that never come time the question out (INPUT_TIMEOUT, the task completes with that tool error), a declined
 * answer reaches the work, a second question gets new keys, a question the starting request cannot answer fails
 * the task with -32021, and a confirmation inside the task is one of its questions.
 */
import t, { type Test } from 'tap'
import { builtinTools } from '../../src/index.js'
import { ManualClock } from '../helpers/clock.js'
import { startServer, type TestServer } from '../helpers/server.js'
import { confirmInTask, twoQuestions } from '../helpers/task-tools.js'
import { answerOf, modernPost, TASKS_EXTENSION, WITH_TASKS } from '../helpers/modern.js'
import { sleep } from '../helpers/stream.js'

const TIMEOUT_MS = 30_000

let ids = 0
async function serve(t: Test, clock: ManualClock): Promise<TestServer> {
  return startServer(t, { tools: [...builtinTools, twoQuestions, confirmInTask], clock, config: { taskInputTimeoutMs: TIMEOUT_MS } })
}
const rpc = (server: TestServer, method: string, params: Record<string, unknown>, capabilities: Record<string, unknown> = WITH_TASKS) =>
  modernPost(server.mcpUrl, server.apiKey, method, params, { capabilities, id: `r-${++ids}` })
const get = async (server: TestServer, taskId: string) => answerOf(await rpc(server, 'tasks/get', { taskId }), `r-${ids}`).result

/** The task once its status is one of `statuses` (polled on real time: the work runs on its own, bounded). */
async function reached(server: TestServer, taskId: string, statuses: string[]): Promise<any> {
  for (const deadline = Date.now() + 5000; Date.now() < deadline; await sleep(20)) {
    const task = await get(server, taskId)
    if (statuses.includes(task.status)) return task
  }
  throw new Error(`task ${taskId} not ${statuses.join(' or ')} after 5 s`)
}

async function start(server: TestServer, capabilities: Record<string, unknown> = WITH_TASKS, tool = 'two_questions'): Promise<any> {
  const reply = await rpc(server, 'tools/call', { name: tool, arguments: {} }, capabilities)
  return reply.json?.result ?? reply.json?.error
}

t.test('a question whose answers never come times out: the task completes with INPUT_TIMEOUT', async (t) => {
  const clock = new ManualClock()
  const server = await serve(t, clock)
  const handle = await start(server)
  t.equal(handle.resultType, 'task')
  const asking = await reached(server, handle.taskId, ['input_required'])
  t.same(Object.keys(asking.inputRequests), ['1.q'])
  await clock.advance(TIMEOUT_MS - 1)
  t.equal((await get(server, handle.taskId)).status, 'input_required', 'still waiting just before the timeout')
  await clock.advance(1)
  const done = await reached(server, handle.taskId, ['completed', 'failed', 'cancelled'])
  t.equal(done.status, 'completed')
  t.equal(done.result.isError, true)
  t.equal(JSON.parse(done.result.content[0].text).code, 'INPUT_TIMEOUT')
  t.notOk('inputRequests' in done)
  const late = await rpc(server, 'tasks/update', { taskId: handle.taskId, inputResponses: { '1.q': { action: 'accept', content: { ok: true } } } })
  t.equal(late.json.result?.resultType, 'complete', 'a late answer is acknowledged and changes nothing')
  t.equal((await get(server, handle.taskId)).status, 'completed')
})

t.test('answers resume the work where it asked; the next question gets new keys; a decline reaches the work', async (t) => {
  const clock = new ManualClock()
  const server = await serve(t, clock)
  const timers = clock.pendingTimers
  const handle = await start(server)
  await reached(server, handle.taskId, ['input_required'])
  t.equal(clock.pendingTimers, timers + 1, 'the question has its timer')
  await rpc(server, 'tasks/update', { taskId: handle.taskId, inputResponses: { '1.q': { action: 'accept', content: { ok: true } } } })
  const second = await reached(server, handle.taskId, ['input_required'])
  // The first answer was taken: the task is asking its second question (polled until the work asked it).
  t.same(Object.keys(second.inputRequests), ['2.q'], 'the second question has a key of its own')
  await rpc(server, 'tasks/update', { taskId: handle.taskId, inputResponses: { '1.q': { action: 'accept', content: { ok: true } }, '2.q': { action: 'decline' } } })
  const done = await reached(server, handle.taskId, ['completed', 'failed', 'cancelled'])
  t.match(done, { status: 'completed', result: { isError: false, content: [{ text: 'first: accept; second: decline' }] } })
  t.equal(clock.pendingTimers, timers, 'no question timer is left behind')
})

t.test('a question the starting request cannot answer fails the task with -32021', async (t) => {
  const server = await serve(t, new ManualClock())
  const handle = await start(server, { extensions: { [TASKS_EXTENSION]: {} } })
  t.equal(handle.resultType, 'task')
  const done = await reached(server, handle.taskId, ['completed', 'failed', 'cancelled'])
  t.equal(done.status, 'failed')
  t.equal(done.error.code, -32021)
  t.same(done.error.data.requiredCapabilities, { elicitation: {} })
})

t.test('a confirmation inside a task is its input request: confirmed, the tool goes ahead', async (t) => {
  const server = await serve(t, new ManualClock())
  const handle = await start(server, WITH_TASKS, 'confirm_in_task')
  const asking = await reached(server, handle.taskId, ['input_required', 'completed', 'failed', 'cancelled'])
  t.equal(asking.status, 'input_required', 'the task waits for the confirmation')
  t.same(Object.keys(asking.inputRequests), ['1.confirm'])
  t.equal(asking.inputRequests['1.confirm'].params.message, 'Go ahead?')
  await rpc(server, 'tasks/update', { taskId: handle.taskId, inputResponses: { '1.confirm': { action: 'accept', content: { confirm: true } } } })
  const done = await reached(server, handle.taskId, ['completed', 'failed', 'cancelled'])
  t.match(done, { status: 'completed', result: { isError: false, content: [{ text: 'went ahead' }] } })
})

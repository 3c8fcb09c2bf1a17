// test-backends: own (processes on PostgreSQL and Redis)
/**
 * A task that asks, followed through another process (docs/decisions/tasks.md): started on A, its input requests are
 * read on B, answered on B (A's work resumes), and cancelled on B (A's work stops).
 */
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { builtinTools } from '../../src/index.js'
import { postgresDatabase, redisPrefix, redisUrl } from '../helpers/backends.js'
import { answerOf, modernPost, WITH_TASKS } from '../helpers/modern.js'
import { startServer, type TestServer } from '../helpers/server.js'
import { twoQuestions } from '../helpers/task-tools.js'

const ENV_KEY = Buffer.alloc(32, 0x3e).toString('base64')
let ids = 0
const rpc = async (server: TestServer, method: string, params: Record<string, unknown>) => {
  const id = `r-${++ids}`
  return answerOf(await modernPost(server.mcpUrl, server.apiKey, method, params, { capabilities: WITH_TASKS, id }), id).result
}

async function reached(server: TestServer, taskId: string, statuses: string[], what: (task: any) => boolean = () => true): Promise<any> {
  for (const deadline = Date.now() + 8000; Date.now() < deadline; await sleep(30)) {
    const task = await rpc(server, 'tasks/get', { taskId })
    if (statuses.includes(task.status) && what(task)) return task
  }
  throw new Error(`task ${taskId} not ${statuses.join(' or ')} after 8 s`)
}

t.test('started on A; asked, answered and cancelled through B', async (t) => {
  const url = await postgresDatabase(t)
  const config = { envKey: ENV_KEY, redisUrl: redisUrl(), redisPrefix: redisPrefix(t) }
  const a = await startServer(t, { dbPath: url, tools: [...builtinTools, twoQuestions], config })
  const b = await startServer(t, { dbPath: url, tools: [...builtinTools, twoQuestions], config })
  // The same owner's API key works on both (one database).
  const onB = { ...b, apiKey: a.apiKey } as TestServer

  const handle = await rpc(a, 'tools/call', { name: 'two_questions', arguments: {} })
  t.equal(handle.resultType, 'task')
  const first = await reached(onB, handle.taskId, ['input_required'])
  t.same(Object.keys(first.inputRequests), ['1.q'], 'B shows the question A\'s work asked')
  t.equal((await rpc(onB, 'tasks/update', { taskId: handle.taskId, inputResponses: { '1.q': { action: 'accept', content: { ok: true } } } })).resultType, 'complete')
  const second = await reached(onB, handle.taskId, ['input_required'], (task) => '2.q' in (task.inputRequests ?? {}))
  t.same(Object.keys(second.inputRequests), ['2.q'], 'A\'s work took the answer given on B and asked its next question')
  await rpc(onB, 'tasks/cancel', { taskId: handle.taskId })
  const done = await reached(a, handle.taskId, ['completed', 'failed', 'cancelled'])
  t.equal(done.status, 'cancelled', 'a cancellation on B stops the work on A')
})

// test-backends: own (processes on PostgreSQL and Redis)
/**
 * A deployment task whose pipeline asks, answered through another process (docs/decisions/pipeline-questions.md): the
 * task runs on A, B shows its question and takes the answer, and A's pipeline gets it and switches traffic.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { postgresDatabase, redisPrefix, redisUrl } from '../helpers/backends.js'
import { answerOf, modernCall, modernPost, WITH_TASKS } from '../helpers/modern.js'
import { answered, ask, ENV_KEY, GRACE_MS, PIPELINES, seedApp } from '../helpers/modern-runs.js'
import { startServer, type TestServer } from '../helpers/server.js'

const TOOL = 'service_deployments_create'
let ids = 0
const rpc = async (server: TestServer, method: string, params: Record<string, unknown>) => {
  const id = `r-${++ids}`
  return answerOf(await modernPost(server.mcpUrl, server.apiKey, method, params, { capabilities: WITH_TASKS, id }), id).result
}

async function reached(server: TestServer, taskId: string, statuses: string[]): Promise<any> {
  for (const deadline = Date.now() + 8000; Date.now() < deadline; await sleep(30)) {
    const task = await rpc(server, 'tasks/get', { taskId })
    if (statuses.includes(task.status)) return task
  }
  throw new Error(`task ${taskId} not ${statuses.join(' or ')} after 8 s`)
}

t.test('a deployment task started on A asks; answered yes through B, its pipeline on A switches traffic', async (t) => {
  const url = await postgresDatabase(t)
  const config = { envKey: ENV_KEY, pipelines: PIPELINES, pipelineGraceMs: GRACE_MS, heartbeatMs: 60_000, redisUrl: redisUrl(), redisPrefix: redisPrefix(t) }
  const a = await startServer(t, { dbPath: url, config })
  const b = await startServer(t, { dbPath: url, config })
  const onB = { ...b, apiKey: a.apiKey } as TestServer
  const app = await seedApp(a, 'web', { PIPELINE_STEP_MS: '1', ASK_BEFORE_SWITCH: '1' })

  const args = { app_id: app.id }
  const { requestState } = await ask(t, a, a.apiKey, TOOL, args, { capabilities: WITH_TASKS })
  const reply = await modernCall(a.mcpUrl, a.apiKey, TOOL, args, { capabilities: WITH_TASKS, id: 'task-a', extra: answered(requestState) })
  const taskId = reply.json?.result?.taskId
  t.type(taskId, 'string', 'A answers with a task handle')

  const waiting = await reached(onB, taskId, ['input_required'])
  t.match(waiting.inputRequests['1.pipeline_question']?.params?.message, /^Deployment dep_[0-9a-z]+ of app web asks: Switch traffic to dep_[0-9a-z]+\?$/, 'B shows the question of A\'s pipeline')
  await rpc(onB, 'tasks/update', { taskId, inputResponses: { '1.pipeline_question': { action: 'accept', content: { yes: true } } } })

  const done = await reached(onB, taskId, ['completed', 'failed', 'cancelled'])
  t.equal(done.status, 'completed')
  t.equal(done.result.isError, false, 'the deployment succeeded')
  const depId = done.result.structuredContent.deployment.id
  t.equal((await a.app.repos.deployments.byId(app.organizationId, depId))?.owner, a.app.processes.id, 'the run was A\'s')
  t.not(a.app.processes.id, b.app.processes.id)
  const lines = (await a.app.repos.deployments.lines(depId, 500)).items.map((l) => l.line)
  t.match(lines.find((l) => l.startsWith('answer: ')), /^answer: yes \(answered by user usr_/)
  t.ok(lines.includes('[6/7] Switching traffic'), 'the pipeline on A got the answer given on B')
})

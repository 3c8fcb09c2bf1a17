// test-backends: both (the task row's compare-and-set, on each dialect)
/**
 * Questions of a task's work (docs/decisions/tasks.md), on the task manager itself:
 * - many tasks/update calls answering one task at once (regression: a lost compare-and-set was retried five times,
 *   and an answer that lost a sixth time was acknowledged and dropped, leaving the task waiting for it);
 * - a question never waits past the task's TTL.
 */
import type { FastifyBaseLogger } from 'fastify'
import t from 'tap'
import type { Principal } from '../../src/auth/principal.js'
import { loadConfig } from '../../src/config.js'
import { EventBus } from '../../src/lib/event-bus.js'
import type { InputRequests } from '../../src/mcp/input-requests.js'
import { TaskManager } from '../../src/plugins/tasks/task-manager.js'
import { CallAbort } from '../../src/rpc/call-abort.js'
import { ManualClock } from '../helpers/clock.js'
import { unitRepos } from '../helpers/unit-repos.js'

const quiet = new Proxy({}, { get: (_target, name) => (name === 'child' ? () => quiet : () => {}) }) as FastifyBaseLogger
const owner = { membershipId: 'mem_1', organizationId: 'org_1' } as Principal
const QUESTIONS = 24

const question = (n: number) => ({
  method: 'elicitation/create' as const,
  params: { mode: 'form' as const, message: `question ${n}`, requestedSchema: { type: 'object' as const, properties: { n: { type: 'number' as const } }, required: ['n'] } },
})

t.test('answers given by concurrent tasks/update calls are all kept', async (t) => {
  const repos = await unitRepos(t)
  const manager = new TaskManager({ repos, config: loadConfig({ env: {}, requireEnvKey: false }), events: new EventBus(), log: quiet })
  t.teardown(() => manager.close())
  let release!: (v: Record<string, unknown>) => void
  const work = new Promise<Record<string, unknown>>((resolve) => (release = resolve))
  const handle = await manager.adopt(owner, 'asker', work, new CallAbort())
  const taskId = handle.taskId as string

  const requests: InputRequests = Object.fromEntries(Array.from({ length: QUESTIONS }, (_, i) => [`q${i}`, question(i)]))
  const answered = manager.ask(taskId, requests, { elicitation: {} })
  let row = await manager.get(owner, taskId)
  for (let i = 0; i < 50 && row?.status !== 'input_required'; i++) row = await manager.get(owner, taskId)
  t.equal(row?.status, 'input_required')
  const keys = Object.keys(row!.inputRequests!)
  t.equal(keys.length, QUESTIONS)

  // Each call starts from the row it read before any of them wrote, as concurrent requests do.
  await Promise.all(keys.map((key) => manager.update(row!, { [key]: { action: 'accept', content: { n: Number(key.split('.q')[1]) } } })))
  const answers = await answered
  t.same(Object.keys(answers).sort(), Object.keys(requests).sort(), 'the work receives every answer')
  for (const [key, answer] of Object.entries(answers)) t.same(answer, { action: 'accept', content: { n: Number(key.slice(1)) } })
  t.equal((await manager.get(owner, taskId))?.status, 'working')
  release({ content: [] })
})

t.test('a question never waits past the task\'s TTL, even with a longer input timeout', async (t) => {
  const repos = await unitRepos(t)
  const clock = new ManualClock()
  const config = loadConfig({ env: {}, requireEnvKey: false, overrides: { taskTtlMs: 5_000, taskInputTimeoutMs: 600_000 } })
  const manager = new TaskManager({ repos, config, events: new EventBus(), log: quiet, clock })
  t.teardown(() => manager.close())
  const handle = await manager.adopt(owner, 'asker', new Promise(() => {}), new CallAbort())
  await clock.advance(1_000)
  const answered = manager.ask(handle.taskId as string, { q: question(0) }, { elicitation: {} })
  const outcome = answered.then(() => 'answered', (err: { code?: string }) => err.code)
  await clock.advance(3_999)
  t.equal(await Promise.race([outcome, Promise.resolve('waiting')]), 'waiting', 'still waiting 1 ms before the TTL')
  await clock.advance(1)
  t.equal(await outcome, 'INPUT_TIMEOUT', 'the question fails when the TTL runs out')
})

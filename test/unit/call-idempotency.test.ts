// test-backends: both (the claim's compare-and-set statements, on each dialect)
/**
 * The claim of a confirmed call between processes (issue 24), step by step: two CallIdempotency instances stand for two
 * processes on one database, and the test decides whose lease lasts (the registry's `liveIds`). A record held by a live
 * process is never taken or marked interrupted; one whose process's lease lapsed is taken over (pending: nothing ran)
 * or read "may or may not have completed" (running); the process that lost it changes nothing afterwards: it does not
 * run, and its late outcome is not stored. The e2e race (test/e2e/confirmation-race.test.ts) runs the same rules
 * between real processes.
 */
import type { FastifyBaseLogger } from 'fastify'
import t, { type Test } from 'tap'
import type { IdempotencyKey } from '../../src/db/repos/idempotency.js'
import type { Repos } from '../../src/db/repos/index.js'
import { CallIdempotency, type Held } from '../../src/plugins/tools/idempotency.js'
import type { CallContext } from '../../src/rpc/dispatcher.js'
import { unitRepos } from '../helpers/unit-repos.js'

const TOOL = 'service_apps_delete'
const OK = { isError: false, content: [{ type: 'text', text: '{"deleted":true}' }] }

const quiet = new Proxy({}, { get: (_target, name) => (name === 'child' ? () => quiet : () => {}) }) as FastifyBaseLogger

/** A process: its own CallIdempotency over the shared repositories, live while `leases` says so. */
function processOn(repos: Repos, id: string, leases: Set<string>): CallIdempotency {
  return new CallIdempotency(repos, quiet, () => null, 60_000, { id, exclusive: false, liveIds: async () => [...leases] })
}

/** What a finished call passes to `finish`: an exchange of its own that no shutdown aborted. */
const ended = { session: null, signal: new AbortController().signal } as unknown as CallContext

let n = 0
function newKey(): IdempotencyKey {
  return { sessionId: 'sess-1', membershipId: 'mem-1', organizationId: 'org-1', requestId: JSON.stringify(`call-${++n}`) }
}

async function setup(t: Test) {
  const repos = await unitRepos(t)
  const leases = new Set(['proc-a', 'proc-b'])
  return { repos, leases, a: processOn(repos, 'proc-a', leases), b: processOn(repos, 'proc-b', leases) }
}

function held(begun: Held | { replay: unknown }): Held {
  if ('replay' in begun) throw new Error(`expected to hold the call, got a replay: ${JSON.stringify(begun.replay)}`)
  return begun
}

t.test('a record held by a live process is that call\'s: 409 while pending or running, then its outcome', async (t) => {
  const { repos, a, b } = await setup(t)
  const key = newKey()
  const call = held(await a.begin(key, TOOL))
  await t.rejects(b.begin(key, TOOL), { code: 'IDEMPOTENCY_CONFLICT', message: /still pending/ }, 'pending elsewhere: 409')
  await t.rejects(b.check({ ...callOf(key) }, TOOL), { code: 'IDEMPOTENCY_CONFLICT' }, 'the precheck says so too')
  t.equal(await a.markRunning(call, TOOL), undefined, 'the holder starts')
  await t.rejects(b.begin(key, TOOL), { code: 'IDEMPOTENCY_CONFLICT', message: /still running/ }, 'running elsewhere: 409, not "interrupted"')
  t.equal((await repos.idempotency.get(key, Date.now()))?.status, 'running', 'and the record is left as it is')
  await a.finish(ended, call, OK)
  t.strictSame(await b.begin(key, TOOL), { replay: OK }, 'once ended, every copy gets the stored outcome')
  t.strictSame(await a.begin(key, TOOL), { replay: OK })
})

t.test('a pending record of a process whose lease lapsed is taken over; the old holder then does not run', async (t) => {
  const { repos, leases, a, b } = await setup(t)
  const key = newKey()
  const stale = held(await a.begin(key, TOOL))
  leases.delete('proc-a')
  const taken = held(await b.begin(key, TOOL))
  t.not(taken.claim, stale.claim, 'a new claim')
  t.equal((await repos.idempotency.get(key, Date.now()))?.owner, 'proc-b', 'the record names its new owner')
  // proc-a wakes up (its lease is renewed) and goes on where it was: its pending → running finds another claim.
  leases.add('proc-a')
  await t.rejects(a.markRunning(stale, TOOL), { code: 'IDEMPOTENCY_CONFLICT' }, 'the old holder may not run: the call is another\'s now')
  t.equal(await b.markRunning(taken, TOOL), undefined, 'the new holder runs')
  await a.release(stale)
  t.equal((await repos.idempotency.get(key, Date.now()))?.status, 'running', 'the old holder\'s release changes nothing')
  await b.finish(ended, taken, OK)
  t.strictSame(await a.begin(key, TOOL), { replay: OK })
})

t.test('a running record of a process whose lease lapsed may have run: interrupted, and the late outcome is not stored', async (t) => {
  const { repos, leases, a, b } = await setup(t)
  const key = newKey()
  const call = held(await a.begin(key, TOOL))
  t.equal(await a.markRunning(call, TOOL), undefined)
  leases.delete('proc-a')
  const answer = await b.begin(key, TOOL)
  t.match(answer, { replay: { isError: true, content: [{ text: /may or may not have completed/ }] } }, 'read as interrupted')
  t.equal((await repos.idempotency.get(key, Date.now()))?.status, 'interrupted', 'and recorded so')
  await a.finish(ended, call, OK)
  const record = await repos.idempotency.get(key, Date.now())
  t.equal(record?.status, 'interrupted', 'the old holder\'s late finish changes nothing')
  t.equal(record?.result, null)
})

t.test('a finished record is never replaced by an interruption', async (t) => {
  const { repos, a } = await setup(t)
  const key = newKey()
  const call = held(await a.begin(key, TOOL))
  await a.markRunning(call, TOOL)
  await a.finish(ended, call, OK)
  t.equal(await repos.idempotency.interrupt(key, call.claim, null, Date.now(), Date.now() + 1000), false, 'an ended record cannot be interrupted')
  t.equal(await repos.idempotency.markRunning(key, call.claim, Date.now()), false, 'nor run again')
  t.strictSame((await repos.idempotency.get(key, Date.now()))?.result, OK)
})

t.test('recovered by another process while pending: the old holder gets "nothing ran" and does not run', async (t) => {
  const { leases, a, b } = await setup(t)
  const key = newKey()
  const call = held(await a.begin(key, TOOL))
  leases.delete('proc-a')
  t.equal(await b.recover({ dead: ['proc-a'] }), 1, 'the lapsed process\'s record is recovered')
  const answer = await a.markRunning(call, TOOL)
  t.match(answer, { isError: true, content: [{ text: /nothing ran/ }] }, 'the old holder answers the stored "nothing ran" instead of running')
})

t.test('concurrent begins of one key from two live processes: exactly one holds it', async (t) => {
  const { a, b } = await setup(t)
  for (let round = 0; round < 20; round++) {
    const key = newKey()
    const outcomes = await Promise.allSettled([a.begin(key, TOOL), b.begin(key, TOOL), a.begin(key, TOOL), b.begin(key, TOOL)])
    const holders = outcomes.filter((o) => o.status === 'fulfilled' && !('replay' in o.value))
    const conflicts = outcomes.filter((o) => o.status === 'rejected' && (o.reason as { code?: string }).code === 'IDEMPOTENCY_CONFLICT')
    if (holders.length !== 1 || conflicts.length !== 3) t.fail(`round ${round}: ${holders.length} holders, ${conflicts.length} conflicts`)
  }
  t.pass('one holder and three conflicts in every round')
})

/** The identity check() reads a key from: a session's call with the key's JSON-RPC id. */
function callOf(key: IdempotencyKey) {
  return {
    exchange: { session: { id: key.sessionId }, era: 'legacy' },
    principal: { membershipId: key.membershipId, organizationId: key.organizationId },
    requestId: JSON.parse(key.requestId),
  } as unknown as Parameters<CallIdempotency['check']>[0]
}

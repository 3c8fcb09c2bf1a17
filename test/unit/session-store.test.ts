// test-backends: both (repositories on SQLite, and on PostgreSQL in the suite's second pass)
import { setImmediate as nextTurn } from 'node:timers/promises'
import t, { type Test } from 'tap'
import { unitRepos } from '../helpers/unit-repos.js'
import { SessionStore, type NewSession } from '../../src/sessions/session-store.js'

const silent = { error() {}, warn() {}, info() {}, debug() {} } as never

/**
 * What the database holds once the save scheduled after this turn has landed: at once on SQLite (synchronous), a few
 * milliseconds later on PostgreSQL. Polls until `check` holds or 2 s passed, then returns the last value.
 */
async function once<T>(read: () => Promise<T>, check: (value: T) => boolean): Promise<T> {
  await nextTurn()
  const deadline = Date.now() + 2000
  let value = await read()
  while (!check(value) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 10))
    value = await read()
  }
  return value
}

async function setup(t: Test) {
  const repos = await unitRepos(t)
  const org = await repos.organizations.create({ slug: 'acme' })
  const user = await repos.users.create({ email: 'a@example.com', passwordHash: null })
  const m = await repos.memberships.upsert({ userId: user.id, organizationId: org.id, role: 'viewer' })
  const store = new SessionStore(repos, { idleMs: 60_000, sweepMs: 60_000, touchFlushMs: 60_000 }, silent)
  const input = (credential = 'key:k1'): NewSession => ({
    credential, membershipId: m.id, organizationId: org.id, protocolVersion: '2025-11-25',
    clientInfo: { name: 'c', version: '1' }, clientCapabilities: {},
  })
  return { repos, store, input }
}

t.test('new sessions are saved together right after the turn that made them', async (t) => {
  const { repos, store, input } = await setup(t)
  const a = store.create(input())
  const b = store.create(input())
  t.equal(await repos.sessions.byId(a.id), undefined, 'not written during the turn')
  t.equal(await store.get(a.id), a, 'but usable at once')
  t.equal((await once(() => repos.sessions.byId(a.id), Boolean))?.id, a.id, 'written after it')
  t.equal((await once(() => repos.sessions.byId(b.id), Boolean))?.id, b.id)
})

t.test('writes to an unsaved session land in its row', async (t) => {
  const { repos, store, input } = await setup(t)
  const s = store.create(input())
  await store.markInitialized(s)
  await store.setLogLevel(s, 'debug')
  const row = await once(() => repos.sessions.byId(s.id), (r) => r?.logLevel === 'debug' && Boolean(r.initializedAt))
  t.ok(row?.initializedAt, 'initialized')
  t.equal(row?.logLevel, 'debug')
})

t.test('a session closed before it was saved never reaches the database', async (t) => {
  const { repos, store, input } = await setup(t)
  const s = store.create(input())
  await store.close(s)
  // A session created after it is saved by the next save, which would have carried the closed one too.
  const later = store.create(input())
  await once(() => repos.sessions.byId(later.id), Boolean)
  t.equal(await repos.sessions.byId(s.id), undefined)
  t.equal(await store.get(s.id), undefined)
})

t.test('ending by credential includes sessions not saved yet', async (t) => {
  const { repos, store, input } = await setup(t)
  const mine = store.create(input('key:k1'))
  const other = store.create(input('key:k2'))
  t.equal(await store.endByCredential('key:k1'), 1)
  t.ok(mine.ended)
  t.equal(await store.get(mine.id), undefined)
  t.ok((await repos.sessions.byId(mine.id))?.endedAt, 'saved, then ended')
  t.equal(await store.get(other.id), other, 'the other credential keeps its session')
})

t.test('stopping saves what is pending, so a restart finds it', async (t) => {
  const { repos, store, input } = await setup(t)
  const s = store.create(input())
  await store.stop()
  t.equal((await repos.sessions.byId(s.id))?.id, s.id)
})

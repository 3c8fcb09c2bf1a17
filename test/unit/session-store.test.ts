import { setImmediate as nextTurn } from 'node:timers/promises'
import t, { type Test } from 'tap'
import { openDatabase } from '../../src/db/client.js'
import { createRepos } from '../../src/db/repos/index.js'
import { SessionStore, type NewSession } from '../../src/sessions/session-store.js'

const silent = { error() {}, warn() {}, info() {}, debug() {} } as never

async function setup(t: Test) {
  const handle = openDatabase(':memory:')
  t.teardown(() => handle.close())
  const repos = createRepos(handle.db)
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
  await nextTurn()
  t.equal((await repos.sessions.byId(a.id))?.id, a.id, 'written after it')
  t.equal((await repos.sessions.byId(b.id))?.id, b.id)
})

t.test('writes to an unsaved session land in its row', async (t) => {
  const { repos, store, input } = await setup(t)
  const s = store.create(input())
  await store.markInitialized(s)
  await store.setLogLevel(s, 'debug')
  await nextTurn()
  const row = await repos.sessions.byId(s.id)
  t.ok(row?.initializedAt, 'initialized')
  t.equal(row?.logLevel, 'debug')
})

t.test('a session closed before it was saved never reaches the database', async (t) => {
  const { repos, store, input } = await setup(t)
  const s = store.create(input())
  await store.close(s)
  await nextTurn()
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

// test-backends: both (repositories on SQLite, and on PostgreSQL in the suite's second pass)
import t from 'tap'
import { unitRepos } from '../helpers/unit-repos.js'

// The session INSERT is a prepared statement with placeholders; JSON columns must round-trip as objects, not as
// doubly encoded strings.
t.test('a session row round-trips through the prepared insert', async (t) => {
  const repos = await unitRepos(t)
  const org = await repos.organizations.create({ slug: 'acme' })
  const user = await repos.users.create({ email: 'a@example.com', passwordHash: null })
  const m = await repos.memberships.upsert({ userId: user.id, organizationId: org.id, role: 'viewer' })
  const row = {
    id: 'd0f1a2b3-0000-4000-8000-000000000000', credential: 'key:k1', membershipId: m.id, organizationId: org.id,
    protocolVersion: '2025-06-18', clientInfo: { name: 'c', version: '1' }, clientCapabilities: { elicitation: {} },
    logLevel: 'info', initializedAt: null, createdAt: 10, lastSeenAt: 20, endedAt: null,
  }
  await repos.sessions.insert(row)
  t.same(await repos.sessions.byId(row.id), row)
  t.strictSame(await repos.sessions.touchMany([[row.id, 30]]), [], 'written, none left for later')
  t.equal((await repos.sessions.byId(row.id))?.lastSeenAt, 30)
  await repos.sessions.touchMany([[row.id, 25]])
  t.equal((await repos.sessions.byId(row.id))?.lastSeenAt, 30, 'an earlier time written late (by another process) never goes back')
  t.same(await repos.sessions.endByCredential('key:k1', 40), [row.id])
  t.equal(await repos.sessions.purge(0), 1, 'ended rows are purged')
})

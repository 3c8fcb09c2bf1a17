// test-backends: own (races on PostgreSQL)
import t, { type Test } from 'tap'
import { openPostgres } from '../../src/db/postgres/client.js'
import { postgresStore, uncachedCredentials } from '../../src/db/postgres/store.js'
import { reposOn, type Repos } from '../../src/db/repos/index.js'
import { postgresDatabase } from '../helpers/backends.js'

/**
 * Rules the repositories check by reading and then writing, raced on PostgreSQL, whose READ COMMITTED lets two
 * transactions read the same state before either writes (SQLite's one write lock hides such races). Two "processes",
 * each with its own pool, fire the two writes at once, round after round: the rule must hold in every round.
 */

const ROUNDS = 30

/** The repositories of one process on the database at `url` (migrated by the first), closed at teardown. */
async function processOn(t: Test, url: string): Promise<Repos> {
  const handle = await openPostgres(url, { max: 4 })
  t.teardown(() => handle.close())
  return reposOn(postgresStore(handle), uncachedCredentials())
}

t.test('two owners demoted or removed at once by two processes: the organization keeps one', async (t) => {
  const url = await postgresDatabase(t)
  const a = await processOn(t, url)
  const b = await processOn(t, url)
  const outcomes = { refused: 0, ownerless: 0 }
  for (let round = 0; round < ROUNDS; round++) {
    const org = await a.organizations.create({ slug: `race-${round}` })
    const [first, second] = await Promise.all([1, 2].map((n) => a.users.create({ email: `owner${n}-${round}@race.test`, passwordHash: null })))
    for (const user of [first!, second!]) await a.memberships.upsert({ userId: user.id, organizationId: org.id, role: 'owner' })
    // Even rounds: both demoted; odd rounds: one demoted, the other removed.
    const results = await Promise.allSettled([
      a.memberships.upsert({ userId: first!.id, organizationId: org.id, role: 'viewer' }),
      round % 2 === 0
        ? b.memberships.upsert({ userId: second!.id, organizationId: org.id, role: 'viewer' })
        : b.memberships.remove(second!.id, org.id),
    ])
    const refused = results.filter((r) => r.status === 'rejected')
    for (const r of refused) t.match((r as PromiseRejectedResult).reason, { code: 'CONFLICT' }, `round ${round}: refused as a CONFLICT`)
    outcomes.refused += refused.length
    const owners = (await a.memberships.forOrganization(org.id)).filter((m) => m.role === 'owner')
    if (owners.length !== 1) outcomes.ownerless++
    if (refused.length !== 1 || owners.length !== 1) t.fail(`round ${round}: ${refused.length} refused, ${owners.length} owner(s) left`)
  }
  t.equal(outcomes.ownerless, 0, `in each of ${ROUNDS} rounds the organization kept an owner`)
  t.equal(outcomes.refused, ROUNDS, 'and exactly one of the two writes was refused')
})

t.test('two processes set the same new env var at once: both succeed, one creates it, one replaces it', async (t) => {
  const url = await postgresDatabase(t)
  const a = await processOn(t, url)
  const b = await processOn(t, url)
  const org = await a.organizations.create({ slug: 'env-race' })
  const app = await a.apps.create({ organizationId: org.id, name: 'web' })
  let bad = 0
  for (let round = 0; round < ROUNDS; round++) {
    const name = `VAR_${round}`
    const results = await Promise.allSettled([
      a.envVars.set({ organizationId: org.id, appId: app.id, name, ciphertext: 'sealed-a', userId: null }),
      b.envVars.set({ organizationId: org.id, appId: app.id, name, ciphertext: 'sealed-b', userId: null }),
    ])
    const failed = results.filter((r) => r.status === 'rejected') as PromiseRejectedResult[]
    const created = results.filter((r) => r.status === 'fulfilled' && r.value.created).length
    if (failed.length > 0 || created !== 1) {
      bad++
      t.fail(`round ${round}: ${failed.length} failed (${failed.map((f) => String(f.reason?.code ?? f.reason?.message)).join(', ')}), ${created} created`)
    }
  }
  t.equal(bad, 0, `in each of ${ROUNDS} rounds both sets succeeded and exactly one created the variable`)
  const stored = await a.envVars.ciphertexts(org.id, app.id)
  t.equal(stored.length, ROUNDS, 'one row per name')
  t.ok(stored.every((v) => v.ciphertext === 'sealed-a' || v.ciphertext === 'sealed-b'), 'holding one of the two values')
  t.equal(await b.envVars.set({ organizationId: org.id, appId: app.id, name: 'VAR_0', ciphertext: 'sealed-c', userId: null }).then((r) => r.created), false, 'a later set replaces')
  t.equal((await a.envVars.ciphertexts(org.id, app.id)).find((v) => v.name === 'VAR_0')?.ciphertext, 'sealed-c')
})

/** `items` in a random order (Fisher–Yates). */
function shuffled<T>(items: readonly T[]): T[] {
  const out = [...items]
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1))
    ;[out[i], out[j]] = [out[j]!, out[i]!]
  }
  return out
}

t.test('several processes record the activity of overlapping sessions and keys at once: no deadlock, the latest time stays', async (t) => {
  const url = await postgresDatabase(t)
  const processes = await Promise.all([1, 2, 3, 4].map(() => processOn(t, url)))
  const a = processes[0]!
  const org = await a.organizations.create({ slug: 'busy' })
  const user = await a.users.create({ email: 'busy@race.test', passwordHash: null })
  const membership = await a.memberships.upsert({ userId: user.id, organizationId: org.id, role: 'owner' })
  const sessionIds = Array.from({ length: 12 }, (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`)
  for (const id of sessionIds) {
    await a.sessions.insert({
      id, credential: 'key:k', membershipId: membership.id, organizationId: org.id, protocolVersion: '2025-11-25',
      clientInfo: { name: 'race', version: '1' }, clientCapabilities: {}, logLevel: 'info', initializedAt: null, createdAt: 0, lastSeenAt: 0, endedAt: null,
    })
  }
  const keyIds: string[] = []
  for (let i = 0; i < 6; i++) keyIds.push((await a.apiKeys.create({ membershipId: membership.id, name: `k${i}`, scopes: ['mcp:read'] })).record.id)

  // Each process flushes what it saw, in its own order (a Map's order is when it first saw each), all at once, round
  // after round: overlapping rows in different orders, the pattern that deadlocked when each flush was a transaction
  // of row-by-row updates. A row another flush holds is returned as skipped and written again, as a flush does.
  const latest = new Map<string, number>()
  const errors: string[] = []
  let skips = 0
  for (let round = 1; round <= 40; round++) {
    await Promise.all(processes.map(async (repos, p) => {
      const at = round * 10 + p
      let sessions: Array<[string, number]> = shuffled(sessionIds).slice(0, 8).map((id) => [id, at])
      let keys: Array<[string, number]> = shuffled(keyIds).slice(0, 4).map((id) => [id, at])
      for (const [id] of [...sessions, ...keys]) latest.set(id, Math.max(latest.get(id) ?? 0, at))
      try {
        while (sessions.length + keys.length > 0) {
          const skipped = await repos.transaction(async (tx) => ({ sessions: await tx.sessions.touchMany(sessions), keys: await tx.apiKeys.touchMany(keys) }))
          skips += skipped.sessions.length + skipped.keys.length
          sessions = sessions.filter(([id]) => skipped.sessions.includes(id))
          keys = keys.filter(([id]) => skipped.keys.includes(id))
        }
      } catch (err) {
        errors.push(`round ${round}, process ${p}: ${(err as Error).message}`)
      }
    }))
  }
  t.strictSame(errors, [], 'no flush failed (no deadlock detected)')
  t.comment(`${skips} rows were held by another flush at that instant and written again`)
  const stored = new Map<string, number | null>()
  for (const id of sessionIds) stored.set(id, (await a.sessions.byId(id))!.lastSeenAt)
  for (const key of await a.apiKeys.listForMembership(membership.id)) stored.set(key.id, key.lastUsedAt)
  t.strictSame(Object.fromEntries(stored), Object.fromEntries([...sessionIds, ...keyIds].map((id) => [id, latest.get(id) ?? 0])), 'every row holds the latest time written, whatever the order of the writes')
})

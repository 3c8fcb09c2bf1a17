import t from 'tap'
import { apiKeyLookup } from '../../src/db/repos/api-keys.js'
import { reposOn } from '../../src/db/repos/index.js'
import { openDatabase } from '../../src/db/sqlite/client.js'
import { credentialChanges } from '../../src/db/sqlite/credential-changes.js'
import { sqliteStore } from '../../src/db/sqlite/store.js'
import type { RootStore } from '../../src/db/store.js'
import { sha256Hex } from '../../src/lib/crypto.js'

/**
 * A dialect's fast path must answer exactly what the repository's portable query does (src/db/fast-paths.ts). On one
 * SQLite database, the repositories with SQLite's fast paths and the same repositories without any (their portable
 * queries, which PostgreSQL runs where it has no hook) write and read the same rows.
 */

/** `store` with no fast paths in the repositories it builds. */
function portable(store: RootStore): RootStore {
  return { ...store, fastPaths: {}, guarded: (build) => store.guarded((inner) => build({ ...inner, fastPaths: {} })) }
}

t.test('every fast path of SQLite answers what the portable query does', async (t) => {
  const handle = openDatabase(':memory:')
  t.teardown(() => handle.close())
  const store = sqliteStore(handle.db)
  t.ok(Object.keys(store.fastPaths).length >= 8, 'SQLite has its fast paths')
  const fast = reposOn(store, credentialChanges(handle.db))
  const slow = reposOn(portable(store), credentialChanges(handle.db))

  const org = await fast.organizations.create({ slug: 'acme' })
  const user = await fast.users.create({ email: 'a@example.com', passwordHash: null })
  const member = await fast.memberships.upsert({ userId: user.id, organizationId: org.id, role: 'admin' })
  const session = (id: string) => ({
    id, credential: 'key:k1', membershipId: member.id, organizationId: org.id, protocolVersion: '2025-06-18',
    clientInfo: { name: 'c', version: '1' }, clientCapabilities: { elicitation: {} }, logLevel: 'info',
    initializedAt: null, createdAt: 10, lastSeenAt: 20, endedAt: null,
  })

  await fast.sessions.insert(session('s-fast'))
  await slow.sessions.insert(session('s-slow'))
  t.same(await slow.sessions.byId('s-fast'), session('s-fast'), 'inserted by the fast path, read by the portable query')
  t.same(await fast.sessions.byId('s-slow'), session('s-slow'), 'inserted by the portable query, read by the fast path')
  t.equal(await fast.sessions.byId('none'), undefined)
  t.equal(await slow.sessions.byId('none'), undefined)
  for (const repos of [fast, slow]) {
    t.same(await repos.sessions.touchMany([['s-fast', 30], ['s-slow', 30]]), [])
    t.same(await repos.sessions.touchMany([['s-fast', 25], ['s-slow', 25]]), [], 'an earlier time is ignored')
  }
  t.equal((await fast.sessions.byId('s-fast'))?.lastSeenAt, 30)
  t.equal((await fast.sessions.byId('s-slow'))?.lastSeenAt, 30, 'a time never goes back, with or without the fast path')

  for (let i = 0; i < 5; i++) await fast.apps.create({ organizationId: org.id, name: `app-${i}`, description: `d ${i}` })
  for (const [limit, after] of [[2, undefined], [10, undefined], [2, (await fast.apps.page(org.id, 2)).items[1]!.id]] as const) {
    t.strictSame(await fast.apps.page(org.id, limit, after), await slow.apps.page(org.id, limit, after), `apps page of ${limit} after ${after ?? 'the start'}`)
  }

  const { key } = await fast.apiKeys.create({ membershipId: member.id, name: 'k', scopes: ['apps:read'] })
  const keyLookup = apiKeyLookup(sha256Hex(key))
  const candidates = await fast.apiKeys.candidatesByLookup(keyLookup)
  t.equal(candidates.length, 1)
  t.strictSame(candidates, await slow.apiKeys.candidatesByLookup(keyLookup), 'API-key candidates')
  t.strictSame(await fast.apiKeys.candidatesByLookup('nothing'), [])

  const client = await fast.oauthClients.create({ name: 'c', redirectUris: ['https://c.example/cb'], grantTypes: ['authorization_code'], scope: 'apps:read' })
  const grant = await fast.oauthGrants.createGrant({ id: 'g1', clientId: client.id, userId: user.id, membershipId: member.id, organizationId: org.id, scope: 'apps:read', resource: 'https://mcp.example/mcp', createdAt: 1, expiresAt: Date.now() + 60_000 })
  await fast.oauthGrants.addAccessToken({ jti: 'j1', grantId: grant.id, createdAt: 1, expiresAt: Date.now() + 60_000 })
  const state = await fast.oauthGrants.accessTokenState('j1')
  t.equal(state?.role, 'admin')
  t.strictSame(state, await slow.oauthGrants.accessTokenState('j1'), 'access-token state')
  t.equal(await fast.oauthGrants.accessTokenState('none'), undefined)

  const app = (await fast.apps.page(org.id, 1)).items[0]!
  const deployment = await fast.deployments.create({ organizationId: org.id, appId: app.id, kind: 'deploy', pipeline: 'default', createdBy: null })
  await fast.deployments.appendLines([0, 1].map((seq) => ({ deploymentId: deployment.id, seq, stream: 'stdout' as const, line: `fast ${seq}`, at: seq })))
  await slow.deployments.appendLines([2, 3].map((seq) => ({ deploymentId: deployment.id, seq, stream: 'stderr' as const, line: `slow ${seq}`, at: seq })))
  t.same((await fast.deployments.lines(deployment.id, 10)).items.map((l) => l.line), ['fast 0', 'fast 1', 'slow 2', 'slow 3'], 'deployment lines, in order')

  await fast.health.ping()
  await slow.health.ping()
  handle.close()
  await t.rejects(fast.health.ping(), 'a closed database fails the fast ping')
  await t.rejects(slow.health.ping(), 'and the portable one')
})

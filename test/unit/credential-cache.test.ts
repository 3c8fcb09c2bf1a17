import t from 'tap'
import { CredentialCache } from '../../src/auth/credential-cache.js'
import type { Principal } from '../../src/auth/principal.js'
import { openDatabase } from '../../src/db/sqlite/client.js'
import { createRepos } from '../../src/db/sqlite/repos.js'
import { tempDatabase } from '../helpers/server.js'

function principal(overrides: Partial<Principal> = {}): Principal {
  return {
    kind: 'api_key', credential: 'key:k1', credentialId: 'k1', userId: 'u1', membershipId: 'm1', organizationId: 'o1',
    role: 'viewer', scopes: ['mcp:read'], expiresAt: null, ...overrides,
  }
}

t.test('the cache answers until something changes, then forgets everything', async (t) => {
  let changed = false
  const cache = new CredentialCache({ changed: () => changed })
  cache.set('h1', principal())
  t.equal(cache.get('h1')?.credential, 'key:k1')
  t.ok(Object.isFrozen(cache.get('h1')), 'shared principals are frozen')
  t.equal(cache.get('h2'), undefined)
  changed = true
  t.equal(cache.get('h1'), undefined, 'a change drops the entry')
  changed = false
  t.equal(cache.get('h1'), undefined, 'and it stays dropped')
  t.equal(cache.size, 0)
})

t.test('a principal verified across a change is not kept: verifying reads the database asynchronously', async (t) => {
  let changed = false
  const cache = new CredentialCache({ changed: () => changed })
  t.equal(cache.get('h1'), undefined, 'a miss: the caller verifies, and awaits the database')
  const generation = cache.generation
  // Meanwhile another request notices a change (a revocation committed after the verifier's read) and the cache drops.
  changed = true
  t.equal(cache.get('h2'), undefined)
  changed = false
  cache.set('h1', principal(), generation)
  t.equal(cache.get('h1'), undefined, 'what was verified before the change is not kept')
  cache.set('h1', principal(), cache.generation)
  t.equal(cache.get('h1')?.credential, 'key:k1', 'what is verified after it is')
})

t.test('an entry lapses at the credential expiry', async (t) => {
  const cache = new CredentialCache({ changed: () => false })
  cache.set('h', principal({ expiresAt: 1000 }))
  t.ok(cache.get('h', 999))
  t.equal(cache.get('h', 1000), undefined)
  t.equal(cache.size, 0)
})

t.test('the cache is bounded and evicts the oldest entry', async (t) => {
  const cache = new CredentialCache({ changed: () => false, max: 2 })
  cache.set('a', principal())
  cache.set('b', principal())
  cache.set('a', principal({ role: 'owner' }))
  t.equal(cache.size, 2, 'replacing an entry evicts nothing')
  cache.set('c', principal())
  t.equal(cache.size, 2)
  t.equal(cache.get('a'), undefined, 'the oldest went')
  t.ok(cache.get('b'))
  t.ok(cache.get('c'))
})

t.test('credential changes are seen from this process and from another connection', async (t) => {
  const path = tempDatabase(t)
  const server = openDatabase(path)
  const cli = openDatabase(path, { migrate: false })
  t.teardown(() => { cli.close(); server.close() })
  const repos = createRepos(server.db)
  const changes = repos.credentialChanges
  t.equal(changes.takeChanged(), false, 'nothing changed yet')

  const org = await repos.organizations.create({ slug: 'acme' })
  const user = await repos.users.create({ email: 'a@example.com', passwordHash: null })
  const m = await repos.memberships.upsert({ userId: user.id, organizationId: org.id, role: 'viewer' })
  const { record } = await repos.apiKeys.create({ membershipId: m.id, name: 'k', scopes: ['mcp:read'] })
  t.equal(changes.takeChanged(), false, 'creating rows changes no existing credential')

  await repos.memberships.upsert({ userId: user.id, organizationId: org.id, role: 'admin' })
  t.equal(changes.takeChanged(), true, 'a role change is a change')
  t.equal(changes.takeChanged(), false, 'reported once')
  await repos.users.setDisabled(user.id, true)
  t.equal(changes.takeChanged(), true, 'disabling a user is a change')
  await repos.apiKeys.revoke(record.id)
  t.equal(changes.takeChanged(), true, 'revoking a key is a change')

  await createRepos(cli.db).users.setDisabled(user.id, false)
  t.equal(changes.takeChanged(), true, 'a commit by another connection (the CLI) is a change')
  t.equal(changes.takeChanged(), false)
})

// test-backends: both (repositories on SQLite, and on PostgreSQL in the suite's second pass)
import t from 'tap'
import { unitRepos } from '../helpers/unit-repos.js'
import { preferredMembership } from '../../src/oauth/preferred-organization.js'
import { ShownOnceStore } from '../../src/plugins/oauth/shown-once.js'

// Credential changes made through the repositories with an actor (the account page, the CLI) are audited in the same
// transaction, in the organization of what changed; without one (the first start's key) nothing is written.

async function setup(t: { teardown(fn: () => unknown): void }) {
  const repos = await unitRepos(t)
  const acme = await repos.organizations.create({ slug: 'acme', name: 'Acme' })
  const zeta = await repos.organizations.create({ slug: 'zeta', name: 'Zeta' })
  const user = await repos.users.create({ email: 'dev@example.com', passwordHash: null })
  const inAcme = await repos.memberships.upsert({ userId: user.id, organizationId: acme.id, role: 'developer' })
  const inZeta = await repos.memberships.upsert({ userId: user.id, organizationId: zeta.id, role: 'owner' })
  // The chain's fields (seq, hashes) are the audit chain's own tests' business (audit-repo, audit-chain).
  const entries = async (organizationId: string) => (await repos.audit.page(organizationId, 100)).items.map(({ seq: _s, prevHash: _p, hash: _h, ...e }) => e)
  return { repos, acme, zeta, user, inAcme, inZeta, entries }
}

t.test('API keys: create, revoke and rotate with an actor are audited; the key never is', async (t) => {
  const { repos, acme, zeta, user, inAcme, entries } = await setup(t)
  const page = { via: 'account_page', userId: user.id, requestId: 'req-1' } as const

  const created = await repos.apiKeys.create({ membershipId: inAcme.id, name: 'laptop', scopes: ['mcp:read'], by: page })
  const [createEntry, ...rest] = await entries(acme.id)
  t.same(rest, [], 'one entry')
  t.strictSame({ ...createEntry, id: undefined, at: undefined }, {
    id: undefined,
    at: undefined,
    organizationId: acme.id,
    userId: user.id,
    membershipId: inAcme.id,
    credentialKind: 'account_page',
    credentialId: null,
    clientId: null,
    action: 'api_key.create',
    targetType: 'api_key',
    targetId: created.record.id,
    outcome: 'succeeded',
    details: { request_id: 'req-1', name: 'laptop', key_prefix: created.record.displayPrefix, scopes: 'mcp:read', membership_id: inAcme.id, expires_at: null },
  }, 'the create entry: actor, organization, target, outcome')
  t.same(await entries(zeta.id), [], 'nothing in the other organization')

  t.ok(await repos.apiKeys.revoke(created.record.id, { via: 'cli' }))
  const revokeEntry = (await entries(acme.id))[0]!
  t.strictSame({ ...revokeEntry, id: undefined, at: undefined }, {
    id: undefined,
    at: undefined,
    organizationId: acme.id,
    userId: null,
    membershipId: null,
    credentialKind: 'cli',
    credentialId: null,
    clientId: null,
    action: 'api_key.revoke',
    targetType: 'api_key',
    targetId: created.record.id,
    outcome: 'succeeded',
    details: { name: 'laptop', key_prefix: created.record.displayPrefix, membership_id: inAcme.id },
  }, 'the CLI revoke entry: no user, credential kind cli')
  t.notOk(await repos.apiKeys.revoke(created.record.id, { via: 'cli' }), 'revoking again changes nothing')
  t.equal((await entries(acme.id)).length, 2, 'and writes nothing')

  const expiring = await repos.apiKeys.create({ membershipId: inAcme.id, name: 'ci', scopes: ['mcp:read', 'mcp:write'], expiresAt: Date.UTC(2030, 0, 1), by: { via: 'cli' } })
  t.equal((await entries(acme.id))[0]!.details?.expires_at, '2030-01-01T00:00:00.000Z', 'the expiry in ISO form')
  const rotated = await repos.apiKeys.rotate(expiring.record.id, page)
  t.ok(rotated, 'rotated')
  t.equal(rotated!.previous.id, expiring.record.id)
  t.equal((await repos.apiKeys.byId(expiring.record.id))?.revokedAt !== null, true, 'the old key is revoked')
  t.equal(rotated!.record.expiresAt, Date.UTC(2030, 0, 1), 'the new key keeps the expiry')
  const [revokedByRotation, createdByRotation] = await entries(acme.id)
  t.equal(createdByRotation!.action, 'api_key.create')
  t.equal(createdByRotation!.targetId, rotated!.record.id)
  t.equal(createdByRotation!.details?.rotated_from, expiring.record.id, 'the new key names the one it replaces')
  t.equal(revokedByRotation!.action, 'api_key.revoke')
  t.equal(revokedByRotation!.targetId, expiring.record.id)
  t.equal(revokedByRotation!.details?.replaced_by, rotated!.record.id, 'the old key names its replacement')
  t.equal(await repos.apiKeys.rotate(expiring.record.id, page), undefined, 'a revoked key cannot be rotated')

  const before = (await entries(acme.id)).length
  await repos.apiKeys.create({ membershipId: inAcme.id, name: 'quiet', scopes: ['mcp:read'] })
  t.equal((await entries(acme.id)).length, before, 'no actor, no entry (the first start)')

  const log = JSON.stringify(await entries(acme.id))
  for (const key of [created.key, expiring.key, rotated!.key]) t.notOk(log.includes(key), 'no key in the audit log')
})

t.test('revoking an application audits each grant in its own organization', async (t) => {
  const { repos, acme, zeta, user, inAcme, inZeta, entries } = await setup(t)
  const client = await repos.oauthClients.create({ name: 'Cursor', redirectUris: ['http://127.0.0.1/cb'], grantTypes: ['authorization_code'], scope: 'mcp:read mcp:write' })
  const now = Date.now()
  const grant = (id: string, m: typeof inAcme, organizationId: string) =>
    repos.oauthGrants.createGrant({ id, clientId: client.id, userId: user.id, membershipId: m.id, organizationId, scope: 'mcp:read', resource: 'http://x', createdAt: now, expiresAt: now + 60_000 })
  await grant('grt_a', inAcme, acme.id)
  await grant('grt_z', inZeta, zeta.id)
  await repos.oauthGrants.addAccessToken({ jti: 'jti-1', grantId: 'grt_a', createdAt: now, expiresAt: now + 60_000 })

  const result = await repos.oauthGrants.revokeClientForUser(user.id, client.id, now, { via: 'account_page', userId: user.id, requestId: 'req-9' })
  t.same(result, { grants: 2, jtis: ['jti-1'] })
  for (const [org, membership, grantId, tokens] of [[acme.id, inAcme.id, 'grt_a', 1], [zeta.id, inZeta.id, 'grt_z', 0]] as const) {
    const list = await entries(org)
    t.equal(list.length, 1, `one entry in ${org}`)
    t.strictSame({ ...list[0], id: undefined, at: undefined }, {
      id: undefined,
      at: undefined,
      organizationId: org,
      userId: user.id,
      membershipId: membership,
      credentialKind: 'account_page',
      credentialId: null,
      clientId: null,
      action: 'oauth_grant.revoke',
      targetType: 'oauth_grant',
      targetId: grantId,
      outcome: 'succeeded',
      details: { request_id: 'req-9', client_id: client.id, scope: 'mcp:read', membership_id: membership, access_tokens_revoked: tokens },
    })
  }
  t.same(await repos.oauthGrants.revokeClientForUser(user.id, client.id, now, { via: 'cli' }), { grants: 0, jtis: [] }, 'nothing left to revoke')
  t.equal((await entries(acme.id)).length + (await entries(zeta.id)).length, 2, 'and nothing more audited')
  t.equal(await repos.oauthGrants.lastChosenMembership(user.id, client.id), inZeta.id, 'the newest grant (ids break the tie) names its membership, revoked or not')
})

t.test('the consent page chooses the organization last chosen for the client, else the oldest membership', async (t) => {
  const m = (id: string, createdAt: number, grantable = true) => ({ id, createdAt, grantable })
  // "zeta" sorts last but is the member's own (oldest); "acme" was joined later.
  const own = m('mem_zeta', 1000)
  const later = m('mem_acme', 2000)
  t.equal(preferredMembership([later, own], undefined), 'mem_zeta', 'the oldest membership')
  t.equal(preferredMembership([later, own], 'mem_acme'), 'mem_acme', 'the one last chosen for this client')
  t.equal(preferredMembership([later, own], 'mem_gone'), 'mem_zeta', 'a last choice that is no longer a membership is ignored')
  t.equal(preferredMembership([later, m('mem_zeta', 1000, false)], undefined), 'mem_acme', 'a membership that can grant nothing is skipped')
  t.equal(preferredMembership([later, m('mem_zeta', 1000, false)], 'mem_zeta'), 'mem_acme', 'even when last chosen')
  t.equal(preferredMembership([m('mem_b', 5), m('mem_a', 5)], undefined), 'mem_a', 'ids break ties')
  t.equal(preferredMembership([m('mem_a', 1, false)], undefined), undefined, 'none can grant: no choice')
  t.equal(preferredMembership([], undefined), undefined)
})

t.test('what the account page shows once is taken once, per sign-in, and lapses', async (t) => {
  const store = new ShownOnceStore(1000)
  store.put('s1', { notice: 'one' }, 0)
  store.put('s2', { newKey: { name: 'k', key: 'service_mcp_x' } }, 10)
  t.same(store.take('s1', 5), { notice: 'one' })
  t.equal(store.take('s1', 6), undefined, 'gone once taken')
  t.equal(store.take('other', 6), undefined, 'another sign-in sees nothing')
  store.put('s2', { notice: 'newer' }, 20)
  t.equal(store.size, 1, 'a newer change replaces what was waiting')
  t.same(store.take('s2', 30), { notice: 'newer' })
  store.put('s3', { notice: 'late' }, 100)
  t.equal(store.take('s3', 1100), undefined, 'not shown after the TTL')
  store.put('s4', { notice: 'old' }, 0)
  store.put('s5', { notice: 'new' }, 5000)
  t.equal(store.size, 1, 'expired entries are swept as others are put')
  store.drop('s5')
  t.equal(store.size, 0, 'sign-out drops what waited')
})

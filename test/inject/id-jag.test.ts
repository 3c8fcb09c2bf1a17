/**
 * Enterprise-managed authorization at POST /oauth/token: the jwt-bearer grant carrying an identity assertion (ID-JAG)
 * signed by a test identity provider (test/helpers/id-jag.ts: a real key, its JWK Set served on 127.0.0.1). One test per
 * check of docs/decisions/enterprise-managed-authorization.md, each on the status, the OAuth error code and, where the
 * exchange succeeds, a tool call with the token. The inject tier: the server's clock moves only when a test advances it.
 *
 * On the PostgreSQL pass the replay test races two app instances that share the database.
 */
import { generateKeyPair, SignJWT, UnsecuredJWT } from 'jose'
import t, { type Test } from 'tap'
import { request } from 'undici'
import type { Config } from '../../src/config.js'
import { callTool, openSession, post } from '../helpers/mcp.js'
import { registerClient, tokenRequest } from '../helpers/oauth.js'
import { createMember, defaultOrganization, ownerMembership } from '../helpers/seed.js'
import { injectServer, type InjectServer } from '../helpers/inject.js'
import { JWT_BEARER, startIdp, type AssertionClaims, type TestIdp } from '../helpers/id-jag.js'
import { OWNER_EMAIL, onPostgres } from '../helpers/server.js'
import { redisPrefix, redisUrl } from '../helpers/backends.js'

type TokenReply = Awaited<ReturnType<typeof tokenRequest>>

interface Setup {
  server: InjectServer
  idp: TestIdp
  clientId: string
  /** An assertion for the owner and the registered client, signed at the server's now; `claims` replace defaults. */
  assertion(claims?: AssertionClaims, options?: Parameters<TestIdp['sign']>[1]): Promise<string>
  exchange(assertion: string, extra?: Record<string, string>): Promise<TokenReply>
}

async function setup(t: Test, options: { issuer?: Partial<Config['trustedIssuers'][number]>; config?: Partial<Config>; idp?: TestIdp } = {}): Promise<Setup> {
  const idp = options.idp ?? await startIdp(t)
  const server = await injectServer(t, {
    config: { trustedIssuers: [{ issuer: idp.issuer, jwksUri: idp.jwksUri, algorithms: ['ES256'], ...options.issuer }], ...options.config },
  })
  const clientId = (await registerClient(server)).client_id
  return {
    server,
    idp,
    clientId,
    assertion: (claims = {}, signOptions = {}) =>
      idp.sign({ sub: 'U0001', email: OWNER_EMAIL, aud: server.url, resource: server.mcpUrl, client_id: clientId, ...claims }, { now: server.clock.now(), ...signOptions }),
    exchange: (assertion, extra = {}) => tokenRequest(server, { grant_type: JWT_BEARER, assertion, client_id: clientId, ...extra }),
  }
}

function refused(t: Test, res: TokenReply, status: number, code: string, description: RegExp, label: string): void {
  t.equal(res.status, status, `${label}: ${status}`)
  t.strictSame(Object.keys(res.json ?? {}).sort(), ['error', 'error_description'], `${label}: OAuth error body`)
  t.equal(res.json?.error, code, `${label}: ${code}`)
  t.match(res.json?.error_description, description, `${label}: says which check failed (${res.json?.error_description})`)
  t.match(String(res.headers['cache-control']), /no-store/, `${label}: no-store`)
}

function granted(t: Test, res: TokenReply, label: string): { access_token: string; scope: string; refresh_token?: string } {
  t.equal(res.status, 200, `${label}: 200${res.status === 200 ? '' : ` (${JSON.stringify(res.json)})`}`)
  return res.json
}

async function metadata(server: InjectServer): Promise<Record<string, unknown>> {
  return (await request(`${server.url}/.well-known/oauth-authorization-server`)).body.json() as Promise<Record<string, unknown>>
}

async function whoami(server: InjectServer, accessToken: string) {
  const { headers } = await openSession(server.mcpUrl, accessToken)
  const reply = await post(server.mcpUrl, callTool('service_whoami'), headers)
  return reply.json?.result?.structuredContent
}

t.test('a valid assertion gives an access token, without a refresh token, that calls a tool as the member', async (t) => {
  const s = await setup(t)
  const res = granted(t, await s.exchange(await s.assertion()), 'exchange')
  t.equal(res.refresh_token, undefined, 'no refresh token: a new assertion replaces refreshing')
  t.equal(res.scope, 'mcp:read mcp:write', 'every scope the owner can use, as nothing narrowed it')
  const me = await whoami(s.server, res.access_token)
  t.equal(me?.user?.email, OWNER_EMAIL, 'service_whoami shows the member the assertion names')
  t.equal(me?.organization?.slug, 'default')
  t.equal(me?.credential?.client_id, s.clientId, 'the token belongs to the requesting client')
  const owner = await ownerMembership(s.server)
  const { items } = await s.server.app.repos.audit.page(owner.organizationId, 10, undefined, 'oauth_grant.assertion')
  t.equal(items.length, 1, 'one audit entry for the exchange')
  t.match(items[0], { userId: owner.userId, membershipId: owner.id, clientId: s.clientId, credentialKind: 'id_jag', details: { issuer: s.idp.issuer, subject: 'U0001' } })
})

t.test('a replayed assertion (same jti) is refused; another jti is not', async (t) => {
  const s = await setup(t)
  const assertion = await s.assertion()
  granted(t, await s.exchange(assertion), 'first use')
  refused(t, await s.exchange(assertion), 400, 'invalid_grant', /already used/, 'replay')
  granted(t, await s.exchange(await s.assertion()), 'a fresh assertion')
})

t.test('an expired assertion is refused once past the clock tolerance', async (t) => {
  const s = await setup(t, { config: { assertionClockToleranceMs: 5_000 } })
  const assertion = await s.assertion()
  await s.server.clock.advance(300_000 + 4_000)
  const within = await s.assertion({ jti: 'within-tolerance', exp: Math.floor(s.server.clock.now() / 1000) - 3 })
  granted(t, await s.exchange(within), 'expired 3 s ago, within a 5 s tolerance')
  await s.server.clock.advance(2_000)
  refused(t, await s.exchange(assertion), 400, 'invalid_grant', /expired/, 'expired beyond the tolerance')
})

t.test('the lifetime and issue time are bounded', async (t) => {
  const s = await setup(t, { config: { assertionMaxLifetimeMs: 60_000 } })
  const iat = Math.floor(s.server.clock.now() / 1000)
  refused(t, await s.exchange(await s.assertion({ iat, exp: iat + 61 })), 400, 'invalid_grant', /lives longer/, 'a lifetime beyond the setting')
  refused(t, await s.exchange(await s.assertion({ iat: iat + 120, exp: iat + 150 })), 400, 'invalid_grant', /issued in the future/, 'iat in the future')
  refused(t, await s.exchange(await s.assertion({ exp: undefined })), 400, 'invalid_grant', /exp/, 'no exp')
})

t.test('the audience must be exactly this authorization server', async (t) => {
  const s = await setup(t)
  refused(t, await s.exchange(await s.assertion({ aud: 'https://other.example' })), 400, 'invalid_grant', /audience/, 'another server')
  refused(t, await s.exchange(await s.assertion({ aud: `${s.server.url}/` })), 400, 'invalid_grant', /audience/, 'not the issuer identifier exactly')
  refused(t, await s.exchange(await s.assertion({ aud: [s.server.url, 'https://other.example'] })), 400, 'invalid_grant', /audience/, 'an array of two')
  granted(t, await s.exchange(await s.assertion({ aud: [s.server.url] })), 'an array of exactly this issuer')
})

t.test('the resource claim must name this server; a resource parameter must too', async (t) => {
  const s = await setup(t)
  refused(t, await s.exchange(await s.assertion({ resource: undefined })), 400, 'invalid_grant', /resource/, 'no resource claim')
  refused(t, await s.exchange(await s.assertion({ resource: 'https://other.example/mcp' })), 400, 'invalid_grant', /resource/, 'another resource')
  granted(t, await s.exchange(await s.assertion({ resource: ['https://other.example/mcp', s.server.url] })), 'an array that names this server')
  refused(t, await s.exchange(await s.assertion(), { resource: 'https://other.example' }), 400, 'invalid_target', /resource/, 'resource parameter of another server')
  granted(t, await s.exchange(await s.assertion(), { resource: s.server.mcpUrl }), 'resource parameter naming /mcp')
})

t.test('an issuer that is not trusted is refused, whatever it signs with', async (t) => {
  const s = await setup(t)
  const stranger = await startIdp(t)
  const forged = await stranger.sign({ sub: 'U0001', email: OWNER_EMAIL, aud: s.server.url, resource: s.server.url, client_id: s.clientId }, { now: s.server.clock.now() })
  refused(t, await s.exchange(forged), 400, 'invalid_grant', /not a trusted issuer/, 'an untrusted issuer')
  const impostor = await s.assertion({}, { key: stranger.privateKey })
  refused(t, await s.exchange(impostor), 400, 'invalid_grant', /signature/, 'the trusted issuer\'s name, another key')
})

t.test('the header type must be oauth-id-jag+jwt', async (t) => {
  const s = await setup(t)
  refused(t, await s.exchange(await s.assertion({}, { header: { typ: 'JWT' } })), 400, 'invalid_grant', /typ/, 'typ JWT')
  refused(t, await s.exchange(await s.assertion({}, { header: { typ: undefined } })), 400, 'invalid_grant', /typ/, 'no typ')
  granted(t, await s.exchange(await s.assertion({}, { header: { typ: 'application/oauth-id-jag+jwt' } })), 'the media type with its application/ prefix')
})

t.test('only the issuer\'s asymmetric algorithms: HS256 keyed with the public key, and none, are refused', async (t) => {
  const s = await setup(t)
  const iat = Math.floor(s.server.clock.now() / 1000)
  const claims = { iss: s.idp.issuer, sub: 'U0001', email: OWNER_EMAIL, aud: s.server.url, resource: s.server.url, client_id: s.clientId, jti: 'alg-test', iat, exp: iat + 60 }
  // The key-confusion attack: the published key used as an HMAC secret.
  const hmac = await new SignJWT(claims).setProtectedHeader({ alg: 'HS256', typ: 'oauth-id-jag+jwt', kid: 'test-key-1' })
    .sign(new TextEncoder().encode(JSON.stringify(s.idp.publicJwk)))
  refused(t, await s.exchange(hmac), 400, 'invalid_grant', /algorithm/, 'HS256')
  const none = new UnsecuredJWT(claims).encode()
  const typedNone = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'oauth-id-jag+jwt' })).toString('base64url')}.${none.split('.')[1]}.`
  refused(t, await s.exchange(typedNone), 400, 'invalid_grant', /algorithm|not a signed JWT/, 'alg none')
  const rsa = await generateKeyPair('RS256')
  refused(t, await s.exchange(await s.assertion({}, { header: { alg: 'RS256' }, key: rsa.privateKey })), 400, 'invalid_grant', /algorithm/, 'an asymmetric algorithm not on this issuer\'s list')
  refused(t, await s.exchange('not.a.jwt'), 400, 'invalid_grant', /not a signed JWT/, 'garbage')
})

t.test('the client: unknown, another than the assertion names, or not allowed for the issuer', async (t) => {
  const s = await setup(t)
  const unknown = await tokenRequest(s.server, { grant_type: JWT_BEARER, assertion: await s.assertion({ client_id: 'mcp_unknown' }), client_id: 'mcp_unknown' })
  refused(t, unknown, 401, 'invalid_client', /client_id/, 'an unknown client')
  const other = (await registerClient(s.server)).client_id
  refused(t, await s.exchange(await s.assertion({ client_id: other })), 400, 'invalid_grant', /another client/, 'the assertion names another client')
  refused(t, await s.exchange(await s.assertion({ client_id: undefined })), 400, 'invalid_grant', /client_id/, 'no client_id claim')
  refused(t, await s.exchange(await s.assertion(), { client_secret: 'x' }), 401, 'invalid_client', /public/, 'a client secret')

  const limited = await setup(t, { idp: s.idp, issuer: { clients: ['mcp_someone_else'] } })
  refused(t, await limited.exchange(await limited.assertion()), 400, 'invalid_grant', /not trusted to assert for this client/, 'a client the issuer may not assert for')
})

t.test('the member: unknown, disabled, or in several organizations without one named', async (t) => {
  const s = await setup(t)
  refused(t, await s.exchange(await s.assertion({ email: 'nobody@example.com' })), 400, 'invalid_grant', /No active member/, 'an unknown email')
  refused(t, await s.exchange(await s.assertion({ email: undefined })), 400, 'invalid_grant', /No active member/, 'neither a linked subject nor an email')
  const member = await createMember(s.server, { role: 'developer' })
  granted(t, await s.exchange(await s.assertion({ email: member.user.email.toUpperCase() })), 'a member by email, in any case')
  await s.server.app.repos.users.setDisabled(member.user.id, true)
  refused(t, await s.exchange(await s.assertion({ email: member.user.email })), 400, 'invalid_grant', /No active member/, 'a disabled user')

  const other = await s.server.app.repos.organizations.create({ slug: 'acme' })
  const owner = await ownerMembership(s.server)
  await s.server.app.repos.memberships.upsert({ userId: owner.userId, organizationId: other.id, role: 'viewer' })
  refused(t, await s.exchange(await s.assertion()), 400, 'invalid_grant', /several organizations/, 'a member of two organizations, none named')

  const named = await setup(t, { idp: s.idp, issuer: { organization: 'default' } })
  const acme = await named.server.app.repos.organizations.create({ slug: 'acme' })
  const namedOwner = await ownerMembership(named.server)
  await named.server.app.repos.memberships.upsert({ userId: namedOwner.userId, organizationId: acme.id, role: 'viewer' })
  const token = granted(t, await named.exchange(await named.assertion()), 'the organization the issuer names')
  t.equal((await whoami(named.server, token.access_token))?.organization?.slug, 'default', 'the token acts in that organization')
  const elsewhere = await createMember(named.server, { role: 'owner', organizationId: acme.id })
  refused(t, await named.exchange(await named.assertion({ email: elsewhere.user.email })), 400, 'invalid_grant', /does not belong to organization default/, 'a member of another organization only')
})

t.test('the member a single sign-on through the same IdP linked to the subject is found by it, whatever the email', async (t) => {
  const idp = await startIdp(t)
  const provider = { name: 'corp', title: 'Corp', issuer: idp.issuer, clientId: 'mcp-server', clientAuth: 'client_secret_basic' as const, clientSecret: 's', scopes: 'openid email', emailClaim: 'email', groupsClaim: 'groups', provision: { justInTime: false, organizations: [] } }
  const s = await setup(t, { idp, config: { signInProviders: [provider] } })
  const member = await createMember(s.server, { role: 'developer' })
  await s.server.app.repos.userIdentities.create({ provider: 'corp', subject: 'S-linked', userId: member.user.id, email: member.user.email, createdAt: 0, lastSignInAt: null })
  const token = granted(t, await s.exchange(await s.assertion({ sub: 'S-linked', email: OWNER_EMAIL })), 'the linked subject')
  t.equal((await whoami(s.server, token.access_token))?.user?.email, member.user.email, 'the linked member, not the one with the email')
  const other = await setup(t, { idp, config: { signInProviders: [{ ...provider, issuer: 'https://other-idp.example' }] } })
  const stranger = await createMember(other.server, { role: 'developer' })
  await other.server.app.repos.userIdentities.create({ provider: 'corp', subject: 'S-linked', userId: stranger.user.id, email: stranger.user.email, createdAt: 0, lastSignInAt: null })
  const byEmail = granted(t, await other.exchange(await other.assertion({ sub: 'S-linked' })), 'a link made through another issuer')
  t.equal((await whoami(other.server, byEmail.access_token))?.user?.email, OWNER_EMAIL, 'is not used: the email decides')
})

t.test('scope: what was asked, within what the assertion grants and what the role can use', async (t) => {
  const s = await setup(t)
  t.equal(granted(t, await s.exchange(await s.assertion({ scope: 'mcp:read' })), 'assertion grants read').scope, 'mcp:read')
  refused(t, await s.exchange(await s.assertion({ scope: 'mcp:read' }), { scope: 'mcp:write' }), 400, 'invalid_scope', /assertion allows "mcp:read"/, 'write asked, read asserted')
  t.equal(granted(t, await s.exchange(await s.assertion({ scope: 'mcp:read mcp:write' }), { scope: 'mcp:write' }), 'write asked').scope, 'mcp:write')
  refused(t, await s.exchange(await s.assertion(), { scope: 'mcp:admin' }), 400, 'invalid_scope', /mcp:read and\/or mcp:write/, 'an unknown scope asked')
  refused(t, await s.exchange(await s.assertion({ scope: 'openid profile' })), 400, 'invalid_scope', /Nothing of the requested scope/, 'the assertion grants none of ours')

  const read = granted(t, await s.exchange(await s.assertion({ scope: 'mcp:read' })), 'read only')
  const { headers } = await openSession(s.server.mcpUrl, read.access_token)
  const create = await post(s.server.mcpUrl, callTool('service_apps_create', { name: 'nope' }), headers)
  t.equal(create.status, 403, 'a write tool is refused to a read-only token')
  t.equal(create.json?.error?.code, 'INSUFFICIENT_SCOPE')

  const viewer = await createMember(s.server, { role: 'viewer' })
  const viewed = granted(t, await s.exchange(await s.assertion({ email: viewer.user.email })), 'a viewer')
  t.equal(viewed.scope, 'mcp:read', 'a viewer\'s role narrows the scope to read')
  const list = await post(s.server.mcpUrl, { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} }, (await openSession(s.server.mcpUrl, viewed.access_token)).headers)
  const names: string[] = list.json?.result?.tools?.map((tool: { name: string }) => tool.name) ?? []
  t.ok(names.includes('service_whoami'), 'read tools are listed')
  t.notOk(names.includes('service_apps_create'), 'write tools are absent for a viewer')
  refused(t, await s.exchange(await s.assertion({ email: viewer.user.email }), { scope: 'mcp:write' }), 400, 'invalid_scope', /a viewer can use mcp:read/, 'a viewer asking for write only')
})

t.test('the metadata advertises the grant only while an issuer is trusted, and the grant is refused otherwise', async (t) => {
  const off = await injectServer(t)
  const metaOff = await metadata(off)
  t.notOk((metaOff.grant_types_supported as string[]).includes(JWT_BEARER), 'no jwt-bearer grant without a trusted issuer')
  t.notOk('authorization_grant_profiles_supported' in metaOff, 'no grant profile either')
  const client = await registerClient(off)
  const res = await tokenRequest(off, { grant_type: JWT_BEARER, assertion: 'x.y.z', client_id: client.client_id })
  t.equal(res.status, 400)
  t.equal(res.json?.error, 'unsupported_grant_type')

  const s = await setup(t)
  const meta = await metadata(s.server)
  t.ok((meta.grant_types_supported as string[]).includes(JWT_BEARER), 'jwt-bearer advertised')
  t.strictSame(meta.authorization_grant_profiles_supported, ['urn:ietf:params:oauth:grant-profile:id-jag'], 'the ID-JAG profile advertised')
  t.notOk(JSON.stringify(meta).includes(s.idp.issuer), 'the trusted issuers are not disclosed')
  const other = await tokenRequest(s.server, { grant_type: 'client_credentials', client_id: s.clientId })
  t.equal(other.json?.error, 'unsupported_grant_type', 'other grants stay unsupported')
  t.match(other.json?.error_description, /jwt-bearer/, 'and the description lists the jwt-bearer grant')
})

t.test('used assertions are forgotten on the purge rhythm once expired', async (t) => {
  const s = await setup(t, { config: { sessionSweepMs: 1_000, assertionClockToleranceMs: 0 } })
  granted(t, await s.exchange(await s.assertion({ jti: 'purge-me' })), 'used')
  const row = { issuer: s.idp.issuer, jti: 'purge-me', expiresAt: s.server.clock.now() + 600_000 }
  t.equal(await s.server.app.repos.assertions.remember(row), false, 'remembered while it could still be presented')
  await s.server.clock.advance(301_000)
  t.equal(await s.server.app.repos.assertions.remember(row), true, 'forgotten by the sweep once expired')
})

t.test('exactly one of many concurrent copies of an assertion succeeds (two instances sharing PostgreSQL)', async (t) => {
  const TRIALS = 40
  const JITTER_MS = [0, 2, 8]
  const idp = await startIdp(t)
  const trustedIssuers = [{ issuer: idp.issuer, jwksUri: idp.jwksUri, algorithms: ['ES256'] }]
  const a = await injectServer(t, { config: { trustedIssuers, ...(onPostgres() ? { redisUrl: redisUrl(), redisPrefix: redisPrefix(t) } : {}) } })
  // On SQLite one process serves a file: the copies race inside one instance. On PostgreSQL, a second instance.
  const b = onPostgres()
    ? await injectServer(t, { dbPath: a.dbPath, config: { trustedIssuers, baseUrl: a.url, redisUrl: redisUrl(), redisPrefix: a.config.redisPrefix, envKey: a.config.envKey } })
    : a
  const clientId = (await registerClient(a)).client_id
  let wrong = 0
  for (let trial = 0; trial < TRIALS; trial++) {
    const assertion = await idp.sign({ sub: 'U0001', email: OWNER_EMAIL, aud: a.url, resource: a.url, client_id: clientId }, { now: a.clock.now() })
    const jitter = JITTER_MS[trial % JITTER_MS.length]!
    // The same assertion at both instances' token endpoints, two copies each, each after its own random delay.
    const answers = await Promise.all([a, b, a, b].map(async (server) => {
      await new Promise((resolve) => setTimeout(resolve, Math.random() * jitter))
      const res = await tokenRequest(server, { grant_type: JWT_BEARER, assertion, client_id: clientId })
      return res.status === 200 ? 'ok' : res.json?.error === 'invalid_grant' && /already used/.test(res.json?.error_description) ? 'replay' : `${res.status} ${JSON.stringify(res.json)}`
    }))
    const ok = answers.filter((x) => x === 'ok').length
    const replays = answers.filter((x) => x === 'replay').length
    if (ok !== 1 || replays !== 3) {
      wrong++
      t.fail(`trial ${trial}: ${answers.join(', ')}`)
    }
  }
  t.equal(wrong, 0, `in each of ${TRIALS} trials exactly one copy got tokens and the others invalid_grant`)
  const org = await defaultOrganization(a)
  const { items } = await a.app.repos.audit.page(org.id, 100, undefined, 'oauth_grant.assertion')
  t.equal(items.length, Math.min(TRIALS, 100), 'one audit entry per trial')
})

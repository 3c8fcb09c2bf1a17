/**
 * Sign-in through an upstream OpenID Connect provider, piece by piece, on the inject tier: the buttons, the start of
 * a flow (its parameters and its row), every refusal of the callback (state unknown, reused, expired, from another
 * browser; the provider's error; an ID token that fails a check; an unverified email; a person nobody invited), the
 * group mapping (adds, changes, removes; leaves other organizations alone; keeps a last owner), the audit entry, and
 * password sign-in turned off. The provider is a small fake on a real socket (test/helpers/fake-idp.ts) whose ID
 * tokens the tests shape; the flow state is read from the database (the postgres pass runs this file on PostgreSQL).
 */
import { createHash } from 'node:crypto'
import { exportJWK, generateKeyPair } from 'jose'
import t, { type Test } from 'tap'
import type { Config } from '../../src/config.js'
import { sha256Hex } from '../../src/lib/crypto.js'
import type { SignInProvider } from '../../src/lib/sign-in-providers.js'
import { fakeIdp, type FakeIdp } from '../helpers/fake-idp.js'
import { injectServer, type InjectServer } from '../helpers/inject.js'
import { authorizeUrl, FormBrowser, formAction, formValue, pkce, registerClient } from '../helpers/oauth.js'
import { defaultOrganization } from '../helpers/seed.js'
import { redisPrefix, redisUrl } from '../helpers/backends.js'
import { OWNER_EMAIL, onPostgres } from '../helpers/server.js'

type ProviderInput = Partial<Omit<SignInProvider, 'provision'>> & { provision?: SignInProvider['provision'] } & Record<string, unknown>

interface Setup {
  server: InjectServer
  idp: FakeIdp
}

async function setup(t: Test, provider: ProviderInput = {}, config: Partial<Config> = {}): Promise<Setup> {
  let now = () => Date.now()
  const idp = await fakeIdp(t, { now: () => now() })
  const server = await injectServer(t, {
    config: {
      signInProviders: [{
        name: 'corp',
        title: 'Acme SSO',
        issuer: idp.issuer,
        clientId: idp.clientId,
        clientSecret: idp.clientSecret,
        provision: { justInTime: true, organizations: [{ organization: 'default', groups: { 'mcp-users': 'viewer', 'mcp-devs': 'developer', 'mcp-admins': 'admin' } }] },
        ...provider,
      }] as unknown as SignInProvider[],
      ...config,
    },
  })
  now = () => server.clock.now()
  return { server, idp }
}

/** Clicks "Sign in with Acme SSO" on /account/signin; returns the provider's authorization URL. */
async function startAtAccount(s: Setup, browser = new FormBrowser(s.server.url)) {
  const page = await browser.get('/account/signin')
  const res = await browser.post('/oauth/sso/corp', { csrf: formValue(page.text, 'csrf') ?? '' })
  if (res.status !== 303 || !res.location) throw new Error(`start answered ${res.status}: ${res.text.slice(0, 300)}`)
  const url = new URL(res.location)
  s.idp.nonce = url.searchParams.get('nonce') ?? ''
  return { browser, url, state: url.searchParams.get('state') ?? '' }
}

function callback(browser: FormBrowser, state: string, extra: Record<string, string> = {}) {
  return browser.get(`/oauth/callback/corp?${new URLSearchParams({ code: 'the-code', state, ...extra })}`)
}

async function signInAs(s: Setup, claims: Record<string, unknown>) {
  const { browser, state } = await startAtAccount(s)
  s.idp.next = { claims }
  return { browser, res: await callback(browser, state) }
}

async function roleIn(s: Setup, email: string, slug = 'default') {
  const user = await s.server.app.repos.users.byEmail(email)
  const org = await s.server.app.repos.organizations.bySlug(slug)
  if (!user || !org) return undefined
  return (await s.server.app.repos.memberships.find(user.id, org.id))?.role ?? null
}

t.test('the sign-in pages show one button per provider above the password form', async (t) => {
  const s = await setup(t)
  const browser = new FormBrowser(s.server.url)
  const account = await browser.get('/account/signin')
  t.match(account.text, /<form method="post" action="\/oauth\/sso\/corp" class="provider">/)
  t.match(account.text, />Sign in with Acme SSO<\/button>/)
  t.ok(account.text.indexOf('Sign in with Acme SSO') < account.text.indexOf('name="password"'), 'the button comes before the password form')

  const client = await registerClient(s.server)
  const start = await browser.get(authorizeUrl(s.server, client, pkce()))
  const interaction = await browser.get(start.location!)
  const id = start.location!.split('/').pop()!
  t.match(interaction.text, />Sign in with Acme SSO<\/button>/)
  t.match(interaction.text, new RegExp(`name="interaction" value="${id}"`), 'the button carries the pending authorization')
})

t.test('the button starts the flow: a row in the database and the provider\'s authorization URL with state, nonce and PKCE', async (t) => {
  const s = await setup(t)
  const { url, state } = await startAtAccount(s)
  t.equal(url.origin + url.pathname, `${s.idp.issuer}/authorize`)
  const p = url.searchParams
  t.equal(p.get('response_type'), 'code')
  t.equal(p.get('client_id'), s.idp.clientId)
  t.equal(p.get('redirect_uri'), `${s.server.url}/oauth/callback/corp`)
  t.equal(p.get('scope'), 'openid email profile')
  t.equal(p.get('code_challenge_method'), 'S256')
  t.match(state, /^[A-Za-z0-9_-]{43}$/)
  t.match(p.get('nonce'), /^[A-Za-z0-9_-]{43}$/)
  const flow = await s.server.app.repos.signInFlows.consume(sha256Hex(state))
  t.ok(flow, 'the flow is stored under the SHA-256 of state')
  t.equal(flow!.returnTo, '/account')
  t.equal(flow!.nonce, p.get('nonce'))
  t.equal(createHash('sha256').update(flow!.codeVerifier).digest('base64url'), p.get('code_challenge'), 'the challenge is the S256 of the stored verifier')
})

t.test('a start without the page\'s CSRF token, or for an unknown provider, is refused', async (t) => {
  const s = await setup(t)
  const browser = new FormBrowser(s.server.url)
  const page = await browser.get('/account/signin')
  t.equal((await browser.post('/oauth/sso/corp', { csrf: 'forged' })).status, 403)
  const unknown = await browser.post('/oauth/sso/nobody', { csrf: formValue(page.text, 'csrf') ?? '' })
  t.equal(unknown.status, 404)
  t.match(unknown.text, /No such sign-in provider/)
})

t.test('a full sign-in: code exchanged with the verifier and client secret, user made just in time, signed in, audited', async (t) => {
  const s = await setup(t)
  const { browser, res } = await signInAs(s, { email: 'Alice@Example.com', groups: ['mcp-devs', 'unrelated'] })
  t.equal(res.status, 303, res.text.slice(0, 300))
  t.equal(res.location, '/account')
  const exchange = s.idp.tokenRequests[0]!
  t.equal(exchange.form.get('grant_type'), 'authorization_code')
  t.equal(exchange.form.get('code'), 'the-code')
  t.equal(exchange.form.get('redirect_uri'), `${s.server.url}/oauth/callback/corp`)
  t.match(exchange.form.get('code_verifier'), /^[A-Za-z0-9_-]{43}$/)
  t.equal(exchange.authorization, `Basic ${Buffer.from(`${s.idp.clientId}:${s.idp.clientSecret}`).toString('base64')}`, 'client_secret_basic')

  const account = await browser.get('/account')
  t.equal(account.status, 200)
  t.match(account.text, /Signed in as <strong>alice@example.com<\/strong>/)
  t.equal(await roleIn(s, 'alice@example.com'), 'developer', 'the highest role of the mapped groups')
  const user = (await s.server.app.repos.users.byEmail('alice@example.com'))!
  t.equal(user.passwordHash, null, 'no password')
  t.same((await s.server.app.repos.userIdentities.forUser(user.id)).map((i) => [i.provider, i.subject]), [['corp', 'subject-1']])

  const audit = (await s.server.app.repos.audit.page((await defaultOrganization(s.server)).id, 10, undefined, 'sign_in')).items
  t.equal(audit.length, 1)
  t.equal(audit[0]!.userId, user.id)
  t.match(audit[0]!.details, { provider: 'corp', account: 'created', memberships: [{ organization: 'default', from: null, to: 'developer' }] })
})

t.test('the callback refuses an unknown state, a reused one, an expired flow and another browser', async (t) => {
  const s = await setup(t)
  const unknown = await callback(new FormBrowser(s.server.url), 'x'.repeat(43))
  t.equal(unknown.status, 400)
  t.match(unknown.text, /This sign-in has expired or was already used/)

  const first = await startAtAccount(s)
  t.equal((await callback(first.browser, first.state)).status, 303)
  const reused = await callback(first.browser, first.state)
  t.equal(reused.status, 400, 'single use')
  t.match(reused.text, /expired or was already used/)

  const late = await startAtAccount(s)
  await s.server.clock.advance(s.server.config.signInFlowTtlMs)
  t.equal((await callback(late.browser, late.state)).status, 400, 'past SERVICE_SIGN_IN_FLOW_TTL_MS')

  const mine = await startAtAccount(s)
  const other = new FormBrowser(s.server.url)
  await other.get('/account/signin')
  const elsewhere = await callback(other, mine.state)
  t.equal(elsewhere.status, 400)
  t.match(elsewhere.text, /started in another browser/)
  t.equal((await callback(mine.browser, mine.state)).status, 400, 'and the flow is spent: its own browser cannot use it now')
  t.equal(s.idp.tokenRequests.length, 1, 'no code was exchanged for a refused callback')
})

t.test('a sign-in started on one process finishes on another: the flow lives in the database', async (t) => {
  const shared = onPostgres() ? { redisUrl: redisUrl(), redisPrefix: redisPrefix(t) } : {}
  const s = await setup(t, {}, shared)
  const { browser, state } = await startAtAccount(s)
  s.idp.next = { claims: { email: 'carol@example.com', groups: ['mcp-users'] } }
  // PostgreSQL: a second process beside the first. SQLite serves a file from one process at a time: the first stops
  // and the next one starts on the same file, as in a restart between redirect and callback.
  if (!onPostgres()) await s.server.app.close()
  const { signInProviders, envKey } = s.server.app.config
  const other = await injectServer(t, { dbPath: s.server.dbPath, clock: s.server.clock, config: { signInProviders, envKey, baseUrl: s.server.url, ...shared } })
  const there = new FormBrowser(other.url)
  for (const [name, value] of browser.cookies) there.cookies.set(name, value)
  const res = await callback(there, state)
  t.equal(res.status, 303, `the other process finishes the sign-in (${res.text.slice(0, 200)})`)
  t.equal(res.location, '/account')
  const user = await other.app.repos.users.byEmail('carol@example.com')
  t.ok(user, 'and made the account')
  const again = await callback(there, state)
  t.equal(again.status, 400, 'the flow was used up there: a second callback is refused')
})

t.test('expired flows are purged on the sweep', async (t) => {
  const s = await setup(t)
  const { state } = await startAtAccount(s)
  await s.server.clock.advance(s.server.config.signInFlowTtlMs + s.server.config.sessionSweepMs)
  t.equal(await s.server.app.repos.signInFlows.consume(sha256Hex(state)), undefined)
})

t.test('an error from the provider is a clear page, with its code but nothing else echoed as markup', async (t) => {
  const s = await setup(t)
  const { browser, state } = await startAtAccount(s)
  const res = await callback(browser, state, { error: 'access_denied', error_description: '<script>x</script>' })
  t.equal(res.status, 403)
  t.match(res.text, /Your identity provider did not sign you in/)
  t.match(res.text, /access_denied/)
  t.notMatch(res.text, /<script>x/)
  t.equal(s.idp.tokenRequests.length, 0)

  const refused = await startAtAccount(s)
  s.idp.next = { error: { status: 400, error: 'invalid_grant' } }
  const exchange = await callback(refused.browser, refused.state)
  t.equal(exchange.status, 403)
  t.match(exchange.text, /invalid_grant/)
})

t.test('an ID token that fails a check signs nobody in: wrong nonce, other audience, expired, wrong issuer, unknown key, HS256, none', async (t) => {
  const s = await setup(t)
  const now = Math.floor(s.server.clock.now() / 1000)
  const cases: Array<[string, FakeIdp['next'], RegExp]> = [
    ['wrong nonce', { claims: { nonce: 'not-the-one' } }, /nonce/],
    ['other audience', { claims: { aud: 'another-client' } }, /another client/],
    ['expired', { claims: { iat: now - 400, exp: now - 120 } }, /expired/],
    ['wrong issuer', { claims: { iss: 'https://evil.example.com' } }, /another issuer/],
    ['unknown key', { signing: 'unknown-key' }, /does not publish/],
    ['HS256', { signing: 'hs256' }, /not allowed/],
    ['alg none', { signing: 'none' }, /not allowed|not valid/],
  ]
  for (const [label, plan, reason] of cases) {
    const { browser, state } = await startAtAccount(s)
    s.idp.next = plan
    const res = await callback(browser, state)
    t.equal(res.status, 403, label)
    t.match(res.text, /Your sign-in could not be verified/, label)
    t.match(res.text, reason, label)
    t.equal((await browser.get('/account')).status, 303, `${label}: not signed in`)
  }
  t.equal(await s.server.app.repos.users.byEmail('alice@example.com'), undefined, 'nobody was created')
})

t.test('an unverified email is refused, and never links to the account with that email', async (t) => {
  const s = await setup(t)
  for (const verified of [false, 'true', undefined]) {
    const { res } = await signInAs(s, { email: OWNER_EMAIL, email_verified: verified })
    t.equal(res.status, 403, `email_verified ${String(verified)}`)
    t.match(res.text, /Your email address is not verified/)
  }
  const owner = (await s.server.app.repos.users.byEmail(OWNER_EMAIL))!
  t.same(await s.server.app.repos.userIdentities.forUser(owner.id), [], 'no identity linked')
  const { res } = await signInAs(s, { email: undefined })
  t.equal(res.status, 403)
  t.match(res.text, /No email address/)
})

t.test('without just-in-time accounts a stranger is told to ask for an invitation; an invited one is linked by verified email', async (t) => {
  const s = await setup(t, { provision: { justInTime: false, organizations: [] } })
  const { res } = await signInAs(s, { email: 'stranger@example.com' })
  t.equal(res.status, 403)
  t.match(res.text, /You have no account on this server/)
  t.match(res.text, /invite/)
  t.equal(await s.server.app.repos.users.byEmail('stranger@example.com'), undefined)

  const linked = await signInAs(s, { sub: 'owner-at-idp', email: OWNER_EMAIL })
  t.equal(linked.res.status, 303)
  const owner = (await s.server.app.repos.users.byEmail(OWNER_EMAIL))!
  t.same((await s.server.app.repos.userIdentities.forUser(owner.id)).map((i) => i.subject), ['owner-at-idp'])
  t.equal(await roleIn(s, OWNER_EMAIL), 'owner', 'no mapping: memberships untouched')

  // Found by subject from now on, whatever email the provider gives.
  const again = await signInAs(s, { sub: 'owner-at-idp', email: 'renamed@example.com' })
  t.equal(again.res.status, 303)
  t.match((await again.browser.get('/account')).text, new RegExp(`Signed in as <strong>${OWNER_EMAIL}`))
  // Another subject of the same provider with the owner's email is someone else: refused, not linked.
  const impostor = await signInAs(s, { sub: 'someone-else', email: OWNER_EMAIL })
  t.equal(impostor.res.status, 403)
  t.match(impostor.res.text, /already tied to another person/)
})

t.test('a disabled user is refused', async (t) => {
  const s = await setup(t)
  t.equal((await signInAs(s, { email: 'bob@example.com', groups: ['mcp-users'] })).res.status, 303)
  const bob = (await s.server.app.repos.users.byEmail('bob@example.com'))!
  await s.server.app.repos.users.setDisabled(bob.id, true)
  const { res } = await signInAs(s, { email: 'bob@example.com', groups: ['mcp-users'] })
  t.equal(res.status, 403)
  t.match(res.text, /Your account is disabled/)
})

t.test('group mapping adds, changes and removes memberships of the organizations it names, and leaves the others alone', async (t) => {
  const s = await setup(t)
  const other = await s.server.app.repos.organizations.create({ slug: 'other' })
  t.equal((await signInAs(s, { email: 'carol@example.com', groups: ['mcp-users'] })).res.status, 303)
  t.equal(await roleIn(s, 'carol@example.com'), 'viewer', 'added')
  const carol = (await s.server.app.repos.users.byEmail('carol@example.com'))!
  await s.server.app.repos.memberships.upsert({ userId: carol.id, organizationId: other.id, role: 'developer' })

  await signInAs(s, { email: 'carol@example.com', groups: ['mcp-users', 'mcp-admins'] })
  t.equal(await roleIn(s, 'carol@example.com'), 'admin', 'changed to the highest mapped role')
  await signInAs(s, { email: 'carol@example.com', groups: ['elsewhere'] })
  t.equal(await roleIn(s, 'carol@example.com'), null, 'removed when no group maps any more')
  t.equal(await roleIn(s, 'carol@example.com', 'other'), 'developer', 'an organization the mapping does not name is left alone')
})

t.test('the mapping never removes an organization\'s last owner: kept, signed in, and the audit entry says so', async (t) => {
  const s = await setup(t)
  const org = await defaultOrganization(s.server)
  const owner = (await s.server.app.repos.users.byEmail(OWNER_EMAIL))!
  const { res } = await signInAs(s, { sub: 'owner-sub', email: OWNER_EMAIL, groups: [] })
  t.equal(res.status, 303)
  t.equal(await roleIn(s, OWNER_EMAIL), 'owner', 'kept')
  const entry = (await s.server.app.repos.audit.page(org.id, 10, undefined, 'sign_in')).items[0]!
  t.equal(entry.userId, owner.id)
  t.match(entry.details, { memberships: [{ organization: 'default', from: 'owner', to: null, kept: /owner/ }] })
})

t.test('from an application\'s sign-in page, the flow returns to its consent page', async (t) => {
  const s = await setup(t)
  const browser = new FormBrowser(s.server.url)
  const client = await registerClient(s.server)
  const start = await browser.get(authorizeUrl(s.server, client, pkce()))
  const page = await browser.get(start.location!)
  const id = start.location!.split('/').pop()!
  const go = await browser.post('/oauth/sso/corp', { csrf: formValue(page.text, 'csrf') ?? '', interaction: id })
  t.equal(go.status, 303)
  const url = new URL(go.location!)
  s.idp.nonce = url.searchParams.get('nonce')!
  s.idp.next = { claims: { email: 'dave@example.com', groups: ['mcp-devs'] } }
  const back = await callback(browser, url.searchParams.get('state')!)
  t.equal(back.location, start.location)
  const consent = await browser.get(back.location!)
  t.match(consent.text, /Authorize Test client/)
  t.match(consent.text, /as <strong>dave@example.com<\/strong>/)

  // An interaction id that is not this browser's pending request is refused before anything starts.
  const stranger = new FormBrowser(s.server.url)
  const strangerPage = await stranger.get('/account/signin')
  const refused = await stranger.post('/oauth/sso/corp', { csrf: formValue(strangerPage.text, 'csrf') ?? '', interaction: id })
  t.equal(refused.status, 403, 'the CSRF token is bound to the interaction, which this browser never opened')
})

t.test('client_secret_post and private_key_jwt authenticate at the token endpoint as configured', async (t) => {
  const post = await setup(t, { clientAuth: 'client_secret_post' })
  await signInAs(post, { email: 'erin@example.com' })
  const form = post.idp.tokenRequests[0]!.form
  t.equal(form.get('client_id'), post.idp.clientId)
  t.equal(form.get('client_secret'), post.idp.clientSecret)
  t.equal(post.idp.tokenRequests[0]!.authorization, undefined)

  const { privateKey } = await generateKeyPair('ES256', { extractable: true })
  const jwk = { ...(await exportJWK(privateKey)), alg: 'ES256', kid: 'client-key' }
  const pkj = await setup(t, { clientAuth: 'private_key_jwt', clientSecret: undefined, privateKeyJwk: jwk })
  await signInAs(pkj, { email: 'erin@example.com' })
  const f = pkj.idp.tokenRequests[0]!.form
  t.equal(f.get('client_assertion_type'), 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer')
  const [header, payload] = f.get('client_assertion')!.split('.').slice(0, 2).map((p) => JSON.parse(Buffer.from(p, 'base64url').toString()))
  t.match(header, { alg: 'ES256', kid: 'client-key' })
  t.match(payload, { iss: pkj.idp.clientId, sub: pkj.idp.clientId, aud: `${pkj.idp.issuer}/token` })
  t.equal(f.get('client_secret'), null)
})

t.test('password sign-in off: no password form on either page, password posts refused, the provider still works', async (t) => {
  const s = await setup(t, {}, { passwordSignIn: 'off' })
  const browser = new FormBrowser(s.server.url)
  const page = await browser.get('/account/signin')
  t.notMatch(page.text, /name="password"/)
  t.match(page.text, /Sign in with Acme SSO/)
  const refused = await browser.post('/account/signin', { csrf: formValue(page.text, 'csrf') ?? '', email: OWNER_EMAIL, password: 'correct horse battery staple' })
  t.equal(refused.status, 403)
  t.match(refused.text, /Password sign-in is turned off/)
  t.equal((await browser.get('/account')).status, 303, 'not signed in')

  const client = await registerClient(s.server)
  const start = await browser.get(authorizeUrl(s.server, client, pkce()))
  const interaction = await browser.get(start.location!)
  t.notMatch(interaction.text, /name="password"/)
  const post = await browser.post(`${start.location!}/signin`, { csrf: formValue(interaction.text, 'csrf') ?? '', email: OWNER_EMAIL, password: 'correct horse battery staple' })
  t.equal(post.status, 403)
  t.equal(formAction(interaction.text), '/oauth/sso/corp')
  t.equal((await signInAs(s, { email: 'frank@example.com' })).res.status, 303)
})

t.test('a provider that cannot be reached is a clear page, and the next sign-in tries again', async (t) => {
  const s = await setup(t, { issuer: 'http://127.0.0.1:9' })
  const browser = new FormBrowser(s.server.url)
  const page = await browser.get('/account/signin')
  const res = await browser.post('/oauth/sso/corp', { csrf: formValue(page.text, 'csrf') ?? '' })
  t.equal(res.status, 502)
  t.match(res.text, /Your identity provider cannot be reached/)
  t.match(res.text, /discovery document/)
})

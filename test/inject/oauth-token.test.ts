/**
 * POST /oauth/token over HTTP: one test per row of the contract's "OAuth credentials" table and per client mistake of
 * Authentication item 8, each checking the status, the OAuth error code and the no-store headers.
 *
 * The inject tier (test/helpers/inject.ts): the server never listens and its clock moves only when a test advances it,
 * so every lifetime here (codes, access tokens, refresh tokens' idle time and cap) is decided by the clock, not by how
 * long the machine took. The two tests that watch a session's GET stream end need a connection: they start a real
 * server (`{ socket: true }`).
 */
import { createHash, randomBytes } from 'node:crypto'
import t, { type Test } from 'tap'
import { request } from 'undici'
import type { Config } from '../../src/config.js'
import { hashPassword } from '../../src/lib/crypto.js'
import { initializeMessage, openSession, post } from '../helpers/mcp.js'
import { authorizeUrl, browserAuthorize, FormBrowser, pkce, registerClient, tokenRequest, type Pkce, type RegisteredClient } from '../helpers/oauth.js'
import { createMember } from '../helpers/seed.js'
import { injectServer } from '../helpers/inject.js'
import { OWNER_KEY, startServer, type TestServer } from '../helpers/server.js'
import { openLive } from '../helpers/stream.js'
import type { ManualClock } from '../helpers/clock.js'

type Headers = Record<string, string | string[] | undefined>
type TokenReply = Awaited<ReturnType<typeof tokenRequest>>

interface Tokens {
  access_token: string
  token_type: string
  expires_in: number
  refresh_token?: string
  scope: string
}

/**
 * One server with a signed-in browser, so each flow costs no extra password hashing. An inject server with a manual
 * clock, or with `socket` a listening one (whose clock is the system's: no test of a lifetime uses it).
 */
async function setup(t: Test, config: Partial<Config> = {}, options: { socket?: boolean } = {}) {
  let server: TestServer
  let clock: ManualClock | undefined
  if (options.socket) server = await startServer(t, { config })
  else ({ clock, ...server } = await injectServer(t, { config }))
  /** Moves the server's time forward (an inject server's only). */
  const advance = async (ms: number) => {
    if (!clock) throw new Error('a listening test server has the system clock: use the inject one to move time')
    await clock.advance(ms)
  }
  const now = () => clock?.now() ?? Date.now()
  const browser = new FormBrowser(server.url)

  async function code(client: RegisteredClient, p: Pkce, overrides: Record<string, string | null> = {}): Promise<string> {
    const { redirect } = await browserAuthorize(server, authorizeUrl(server, client, p, overrides), { browser })
    const c = redirect.searchParams.get('code')
    if (!c) throw new Error(`no code in ${redirect.href}`)
    return c
  }

  function exchange(client: RegisteredClient, p: Pkce, c: string, extra: Record<string, string> = {}): Promise<TokenReply> {
    return tokenRequest(server, { grant_type: 'authorization_code', code: c, redirect_uri: client.redirect_uris[0]!, client_id: client.client_id, code_verifier: p.verifier, ...extra })
  }

  function refresh(client: RegisteredClient, refreshToken: string, extra: Record<string, string> = {}): Promise<TokenReply> {
    return tokenRequest(server, { grant_type: 'refresh_token', refresh_token: refreshToken, client_id: client.client_id, ...extra })
  }

  /** Register (unless given), authorize, exchange. */
  async function tokens(options: { client?: RegisteredClient; scope?: string } = {}) {
    const client = options.client ?? (await registerClient(server))
    const p = pkce()
    const c = await code(client, p, options.scope ? { scope: options.scope } : {})
    const res = await exchange(client, p, c)
    if (res.status !== 200) throw new Error(`exchange failed: ${res.status} ${JSON.stringify(res.json)}`)
    return { client, p, code: c, tokens: res.json as Tokens }
  }

  /** What /mcp says to an initialize with this access token. */
  async function mcp(accessToken: string) {
    const res = await post(server.mcpUrl, initializeMessage(), { authorization: `Bearer ${accessToken}` })
    return { status: res.status, code: res.json?.error?.code as string | undefined, headers: res.headers, json: res.json }
  }

  return { server, browser, code, exchange, refresh, tokens, mcp, advance, now }
}

function noStore(t: Test, headers: Headers, label: string): void {
  t.match(String(headers['cache-control']), /no-store/, `${label}: Cache-Control no-store`)
  t.equal(headers.pragma, 'no-cache', `${label}: Pragma no-cache`)
}

function oauthError(t: Test, res: TokenReply, status: number, code: string, label: string): void {
  t.equal(res.status, status, `${label}: ${status}`)
  t.match(String(res.headers['content-type']), /^application\/json/, `${label}: JSON`)
  t.strictSame(Object.keys(res.json ?? {}).sort(), ['error', 'error_description'], `${label}: OAuth error body`)
  t.equal(res.json?.error, code, `${label}: ${code} (${res.json?.error_description})`)
  noStore(t, res.headers as Headers, label)
}

function ok(t: Test, res: TokenReply, label: string): Tokens {
  t.equal(res.status, 200, `${label}: 200${res.status === 200 ? '' : ` (${JSON.stringify(res.json)})`}`)
  noStore(t, res.headers as Headers, label)
  return res.json as Tokens
}

function claimsOf(jwt: string): Record<string, any> {
  return JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString('utf8'))
}

function headerOf(jwt: string): Record<string, any> {
  return JSON.parse(Buffer.from(jwt.split('.')[0]!, 'base64url').toString('utf8'))
}

function works(t: Test, r: { status: number; code?: string | undefined }, label: string): void {
  t.equal(r.status, 200, `${label}: the access token works on /mcp${r.status === 200 ? '' : ` (${r.status} ${r.code})`}`)
}

function revoked(t: Test, r: { status: number; code?: string | undefined }, label: string): void {
  t.equal(r.status, 401, `${label}: 401 on /mcp`)
  t.equal(r.code, 'TOKEN_REVOKED', `${label}: TOKEN_REVOKED`)
}

t.test('authorization code: exchanged once for the token response', async (t) => {
  const { server, code, exchange, mcp, now } = await setup(t)
  const client = await registerClient(server)
  const p = pkce()
  const c = await code(client, p)
  const before = Math.floor(now() / 1000)
  const res = await exchange(client, p, c, { resource: server.url })
  const tok = ok(t, res, 'exchange')
  t.equal(res.headers['access-control-allow-origin'], '*', 'CORS for any origin')
  t.strictSame(Object.keys(tok).sort(), ['access_token', 'expires_in', 'refresh_token', 'scope', 'token_type'], 'the token response fields')
  t.match(tok.access_token, /^eyJ[\w-]*\.[\w-]+\.[\w-]+$/, 'access_token is a compact JWT')
  t.equal(tok.token_type, 'Bearer')
  t.equal(tok.expires_in, 3600)
  t.match(tok.refresh_token, /^mcp_rt_[A-Za-z0-9_-]{32,}$/, 'refresh_token begins with mcp_rt_')
  t.equal(tok.scope, 'mcp:read mcp:write')

  const header = headerOf(tok.access_token)
  t.equal(header.alg, 'ES256')
  t.equal(header.typ, 'at+jwt')
  t.type(header.kid, 'string')
  const claims = claimsOf(tok.access_token)
  t.equal(claims.iss, server.url, 'iss is the issuer')
  t.equal(claims.aud, server.url, 'aud is this server')
  t.equal(claims.client_id, client.client_id)
  t.equal(claims.scope, 'mcp:read mcp:write')
  t.type(claims.sub, 'string')
  t.type(claims.jti, 'string')
  t.equal(claims.iat, before, 'iat is now (the server\'s clock, which did not move)')
  t.equal(claims.exp - claims.iat, 3600, 'exp is one hour after iat')
  works(t, await mcp(tok.access_token), 'issued token')

  const inQuery = await post(`${server.mcpUrl}?access_token=${encodeURIComponent(tok.access_token)}`, initializeMessage())
  t.equal(inQuery.status, 401, 'an access token in the query string is never accepted')
  const viaGet = await request(`${server.url}/oauth/token?${new URLSearchParams({ grant_type: 'refresh_token', refresh_token: tok.refresh_token!, client_id: client.client_id })}`, { method: 'GET' })
  const viaGetBody = await viaGet.body.text()
  t.ok(viaGet.statusCode >= 400, `GET /oauth/token is refused (${viaGet.statusCode})`)
  t.notMatch(viaGetBody, /access_token/, 'and issues nothing')
})

t.test('authorization code older than its TTL: invalid_grant', async (t) => {
  const { server, code, exchange, advance } = await setup(t, { authCodeTtlMs: 50 })
  const client = await registerClient(server)
  const p = pkce()
  const c = await code(client, p)
  const c2 = await code(client, p)
  await advance(49)
  ok(t, await exchange(client, p, c2), 'a code 49 ms old still exchanges')
  await advance(1)
  oauthError(t, await exchange(client, p, c), 400, 'invalid_grant', 'expired code (50 ms old, its TTL)')
})

t.test('authorization code reused: invalid_grant, and what it issued is revoked', async (t) => {
  const { server, code, exchange, refresh, mcp } = await setup(t, { sessionSweepMs: 50 }, { socket: true })
  const client = await registerClient(server)
  const p = pkce()
  const c = await code(client, p)
  const first = ok(t, await exchange(client, p, c), 'first exchange')
  const { sessionId, headers } = await openSession(server.mcpUrl, first.access_token)
  const live = await openLive(server.mcpUrl, { method: 'GET', headers: { ...headers, accept: 'text/event-stream' } })
  t.teardown(() => live.close())
  t.equal(live.status, 200, 'a GET stream is open on the session')

  oauthError(t, await exchange(client, p, c), 400, 'invalid_grant', 'second exchange')
  revoked(t, await mcp(first.access_token), 'access token of the first exchange')
  oauthError(t, await refresh(client, first.refresh_token!), 400, 'invalid_grant', 'refresh token of the first exchange')
  await live.ended(2000)
  t.ok(live.endedByServer, 'the stream of the session bound to it was ended by the server')
  t.equal(await server.app.sessions.get(sessionId), undefined, 'the session ended')
  oauthError(t, await exchange(client, p, c), 400, 'invalid_grant', 'third exchange')
})

t.test('a replay with a wrong verifier or another client revokes nothing', async (t) => {
  const { server, code, exchange, refresh, mcp } = await setup(t)
  const client = await registerClient(server)
  const other = await registerClient(server)
  const p = pkce()
  const c = await code(client, p)
  const first = ok(t, await exchange(client, p, c), 'first exchange')

  oauthError(t, await exchange(client, pkce(), c), 400, 'invalid_grant', 'replay with a wrong verifier')
  oauthError(t, await tokenRequest(server, { grant_type: 'authorization_code', code: c, redirect_uri: client.redirect_uris[0]!, client_id: other.client_id, code_verifier: p.verifier }), 400, 'invalid_grant', 'replay by another client')
  oauthError(t, await exchange(client, p, c, { redirect_uri: 'http://127.0.0.1:9999/other' }), 400, 'invalid_grant', 'replay with another redirect_uri')
  works(t, await mcp(first.access_token), 'after the bad replays')
  const second = ok(t, await refresh(client, first.refresh_token!), 'the refresh token still works')

  // The rightful client replaying it is the attack signal: the whole grant goes, rotated tokens included.
  oauthError(t, await exchange(client, p, c), 400, 'invalid_grant', 'replay by the rightful client')
  revoked(t, await mcp(first.access_token), 'first access token')
  revoked(t, await mcp(second.access_token), 'access token from the rotation')
  oauthError(t, await refresh(client, second.refresh_token!), 400, 'invalid_grant', 'rotated refresh token')
})

t.test('the code of another client: invalid_grant', async (t) => {
  const { server, code, exchange } = await setup(t)
  const client = await registerClient(server)
  const other = await registerClient(server)
  const p = pkce()
  const c = await code(client, p)
  oauthError(t, await tokenRequest(server, { grant_type: 'authorization_code', code: c, redirect_uri: client.redirect_uris[0]!, client_id: other.client_id, code_verifier: p.verifier }), 400, 'invalid_grant', 'code of another client')
  oauthError(t, await exchange(client, p, randomBytes(32).toString('base64url')), 400, 'invalid_grant', 'a made-up code')
  ok(t, await exchange(client, p, c), 'the owner of the code can still exchange it')
})

t.test('client mistake: regenerating the verifier between challenge and exchange', async (t) => {
  const { server, code, exchange } = await setup(t)
  const client = await registerClient(server)
  const p = pkce()
  const c = await code(client, p)
  oauthError(t, await exchange(client, { ...p, verifier: pkce().verifier }, c), 400, 'invalid_grant', 'regenerated verifier')
  oauthError(t, await exchange(client, { ...p, verifier: p.challenge }, c), 400, 'invalid_grant', 'the challenge sent as verifier')
})

t.test('client mistake: a verifier shorter than 43 characters', async (t) => {
  const { server, code, exchange } = await setup(t)
  const client = await registerClient(server)
  const verifier = randomBytes(32).toString('base64url').slice(0, 42)
  const p = { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') }
  const c = await code(client, p)
  oauthError(t, await exchange(client, p, c), 400, 'invalid_request', '42-character verifier')
  oauthError(t, await exchange(client, { ...p, verifier: 'a'.repeat(129) }, c), 400, 'invalid_request', '129-character verifier')
  oauthError(t, await exchange(client, { ...p, verifier: 'a'.repeat(42) + '!' }, c), 400, 'invalid_request', 'a verifier outside the alphabet')
  const missing = await tokenRequest(server, { grant_type: 'authorization_code', code: c, redirect_uri: client.redirect_uris[0]!, client_id: client.client_id })
  oauthError(t, missing, 400, 'invalid_request', 'no verifier at all (PKCE downgrade)')
})

t.test('client mistake: base64 padding in the challenge, or no resource, stops the flow at authorize', async (t) => {
  const { server } = await setup(t)
  const client = await registerClient(server)
  const p = pkce()
  for (const [label, overrides, error] of [
    ['padded challenge', { code_challenge: p.challenge + '=' }, 'invalid_request'],
    ['standard base64 challenge', { code_challenge: Buffer.from(p.challenge, 'base64url').toString('base64') }, 'invalid_request'],
    ['omitted resource', { resource: null }, 'invalid_target'],
  ] as const) {
    const res = await request(authorizeUrl(server, client, p, { ...overrides, state: 's1' }), { method: 'GET' })
    await res.body.text()
    t.equal(res.statusCode, 303, `${label}: redirected back`)
    const back = new URL(String(res.headers.location))
    t.equal(back.searchParams.get('error'), error, `${label}: ${error}`)
    t.equal(back.searchParams.get('code'), null, `${label}: no code`)
    t.match(String(res.headers['cache-control']), /no-store/, `${label}: no-store`)
  }
})

t.test('client mistake: redirect_uri differs from the authorize request (localhost vs 127.0.0.1)', async (t) => {
  const { server, code, exchange } = await setup(t)
  const client = await registerClient(server, { redirect_uris: ['http://127.0.0.1:9999/callback', 'http://127.0.0.1:9999/second'] })
  const p = pkce()
  const c = await code(client, p)
  oauthError(t, await exchange(client, p, c, { redirect_uri: 'http://localhost:9999/callback' }), 400, 'invalid_grant', 'localhost instead of 127.0.0.1')
  oauthError(t, await exchange(client, p, c, { redirect_uri: 'http://127.0.0.1:9999/second' }), 400, 'invalid_grant', 'another registered redirect_uri')
  oauthError(t, await exchange(client, p, c, { redirect_uri: 'http://127.0.0.1:8888/callback' }), 400, 'invalid_grant', 'another loopback port than the request used')
})

t.test('resource naming another audience: invalid_target, and nothing is consumed', async (t) => {
  const { server, code, exchange, refresh, mcp } = await setup(t)
  const client = await registerClient(server)
  const p = pkce()
  const c = await code(client, p)
  oauthError(t, await exchange(client, p, c, { resource: 'https://other.example/mcp' }), 400, 'invalid_target', 'code exchange for another audience')
  oauthError(t, await exchange(client, p, c, { resource: `${server.url}/mcp#x` }), 400, 'invalid_target', 'resource with a fragment')
  const tok = ok(t, await exchange(client, p, c, { resource: `${server.url}/mcp` }), 'the code still exchanges (resource /mcp, same audience)')
  works(t, await mcp(tok.access_token), 'issued token')

  oauthError(t, await refresh(client, tok.refresh_token!, { resource: 'https://other.example' }), 400, 'invalid_target', 'refresh for another audience')
  const next = ok(t, await refresh(client, tok.refresh_token!, { resource: server.url }), 'the refresh token was not rotated by the refusal')
  works(t, await mcp(next.access_token), 'refreshed token')
})

t.test('resource sent twice at the token endpoint: invalid_target, nothing consumed', async (t) => {
  // docs/decisions/oauth.md: "a fragment, a query or a second `resource` is `invalid_target`".
  const { server, code, exchange } = await setup(t)
  const client = await registerClient(server)
  const p = pkce()
  const c = await code(client, p)
  const body = new URLSearchParams({ grant_type: 'authorization_code', code: c, redirect_uri: client.redirect_uris[0]!, client_id: client.client_id, code_verifier: p.verifier })
  body.append('resource', server.url)
  body.append('resource', `${server.url}/mcp`)
  const res = await request(`${server.url}/oauth/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: body.toString() })
  oauthError(t, { status: res.statusCode, headers: res.headers, json: JSON.parse(await res.body.text()) }, 400, 'invalid_target', 'two resource parameters')
  ok(t, await exchange(client, p, c), 'the code was not consumed')
})

t.test('refresh: rotation, and reuse of a rotated token revokes the whole family', async (t) => {
  const { server, tokens, refresh, mcp } = await setup(t, { sessionSweepMs: 50 }, { socket: true })
  const { client, tokens: first } = await tokens()
  const second = ok(t, await refresh(client, first.refresh_token!), 'refresh')
  t.match(second.refresh_token, /^mcp_rt_/, 'a new refresh token')
  t.not(second.refresh_token, first.refresh_token, 'rotated: the new refresh token differs')
  t.not(second.access_token, first.access_token, 'a new access token')
  t.equal(second.expires_in, 3600)
  t.equal(second.token_type, 'Bearer')
  t.equal(second.scope, first.scope, 'same scope')
  works(t, await mcp(second.access_token), 'refreshed token')
  const third = ok(t, await refresh(client, second.refresh_token!), 'the newest refresh token works')

  const { sessionId, headers } = await openSession(server.mcpUrl, third.access_token)
  const live = await openLive(server.mcpUrl, { method: 'GET', headers: { ...headers, accept: 'text/event-stream' } })
  t.teardown(() => live.close())
  t.equal(live.status, 200)

  oauthError(t, await refresh(client, first.refresh_token!), 400, 'invalid_grant', 'rotated refresh token presented again')
  oauthError(t, await refresh(client, third.refresh_token!), 400, 'invalid_grant', 'the newest refresh token of the family')
  for (const [label, tok] of [['first', first], ['second', second], ['third', third]] as const) revoked(t, await mcp(tok.access_token), `${label} access token`)
  await live.ended(2000)
  t.ok(live.endedByServer, 'the open stream of a family session was ended by the server')
  t.equal(await server.app.sessions.get(sessionId), undefined, 'the session opened with a family token ended')
  const after = await post(server.mcpUrl, { jsonrpc: '2.0', id: 2, method: 'ping' }, headers)
  t.equal(after.status, 401, 'the session cannot be used any more')
})

t.test('refresh token unused for longer than the idle lifetime: invalid_grant', async (t) => {
  const { tokens, refresh, advance } = await setup(t, { refreshTokenIdleMs: 100 })
  const { client, tokens: tok } = await tokens()
  const { tokens: other } = await tokens({ client })
  await advance(99)
  ok(t, await refresh(client, other.refresh_token!), 'unused for 99 ms of a 100 ms idle lifetime: still refreshes')
  await advance(1)
  oauthError(t, await refresh(client, tok.refresh_token!), 400, 'invalid_grant', 'idle refresh token (unused for its whole idle lifetime)')
})

t.test('each refresh extends the idle lifetime', async (t) => {
  const idleMs = 400
  const stepMs = 250
  const { tokens, refresh, advance } = await setup(t, { refreshTokenIdleMs: idleMs })
  const { client, tokens: tok } = await tokens()
  let current = tok.refresh_token!
  const statuses: number[] = []
  for (let i = 0; i < 3; i++) {
    await advance(stepMs)
    const res = await refresh(client, current)
    statuses.push(res.status)
    if (res.status !== 200) break
    current = res.json.refresh_token
  }
  t.strictSame(statuses, [200, 200, 200], `three refreshes ${stepMs} ms apart with a ${idleMs} ms idle lifetime all succeed (${3 * stepMs} ms in all)`)
  await advance(idleMs)
  oauthError(t, await refresh(client, current), 400, 'invalid_grant', 'unused for longer than the idle lifetime after the last use')
})

t.test('a refresh-token family ends at its absolute cap', async (t) => {
  const { tokens, refresh, advance } = await setup(t, { refreshTokenMaxMs: 300 })
  const { client, tokens: tok } = await tokens()
  await advance(200)
  const next = ok(t, await refresh(client, tok.refresh_token!), 'refresh within the cap')
  await advance(99)
  const last = ok(t, await refresh(client, next.refresh_token!), 'refresh 1 ms before the cap')
  await advance(1)
  oauthError(t, await refresh(client, last.refresh_token!), 400, 'invalid_grant', 'refresh at the cap')
})

t.test('a rotated refresh token presented by another client revokes nothing', async (t) => {
  const { server, tokens, refresh, mcp } = await setup(t)
  const { client, tokens: first } = await tokens()
  const second = ok(t, await refresh(client, first.refresh_token!), 'rotation')
  const other = await registerClient(server)
  oauthError(t, await refresh(other, first.refresh_token!), 400, 'invalid_grant', 'rotated token presented by another client')
  works(t, await mcp(second.access_token), 'the family is intact')
  ok(t, await refresh(client, second.refresh_token!), 'the newest refresh token still works')
})

t.test('membership removed or user disabled: the code and refresh token stop working', async (t) => {
  const { server, exchange, refresh, mcp } = await setup(t)
  const repos = server.app.repos

  async function memberTokens(role: 'developer' | 'viewer') {
    const member = await createMember(server, { role })
    await repos.users.setPasswordHash(member.user.id, await hashPassword('member password 1'))
    const client = await registerClient(server)
    const p = pkce()
    const { redirect } = await browserAuthorize(server, authorizeUrl(server, client, p), { email: member.user.email, password: 'member password 1' })
    return { member, client, p, code: redirect.searchParams.get('code')! }
  }

  const removedBeforeExchange = await memberTokens('developer')
  await repos.memberships.remove(removedBeforeExchange.member.user.id, removedBeforeExchange.member.membership.organizationId)
  oauthError(t, await exchange(removedBeforeExchange.client, removedBeforeExchange.p, removedBeforeExchange.code), 400, 'invalid_grant', 'code of a removed membership')

  const removed = await memberTokens('developer')
  const removedTokens = ok(t, await exchange(removed.client, removed.p, removed.code), 'exchange')
  await repos.memberships.remove(removed.member.user.id, removed.member.membership.organizationId)
  oauthError(t, await refresh(removed.client, removedTokens.refresh_token!), 400, 'invalid_grant', 'refresh of a removed membership')
  t.equal((await mcp(removedTokens.access_token)).status, 401, 'its access token: 401')

  const disabled = await memberTokens('developer')
  const disabledTokens = ok(t, await exchange(disabled.client, disabled.p, disabled.code), 'exchange')
  await repos.users.setDisabled(disabled.member.user.id, true)
  t.equal((await mcp(disabledTokens.access_token)).status, 401, 'the access token of a disabled user: 401')
  oauthError(t, await refresh(disabled.client, disabledTokens.refresh_token!), 400, 'invalid_grant', 'refresh of a disabled user')

  const disabledBeforeExchange = await memberTokens('viewer')
  await repos.users.setDisabled(disabledBeforeExchange.member.user.id, true)
  oauthError(t, await exchange(disabledBeforeExchange.client, disabledBeforeExchange.p, disabledBeforeExchange.code), 400, 'invalid_grant', 'code of a user disabled before the exchange')
})

t.test('refresh by another client: invalid_grant, and nothing is revoked', async (t) => {
  const { server, tokens, refresh, mcp } = await setup(t)
  const { client, tokens: tok } = await tokens()
  const other = await registerClient(server)
  oauthError(t, await refresh(other, tok.refresh_token!), 400, 'invalid_grant', 'refresh token of another client')
  oauthError(t, await refresh(client, 'mcp_rt_' + randomBytes(32).toString('base64url')), 400, 'invalid_grant', 'a made-up refresh token')
  oauthError(t, await refresh(client, tok.access_token), 400, 'invalid_grant', 'an access token as refresh token')
  works(t, await mcp(tok.access_token), 'access token')
  ok(t, await refresh(client, tok.refresh_token!), 'the refresh token still works for its own client')
})

t.test('a client registered without refresh_token gets none and may not refresh', async (t) => {
  const { server, tokens, refresh } = await setup(t)
  const client = await registerClient(server, { grant_types: ['authorization_code'] })
  const { tokens: tok } = await tokens({ client })
  t.equal(tok.refresh_token, undefined, 'no refresh_token in the token response')
  t.notOk('refresh_token' in tok, 'the field is absent')
  const { tokens: withRefresh } = await tokens()
  oauthError(t, await refresh(client, withRefresh.refresh_token!), 400, 'unauthorized_client', 'grant_type=refresh_token')
})

t.test('unknown or missing grant_type', async (t) => {
  const { server } = await setup(t)
  const client = await registerClient(server)
  for (const grant of ['password', 'client_credentials', 'implicit', 'urn:ietf:params:oauth:grant-type:device_code', 'AUTHORIZATION_CODE']) {
    oauthError(t, await tokenRequest(server, { grant_type: grant, client_id: client.client_id, code: 'x', username: 'a', password: 'b' }), 400, 'unsupported_grant_type', grant)
  }
  oauthError(t, await tokenRequest(server, { client_id: client.client_id, code: 'x' }), 400, 'invalid_request', 'no grant_type')
})

t.test('unknown client_id: 401 invalid_client', async (t) => {
  const { server, code } = await setup(t)
  const client = await registerClient(server)
  const p = pkce()
  const c = await code(client, p)
  oauthError(t, await tokenRequest(server, { grant_type: 'authorization_code', code: c, redirect_uri: client.redirect_uris[0]!, client_id: 'mcp_unknown', code_verifier: p.verifier }), 401, 'invalid_client', 'authorization_code, unknown client')
  oauthError(t, await tokenRequest(server, { grant_type: 'refresh_token', refresh_token: 'mcp_rt_x', client_id: 'mcp_unknown' }), 401, 'invalid_client', 'refresh_token, unknown client')
  const missing = await tokenRequest(server, { grant_type: 'authorization_code', code: c, redirect_uri: client.redirect_uris[0]!, code_verifier: p.verifier })
  t.ok([400, 401].includes(missing.status), `no client_id: 400 or 401 (${missing.status})`)
  t.ok(['invalid_request', 'invalid_client'].includes(missing.json?.error), `no client_id: invalid_request or invalid_client (${missing.json?.error})`)
  noStore(t, missing.headers as Headers, 'no client_id')
})

t.test('client authentication by a public client: 401 invalid_client, and the code is not consumed', async (t) => {
  const { server, code, exchange } = await setup(t)
  const client = await registerClient(server)
  const p = pkce()
  const c = await code(client, p)
  const fields = { grant_type: 'authorization_code', code: c, redirect_uri: client.redirect_uris[0]!, client_id: client.client_id, code_verifier: p.verifier }
  oauthError(t, await tokenRequest(server, { ...fields, client_secret: 'secret' }), 401, 'invalid_client', 'client_secret sent')
  const { client_id: _omit, ...withoutId } = fields
  const basic = await tokenRequest(server, withoutId, { authorization: `Basic ${Buffer.from(`${client.client_id}:`).toString('base64')}` })
  oauthError(t, basic, 401, 'invalid_client', 'Authorization: Basic')
  t.match(String(basic.headers['www-authenticate']), /^Basic/i, 'a Basic challenge names the method that failed (RFC 6749 §5.2)')
  oauthError(t, await tokenRequest(server, fields, { authorization: `Basic ${Buffer.from(`${client.client_id}:x`).toString('base64')}` }), 401, 'invalid_client', 'Basic with client_id too')
  oauthError(t, await tokenRequest(server, fields, { authorization: `Bearer ${OWNER_KEY}` }), 401, 'invalid_client', 'an API key as Authorization (API keys never work at /oauth/*)')
  oauthError(t, await tokenRequest(server, { grant_type: 'refresh_token', refresh_token: 'mcp_rt_x', client_id: client.client_id, client_secret: 's' }), 401, 'invalid_client', 'client_secret on a refresh')
  ok(t, await exchange(client, p, c), 'the code survived the refused attempts')
})

t.test('form encoding only, one value per parameter', async (t) => {
  const { server, code, exchange } = await setup(t)
  const client = await registerClient(server)
  const p = pkce()
  const c = await code(client, p)
  const fields = { grant_type: 'authorization_code', code: c, redirect_uri: client.redirect_uris[0]!, client_id: client.client_id, code_verifier: p.verifier }

  const json = await request(`${server.url}/oauth/token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(fields) })
  const jsonBody = await json.body.text()
  oauthError(t, { status: json.statusCode, headers: json.headers, json: JSON.parse(jsonBody) }, 400, 'invalid_request', 'a JSON body')

  for (const name of ['code', 'client_id', 'grant_type', 'code_verifier', 'redirect_uri']) {
    const body = new URLSearchParams(fields)
    body.append(name, (fields as Record<string, string>)[name]!)
    const res = await request(`${server.url}/oauth/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: body.toString() })
    const text = await res.body.text()
    oauthError(t, { status: res.statusCode, headers: res.headers, json: JSON.parse(text) }, 400, 'invalid_request', `${name} repeated`)
  }
  ok(t, await exchange(client, p, c), 'none of that consumed the code')
})

t.test('scope on refresh: narrowing works, widening is invalid_scope', async (t) => {
  const { tokens, refresh, mcp } = await setup(t)
  const { client, tokens: both } = await tokens()
  const narrowed = ok(t, await refresh(client, both.refresh_token!, { scope: 'mcp:read' }), 'narrow to mcp:read')
  t.equal(narrowed.scope, 'mcp:read', 'the response names the narrowed scope')
  t.equal(claimsOf(narrowed.access_token).scope, 'mcp:read', 'and so does the access token')
  works(t, await mcp(narrowed.access_token), 'narrowed token')

  const { client: readClient, tokens: read } = await tokens({ scope: 'mcp:read' })
  t.equal(read.scope, 'mcp:read')
  oauthError(t, await refresh(readClient, read.refresh_token!, { scope: 'mcp:read mcp:write' }), 400, 'invalid_scope', 'wider than the grant')
  oauthError(t, await refresh(readClient, read.refresh_token!, { scope: 'mcp:write' }), 400, 'invalid_scope', 'another scope than the grant')
  oauthError(t, await refresh(readClient, read.refresh_token!, { scope: 'mcp:admin' }), 400, 'invalid_scope', 'an unknown scope')
  const still = ok(t, await refresh(readClient, read.refresh_token!), 'the refusals did not rotate the refresh token')
  t.equal(still.scope, 'mcp:read')
})

t.test('access token expiry: TOKEN_EXPIRED, and a refreshed token never adopts the old session', async (t) => {
  const { server, code, exchange, refresh, mcp, advance, now } = await setup(t, { accessTokenTtlMs: 1000 })
  const client = await registerClient(server)
  const p = pkce()
  const c = await code(client, p)
  const tok = ok(t, await exchange(client, p, c), 'exchange')
  t.equal(tok.expires_in, 1, 'expires_in follows the configured lifetime')
  const { sessionId, headers } = await openSession(server.mcpUrl, tok.access_token)
  const exp = claimsOf(tok.access_token).exp as number
  // exp has one-second granularity: the token works up to and including the instant exp names, not after it.
  await advance(exp * 1000 - now())
  const last = await post(server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'ping' }, headers)
  t.equal(last.status, 200, 'at exp itself the token still works')
  await advance(1)

  const expired = await post(server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'ping' }, headers)
  t.equal(expired.status, 401, 'expired token: 401')
  t.equal(expired.json.error.code, 'TOKEN_EXPIRED')
  t.match(expired.json.error.action, /[Rr]efresh/, 'the action says to refresh')
  const challenge = String(expired.headers['www-authenticate'] ?? '')
  t.match(challenge, /^Bearer /)
  t.match(challenge, /error="invalid_token"/, 'WWW-Authenticate error="invalid_token"')
  t.match(challenge, /resource_metadata="/)
  t.equal((await mcp(tok.access_token)).code, 'TOKEN_EXPIRED', 'initialize with it is refused too')

  const next = ok(t, await refresh(client, tok.refresh_token!), 'refresh after expiry')
  const rebound = await post(server.mcpUrl, { jsonrpc: '2.0', id: 2, method: 'ping' }, { ...headers, authorization: `Bearer ${next.access_token}` })
  t.equal(rebound.status, 404, 'the old session with the new token: 404')
  t.equal(rebound.json.error.code, 'SESSION_NOT_FOUND', 'a session is never rebound')
  const fresh = await openSession(server.mcpUrl, next.access_token)
  t.not(fresh.sessionId, sessionId, 'the new token opens a new session')
})

t.test('a session is bound to the access token that created it, not to its grant', async (t) => {
  const { server, tokens, refresh } = await setup(t)
  const { client, tokens: tok } = await tokens()
  const { headers } = await openSession(server.mcpUrl, tok.access_token)
  const next = ok(t, await refresh(client, tok.refresh_token!), 'refresh')
  const res = await post(server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'ping' }, { ...headers, authorization: `Bearer ${next.access_token}` })
  t.equal(res.status, 404, 'the session of the old token with the refreshed one: 404')
  t.equal(res.json.error.code, 'SESSION_NOT_FOUND')
})

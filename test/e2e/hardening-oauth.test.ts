/**
 * Issue 10, the authorization server and its pages, each written as the attack:
 * - password guessing on both sign-in forms (/account/signin, /oauth/interaction/:id/signin) meets a per-account and
 *   per-address throttle with a doubling wait, answered as the sign-in page (429, Retry-After) without the password
 *   being checked, and logged at warn with address and account;
 * - a flood of GET /oauth/authorize creates at most the per-address bound of pending rows, then meets the limits;
 * - the authorization and interaction pages answer no CORS preflight;
 * - a viewer approving `mcp:read mcp:write` gets a token claiming only `mcp:read`, through refreshes and promotions;
 * - tokens signed with our own key but with a future `iat` or an `aud` array are refused;
 * - a 429 from /oauth/register is an OAuth error body an SDK client parses;
 * - the CLI refuses to demote or remove an organization's last owner.
 * Unrelated clients keep being served (whileServed) while the floods run.
 */
import { createPrivateKey } from 'node:crypto'
import { registerClient as sdkRegisterClient } from '@modelcontextprotocol/sdk/client/auth.js'
import { TemporarilyUnavailableError } from '@modelcontextprotocol/sdk/server/auth/errors.js'
import { OAuthErrorResponseSchema } from '@modelcontextprotocol/sdk/shared/auth.js'
import { decodeJwt, SignJWT } from 'jose'
import t, { type Test } from 'tap'
import { request } from 'undici'
import type { Config } from '../../src/config.js'
import { hashPassword, sha256Hex } from '../../src/lib/crypto.js'
import { whileServed } from '../helpers/attack.js'
import { postgresDatabase } from '../helpers/backends.js'
import { cli } from '../helpers/cli.js'
import { ManualClock } from '../helpers/clock.js'
import { databaseRows } from '../helpers/database.js'
import { injectServer } from '../helpers/inject.js'
import { callTool, initializeMessage, openSession, post } from '../helpers/mcp.js'
import { authorizeUrl, formAction, formValue, oauthTokens, pkce, registerClient, tokenRequest, type RegisteredClient } from '../helpers/oauth.js'
import { createMember, defaultOrganization, ownerMembership } from '../helpers/seed.js'
import { onPostgres, OWNER_EMAIL, OWNER_PASSWORD, startServer, tempDatabase, type TestServer } from '../helpers/server.js'

type Headers = Record<string, string | string[] | undefined>

interface Page {
  status: number
  headers: Headers
  text: string
  location: string | undefined
}

/**
 * A cookie-keeping form client with a real browser's form-post headers, seen by the server as coming from `address`
 * (sent as X-Forwarded-For to a server that trusts it).
 */
class Visitor {
  readonly cookies = new Map<string, string>()

  constructor(readonly origin: string, readonly address?: string) {}

  get(url: string, headers: Record<string, string> = {}): Promise<Page> {
    return this.send('GET', url, undefined, headers)
  }

  post(url: string, fields: Record<string, string>): Promise<Page> {
    return this.send('POST', url, new URLSearchParams(fields).toString())
  }

  async send(method: string, url: string, body?: string, extra: Record<string, string> = {}): Promise<Page> {
    const headers: Record<string, string> = { ...extra }
    if (this.address) headers['x-forwarded-for'] = this.address
    if (this.cookies.size > 0) headers.cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ')
    if (body !== undefined) {
      headers['content-type'] = 'application/x-www-form-urlencoded'
      headers.origin = 'null'
      headers['sec-fetch-site'] = 'same-origin'
    }
    const res = await request(new URL(url, this.origin).href, { method, headers, ...(body !== undefined ? { body } : {}) })
    const setCookie = res.headers['set-cookie']
    for (const line of Array.isArray(setCookie) ? setCookie : setCookie ? [setCookie] : []) {
      const [pair] = line.split(';')
      const eq = pair!.indexOf('=')
      const value = pair!.slice(eq + 1)
      if (value === '' || /Max-Age=0/i.test(line)) this.cookies.delete(pair!.slice(0, eq))
      else this.cookies.set(pair!.slice(0, eq), value)
    }
    const text = await res.body.text()
    return { status: res.statusCode, headers: res.headers as Headers, text, location: typeof res.headers.location === 'string' ? res.headers.location : undefined }
  }
}

/** Log lines captured from the server (JSON), through createServer's `logger` option. */
function logCapture(): { stream: { write(line: string): void }; lines: string[]; entries(msg: string): Array<Record<string, any>> } {
  const lines: string[] = []
  return {
    stream: { write: (line: string) => void lines.push(line) },
    lines,
    entries: (msg) => lines.map((l) => JSON.parse(l) as Record<string, any>).filter((e) => e.msg === msg),
  }
}

async function memberWithPassword(server: TestServer, role: 'viewer' | 'developer' | 'admin' | 'owner', password: string) {
  const member = await createMember(server, { role })
  await server.app.repos.users.setPasswordHash(member.user.id, await hashPassword(password))
  return member
}

const PAGE_TYPE = /^text\/html/

/** The throttle's answer: the sign-in page again, 429, Retry-After, the message, no sign-in cookie. */
function isThrottled(t: Test, page: Page, whose: 'for this account' | 'from your network', label: string): number {
  t.equal(page.status, 429, `${label}: 429`)
  t.match(String(page.headers['content-type']), PAGE_TYPE, `${label}: an HTML page`)
  t.match(page.text, new RegExp(`Too many failed sign-ins ${whose}; try again in \\d+ (second|seconds|minutes)\\.`), `${label}: says why and how long`)
  t.match(page.text, /name="password"/, `${label}: the sign-in form, to try again later`)
  const retryAfter = String(page.headers['retry-after'])
  t.match(retryAfter, /^\d+$/, `${label}: Retry-After in seconds`)
  t.notMatch(String(page.headers['set-cookie'] ?? ''), /mcp_signin=[A-Za-z0-9_-]{43}/, `${label}: not signed in`)
  return Number(retryAfter)
}

/**
 * Sends `count` wrong passwords for `email` in a row; returns the statuses and the last Retry-After. Every answer must
 * be a 401 (checked, wrong) or the throttle's 429.
 */
async function guess(t: Test, visitor: Visitor, action: string, csrf: string, email: string, count: number, whose: 'for this account' | 'from your network' = 'for this account') {
  const statuses: number[] = []
  let retryAfter = 0
  let unexpected = 0
  for (let i = 0; i < count; i++) {
    const page = await visitor.post(action, { csrf, email, password: `wrong guess ${i}` })
    statuses.push(page.status)
    if (page.status === 429) {
      retryAfter = Number(page.headers['retry-after'])
      if (!new RegExp(`Too many failed sign-ins ${whose}`).test(page.text) || !PAGE_TYPE.test(String(page.headers['content-type']))) unexpected++
    } else if (page.status !== 401 || !/Incorrect email or password/.test(page.text)) {
      unexpected++
    }
  }
  t.equal(unexpected, 0, `each of ${count} guesses for ${email}: 401 "Incorrect" or the throttle's 429 page`)
  return { statuses, retryAfter, checked: statuses.filter((s) => s === 401).length }
}

/**
 * 60 guesses, then the right password refused unchecked, then accepted once the wait has passed. The wait is measured by
 * the server's manual clock (docs/decisions/clock.md): it does not move during the flood, and the test moves it to the
 * instant before the wait ends and to its end.
 */
async function passwordGuessing(t: Test, server: TestServer, clock: ManualClock, visitor: Visitor, action: string, csrf: string, logs: ReturnType<typeof logCapture>) {
  const flood = await whileServed(t, server.url, () => guess(t, visitor, action, csrf, OWNER_EMAIL, 60), { label: '60 wrong passwords' })
  t.strictSame(flood.statuses.slice(0, 5), [401, 401, 401, 401, 401], 'the first 5 guesses are checked (the free attempts)')
  t.equal(flood.checked, 5, 'only those 5 of 60 guesses were checked at all; the rest met the wait')
  t.equal(flood.statuses.filter((s) => s === 429).length, 60 - flood.checked, 'every other guess: 429')

  const right = await visitor.post(action, { csrf, email: OWNER_EMAIL, password: OWNER_PASSWORD })
  const retryAfter = isThrottled(t, right, 'for this account', 'the right password during the wait')
  t.ok(retryAfter >= 1 && retryAfter <= 5, `Retry-After ${retryAfter} s is the current wait`)

  const noCsrf = await visitor.post(action, { email: OWNER_EMAIL, password: OWNER_PASSWORD })
  t.equal(noCsrf.status, 403, 'CSRF is still checked first: 403 without the token')
  t.match(noCsrf.text, /Form expired/)

  await clock.advance(THROTTLE.signInDelayMs! - 1)
  isThrottled(t, await visitor.post(action, { csrf, email: OWNER_EMAIL, password: OWNER_PASSWORD }), 'for this account', 'the right password 1 ms before the wait ends')
  await clock.advance(1)
  const after = await visitor.post(action, { csrf, email: OWNER_EMAIL, password: OWNER_PASSWORD })
  t.equal(after.status, 303, 'once the wait has passed, the right password signs in')
  t.match(String(after.headers['set-cookie'] ?? ''), /mcp_signin=/, 'with the sign-in cookie')

  const failures = logs.entries('sign-in failed')
  t.equal(failures.length, flood.checked, 'every checked failure is logged')
  t.ok(failures.every((e) => e.level === 40 && e.address === '127.0.0.1' && e.account === OWNER_EMAIL), 'at warn, with the client address and the account')
  t.strictSame(failures.map((e) => e.accountFailures), Array.from({ length: flood.checked }, (_, i) => i + 1), 'with the running failure count')
  const refusals = logs.entries('sign-in refused: too many failed sign-ins')
  t.equal(refusals.length, 60 - flood.checked + 2, 'every refusal by the throttle is logged')
  t.ok(refusals.every((e) => e.level === 40 && e.address === '127.0.0.1' && e.account === OWNER_EMAIL && e.throttledBy === 'account' && e.retryAfter >= 1), 'at warn, with address, account and wait')
  t.notOk(logs.lines.some((l) => l.includes(OWNER_PASSWORD) || l.includes('wrong guess')), 'no password, right or wrong, is logged')
  return failures
}

// The first wait after the free attempts: the server's manual clock decides when it has passed.
const THROTTLE: Partial<Config> = { signInFreeAttempts: 5, signInAddressFreeAttempts: 100, signInDelayMs: 2500, signInMaxDelayMs: 5000 }

t.test('password guessing on /account/signin is throttled per account', async (t) => {
  const logs = logCapture()
  const clock = new ManualClock()
  const server = await startServer(t, { clock, config: THROTTLE, logger: { level: 'info', stream: logs.stream } })
  const visitor = new Visitor(server.url)
  const form = await visitor.get('/account/signin')
  const csrf = formValue(form.text, 'csrf')!
  const failures = await passwordGuessing(t, server, clock, visitor, '/account/signin', csrf, logs)
  t.ok(failures.every((e) => e.form === 'account'), 'the log names the form')
  t.equal((await visitor.get('/account')).status, 200, 'the account page opens')
})

t.test('password guessing on the OAuth sign-in form is throttled the same way', async (t) => {
  const logs = logCapture()
  const clock = new ManualClock()
  const server = await startServer(t, { clock, config: THROTTLE, logger: { level: 'info', stream: logs.stream } })
  const client = await registerClient(server)
  const visitor = new Visitor(server.url)
  const start = await visitor.get(authorizeUrl(server, client, pkce()))
  t.equal(start.status, 303)
  const form = await visitor.get(start.location!)
  const action = formAction(form.text)
  const failures = await passwordGuessing(t, server, clock, visitor, action, formValue(form.text, 'csrf')!, logs)
  t.ok(failures.every((e) => e.form === 'oauth' && e.client === client.client_id), 'the log names the form and the client')
  const consent = await visitor.get(start.location!)
  t.match(consent.text, /Authorize Test client/, 'signed in: the consent page follows')
})

t.test('per address: other accounts get their free attempts until the address limit; unknown emails count alike', async (t) => {
  const logs = logCapture()
  // A long wait: nothing here waits for it. X-Forwarded-For is trusted so the test can speak from several addresses.
  const server = await startServer(t, {
    config: { trustProxy: true, signInFreeAttempts: 5, signInAddressFreeAttempts: 12, signInDelayMs: 60_000, signInMaxDelayMs: 120_000 },
    logger: { level: 'info', stream: logs.stream },
  })
  const m1 = await memberWithPassword(server, 'developer', 'member password 1')
  const m2 = await memberWithPassword(server, 'developer', 'member password 2')
  const m3 = await memberWithPassword(server, 'developer', 'member password 3')
  const open = async (address: string) => {
    const visitor = new Visitor(server.url, address)
    const form = await visitor.get('/account/signin')
    return { visitor, csrf: formValue(form.text, 'csrf')! }
  }
  const a = await open('198.51.100.7')

  const owner = await whileServed(t, server.url, () => guess(t, a.visitor, '/account/signin', a.csrf, OWNER_EMAIL, 20), { label: 'guessing the owner' })
  t.strictSame(owner.statuses, [...Array(5).fill(401), ...Array(15).fill(429)], 'owner: 5 checked guesses, then the account waits')

  const first = await guess(t, a.visitor, '/account/signin', a.csrf, m1.user.email, 6)
  t.strictSame(first.statuses, [401, 401, 401, 401, 401, 429], 'another account from the same address: its own 5 free attempts, then its own wait')

  const second = await guess(t, a.visitor, '/account/signin', a.csrf, m2.user.email, 3, 'from your network')
  t.strictSame(second.statuses, [401, 401, 429], 'a third account: free attempts only until the address has failed 12 times')
  const rightFromA = await a.visitor.post('/account/signin', { csrf: a.csrf, email: m3.user.email, password: 'member password 3' })
  isThrottled(t, rightFromA, 'from your network', 'a right password from the waiting address')

  const b = await open('203.0.113.9')
  t.equal((await b.visitor.post('/account/signin', { csrf: b.csrf, email: m3.user.email, password: 'member password 3' })).status, 303, 'the same member from another address signs in')
  isThrottled(t, await b.visitor.post('/account/signin', { csrf: b.csrf, email: OWNER_EMAIL, password: OWNER_PASSWORD }), 'for this account', 'the guessed account waits from any address')

  const c = await open('192.0.2.44')
  const unknown = await guess(t, c.visitor, '/account/signin', c.csrf, 'nobody-here@example.com', 6)
  t.strictSame(unknown.statuses, owner.statuses.slice(0, 6), 'an unknown email meets the same throttle as a real one: nothing to enumerate')
  const shouted = await c.visitor.post('/account/signin', { csrf: c.csrf, email: '  NOBODY-here@Example.com ', password: 'x' })
  t.equal(shouted.status, 429, 'the account key is the normalized email: case and spaces do not reset it')

  const failed = logs.entries('sign-in failed')
  t.ok(failed.some((e) => e.address === '198.51.100.7' && e.account === m2.user.email && e.addressFailures === 12), 'the log carries the per-address count')
  t.ok(logs.entries('sign-in refused: too many failed sign-ins').some((e) => e.address === '198.51.100.7' && e.throttledBy === 'address'), 'and refusals by address')
})

t.test('a flood of GET /oauth/authorize: bounded pending rows per address, then the rate limit', async (t) => {
  const config: Partial<Config> = { trustProxy: true, authorizeRateLimit: 50, authorizeRateLimitWindowMs: 60_000, pendingAuthorizationsPerAddress: 5 }
  const server = await startServer(t, { config })
  const client = await registerClient(server)
  const attacker = new Visitor(server.url, '198.51.100.66')
  const pages = await whileServed(t, server.url, async () => {
    const out: Page[] = []
    for (let i = 0; i < 200; i++) out.push(await attacker.get(authorizeUrl(server, client, pkce())))
    return out
  }, { label: '200 authorization requests' })
  const statuses = pages.map((p) => p.status)
  t.strictSame(statuses.slice(0, 5), [303, 303, 303, 303, 303], 'the first 5 start an authorization')
  t.equal(statuses.filter((s) => s === 303).length, 5, 'no more than the per-address bound')
  t.equal(statuses.filter((s) => s === 429).length, 195, 'every other request: 429')

  const overBound = pages[5]!
  t.match(String(overBound.headers['content-type']), PAGE_TYPE, 'over the bound: an HTML page')
  t.match(overBound.text, /Too many sign-ins are in progress from your network\. Finish or cancel one of them, or try again in \d+ (seconds|minutes)\./, 'telling the person to finish one or wait')
  t.match(String(overBound.headers['retry-after']), /^\d+$/, 'with Retry-After')
  t.ok(Number(overBound.headers['retry-after']) <= 900, 'no longer than a pending request lives')
  t.equal(overBound.location, undefined, 'not redirected to the client')

  const limited = pages[50]!
  t.equal(limited.status, 429)
  t.match(String(limited.headers['content-type']), PAGE_TYPE, 'past the rate limit: an HTML page too')
  t.match(limited.text, /Too many sign-in requests from your network; try again in \d+ (second|seconds|minutes)\./)
  t.match(String(limited.headers['retry-after']), /^\d+$/, 'with Retry-After')
  t.equal(limited.headers['x-ratelimit-limit'], '50')
  t.equal(limited.headers['x-ratelimit-remaining'], '0')
  t.match(String(limited.headers['x-request-id']), /^[0-9a-f-]{36}$/)
  t.ok(pages.every((p) => p.headers['access-control-allow-origin'] === undefined), 'no CORS header on any of them')

  const db = await databaseRows(t, server)
  const rows = async (address: string) => (await db.get<{ n: number }>('SELECT count(*) AS n FROM oauth_authorization_requests WHERE client_address = ?', sha256Hex(address)))!.n
  t.equal(await rows('198.51.100.66'), 5, '5 rows for the flooding address, stored as the hash of the address')
  t.equal((await db.get<{ n: number }>('SELECT count(*) AS n FROM oauth_authorization_requests'))!.n, 5, 'and no others')
  const count = 'SELECT count(*), min(expires_at) FROM oauth_authorization_requests WHERE client_address = ? AND expires_at > ? AND consumed_at IS NULL'
  if (db.dialect === 'sqlite') {
    const plan = await db.all<{ detail: string }>(`EXPLAIN QUERY PLAN ${count}`, 'x', 0)
    t.match(plan.map((p) => p.detail).join(' '), /USING INDEX oauth_authorization_requests_address_idx/, 'the count is served by the index')
  } else {
    // Five rows are read faster in a sequential scan: with that ruled out, the plan shows the index can serve the count.
    await db.all("SELECT set_config('enable_seqscan', 'off', false)")
    const plan = await db.all<{ 'QUERY PLAN': string }>(`EXPLAIN ${count}`, 'x', 0)
    t.match(plan.map((p) => p['QUERY PLAN']).join(' '), /oauth_authorization_requests_address_idx/, 'the count is served by the index')
  }

  const other = new Visitor(server.url, '203.0.113.20')
  const ok = await other.get(authorizeUrl(server, client, pkce()))
  t.equal(ok.status, 303, 'another address still starts an authorization')
  t.equal(await rows('203.0.113.20'), 1)
})

t.test('a pending authorization answered or expired frees its place', async (t) => {
  // The inject tier (test/helpers/inject.ts): the requests' lifetime is decided by the server's clock, moved below.
  const server = await injectServer(t, { config: { trustProxy: true, pendingAuthorizationsPerAddress: 2, authRequestTtlMs: 3000 } })
  const client = await registerClient(server)
  const person = new Visitor(server.url, '198.51.100.5')
  const first = await person.get(authorizeUrl(server, client, pkce()))
  t.equal((await person.get(authorizeUrl(server, client, pkce()))).status, 303)
  const refused = await person.get(authorizeUrl(server, client, pkce()))
  t.equal(refused.status, 429, 'the third is over the bound')
  t.equal(refused.headers['retry-after'], '3', 'Retry-After: until the oldest pending one expires (3 s: the clock has not moved)')

  // Finish the first one: sign in and allow.
  const form = await person.get(first.location!)
  const signin = await person.post(formAction(form.text), { csrf: formValue(form.text, 'csrf')!, email: OWNER_EMAIL, password: OWNER_PASSWORD })
  const consent = await person.get(signin.location!)
  const done = await person.post(formAction(consent.text), { csrf: formValue(consent.text, 'csrf')!, decision: 'approve', membership: formValue(consent.text, 'membership')! })
  t.match(done.location, /^http:\/\/127\.0\.0\.1:9999\/callback\?code=/, 'the first authorization completes')
  t.equal((await person.get(authorizeUrl(server, client, pkce()))).status, 303, 'an answered request no longer counts')
  t.equal((await person.get(authorizeUrl(server, client, pkce()))).status, 429, 'two pending again: refused')
  await server.clock.advance(2999)
  const stillPending = await person.get(authorizeUrl(server, client, pkce()))
  t.equal(stillPending.status, 429, '1 ms before they expire, the two pending requests still count')
  t.equal(stillPending.headers['retry-after'], '1', 'Retry-After rounds the last millisecond up to a second')
  await server.clock.advance(1)
  t.equal((await person.get(authorizeUrl(server, client, pkce()))).status, 303, 'expired requests no longer count')
})

t.test('no CORS on the authorization and interaction pages; open CORS on the machine endpoints', async (t) => {
  const server = await startServer(t)
  const preflight = (path: string, method = 'GET') =>
    new Visitor(server.url).send('OPTIONS', path, undefined, { origin: 'https://evil.example', 'access-control-request-method': method, 'access-control-request-headers': 'content-type' })
  const id = 'A'.repeat(43)
  for (const [path, allow] of [['/oauth/authorize', 'GET'], [`/oauth/interaction/${id}`, 'GET'], [`/oauth/interaction/${id}/signin`, 'POST'], [`/oauth/interaction/${id}/consent`, 'POST']] as const) {
    const res = await preflight(path, allow)
    t.equal(res.status, 405, `OPTIONS ${path}: 405`)
    t.equal(res.headers.allow, allow, `OPTIONS ${path}: Allow ${allow}`)
    t.match(String(res.headers['content-type']), PAGE_TYPE, `OPTIONS ${path}: the error page`)
    t.strictSame(Object.keys(res.headers).filter((h) => h.startsWith('access-control-')), [], `OPTIONS ${path}: no Access-Control-* header at all`)
    t.match(String(res.headers['x-request-id']), /^[0-9a-f-]{36}$/, `OPTIONS ${path}: X-Request-Id`)
    t.match(String(res.headers['x-service-mcp-version']), /^\d{4}-\d\d-\d\d$/, `OPTIONS ${path}: X-Service-MCP-Version`)
  }
  const client = await registerClient(server)
  const cross = await new Visitor(server.url).get(authorizeUrl(server, client, pkce()), { origin: 'https://evil.example' })
  t.equal(cross.status, 303)
  t.equal(cross.headers['access-control-allow-origin'], undefined, 'GET /oauth/authorize from another origin: no CORS')

  for (const path of ['/oauth/register', '/oauth/token', '/oauth/revoke']) {
    const res = await preflight(path, 'POST')
    t.equal(res.status, 204, `OPTIONS ${path}: 204`)
    t.equal(res.headers['access-control-allow-origin'], '*', `OPTIONS ${path}: any origin`)
    t.match(String(res.headers['access-control-allow-methods']), /POST/)
    t.equal(res.headers['access-control-allow-credentials'], undefined, `OPTIONS ${path}: never with credentials`)
  }
  const wellKnown = await preflight('/.well-known/oauth-authorization-server')
  t.equal(wellKnown.headers['access-control-allow-origin'], '*', 'discovery documents: any origin')
  const unknown = await preflight('/oauth/nothing-here', 'POST')
  t.equal(unknown.status, 404, 'OPTIONS on an unknown /oauth path: 404')
  t.equal(unknown.headers['access-control-allow-origin'], undefined, 'without CORS')
})

/** Walks authorize → sign-in → consent page for `email`; returns the consent page and the way to answer it. */
async function toConsent(server: TestServer, client: RegisteredClient, scope: string, email: string, password: string) {
  const p = pkce()
  const visitor = new Visitor(server.url)
  const start = await visitor.get(authorizeUrl(server, client, p, { scope }))
  const form = await visitor.get(start.location!)
  const signin = await visitor.post(formAction(form.text), { csrf: formValue(form.text, 'csrf')!, email, password })
  if (signin.status !== 303) throw new Error(`sign-in answered ${signin.status}`)
  const consent = await visitor.get(start.location!)
  const answer = (decision: 'approve' | 'deny', membership = formValue(consent.text, 'membership') ?? '') =>
    visitor.post(formAction(consent.text), { csrf: formValue(consent.text, 'csrf')!, decision, membership })
  return { consent, answer, pkce: p }
}

async function exchange(server: TestServer, client: RegisteredClient, location: string | undefined, verifier: string) {
  const code = new URL(location ?? 'http://x/').searchParams.get('code')
  if (!code) throw new Error(`no code in ${location}`)
  return tokenRequest(server, { grant_type: 'authorization_code', code, redirect_uri: client.redirect_uris[0]!, client_id: client.client_id, code_verifier: verifier, resource: server.url })
}

t.test('a viewer approving mcp:read mcp:write gets a token claiming mcp:read only, for good', async (t) => {
  const server = await startServer(t)
  const repos = server.app.repos
  const viewer = await memberWithPassword(server, 'viewer', 'viewer password 1')
  const client = await registerClient(server)

  const { consent, answer, pkce: p } = await toConsent(server, client, 'mcp:read mcp:write', viewer.user.email, 'viewer password 1')
  t.match(consent.text, /As a viewer in Default organization you can only grant read access \(mcp:read\)\./, 'the consent page says what a viewer can grant')
  const approved = await answer('approve')
  t.equal(approved.status, 303)
  const res = await exchange(server, client, approved.location, p.verifier)
  t.equal(res.status, 200)
  t.equal(res.json.scope, 'mcp:read', 'the token response names the narrowed scope')
  t.equal(decodeJwt(res.json.access_token).scope, 'mcp:read', 'and so does the JWT scope claim')

  const { headers } = await openSession(server.mcpUrl, res.json.access_token)
  const who = await post(server.mcpUrl, callTool('service_whoami', {}, 2), headers)
  t.strictSame(who.json.result.structuredContent.scopes, ['mcp:read'], 'whoami: mcp:read')

  const refreshed = await tokenRequest(server, { grant_type: 'refresh_token', refresh_token: res.json.refresh_token, client_id: client.client_id })
  t.equal(refreshed.json.scope, 'mcp:read', 'a refresh keeps the narrowed scope')
  t.equal(decodeJwt(refreshed.json.access_token).scope, 'mcp:read')

  await repos.memberships.upsert({ userId: viewer.user.id, organizationId: viewer.membership.organizationId, role: 'developer' })
  const promoted = await tokenRequest(server, { grant_type: 'refresh_token', refresh_token: refreshed.json.refresh_token, client_id: client.client_id })
  t.equal(promoted.json.scope, 'mcp:read', 'a later promotion does not widen the grant')
  t.equal(decodeJwt(promoted.json.access_token).scope, 'mcp:read')
  const wider = await tokenRequest(server, { grant_type: 'refresh_token', refresh_token: promoted.json.refresh_token, client_id: client.client_id, scope: 'mcp:read mcp:write' })
  t.equal(wider.status, 400, 'asking for more on refresh is refused')
  t.equal(wider.json.error, 'invalid_scope')
})

t.test('scope follows the role at consent, at exchange and at refresh', async (t) => {
  const server = await startServer(t)
  const repos = server.app.repos
  const client = await registerClient(server)
  const dev = await memberWithPassword(server, 'developer', 'developer password')
  const setRole = async (role: 'viewer' | 'developer') => repos.memberships.upsert({ userId: dev.user.id, organizationId: dev.membership.organizationId, role })

  const full = await toConsent(server, client, 'mcp:read mcp:write', dev.user.email, 'developer password')
  t.notMatch(full.consent.text, /you can only grant/, 'a developer: no narrowing to announce')
  const tokens = await exchange(server, client, (await full.answer('approve')).location, full.pkce.verifier)
  t.equal(tokens.json.scope, 'mcp:read mcp:write', 'a developer gets both scopes')
  await setRole('viewer')
  const demoted = await tokenRequest(server, { grant_type: 'refresh_token', refresh_token: tokens.json.refresh_token, client_id: client.client_id })
  t.equal(demoted.json.scope, 'mcp:read', 'demoted to viewer: the next refresh claims mcp:read only')
  t.equal(decodeJwt(demoted.json.access_token).scope, 'mcp:read')

  await setRole('developer')
  const late = await toConsent(server, client, 'mcp:read mcp:write', dev.user.email, 'developer password')
  const approved = await late.answer('approve')
  await setRole('viewer')
  const exchanged = await exchange(server, client, approved.location, late.pkce.verifier)
  t.equal(exchanged.json.scope, 'mcp:read', 'demoted between consent and exchange: the code yields mcp:read only')

  const writeOnly = await toConsent(server, client, 'mcp:write', dev.user.email, 'developer password')
  t.match(writeOnly.consent.text, /As a viewer in Default organization you cannot grant what this application asks for \(mcp:write\)\./, 'asking only for what a viewer cannot grant: said so')
  t.notMatch(writeOnly.consent.text, /value="approve"/, 'and no Allow button')
  const forced = await writeOnly.answer('approve')
  t.equal(forced.status, 400, 'an approval posted anyway is refused')
  t.equal(forced.location, undefined, 'no code is issued')
})

t.test('tokens signed with our own key are refused with an iat in the future or an aud that is not exactly ours', async (t) => {
  const server = await startServer(t)
  const { tokens } = await oauthTokens(server)
  const claims = decodeJwt(tokens.access_token)
  const key = (await server.app.repos.signingKeys.current())!
  const serverKey = createPrivateKey(key.privateKey)
  // Each token keeps the real, recorded jti: only the claim under test differs from a token the server issued.
  const sign = (body: Record<string, unknown>) => new SignJWT(body).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: key.kid }).sign(serverKey)
  const initialize = async (token: string) => post(server.mcpUrl, initializeMessage(), { authorization: `Bearer ${token}` })
  const refused = async (token: string, what: string) => {
    const reply = await initialize(token)
    t.equal(reply.status, 401, `${what}: 401`)
    t.equal(reply.json?.error?.code, 'INVALID_TOKEN', `${what}: INVALID_TOKEN`)
    t.match(String(reply.headers['www-authenticate']), /error="invalid_token"/, `${what}: invalid_token challenge`)
  }
  const now = Math.floor(Date.now() / 1000)
  t.equal((await initialize(await sign(claims))).status, 200, 'control: the real claims re-signed are accepted')
  t.equal((await initialize(await sign({ ...claims, iat: now + 10 }))).status, 200, 'an iat 10 s ahead is within the clock tolerance')
  await refused(await sign({ ...claims, iat: now + 3600 }), 'iat an hour in the future')
  await refused(await sign({ ...claims, iat: now + 60 }), 'iat a minute in the future')
  await refused(await sign({ ...claims, aud: [server.url] }), 'aud an array of our audience alone')
  await refused(await sign({ ...claims, aud: [server.url, 'https://other.example'] }), 'aud an array naming another audience too')
  await refused(await sign({ ...claims, aud: ['https://other.example'] }), 'aud an array of another audience')
  await refused(await sign({ ...claims, iss: [server.url] }), 'iss an array')
  t.equal((await initialize(tokens.access_token)).status, 200, 'the genuine token is unaffected')
})

t.test('a 429 from /oauth/register is an OAuth error body an SDK client parses', async (t) => {
  const server = await startServer(t, { config: { registerRateLimit: 1, registerRateLimitWindowMs: 60_000 } })
  const metadata = { client_name: 'SDK client', redirect_uris: ['http://127.0.0.1:9999/callback'] }
  t.equal((await request(`${server.url}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(metadata) })).statusCode, 201)

  const res = await request(`${server.url}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(metadata) })
  const body = await res.body.json() as Record<string, unknown>
  t.equal(res.statusCode, 429)
  t.match(String(res.headers['content-type']), /^application\/json/)
  t.strictSame(Object.keys(body).sort(), ['error', 'error_description'], 'the OAuth error shape')
  t.equal(body.error, 'temporarily_unavailable')
  t.type(body.error_description, 'string')
  t.match(String(res.headers['retry-after']), /^\d+$/, 'Retry-After')
  t.equal(res.headers['x-ratelimit-limit'], '1')
  t.equal(res.headers['access-control-allow-origin'], '*', 'readable by a browser-based client')
  t.equal(res.headers['cache-control'], 'no-store')
  t.ok(OAuthErrorResponseSchema.safeParse(body).success, "the SDK's OAuth error schema accepts it")

  const discovery = await (await request(`${server.url}/.well-known/oauth-authorization-server`)).body.json() as Record<string, string>
  await t.rejects(
    sdkRegisterClient(server.url, { metadata: discovery as any, clientMetadata: metadata }),
    TemporarilyUnavailableError,
    'the SDK registration raises its temporarily_unavailable error, not an unparsable-response one',
  )
})

t.test('an organization keeps its last owner: the CLI refuses to demote or remove it (exit 2)', async (t) => {
  t.setTimeout(120_000)
  // The suite's pass on PostgreSQL runs the command line there too, with the key a PostgreSQL database needs.
  const env: Record<string, string> = onPostgres()
    ? { SERVICE_DATABASE: await postgresDatabase(t), SERVICE_ENV_KEY: Buffer.alloc(32, 0x6f).toString('base64') }
    : { SERVICE_DATABASE: tempDatabase(t) }
  const run = (...args: string[]) => cli(args, env)
  const ok = async (...args: string[]) => {
    const r = await run(...args)
    t.equal(r.code, 0, `service-mcp ${args.join(' ')}: exit 0 ${r.stderr}`)
    return r
  }
  const refusedRun = async (...args: string[]) => {
    const r = await run(...args)
    t.equal(r.code, 2, `service-mcp ${args.join(' ')}: exit 2`)
    t.match(r.stderr, /no owner left; make another member owner first/, `service-mcp ${args.join(' ')}: says why and what to do`)
    t.notMatch(r.stderr, /at .*\.ts:\d+/, 'no stack trace')
    return r
  }
  await ok('migrate')
  await ok('orgs', 'create', 'acme')
  await Promise.all([ok('users', 'create', 'first@acme.test', '--password', 'longenough1'), ok('users', 'create', 'second@acme.test', '--password', 'longenough2')])
  await ok('members', 'set', 'first@acme.test', 'acme', 'owner')

  const demote = await refusedRun('members', 'set', 'first@acme.test', 'acme', 'viewer')
  t.match(demote.stderr, /cannot make first@acme\.test viewer of acme/)
  const remove = await refusedRun('members', 'remove', 'first@acme.test', 'acme')
  t.match(remove.stderr, /cannot remove first@acme\.test from acme/)
  t.match((await ok('members', 'list', '--org', 'acme')).stdout, /first@acme\.test\s+acme\s+owner/, 'still the owner')
  await ok('members', 'set', 'first@acme.test', 'acme', 'owner')

  await ok('members', 'set', 'second@acme.test', 'acme', 'owner')
  await ok('members', 'set', 'first@acme.test', 'acme', 'viewer')
  await refusedRun('members', 'remove', 'second@acme.test', 'acme')
  await ok('members', 'remove', 'first@acme.test', 'acme')
})

t.test('every path through the memberships repository keeps the last owner', async (t) => {
  const server = await startServer(t)
  const repos = server.app.repos
  const owner = await ownerMembership(server)
  const org = (await defaultOrganization(server)).id
  await t.rejects(() => repos.memberships.upsert({ userId: owner.userId, organizationId: org, role: 'admin' }), { code: 'CONFLICT' }, 'demotion refused')
  await t.rejects(() => repos.memberships.remove(owner.userId, org), { code: 'CONFLICT' }, 'removal refused')
  t.equal((await repos.memberships.find(owner.userId, org))?.role, 'owner', 'nothing changed')
  const second = await createMember(server, { role: 'owner' })
  await repos.memberships.upsert({ userId: owner.userId, organizationId: org, role: 'admin' })
  t.equal((await repos.memberships.find(owner.userId, org))?.role, 'admin', 'with another owner the demotion goes through')
  await t.rejects(() => repos.memberships.remove(second.user.id, org), { code: 'CONFLICT' }, 'and the other is now the last owner')
})

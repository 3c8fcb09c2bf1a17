/**
 * GET /oauth/authorize and the interaction pages over HTTP: which errors are pages and which are redirects, the
 * accepted `resource` forms, the pages' security headers, and the pending request bound to one browser, used once.
 */
import { createServer as createNetServer, type AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { request } from 'undici'
import { hashPassword } from '../../src/lib/crypto.js'
import { browserAuthorize, formAction, formValue, FormBrowser, authorizeUrl, pkce, registerClient, tokenRequest, type RegisteredClient } from '../helpers/oauth.js'
import { injectServer } from '../helpers/inject.js'
import { createMember } from '../helpers/seed.js'
import { OWNER_EMAIL, OWNER_PASSWORD, startServer, type TestServer } from '../helpers/server.js'

type Headers = Record<string, string | string[] | undefined>

interface Raw {
  status: number
  headers: Headers
  text: string
  location: string | undefined
}

async function get(url: string): Promise<Raw> {
  const res = await request(url, { method: 'GET' })
  const text = await res.body.text()
  return { status: res.statusCode, headers: res.headers as Headers, text, location: typeof res.headers.location === 'string' ? res.headers.location : undefined }
}

/** The headers every HTML page of the flow carries (RFC 9700 §4.16, §4.2.4; research items 12 and 20). */
function pageSecurity(t: Test, headers: Headers, label: string): void {
  t.match(String(headers['content-type']), /^text\/html/, `${label}: text/html`)
  t.equal(String(headers['x-frame-options']).toUpperCase(), 'DENY', `${label}: X-Frame-Options DENY`)
  t.match(String(headers['content-security-policy']), /frame-ancestors 'none'/, `${label}: CSP frame-ancestors 'none'`)
  t.match(String(headers['cache-control']), /no-store/, `${label}: Cache-Control no-store`)
  t.equal(headers['referrer-policy'], 'no-referrer', `${label}: Referrer-Policy no-referrer`)
  t.equal(headers['access-control-allow-origin'], undefined, `${label}: no CORS on the browser endpoints`)
}

/** An error shown as a page: never a redirect, so nothing reaches an unverified redirect_uri. */
function errorPage(t: Test, res: { status: number; headers: Headers; location?: string | undefined }, status: number, label: string): void {
  t.equal(res.status, status, `${label}: ${status}`)
  t.equal(res.location, undefined, `${label}: no Location (not redirected)`)
  pageSecurity(t, res.headers, label)
}

/** An error sent back to the client: 303 to its redirect_uri with error, error_description, state and iss; no code. */
function errorRedirect(t: Test, server: TestServer, res: Raw, redirectUri: string, code: string, state: string | null, label: string): URL | undefined {
  t.equal(res.status, 303, `${label}: 303`)
  if (!res.location) {
    t.fail(`${label}: no Location; body: ${res.text.slice(0, 200)}`)
    return undefined
  }
  const url = new URL(res.location)
  t.equal(`${url.origin}${url.pathname}`, redirectUri.replace(/\?.*$/, ''), `${label}: to the redirect_uri`)
  t.equal(url.searchParams.get('error'), code, `${label}: error=${code}`)
  t.ok((url.searchParams.get('error_description') ?? '').length > 0, `${label}: error_description`)
  t.equal(url.searchParams.get('state'), state, `${label}: state ${state === null ? 'absent' : 'returned unchanged'}`)
  t.equal(url.searchParams.get('iss'), server.url, `${label}: iss is the issuer`)
  t.equal(url.searchParams.get('code'), null, `${label}: no code`)
  t.match(String(res.headers['cache-control']), /no-store/, `${label}: no-store`)
  return url
}

/** An accepted authorize request: 303 to this server's interaction page. */
function accepted(t: Test, res: Raw, label: string): void {
  t.equal(res.status, 303, `${label}: 303`)
  t.match(String(res.location), /^\/oauth\/interaction\/[A-Za-z0-9_-]{43}$/, `${label}: to the interaction page (${res.location ?? res.text.slice(0, 120)})`)
}

/** The query of authorizeUrl with some parameters replaced, removed (null) or repeated (array). */
function authorizeWith(server: TestServer, client: RegisteredClient, overrides: Record<string, string | null | string[]>, state = 'st-' + Math.random().toString(36).slice(2)): string {
  const p = pkce()
  const simple: Record<string, string | null> = { state }
  const repeated: Array<[string, string[]]> = []
  for (const [k, v] of Object.entries(overrides)) {
    if (Array.isArray(v)) {
      simple[k] = null
      repeated.push([k, v])
    } else simple[k] = v
  }
  const url = new URL(authorizeUrl(server, client, p, simple))
  for (const [k, values] of repeated) for (const v of values) url.searchParams.append(k, v)
  return url.href
}

/** Walks to the consent page in `browser` (signing in when asked) and returns the form's fields. */
async function toConsent(server: TestServer, url: string, browser: FormBrowser, creds = { email: OWNER_EMAIL, password: OWNER_PASSWORD }) {
  const start = await browser.get(url)
  if (start.status !== 303 || !start.location) throw new Error(`authorize answered ${start.status}: ${start.text.slice(0, 300)}`)
  const interaction = start.location
  let page = await browser.get(interaction)
  if (page.text.includes('name="password"')) {
    const signin = await browser.post(formAction(page.text), { csrf: formValue(page.text, 'csrf') ?? '', ...creds })
    if (signin.status !== 303) throw new Error(`sign-in answered ${signin.status}`)
    page = await browser.get(signin.location!)
  }
  if (page.status !== 200) throw new Error(`consent page answered ${page.status}`)
  return {
    interaction,
    page,
    action: formAction(page.text),
    csrf: formValue(page.text, 'csrf') ?? '',
    membership: formValue(page.text, 'membership') ?? '',
  }
}

t.test('client_id and redirect_uri problems are an HTML page, never a redirect', async (t) => {
  const server = await startServer(t)
  const client = await registerClient(server, { redirect_uris: ['http://127.0.0.1:9999/callback'] })
  const named = await registerClient(server, { redirect_uris: ['http://localhost:9999/callback'] })
  const web = await registerClient(server, { redirect_uris: ['https://app.example.com/callback'] })
  const cases: Array<[string, string]> = [
    ['missing client_id', authorizeWith(server, client, { client_id: null })],
    ['unknown client_id', authorizeWith(server, client, { client_id: 'mcp_unknown' })],
    ['client_id repeated', authorizeWith(server, client, { client_id: [client.client_id, client.client_id] })],
    ['missing redirect_uri', authorizeWith(server, client, { redirect_uri: null })],
    ['unregistered redirect_uri', authorizeWith(server, client, { redirect_uri: 'https://evil.example/callback' })],
    ['redirect_uri repeated', authorizeWith(server, client, { redirect_uri: [client.redirect_uris[0]!, client.redirect_uris[0]!] })],
    ['registered 127.0.0.1, authorized with localhost', authorizeWith(server, client, { redirect_uri: 'http://localhost:9999/callback' })],
    ['registered localhost, authorized with 127.0.0.1', authorizeWith(server, named, { redirect_uri: 'http://127.0.0.1:9999/callback' })],
    ['registered 127.0.0.1, authorized with [::1]', authorizeWith(server, client, { redirect_uri: 'http://[::1]:9999/callback' })],
    ['loopback with another path', authorizeWith(server, client, { redirect_uri: 'http://127.0.0.1:9999/other' })],
    ['loopback with an added query', authorizeWith(server, client, { redirect_uri: 'http://127.0.0.1:9999/callback?x=1' })],
    ['https with another port (only loopback ports may differ)', authorizeWith(server, web, { redirect_uri: 'https://app.example.com:8443/callback' })],
    ['https with a trailing slash', authorizeWith(server, web, { redirect_uri: 'https://app.example.com/callback/' })],
    ["another client's redirect_uri", authorizeWith(server, client, { redirect_uri: web.redirect_uris[0]! })],
    // Even with everything else wrong too: the redirect target is not trusted, so nothing is redirected.
    ['unknown client and no state', authorizeWith(server, client, { client_id: 'mcp_unknown', state: null, response_type: 'token' })],
  ]
  for (const [label, url] of cases) {
    const res = await get(url)
    errorPage(t, res, 400, label)
    t.notMatch(res.text, /evil\.example/, `${label}: the page does not link to the offered address`)
  }
})

t.test('a loopback redirect_uri may differ only by port (RFC 8252)', async (t) => {
  const server = await startServer(t)
  const client = await registerClient(server, { redirect_uris: ['http://127.0.0.1:9999/callback', 'http://localhost/cb'] })
  const p = pkce()
  const url = authorizeUrl(server, client, p, { redirect_uri: 'http://127.0.0.1:51234/callback' })
  accepted(t, await get(url), 'another port')
  accepted(t, await get(authorizeWith(server, client, { redirect_uri: 'http://127.0.0.1/callback' })), 'no port against a registered port')
  accepted(t, await get(authorizeWith(server, client, { redirect_uri: 'http://localhost:4711/cb' })), 'a port against a registered portless localhost')

  const { redirect } = await browserAuthorize(server, url)
  t.equal(`${redirect.origin}${redirect.pathname}`, 'http://127.0.0.1:51234/callback', 'the code goes to the port of the request')
  const code = redirect.searchParams.get('code')
  t.ok(code, 'a code was issued')
  const exchange = await tokenRequest(server, { grant_type: 'authorization_code', code: code!, redirect_uri: 'http://127.0.0.1:51234/callback', client_id: client.client_id, code_verifier: p.verifier })
  t.equal(exchange.status, 200, 'exchanged with the redirect_uri of the request')
})

t.test('other errors redirect to the client with error, state and iss', async (t) => {
  const server = await startServer(t)
  const client = await registerClient(server)
  const readOnly = await registerClient(server, { scope: 'mcp:read' })
  const cb = client.redirect_uris[0]!
  const digest = pkce().challenge
  const cases: Array<[string, RegisteredClient, Record<string, string | null | string[]>, string]> = [
    ['missing response_type', client, { response_type: null }, 'invalid_request'],
    ['response_type=token', client, { response_type: 'token' }, 'unsupported_response_type'],
    ['response_type=code token', client, { response_type: 'code token' }, 'unsupported_response_type'],
    ['unknown scope', client, { scope: 'mcp:read mcp:admin' }, 'invalid_scope'],
    ['scope beyond the registered one', readOnly, { scope: 'mcp:read mcp:write' }, 'invalid_scope'],
    ['missing code_challenge', client, { code_challenge: null }, 'invalid_request'],
    ['padded code_challenge', client, { code_challenge: digest + '=' }, 'invalid_request'],
    ['code_challenge with + and /', client, { code_challenge: 'A'.repeat(41) + '+/' }, 'invalid_request'],
    ['code_challenge too short', client, { code_challenge: digest.slice(0, 42) }, 'invalid_request'],
    ['code_challenge_method plain', client, { code_challenge_method: 'plain' }, 'invalid_request'],
    ['code_challenge_method missing', client, { code_challenge_method: null }, 'invalid_request'],
    ['code_challenge_method s256 (lower case)', client, { code_challenge_method: 's256' }, 'invalid_request'],
    ['missing resource', client, { resource: null }, 'invalid_target'],
    ['resource of another server', client, { resource: 'https://other.example' }, 'invalid_target'],
    ['resource with another path', client, { resource: `${server.url}/other` }, 'invalid_target'],
    ['resource with another port', client, { resource: server.url.replace(/:(\d+)$/, (_m, p: string) => `:${Number(p) === 65535 ? 1 : Number(p) + 1}`) }, 'invalid_target'],
    ['resource with a fragment', client, { resource: `${server.url}/mcp#frag` }, 'invalid_target'],
    ['resource with an empty fragment', client, { resource: `${server.url}#` }, 'invalid_target'],
    ['resource with a query', client, { resource: `${server.url}/mcp?x=1` }, 'invalid_target'],
    ['resource relative', client, { resource: '/mcp' }, 'invalid_target'],
    ['resource twice', client, { resource: [server.url, server.url] }, 'invalid_target'],
    ['response_type repeated', client, { response_type: ['code', 'code'] }, 'invalid_request'],
    ['scope repeated', client, { scope: ['mcp:read', 'mcp:read'] }, 'invalid_request'],
    ['code_challenge repeated', client, { code_challenge: [digest, digest] }, 'invalid_request'],
    ['code_challenge_method repeated', client, { code_challenge_method: ['S256', 'S256'] }, 'invalid_request'],
  ]
  for (const [label, c, overrides, code] of cases) {
    const state = `state-${label.replace(/\W+/g, '-')}`
    errorRedirect(t, server, await get(authorizeWith(server, c, overrides, state)), c.redirect_uris[0]!, code, state, label)
  }

  errorRedirect(t, server, await get(authorizeWith(server, client, { state: null })), cb, 'invalid_request', null, 'missing state')
  const twice = await get(authorizeWith(server, client, { state: ['a', 'b'] }))
  errorRedirect(t, server, twice, cb, 'invalid_request', null, 'state repeated')
  const long = await get(authorizeWith(server, client, {}, 's'.repeat(1025)))
  errorRedirect(t, server, long, cb, 'invalid_request', null, 'state over 1 KiB')

  // A redirect_uri with its own query keeps it, and the error parameters are added to it.
  const withQuery = await registerClient(server, { redirect_uris: ['https://app.example.com/cb?tenant=a'] })
  const res = await get(authorizeWith(server, withQuery, { response_type: 'token' }, 'q'))
  const url = errorRedirect(t, server, res, 'https://app.example.com/cb', 'unsupported_response_type', 'q', 'redirect_uri with a query')
  t.equal(url?.searchParams.get('tenant'), 'a', 'the registered query is kept')
})

t.test('resource forms that name this server are accepted', async (t) => {
  const server = await startServer(t)
  const client = await registerClient(server)
  const upperScheme = server.url.replace(/^http:/, 'HTTP:')
  const browser = new FormBrowser(server.url)
  for (const [label, resource] of [
    ['base', server.url],
    ['base/', `${server.url}/`],
    ['base/mcp', `${server.url}/mcp`],
    ['upper-case scheme', `${upperScheme}/mcp`],
  ] as const) {
    const p = pkce()
    const url = authorizeUrl(server, client, p, { resource })
    accepted(t, await get(url), label)
    const { redirect } = await browserAuthorize(server, url, { browser })
    const code = redirect.searchParams.get('code')
    t.ok(code, `${label}: a code is issued`)
    const res = await tokenRequest(server, { grant_type: 'authorization_code', code: code!, redirect_uri: client.redirect_uris[0]!, client_id: client.client_id, code_verifier: p.verifier })
    t.equal(res.status, 200, `${label}: exchanged`)
    const claims = JSON.parse(Buffer.from(String(res.json.access_token).split('.')[1]!, 'base64url').toString('utf8'))
    t.equal(claims.aud, server.url, `${label}: the audience is the base URL`)
  }
})

t.test('resource: scheme and host are compared case-insensitively', async (t) => {
  // A base URL with a host name (letters) on a port picked beforehand; requests still go to 127.0.0.1.
  const probe = createNetServer()
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve))
  const port = (probe.address() as AddressInfo).port
  await new Promise<void>((resolve) => probe.close(() => resolve()))
  const server = await startServer(t, { config: { port, baseUrl: `http://localhost:${port}` } })
  const direct = { ...server, url: `http://127.0.0.1:${port}` } as TestServer
  const client = await registerClient(direct)
  for (const resource of [`HTTP://LOCALHOST:${port}`, `http://LocalHost:${port}/mcp`, `http://localhost:${port}/`]) {
    const url = authorizeUrl(direct, client, pkce(), { resource })
    accepted(t, await get(url), resource)
  }
  const wrong = await get(authorizeUrl(direct, client, pkce(), { resource: `http://127.0.0.1:${port}` }))
  t.equal(new URL(wrong.location ?? 'x:/').searchParams.get('error'), 'invalid_target', 'another host spelling of the same machine is another audience')
})

t.test('the pages carry the security headers, and the flow ends in a 303 with code, state and iss', async (t) => {
  const server = await startServer(t)
  const client = await registerClient(server)
  const state = 'opaque-state-☃'
  const url = authorizeUrl(server, client, pkce(), { state })
  const start = await get(url)
  accepted(t, start, 'authorize')
  t.match(String(start.headers['cache-control']), /no-store/, 'the authorize redirect is no-store')
  t.equal(start.headers['referrer-policy'], 'no-referrer', 'and has no referrer')
  t.equal(start.headers['access-control-allow-origin'], undefined, 'no CORS on /oauth/authorize')

  errorPage(t, await get(`${server.url}/oauth/authorize`), 400, 'error page')

  const browser = new FormBrowser(server.url)
  const first = await browser.get(url)
  const signin = await browser.get(first.location!)
  t.equal(signin.status, 200, 'sign-in page')
  pageSecurity(t, signin.headers as Headers, 'sign-in page')
  const cookieLines = ([] as string[]).concat((first.headers['set-cookie'] as string | string[] | undefined) ?? [])
  t.ok(cookieLines.length > 0, 'the browser cookie is set by authorize')
  for (const line of cookieLines) {
    t.match(line, /HttpOnly/i, 'cookies are HttpOnly')
    t.match(line, /SameSite=Lax/i, 'cookies are SameSite=Lax')
  }

  const consent = await toConsent(server, url, browser)
  pageSecurity(t, consent.page.headers as Headers, 'consent page')
  t.match(consent.page.text, /Test client/, 'the consent page names the client')
  t.match(consent.page.text, /127\.0\.0\.1:9999/, 'and the redirect host')
  t.match(consent.page.text, /mcp:read/, 'and the scopes')

  const done = await browser.post(consent.action, { csrf: consent.csrf, decision: 'approve', membership: consent.membership })
  t.equal(done.status, 303, 'consent answers 303, never 307')
  const cb = new URL(done.location!)
  t.equal(`${cb.origin}${cb.pathname}`, client.redirect_uris[0])
  t.match(cb.searchParams.get('code') ?? '', /^[A-Za-z0-9_-]{43,}$/, 'a code')
  t.equal(cb.searchParams.get('state'), state, 'state returned unchanged')
  t.equal(cb.searchParams.get('iss'), server.url, 'iss (RFC 9207)')
  t.equal(done.headers['referrer-policy'], 'no-referrer')

  // Deny: an access_denied redirect with state and iss, no code.
  const denyState = 'deny-state'
  const deny = await toConsent(server, authorizeUrl(server, client, pkce(), { state: denyState }), browser)
  const denied = await browser.post(deny.action, { csrf: deny.csrf, decision: 'deny', membership: deny.membership })
  errorRedirect(t, server, { status: denied.status, headers: denied.headers as Headers, text: denied.text, location: denied.location }, client.redirect_uris[0]!, 'access_denied', denyState, 'deny')
})

t.test('no scope asks for the client\'s registered scope (RFC 6749 §3.3 default), shown on the consent page', async (t) => {
  const server = await startServer(t)
  const readOnly = await registerClient(server, { scope: 'mcp:read' })
  const p = pkce()
  const browser = new FormBrowser(server.url)
  const consent = await toConsent(server, authorizeUrl(server, readOnly, p, { scope: null }), browser)
  t.match(consent.page.text, /mcp:read/, 'the consent page shows the registered scope')
  t.notMatch(consent.page.text, /mcp:write/, 'and nothing beyond it')
  const done = await browser.post(consent.action, { csrf: consent.csrf, decision: 'approve', membership: consent.membership })
  const code = new URL(done.location!).searchParams.get('code') ?? ''
  const res = await tokenRequest(server, { grant_type: 'authorization_code', code, redirect_uri: readOnly.redirect_uris[0]!, client_id: readOnly.client_id, code_verifier: p.verifier })
  t.equal(res.status, 200, 'the code is exchanged')
  t.equal(res.json.scope, 'mcp:read', 'for the registered scope')

  const both = await registerClient(server, { scope: undefined })
  t.equal(both.scope, 'mcp:read mcp:write', 'a registration without scope registers the default scopes')
  const bothConsent = await toConsent(server, authorizeUrl(server, both, pkce(), { scope: null }), browser)
  t.match(bothConsent.page.text, /mcp:write/, 'and such a client, asking for no scope, is offered both')
})

t.test('consent: escaped client name, asked every time, and only for the signed-in user\'s own memberships', async (t) => {
  const server = await startServer(t)
  const client = await registerClient(server, { client_name: '<script>alert(1)</script> "Evil" & Co' })
  const browser = new FormBrowser(server.url)
  const c = await toConsent(server, authorizeUrl(server, client, pkce()), browser)
  t.notMatch(c.page.text, /<script>alert/, 'the client name is not markup')
  t.match(c.page.text, /&lt;script&gt;alert\(1\)&lt;\/script&gt;/, 'it is shown escaped')

  // Another member's membership id slipped into the form is refused, and the request stays answerable.
  const stranger = await createMember(server, { role: 'owner' })
  const tampered = await browser.post(c.action, { csrf: c.csrf, decision: 'approve', membership: stranger.membership.id })
  t.equal(tampered.status, 400, "approving for another user's membership: 400")
  t.equal(tampered.location, undefined, 'no redirect, no code')
  const missing = await browser.post(c.action, { csrf: c.csrf, decision: 'approve' })
  t.equal(missing.status, 400, 'approving without a membership: 400')
  const done = await browser.post(c.action, { csrf: c.csrf, decision: 'approve', membership: c.membership })
  t.equal(done.status, 303, 'the real membership still works')
  t.ok(new URL(done.location!).searchParams.get('code'))

  // Signed in already: the next authorization still shows the consent page instead of redirecting silently.
  const next = await browser.get(authorizeUrl(server, client, pkce()))
  t.equal(next.status, 303)
  t.match(String(next.location), /^\/oauth\/interaction\//, 'to the interaction page, not straight to the client')
  const page = await browser.get(next.location!)
  t.equal(page.status, 200)
  t.match(page.text, /name="decision"/, 'the consent form is shown again')
  t.notMatch(page.text, /name="password"/, 'without asking for the password again')
})

t.test('the pending request is single use and bound to the browser', async (t) => {
  const server = await startServer(t)
  const client = await registerClient(server)
  const browser = new FormBrowser(server.url)
  const c = await toConsent(server, authorizeUrl(server, client, pkce()), browser)

  // Another browser (other cookies) cannot open or answer it.
  const other = new FormBrowser(server.url)
  const stolen = await other.get(c.interaction)
  errorPage(t, stolen, 400, 'another browser opens the interaction URL')
  t.notMatch(stolen.text, /name="csrf"/, 'and gets no form')
  const stolenPost = await other.post(c.action, { csrf: c.csrf, decision: 'approve', membership: c.membership })
  t.ok(stolenPost.status >= 400 && stolenPost.status < 500, `another browser posting the consent is refused (${stolenPost.status})`)
  t.equal(stolenPost.location, undefined, 'and not redirected')

  // CSRF: no token, a wrong token, a foreign Origin.
  const noCsrf = await browser.post(c.action, { decision: 'approve', membership: c.membership })
  errorPage(t, noCsrf, 403, 'consent without csrf')
  const wrongCsrf = await browser.post(c.action, { csrf: 'A'.repeat(64), decision: 'approve', membership: c.membership })
  errorPage(t, wrongCsrf, 403, 'consent with a wrong csrf')
  const evil = new FormBrowser('https://evil.example')
  for (const [k, v] of browser.cookies) evil.cookies.set(k, v)
  const foreign = await evil.post(new URL(c.action, server.url).href, { csrf: c.csrf, decision: 'approve', membership: c.membership })
  errorPage(t, foreign, 403, 'consent from a foreign Origin')
  // Cross-site signals without a usable Origin: an opaque Origin, or only Sec-Fetch-Site (which pages cannot forge).
  const cookie = [...browser.cookies].map(([k, v]) => `${k}=${v}`).join('; ')
  for (const extra of [{ origin: 'null' }, { origin: 'null', 'sec-fetch-site': 'cross-site' }, { 'sec-fetch-site': 'cross-site' }] as Array<Record<string, string>>) {
    const res = await request(new URL(c.action, server.url).href, {
      method: 'POST',
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded', ...extra },
      body: new URLSearchParams({ csrf: c.csrf, decision: 'approve', membership: c.membership }).toString(),
    })
    const text = await res.body.text()
    errorPage(t, { status: res.statusCode, headers: res.headers as Headers, location: typeof res.headers.location === 'string' ? res.headers.location : undefined }, 403, `consent with ${JSON.stringify(extra)}`)
    t.notMatch(text, /code=/, 'no code')
  }

  // None of that used the request up: the real answer still works, once.
  const ok = await browser.post(c.action, { csrf: c.csrf, decision: 'approve', membership: c.membership })
  t.equal(ok.status, 303, 'the legitimate consent works')
  t.ok(new URL(ok.location!).searchParams.get('code'), 'with a code')
  const replay = await browser.post(c.action, { csrf: c.csrf, decision: 'approve', membership: c.membership })
  errorPage(t, replay, 400, 'replayed consent')
  t.notMatch(replay.text, /code=/, 'no second code')
  errorPage(t, await browser.get(c.interaction), 400, 'the answered interaction page')
})

// The two expiry tests run on the inject tier (test/helpers/inject.ts): the server's clock decides, moved by the test.
t.test('an expired pending request gets the error page', async (t) => {
  const server = await injectServer(t, { config: { authRequestTtlMs: 50 } })
  const client = await registerClient(server)
  const browser = new FormBrowser(server.url)
  const start = await browser.get(authorizeUrl(server, client, pkce()))
  t.equal(start.status, 303)
  await server.clock.advance(49)
  t.equal((await browser.get(start.location!)).status, 200, '1 ms before it expires, the sign-in page')
  await server.clock.advance(1)
  errorPage(t, await browser.get(start.location!), 400, 'expired pending request')
})

t.test('an expired pending request cannot be consented either', async (t) => {
  const server = await injectServer(t, { config: { authRequestTtlMs: 400 } })
  const client = await registerClient(server)
  const browser = new FormBrowser(server.url)
  const c = await toConsent(server, authorizeUrl(server, client, pkce()), browser)
  await server.clock.advance(400)
  const late = await browser.post(c.action, { csrf: c.csrf, decision: 'approve', membership: c.membership })
  errorPage(t, late, 400, 'consent after expiry')
})

t.test('sign-in: a wrong password or a disabled user is refused without a sign-in cookie', async (t) => {
  const server = await startServer(t)
  const client = await registerClient(server)
  const repos = server.app.repos

  async function trySignIn(email: string, password: string) {
    const browser = new FormBrowser(server.url)
    const start = await browser.get(authorizeUrl(server, client, pkce()))
    const page = await browser.get(start.location!)
    const before = new Set(browser.cookies.keys())
    const res = await browser.post(formAction(page.text), { csrf: formValue(page.text, 'csrf') ?? '', email, password })
    const setCookie = ([] as string[]).concat((res.headers['set-cookie'] as string | string[] | undefined) ?? [])
    return { res, browser, before, setCookie, interaction: start.location! }
  }

  const wrong = await trySignIn(OWNER_EMAIL, 'not the password')
  t.equal(wrong.res.status, 401, 'wrong password: 401')
  pageSecurity(t, wrong.res.headers as Headers, 'wrong password page')
  t.match(wrong.res.text, /Incorrect email or password/)
  t.equal(wrong.res.location, undefined, 'not redirected')
  t.strictSame(wrong.setCookie.filter((l) => /signin/i.test(l)), [], 'no sign-in cookie is set')
  t.strictSame([...wrong.browser.cookies.keys()], [...wrong.before], 'no new cookie at all')
  const still = await wrong.browser.get(wrong.interaction)
  t.match(still.text, /name="password"/, 'the browser is still signed out')

  const unknown = await trySignIn('nobody@example.com', OWNER_PASSWORD)
  t.equal(unknown.res.status, 401, 'unknown email: 401, like a wrong password')
  t.match(unknown.res.text, /Incorrect email or password/)

  const member = await createMember(server, { role: 'developer' })
  await repos.users.setPasswordHash(member.user.id, await hashPassword('member password 1'))
  const ok = await trySignIn(member.user.email, 'member password 1')
  t.equal(ok.res.status, 303, 'the enabled member can sign in')

  await repos.users.setDisabled(member.user.id, true)
  const disabled = await trySignIn(member.user.email, 'member password 1')
  t.equal(disabled.res.status, 401, 'a disabled user is refused')
  t.strictSame(disabled.setCookie.filter((l) => /signin/i.test(l)), [], 'no sign-in cookie for a disabled user')

  // A browser signed in before the user was disabled is signed out by it: the consent page asks to sign in again.
  const again = await ok.browser.get(ok.interaction)
  t.match(again.text, /name="password"/, 'an existing sign-in of a disabled user no longer counts')

  const noCsrf = await new FormBrowser(server.url).post(`${server.url}${wrong.interaction}/signin`, { email: OWNER_EMAIL, password: OWNER_PASSWORD })
  t.ok(noCsrf.status >= 400 && noCsrf.status < 500, `sign-in from a browser without the pending request is refused (${noCsrf.status})`)
  const missingCsrf = await wrong.browser.post(`${wrong.interaction}/signin`, { email: OWNER_EMAIL, password: OWNER_PASSWORD })
  errorPage(t, missingCsrf, 403, 'sign-in without csrf')
})

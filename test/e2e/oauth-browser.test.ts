import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Page } from 'playwright-core'
import t, { type Test } from 'tap'
import { launchBrowser, screenshot, watchConsole } from '../helpers/browser.js'
import { callTool, initializeMessage, openSession, post, type RpcReply } from '../helpers/mcp.js'
import { authorizeUrl, pkce, registerClient, revokeRequest, tokenRequest, type Pkce, type RegisteredClient } from '../helpers/oauth.js'
import { OWNER_EMAIL, OWNER_PASSWORD, startServer, type TestServer } from '../helpers/server.js'
import { openLive } from '../helpers/stream.js'

// The whole authorization code flow driven in headless Chromium, as a person would: the sign-in and consent pages of
// the server, the redirect to a real client callback, then the tokens on /mcp, refresh rotation, reuse detection and
// revocation ending sessions and streams.

const CLIENT_NAME = 'Browser Flow Client'

interface Callback {
  port: number
  base: string
  /** Request URLs (path and query) received on /callback, in order. */
  hits: string[]
}

/** The client's redirect URI: a tiny server on 127.0.0.1, port 0, that records what it receives and answers "done". */
async function startCallbackServer(t: Test): Promise<Callback> {
  const hits: string[] = []
  const server = createServer((req, res) => {
    if (req.url?.startsWith('/callback')) hits.push(req.url)
    res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end('done')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  t.teardown(() => new Promise<void>((resolve) => {
    server.closeAllConnections()
    server.close(() => resolve())
  }))
  return { port, base: `http://127.0.0.1:${port}/callback`, hits }
}


function revoked(t: Test, reply: RpcReply, label: string): void {
  t.equal(reply.status, 401, `${label}: 401`)
  t.equal(reply.json?.error?.code, 'TOKEN_REVOKED', `${label}: TOKEN_REVOKED`)
  t.match(String(reply.headers['www-authenticate'] ?? ''), /^Bearer /, `${label}: WWW-Authenticate`)
}

async function whoami(t: Test, server: TestServer, headers: Record<string, string>) {
  const reply = await post(server.mcpUrl, callTool('service_whoami'), headers)
  t.equal(reply.status, 200, 'service_whoami answers 200')
  t.equal(reply.json?.result?.isError, false, 'service_whoami succeeds')
  return reply.json.result.structuredContent as {
    user: { email: string }
    organization: { slug: string; name: string }
    role: string
    scopes: string[]
    credential: { kind: string; id: string; client_id?: string }
  }
}

async function exchange(server: TestServer, client: RegisteredClient, p: Pkce, code: string) {
  return tokenRequest(server, {
    grant_type: 'authorization_code',
    code,
    redirect_uri: client.redirect_uris[0]!,
    client_id: client.client_id,
    code_verifier: p.verifier,
  })
}

/** Clicks a consent button and waits for the browser to land on the client's callback; returns the callback URL. */
async function decide(page: Page, callback: Callback, button: 'Allow' | 'Deny'): Promise<URL> {
  await Promise.all([
    page.waitForURL((u) => u.href.startsWith(callback.base), { waitUntil: 'load' }),
    page.getByRole('button', { name: button, exact: true }).click(),
  ])
  return new URL(page.url())
}

/** Goes through the sign-in page (already on it) with the given password; returns the POST's response. */
async function submitSignIn(page: Page, password: string) {
  await page.fill('#email', OWNER_EMAIL)
  await page.fill('#password', password)
  const [response] = await Promise.all([
    page.waitForResponse((r) => r.request().method() === 'POST' && /\/oauth\/interaction\/[^/]+\/signin$/.test(r.url())),
    page.getByRole('button', { name: 'Sign in' }).click(),
  ])
  await page.waitForLoadState('load')
  if (response.status() === 403) {
    // Stop here, saying why, rather than time out on every later step. Chromium sends `Origin: null` on a same-origin
    // form POST from a page under `Referrer-Policy: no-referrer` (Fetch, "append a request Origin header").
    const sent = await response.request().allHeaders()
    const alert = await page.getByRole('alert').textContent({ timeout: 1000 }).catch(() => null)
    throw new Error(`the server refused its own sign-in form: 403 ${JSON.stringify(alert)}; Chromium sent Origin: ${sent.origin} and Sec-Fetch-Site: ${sent['sec-fetch-site']}`)
  }
  return response
}

function checkPageHeaders(t: Test, headers: Record<string, string>, label: string): void {
  t.equal(headers['x-frame-options'], 'DENY', `${label}: X-Frame-Options DENY`)
  t.match(headers['content-security-policy'] ?? '', /(^|;\s*)frame-ancestors 'none'(;|$)/, `${label}: CSP frame-ancestors 'none'`)
  t.equal(headers['cache-control'], 'no-store', `${label}: Cache-Control no-store`)
  t.match(headers['content-type'] ?? '', /^text\/html/, `${label}: HTML`)
}

let browserPromise: ReturnType<typeof launchBrowser> | undefined
/** One Chromium for the file (launched through launchBrowser, closed at the end); a fresh context per test. */
function browser() {
  browserPromise ??= launchBrowser(t)
  return browserPromise
}

/** A server, a callback server, and a page in a fresh browser context, watched for CSP violations and errors. */
async function setup(t: Test) {
  const server = await startServer(t)
  const callback = await startCallbackServer(t)
  const context = await (await browser()).newContext()
  context.setDefaultTimeout(5000)
  t.teardown(() => context.close())
  const page = await context.newPage()
  return { server, callback, page, problems: watchConsole(page) }
}

t.test('the whole flow as a person would', async (t) => {
  const { server, callback, page, problems } = await setup(t)

  const client = await registerClient(server, { client_name: CLIENT_NAME, redirect_uris: [callback.base] })
  t.same(client.redirect_uris, [callback.base], 'the client is registered with the callback')
  t.ok(client.grant_types.includes('refresh_token'), 'and may refresh')

  // --- First authorization: sign in, consent, callback --------------------------------------------------------------
  const p1 = pkce()
  const state1 = 'state-one-' + Date.now()
  const signInResponse = await page.goto(authorizeUrl(server, client, p1, { state: state1 }))
  t.equal(signInResponse?.status(), 200, 'the sign-in page answers 200')
  t.match(page.url(), new RegExp(`^${server.url}/oauth/interaction/[A-Za-z0-9_-]{43}$`), 'authorize redirected to the interaction page')
  t.equal(await page.title(), 'Sign in', 'title')
  t.equal(await page.getByRole('heading', { level: 1 }).textContent(), 'Sign in', 'heading')
  t.equal(await page.locator('p.muted strong').textContent(), CLIENT_NAME, 'the client name is shown')
  t.equal(await page.getByRole('alert').count(), 0, 'no error before an attempt')
  await screenshot(page, 'oauth-sign-in')
  const interactionUrl = page.url()

  const wrong = await submitSignIn(page, 'not the password')
  t.equal(wrong.status(), 401, 'a wrong password answers 401')
  t.equal(page.url(), `${interactionUrl}/signin`, 'the browser shows the answer of the sign-in POST')
  t.equal(await page.getByRole('alert').textContent(), 'Incorrect email or password.', 'the error is shown in role=alert')
  t.equal(await page.inputValue('#email'), OWNER_EMAIL, 'the email is kept')
  t.equal(await page.inputValue('#password'), '', 'the password is not echoed back')
  t.equal(await page.locator('p.muted strong').textContent(), CLIENT_NAME, 'the client name is still shown')

  await page.fill('#email', OWNER_EMAIL)
  await page.fill('#password', OWNER_PASSWORD)
  const [signedIn, consentResponse] = await Promise.all([
    page.waitForResponse((r) => r.request().method() === 'POST' && r.url() === `${interactionUrl}/signin`),
    page.waitForResponse((r) => r.request().method() === 'GET' && r.url() === interactionUrl),
    page.getByRole('button', { name: 'Sign in' }).click(),
  ])
  await page.waitForLoadState('load')
  t.equal(signedIn.status(), 303, 'the right password answers 303')
  t.equal(consentResponse.status(), 200, 'the consent page answers 200')
  t.equal(page.url(), interactionUrl, 'back on the interaction page, now the consent')
  checkPageHeaders(t, await consentResponse.allHeaders(), 'consent page after sign-in')

  t.equal(await page.title(), `Authorize ${CLIENT_NAME}`, 'consent title names the client')
  t.equal(await page.getByRole('heading', { level: 1 }).textContent(), `Authorize ${CLIENT_NAME}`, 'consent heading names the client')
  t.equal(await page.locator('#redirect-host').textContent(), `127.0.0.1:${callback.port}`, 'the redirect host and port are shown')
  const scopes = await page.locator('main ul li').allTextContents()
  t.equal(scopes.length, 2, 'two scopes listed')
  t.match(scopes[0] ?? '', /^mcp:read: /, 'mcp:read is listed')
  t.match(scopes[1] ?? '', /^mcp:write: /, 'mcp:write is listed')
  t.match(await page.locator('main').textContent(), /Organization\s+Default organization default owner/, 'the organization and role are named')
  t.equal(await page.locator('#server-host').textContent(), new URL(server.url).host, 'and the server')
  t.match(await page.locator('main').textContent(), OWNER_EMAIL, 'the signed-in user is named')
  t.match(await page.locator('main').textContent(), client.client_id, 'the client id is shown')
  await screenshot(page, 'oauth-consent')

  const landed1 = await decide(page, callback, 'Allow')
  t.equal(landed1.origin + landed1.pathname, callback.base, 'the browser lands on the callback')
  t.equal(await page.locator('body').textContent(), 'done', 'the callback page is shown')
  t.same(callback.hits.map((h) => new URL(h, callback.base).href), [landed1.href], 'the callback server received exactly that request')
  const code1 = landed1.searchParams.get('code')
  t.match(code1, /^[A-Za-z0-9_-]{43}$/, 'code')
  t.equal(landed1.searchParams.get('state'), state1, 'the same state')
  t.equal(landed1.searchParams.get('iss'), server.url, 'iss is the server base URL')
  t.equal(landed1.searchParams.get('error'), null, 'no error')

  // --- Tokens and /mcp --------------------------------------------------------------------------------------------
  const tokens1 = await exchange(server, client, p1, code1!)
  t.equal(tokens1.status, 200, 'the code is exchanged')
  t.equal(tokens1.json.token_type, 'Bearer')
  t.equal(tokens1.json.scope, 'mcp:read mcp:write')
  t.match(tokens1.json.access_token, /^eyJ/, 'a JWT access token')
  t.match(tokens1.json.refresh_token, /^mcp_rt_/, 'a refresh token')
  const access1: string = tokens1.json.access_token
  const refresh1: string = tokens1.json.refresh_token

  const session1 = await openSession(server.mcpUrl, access1)
  const me = await whoami(t, server, session1.headers)
  t.equal(me.credential.kind, 'oauth', 'the session runs on the OAuth credential')
  t.equal(me.credential.client_id, client.client_id, 'of this client')
  t.equal(me.user.email, OWNER_EMAIL)
  t.equal(me.organization.slug, 'default')
  t.same(me.scopes, ['mcp:read', 'mcp:write'])

  // --- Refresh, then reuse of the rotated refresh token -----------------------------------------------------------
  const tokens2 = await tokenRequest(server, { grant_type: 'refresh_token', refresh_token: refresh1, client_id: client.client_id })
  t.equal(tokens2.status, 200, 'refresh answers 200')
  const access2: string = tokens2.json.access_token
  const refresh2: string = tokens2.json.refresh_token
  t.ok(access2 && access2 !== access1, 'a new access token')
  t.ok(refresh2 && refresh2 !== refresh1 && refresh2.startsWith('mcp_rt_'), 'a new, rotated refresh token')
  const fresh = await post(server.mcpUrl, initializeMessage(), { authorization: `Bearer ${access2}` })
  t.equal(fresh.status, 200, 'the refreshed access token works before the reuse')
  t.equal((await post(server.mcpUrl, { jsonrpc: '2.0', id: 2, method: 'ping' }, session1.headers)).status, 200, 'the first session still works before the reuse')

  const reuse = await tokenRequest(server, { grant_type: 'refresh_token', refresh_token: refresh1, client_id: client.client_id })
  t.equal(reuse.status, 400, 'the rotated refresh token presented again: 400')
  t.equal(reuse.json?.error, 'invalid_grant', 'invalid_grant')
  revoked(t, await post(server.mcpUrl, initializeMessage(), { authorization: `Bearer ${access2}` }), 'the refreshed access token after the reuse (family revoked)')
  const afterFamily = await tokenRequest(server, { grant_type: 'refresh_token', refresh_token: refresh2, client_id: client.client_id })
  t.equal(afterFamily.json?.error, 'invalid_grant', 'the newest refresh token of the family is refused too')

  const old = await post(server.mcpUrl, { jsonrpc: '2.0', id: 3, method: 'ping' }, session1.headers)
  t.ok(old.status === 401 || old.status === 404, `the first session with its token is refused (401 or 404): ${old.status}`)
  // What this server does: the credential is checked before the session is looked up.
  revoked(t, old, 'the first session with the first token')
  t.equal(await server.app.sessions.get(session1.sessionId), undefined, 'the first session is ended')

  // --- Second authorization in the same browser: already signed in, straight to consent ---------------------------
  callback.hits.length = 0
  const p2 = pkce()
  const state2 = 'state-two-' + Date.now()
  const consent2 = await page.goto(authorizeUrl(server, client, p2, { state: state2 }))
  t.equal(consent2?.status(), 200)
  t.match(page.url(), new RegExp(`^${server.url}/oauth/interaction/[A-Za-z0-9_-]{43}$`), 'on a new interaction page')
  t.not(page.url(), interactionUrl, 'a new authorization request')
  t.equal(await page.title(), `Authorize ${CLIENT_NAME}`, 'no sign-in: straight to consent')
  t.equal(await page.locator('#password').count(), 0, 'no password field')
  checkPageHeaders(t, consent2?.headers() ?? {}, 'consent page from page.goto')
  const landed2 = await decide(page, callback, 'Allow')
  t.equal(landed2.searchParams.get('state'), state2, 'the second state comes back')
  t.equal(landed2.searchParams.get('iss'), server.url, 'iss')
  const code2 = landed2.searchParams.get('code')
  t.ok(code2 && code2 !== code1, 'a new code')
  t.equal(callback.hits.length, 1, 'one callback request')

  const tokens3 = await exchange(server, client, p2, code2!)
  t.equal(tokens3.status, 200, 'the second code is exchanged')
  const access3: string = tokens3.json.access_token
  const session3 = await openSession(server.mcpUrl, access3)
  t.equal((await whoami(t, server, session3.headers)).credential.kind, 'oauth')

  const live = await openLive(server.mcpUrl, { method: 'GET', headers: { ...session3.headers, accept: 'text/event-stream' } })
  t.teardown(() => live.close())
  t.equal(live.status, 200, 'the GET stream is open')
  t.match(String(live.headers['content-type']), /^text\/event-stream/)

  const revocation = await revokeRequest(server, { token: access3, client_id: client.client_id })
  t.equal(revocation.status, 200, 'revocation answers 200')
  await live.ended(3000)
  t.ok(live.endedByServer, 'the server ended the stream')
  t.equal(await server.app.sessions.get(session3.sessionId), undefined, 'the session is gone')
  revoked(t, await post(server.mcpUrl, { jsonrpc: '2.0', id: 4, method: 'ping' }, session3.headers), 'the revoked token on its session')
  revoked(t, await post(server.mcpUrl, initializeMessage(), { authorization: `Bearer ${access3}` }), 'the revoked token on initialize')

  t.same(problems, [], 'no CSP violations or page errors')
})

t.test('Deny sends access_denied to the callback, with state and iss and no code', async (t) => {
  const { server, callback, page, problems } = await setup(t)

  const client = await registerClient(server, { client_name: CLIENT_NAME, redirect_uris: [callback.base] })
  const p = pkce()
  const state = 'deny-state-' + Date.now()
  await page.goto(authorizeUrl(server, client, p, { state }))
  t.equal(await page.title(), 'Sign in')
  const signedIn = await submitSignIn(page, OWNER_PASSWORD)
  t.equal(signedIn.status(), 303, 'signed in')
  t.equal(await page.title(), `Authorize ${CLIENT_NAME}`, 'on the consent page')

  const landed = await decide(page, callback, 'Deny')
  t.equal(landed.origin + landed.pathname, callback.base, 'the browser lands on the callback')
  t.equal(landed.searchParams.get('error'), 'access_denied', 'error=access_denied')
  t.equal(landed.searchParams.get('state'), state, 'the same state')
  t.equal(landed.searchParams.get('iss'), server.url, 'iss is the server base URL')
  t.equal(landed.searchParams.get('code'), null, 'no code')
  t.same(callback.hits.map((h) => new URL(h, callback.base).href), [landed.href], 'the callback server received exactly that request')
  t.same(await server.app.repos.oauthGrants.authorizedClients((await server.app.repos.users.byEmail(OWNER_EMAIL))!.id, Date.now()), [], 'nothing was granted')

  // The answered request cannot be answered again (back button, then Allow).
  await page.goBack()
  const again = await page.reload()
  t.equal(again?.status(), 400, 'the answered authorization request is gone')
  t.equal(await page.getByRole('alert').count(), 1, 'with an error shown')
  t.same(problems, [], 'no CSP violations or page errors')
})

import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { BrowserContext, Page, Response } from 'playwright-core'
import t, { type Test } from 'tap'
import { request } from 'undici'
import { launchBrowser, openPage, screenshot } from '../helpers/browser.js'
import { callTool, initializeMessage, openSession, post, type RpcReply } from '../helpers/mcp.js'
import { oauthTokens, tokenRequest } from '../helpers/oauth.js'
import { ownerMembership } from '../helpers/seed.js'
import { OWNER_EMAIL, OWNER_PASSWORD, startServer, type TestServer } from '../helpers/server.js'
import { openLive, type LiveStream } from '../helpers/stream.js'

// The /account pages in headless Chromium: sign-in, API keys (created and shown once, used on /mcp, revoked, rotated),
// authorized applications (revoked), sign-out, and form posts from another origin refused. Every change is a POST
// answered 303 to /account; revoking and rotating go through a confirmation page (test/e2e/account-pages.test.ts
// covers reloads, the notices, the narrow layout and the audit log).

const KEY_PATTERN = /^service_mcp_[A-Za-z0-9_-]{20,}$/

let browserPromise: ReturnType<typeof launchBrowser> | undefined
/** One Chromium for the file (launched through launchBrowser, closed at the end); a fresh context per test. */
function browser() {
  browserPromise ??= launchBrowser(t)
  return browserPromise
}

async function newContext(t: Test): Promise<{ context: BrowserContext; page: Page; problems: string[] }> {
  return openPage(t, await browser())
}

/** goto /account → redirected to the sign-in page → sign in → /account. */
async function signIn(t: Test, page: Page, server: TestServer): Promise<void> {
  const first = await page.goto(`${server.url}/account`)
  t.equal(page.url(), `${server.url}/account/signin`, '/account redirects to the sign-in page')
  t.equal(first?.status(), 200)
  t.equal(await page.title(), 'Sign in')
  t.equal(await page.getByRole('heading', { level: 1 }).textContent(), 'Sign in')
  await page.fill('#email', OWNER_EMAIL)
  await page.fill('#password', OWNER_PASSWORD)
  const [posted] = await Promise.all([
    page.waitForResponse((r) => r.request().method() === 'POST' && r.url() === `${server.url}/account/signin`),
    page.getByRole('button', { name: 'Sign in' }).click(),
  ])
  await page.waitForLoadState('load')
  t.equal(posted.status(), 303, 'sign-in answers 303')
  if (posted.status() !== 303) await formRefused(page, posted)
  t.equal(page.url(), `${server.url}/account`, 'back on /account')
  t.equal(await page.getByRole('heading', { level: 1 }).textContent(), 'Your account', 'signed in')
}

/**
 * Stops a test whose sign-in form was refused, saying why: the rest would only time out. Chromium sends `Origin: null`
 * on a same-origin form POST from a page under `Referrer-Policy: no-referrer` (Fetch, "append a request Origin header").
 */
async function formRefused(page: Page, response: Response): Promise<never> {
  const sent = await response.request().allHeaders()
  const alert = await page.getByRole('alert').textContent({ timeout: 1000 }).catch(() => null)
  throw new Error(`the server refused its own form: ${response.status()} ${JSON.stringify(alert)}; Chromium sent Origin: ${sent.origin} and Sec-Fetch-Site: ${sent['sec-fetch-site']}`)
}

/** Submits a form button on the account page and waits for the resulting page; returns the POST's response. */
async function submit(page: Page, click: () => Promise<void>, path: RegExp) {
  const [response] = await Promise.all([
    page.waitForResponse((r) => r.request().method() === 'POST' && path.test(new URL(r.url()).pathname)),
    click(),
  ])
  await page.waitForLoadState('load')
  return response
}

/** Asks for `label` on a row (a link to the confirmation page), then confirms; returns the confirming POST's response. */
async function confirmAction(page: Page, row: ReturnType<Page['locator']>, label: string, path: RegExp) {
  await Promise.all([page.waitForURL((u) => path.test(u.pathname)), row.getByRole('link', { name: label, exact: true }).click()])
  return submit(page, () => page.getByRole('button', { name: label, exact: true }).click(), path)
}

/** Creates a key through the form; returns the key shown once and the POST status. */
async function createKey(page: Page, name: string, scopes: { write: boolean }) {
  await page.fill('#key-name', name)
  const write = page.locator('input[name=scope][value="mcp:write"]')
  if (scopes.write) await write.check()
  else await write.uncheck()
  const response = await submit(page, () => page.getByRole('button', { name: 'Create key' }).click(), /^\/account\/keys$/)
  const key = (await page.locator('#new-key').textContent()) ?? ''
  return { key, status: response.status() }
}

function keyRow(page: Page, id: string) {
  return page.locator(`tr[data-key-id="${id}"]`)
}

async function keyIdByName(page: Page, name: string): Promise<string> {
  const rows = page.locator('tr[data-key-id]').filter({ hasText: name })
  const ids: string[] = []
  for (const row of await rows.all()) ids.push((await row.getAttribute('data-key-id')) ?? '')
  if (ids.length === 0) throw new Error(`no key row named ${name}`)
  return ids[0]!
}

function revoked(t: Test, reply: RpcReply, label: string): void {
  t.equal(reply.status, 401, `${label}: 401`)
  t.equal(reply.json?.error?.code, 'TOKEN_REVOKED', `${label}: TOKEN_REVOKED`)
}

async function whoami(server: TestServer, headers: Record<string, string>) {
  const reply = await post(server.mcpUrl, callTool('service_whoami'), headers)
  if (reply.status !== 200 || reply.json?.result?.isError !== false) throw new Error(`whoami failed: ${reply.status} ${reply.text}`)
  return reply.json.result.structuredContent as { user: { email: string }; scopes: string[]; credential: { kind: string; id: string; client_id?: string } }
}

async function openStream(t: Test, server: TestServer, headers: Record<string, string>): Promise<LiveStream> {
  const live = await openLive(server.mcpUrl, { method: 'GET', headers: { ...headers, accept: 'text/event-stream' } })
  t.teardown(() => live.close())
  t.equal(live.status, 200, 'GET stream opened')
  return live
}

t.test('API keys: create (shown once), use, revoke, rotate', async (t) => {
  const server = await startServer(t)
  const { page, problems } = await newContext(t)
  await signIn(t, page, server)

  // Create "ci key" with both scopes.
  t.ok(await page.locator('input[name=scope][value="mcp:read"]').isChecked(), 'mcp:read is checked by default')
  const created = await createKey(page, 'ci key', { write: true })
  t.equal(created.status, 303, 'creation answers 303 to /account')
  t.equal(page.url(), `${server.url}/account`, 'the key is shown on /account')
  t.match(created.key, KEY_PATTERN, 'the new key is shown in #new-key')
  t.match(await page.locator('main').textContent(), /Copy your new key now/, 'with the shown-once warning')
  await screenshot(page, 'account-new-key')
  const key = created.key
  const keyId = await keyIdByName(page, 'ci key')
  t.match(await keyRow(page, keyId).textContent(), /mcp:read mcp:write/, 'the row lists both scopes')

  // The key works on /mcp.
  const s1 = await openSession(server.mcpUrl, key)
  const me = await whoami(server, s1.headers)
  t.equal(me.credential.kind, 'api_key', 'credential.kind api_key')
  t.equal(me.credential.id, keyId, 'the key of the row')
  t.same(me.scopes, ['mcp:read', 'mcp:write'], 'both scopes')
  t.equal(me.user.email, OWNER_EMAIL)

  // Reloaded: the key is not shown again, its row is listed.
  const reloaded = await page.goto(`${server.url}/account`)
  t.equal(reloaded?.status(), 200)
  t.equal(await page.locator('#new-key').count(), 0, 'no #new-key after a reload')
  t.notOk((await page.content()).includes(key), 'the key appears nowhere on the page')
  t.equal(await keyRow(page, keyId).count(), 1, 'its row is listed')
  t.equal(await keyRow(page, keyId).locator('.status-active').textContent(), 'active')
  t.match(await keyRow(page, keyId).textContent(), key.slice(0, 'service_mcp_'.length + 4), 'the row shows the key prefix')

  // Revoke with a session and an open stream.
  const s2 = await openSession(server.mcpUrl, key)
  const live = await openStream(t, server, s2.headers)
  const revokeResponse = await confirmAction(page, keyRow(page, keyId), 'Revoke', /\/revoke$/)
  t.equal(revokeResponse.status(), 303, 'revoke answers 303')
  t.equal(page.url(), `${server.url}/account`, 'back on /account')
  t.equal(await keyRow(page, keyId).locator('.status-revoked').textContent(), 'revoked', 'the row shows revoked')
  t.equal(await keyRow(page, keyId).getByRole('link').count(), 0, 'no more actions on the revoked row')
  await live.ended(3000)
  t.ok(live.endedByServer, 'the stream was ended by the server')
  t.equal(await server.app.sessions.get(s2.sessionId), undefined, 'the streaming session ended')
  t.equal(await server.app.sessions.get(s1.sessionId), undefined, 'the other session of the key ended')
  revoked(t, await post(server.mcpUrl, initializeMessage(), { authorization: `Bearer ${key}` }), 'the revoked key')
  revoked(t, await post(server.mcpUrl, { jsonrpc: '2.0', id: 2, method: 'ping' }, s2.headers), 'the revoked key on its session')

  // Create another key and rotate it.
  const other = await createKey(page, 'rotate me', { write: false })
  t.equal(other.status, 303)
  t.match(other.key, KEY_PATTERN)
  const otherId = await keyIdByName(page, 'rotate me')
  t.match(await keyRow(page, otherId).textContent(), /mcp:read/, 'read-only key')
  t.notMatch(await keyRow(page, otherId).textContent(), /mcp:write/)
  const s3 = await openSession(server.mcpUrl, other.key)
  t.equal((await whoami(server, s3.headers)).credential.id, otherId)

  const rotateResponse = await confirmAction(page, keyRow(page, otherId), 'Rotate', /\/rotate$/)
  t.equal(rotateResponse.status(), 303, 'rotate answers 303 to /account, where the new key is shown')
  const rotated = (await page.locator('#new-key').textContent()) ?? ''
  t.match(rotated, KEY_PATTERN, 'a new key is shown')
  t.not(rotated, other.key, 'a different key')
  t.match(await page.locator('main').textContent(), `the previous key ${other.key.slice(0, 'service_mcp_'.length + 4)}… is revoked;`, 'the notice names the old key')
  t.equal(await keyRow(page, otherId).locator('.status-revoked').textContent(), 'revoked', 'the old row shows revoked')
  const rows = page.locator('tr[data-key-id]').filter({ hasText: 'rotate me' })
  t.equal(await rows.count(), 2, 'the rotated key keeps the name, in a new row')

  revoked(t, await post(server.mcpUrl, initializeMessage(), { authorization: `Bearer ${other.key}` }), 'the rotated-out key')
  t.equal(await server.app.sessions.get(s3.sessionId), undefined, 'the session of the rotated-out key ended')
  const s4 = await openSession(server.mcpUrl, rotated)
  const me4 = await whoami(server, s4.headers)
  t.equal(me4.credential.kind, 'api_key')
  t.not(me4.credential.id, otherId, 'the new key is a new credential')
  t.same(me4.scopes, ['mcp:read'], 'with the same scopes')
  t.equal(await keyRow(page, me4.credential.id).locator('.status-active').textContent(), 'active', 'listed as active')

  t.same(problems, [], 'no CSP violations or page errors')
})

t.test('authorized applications: listed, revoked; then sign out', async (t) => {
  const server = await startServer(t)
  const { context, page, problems } = await newContext(t)
  await signIn(t, page, server)
  t.match(await page.locator('main').textContent(), /No applications are authorized/, 'no applications yet')

  // An authorization done elsewhere (over HTTP, as an MCP client would), with a session and a stream.
  const { client, tokens } = await oauthTokens(server, { metadata: { client_name: 'Account Page Client' } })
  const session = await openSession(server.mcpUrl, tokens.access_token)
  t.equal((await whoami(server, session.headers)).credential.kind, 'oauth')
  const live = await openStream(t, server, session.headers)

  await page.goto(`${server.url}/account`)
  const row = page.locator(`tr[data-client-id="${client.client_id}"]`)
  t.equal(await row.count(), 1, 'the client is listed')
  t.match(await row.textContent(), /Account Page Client/, 'by name')
  t.match(await row.textContent(), /Default organization/, 'with the organization')
  t.match(await row.textContent(), /mcp:read mcp:write/, 'and the scopes')
  await screenshot(page, 'account-authorized-apps')

  const response = await confirmAction(page, row, 'Revoke access', /^\/account\/clients\/.+\/revoke$/)
  t.equal(response.status(), 303, 'revoke access answers 303')
  t.equal(page.url(), `${server.url}/account`)
  t.equal(await row.count(), 0, 'the client is no longer listed')
  t.match(await page.locator('main').textContent(), /No applications are authorized/)

  revoked(t, await post(server.mcpUrl, initializeMessage(), { authorization: `Bearer ${tokens.access_token}` }), 'the access token of the revoked client')
  await live.ended(3000)
  t.ok(live.endedByServer, 'the stream of the client was ended by the server')
  t.equal(await server.app.sessions.get(session.sessionId), undefined, 'the session of the client ended')
  const refresh = await tokenRequest(server, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: client.client_id })
  t.equal(refresh.status, 400, 'the refresh token is refused')
  t.equal(refresh.json?.error, 'invalid_grant', 'invalid_grant')

  // Sign out.
  const out = await submit(page, () => page.getByRole('button', { name: 'Sign out' }).click(), /^\/account\/signout$/)
  t.equal(out.status(), 303, 'sign-out answers 303')
  t.equal(page.url(), `${server.url}/account/signin`, 'on the sign-in page')
  t.equal(await page.title(), 'Sign in')
  t.notOk((await context.cookies(server.url)).some((c) => c.name === 'mcp_signin'), 'the sign-in cookie is gone')
  await page.goto(`${server.url}/account`)
  t.equal(page.url(), `${server.url}/account/signin`, '/account redirects to the sign-in page again')
  t.equal(await page.locator('#new-key, tr[data-key-id]').count(), 0, 'no account data shown')

  t.same(problems, [], 'no CSP violations or page errors')
})

/** A page on another origin (127.0.0.1, another port: same site, so SameSite=Lax cookies go along) that auto-submits. */
async function startAttacker(t: Test) {
  const pages = new Map<string, string>()
  const server = createServer((req, res) => {
    const body = pages.get(req.url ?? '')
    if (body === undefined) res.writeHead(404).end()
    else res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(body)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  t.teardown(() => new Promise<void>((resolve) => {
    server.closeAllConnections()
    server.close(() => resolve())
  }))
  return {
    origin,
    /** Serves an auto-submitting form at `path`. */
    form(path: string, action: string, fields: Record<string, string>): string {
      const inputs = Object.entries(fields).map(([k, v]) => `<input type="hidden" name="${k}" value="${v}">`).join('')
      pages.set(path, `<!doctype html><title>Win a prize</title><form method="post" action="${action}">${inputs}</form><script>document.forms[0].submit()</script>`)
      return origin + path
    },
  }
}

t.test('CSRF: forms from another origin, or without the token, are refused with 403 and create nothing', async (t) => {
  const server = await startServer(t)
  const attacker = await startAttacker(t)
  const { context, page } = await newContext(t)
  await signIn(t, page, server)
  const membershipId = (await ownerMembership(server)).id
  const csrf = (await page.locator('form[action="/account/keys"] input[name=csrf]').getAttribute('value')) ?? ''
  t.match(csrf, /^[0-9a-f]{64}$/, 'the account CSRF token')
  t.equal(await page.locator('form[action="/account/keys"] input[name=membership]').getAttribute('value'), membershipId)
  const keyCount = async () => (await server.app.repos.apiKeys.listForMembership(membershipId)).length
  const before = await keyCount()

  // In the browser, from a page on another origin: once even with the right token (as if it had leaked), once without.
  for (const [label, fields] of [
    ['with the right token', { csrf, name: 'evil key', membership: membershipId, scope: 'mcp:write' }],
    ['without a token', { name: 'evil key', membership: membershipId, scope: 'mcp:write' }],
  ] as const) {
    const url = attacker.form(`/${label.replace(/\W+/g, '-')}`, `${server.url}/account/keys`, fields)
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'POST' && r.url() === `${server.url}/account/keys`),
      page.goto(url, { waitUntil: 'commit' }),
    ])
    await page.waitForURL(`${server.url}/account/keys`)
    const sent = await response.request().allHeaders()
    t.equal(sent.origin, attacker.origin, `${label}: the browser sent the attacker's Origin`)
    t.match(sent.cookie ?? '', /mcp_signin=/, `${label}: and the sign-in cookie (same site)`)
    t.equal(response.status(), 403, `${label}: 403`)
    t.equal(await page.title(), 'Form expired', `${label}: the refusal page`)
    t.equal(await page.locator('#new-key').count(), 0, `${label}: no key shown`)
    t.equal(await keyCount(), before, `${label}: no key created`)
  }

  // Over HTTP with the browser's cookies.
  const cookie = (await context.cookies(server.url)).map((c) => `${c.name}=${c.value}`).join('; ')
  t.match(cookie, /mcp_signin=/, 'signed-in cookies')
  const form = (fields: Record<string, string>, origin: string) =>
    request(`${server.url}/account/keys`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie, origin },
      body: new URLSearchParams(fields).toString(),
    })
  const fields = { name: 'http key', membership: membershipId, scope: 'mcp:read' }

  const noToken = await form(fields, server.url)
  t.equal(noToken.statusCode, 403, 'same origin, no csrf field: 403')
  t.match(await noToken.body.text(), /role="alert"/)
  const foreign = await form({ ...fields, csrf }, 'https://evil.example')
  t.equal(foreign.statusCode, 403, 'right cookies and token, foreign Origin: 403')
  t.match(await foreign.body.text(), /another site/)
  const wrongToken = await form({ ...fields, csrf: 'f'.repeat(64) }, server.url)
  t.equal(wrongToken.statusCode, 403, 'a wrong token: 403')
  await wrongToken.body.text()
  t.equal(await keyCount(), before, 'nothing was created')

  // Control: the same request with the right token and Origin is accepted, so the refusals above mean something.
  const control = await form({ ...fields, csrf }, server.url)
  t.equal(control.statusCode, 303, 'control: right cookies, token and Origin: 303')
  t.equal(control.headers.location, '/account', 'to /account')
  await control.body.text()
  t.equal(await keyCount(), before + 1, 'control: one key created')
})

import t, { type Test } from 'tap'
import { request } from 'undici'
import { launchBrowser, screenshot } from '../helpers/browser.js'
import { authorizeUrl, FormBrowser, formAction, formValue, pkce, registerClient } from '../helpers/oauth.js'
import { injectServer } from '../helpers/inject.js'
import { ownerMembership } from '../helpers/seed.js'
import { OWNER_EMAIL, OWNER_PASSWORD, startServer, type TestServer } from '../helpers/server.js'

// Refusals that say what to do: the redirect-scheme hint at registration, the state hint at /oauth/authorize, and the
// pages of a sign-in link that can no longer be used (and the account page's refusals), in their readers' terms.

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

async function register(server: TestServer, redirectUris: string[]) {
  const res = await request(`${server.url}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: 'Hint Client', redirect_uris: redirectUris }),
  })
  return { status: res.statusCode, json: (await res.body.json()) as Record<string, unknown> }
}

/** The parts of an error page a person reads: title, heading, the alert, the next step, the link, the small print. */
function readPage(text: string) {
  const unescape = (s: string | undefined) => s?.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&amp;/g, '&')
  return {
    title: unescape(/<title>([^<]*)<\/title>/.exec(text)?.[1]),
    h1: unescape(/<h1>([^<]*)<\/h1>/.exec(text)?.[1]),
    alert: unescape(/<div class="error" role="alert">([^<]*)<\/div>/.exec(text)?.[1]),
    next: unescape(/<\/div>\n<p>([^<]*)<\/p>/.exec(text)?.[1]),
    link: /<p><a href="([^"]*)">([^<]*)<\/a><\/p>/.exec(text)?.slice(1, 3),
    detail: unescape(/<p class="small muted mono">([^<]*)<\/p>/.exec(text)?.[1]),
  }
}

/** No API-client wording on a page meant for a person. */
function noJargon(t: Test, text: string, label: string): void {
  t.notMatch(text, /error_description|parameter|Fix the|the MCP endpoint is|authorization request/, `${label}: no developer jargon`)
}

t.test('a private-use scheme that is not allowed: the description names it and SERVICE_REDIRECT_SCHEMES', async (t) => {
  const server = await startServer(t)
  const cursor = await register(server, ['cursor://anysphere.cursor-retrieval/oauth/callback'])
  t.equal(cursor.status, 400)
  t.strictSame(cursor.json, {
    error: 'invalid_redirect_uri',
    error_description: 'redirect_uris[0] the cursor: scheme is not allowed on this server; the operator can allow it by adding cursor to SERVICE_REDIRECT_SCHEMES',
  })
  const second = await register(server, ['http://127.0.0.1:3000/cb', 'vscode://vscode.github-authentication/did-authenticate'])
  t.equal(second.json.error_description, 'redirect_uris[1] the vscode: scheme is not allowed on this server; the operator can allow it by adding vscode to SERVICE_REDIRECT_SCHEMES', 'names the entry and its scheme')
  // Forbidden schemes keep their plain refusal: no operator may allow them.
  const js = await register(server, ['javascript:alert(1)'])
  t.strictSame(js.json, { error: 'invalid_redirect_uri', error_description: 'redirect_uris[0] the javascript: scheme is never allowed' })

  // Control: allowed by the operator, the same registration succeeds.
  const allowing = await startServer(t, { config: { redirectSchemes: ['cursor'] } })
  const ok = await register(allowing, ['cursor://anysphere.cursor-retrieval/oauth/callback'])
  t.equal(ok.status, 201, 'with SERVICE_REDIRECT_SCHEMES=cursor it is registered')
})

t.test('no state: the refusal goes back to the client and says what to send', async (t) => {
  const server = await startServer(t)
  const client = await registerClient(server, { client_name: 'Hint Client' })
  const expected = 'state is required: send a random, unguessable value of at least 22 characters (128 bits, e.g. 16 random bytes base64url-encoded) and check that the redirect brings it back unchanged (RFC 6749 section 10.12)'
  for (const [label, state] of [['missing', null], ['empty', '']] as const) {
    const res = await request(authorizeUrl(server, client, pkce(), { state }))
    await res.body.text()
    t.equal(res.statusCode, 303, `${label} state: redirected (the client and redirect URI are valid; docs/decisions/oauth.md)`)
    const to = new URL(String(res.headers.location))
    t.equal(to.origin + to.pathname, client.redirect_uris[0], `${label} state: to the registered redirect URI`)
    t.equal(to.searchParams.get('error'), 'invalid_request')
    t.equal(to.searchParams.get('error_description'), expected, `${label} state: the description says what to send`)
    t.equal(to.searchParams.get('iss'), server.url)
    t.notOk(to.searchParams.has('state') || to.searchParams.has('code'), `${label} state: no state, no code`)
  }
  t.match(expected, /^[\x20-\x21\x23-\x5b\x5d-\x7e]+$/, 'error_description characters only (RFC 6749 §5.2)')
})

t.test('a sign-in link that can no longer be used says so in user terms', async (t) => {
  // The inject tier (test/helpers/inject.ts): the link's lifetime is decided by the server's clock, moved below.
  const server = await injectServer(t, { config: { authRequestTtlMs: 3000 } })
  const client = await registerClient(server, { client_name: 'Hint Client' })

  // Expired while waiting: the page names the application.
  const waiting = new FormBrowser(server.url)
  const started = await waiting.get(authorizeUrl(server, client, pkce()))
  t.equal(started.status, 303)
  await server.clock.advance(2999)
  t.equal((await waiting.get(started.location!)).status, 200, '1 ms before it expires, the sign-in page')
  await server.clock.advance(1)
  const expired = await waiting.get(started.location!)
  t.equal(expired.status, 400)
  t.strictSame(readPage(expired.text), {
    title: 'This sign-in link has expired',
    h1: 'This sign-in link has expired',
    alert: 'This sign-in link has expired. Go back to Hint Client and connect again.',
    next: undefined,
    link: undefined,
    detail: undefined,
  })
  noJargon(t, expired.text, 'expired')

  // Purged by the sweep, the request is unknown: still "expired", without a name to give.
  await server.app.repos.authorizations.purge(server.clock.now())
  t.equal(readPage((await waiting.get(started.location!)).text).alert, 'This sign-in link has expired. Go back to the application and connect again.')

  // A consent form left open too long.
  const slow = new FormBrowser(server.url)
  const begun = await slow.get(authorizeUrl(server, client, pkce()))
  const signin = await slow.get(begun.location!)
  const signedIn = await slow.post(formAction(signin.text), { csrf: formValue(signin.text, 'csrf') ?? '', email: OWNER_EMAIL, password: OWNER_PASSWORD })
  t.equal(signedIn.status, 303)
  const consent = await slow.get(signedIn.location!)
  t.match(consent.text, /Authorize Hint Client/)
  await server.clock.advance(3000)
  const stale = await slow.post(formAction(consent.text), { csrf: formValue(consent.text, 'csrf') ?? '', decision: 'approve', membership: formValue(consent.text, 'membership') ?? '' })
  t.equal(stale.status, 400, 'the stale consent form: 400')
  t.equal(stale.location, undefined, 'not redirected')
  t.equal(readPage(stale.text).alert, 'This sign-in link has expired. Go back to Hint Client and connect again.')

  // Already used, then opened again.
  const fresh = await slow.get(authorizeUrl(server, client, pkce()))
  const page = await slow.get(fresh.location!)
  const approved = await slow.post(formAction(page.text), { csrf: formValue(page.text, 'csrf') ?? '', decision: 'approve', membership: formValue(page.text, 'membership') ?? '' })
  t.equal(approved.status, 303)
  const used = await slow.get(fresh.location!)
  t.equal(used.status, 400)
  t.strictSame(readPage(used.text), {
    title: 'This sign-in link was already used',
    h1: 'This sign-in link was already used',
    alert: 'This sign-in link was already used. If Hint Client is not connected, go back to it and connect again.',
    next: undefined,
    link: undefined,
    detail: undefined,
  })
  const twice = await slow.post(formAction(page.text), { csrf: formValue(page.text, 'csrf') ?? '', decision: 'approve', membership: formValue(page.text, 'membership') ?? '' })
  t.equal(readPage(twice.text).title, 'This sign-in link was already used', 'the consent posted twice: the same page')

  // Opened in another browser: nothing about the request, not even the application's name.
  const elsewhere = await new FormBrowser(server.url).get(fresh.location!)
  t.equal(elsewhere.status, 400)
  t.strictSame(readPage(elsewhere.text), {
    title: 'This sign-in link belongs to another browser',
    h1: 'This sign-in link belongs to another browser',
    alert: 'This sign-in link was started in another browser. Go back to the application and connect again, then finish in the browser that opens.',
    next: undefined,
    link: undefined,
    detail: undefined,
  })
  t.notMatch(elsewhere.text, /Hint Client/, 'the other browser is not told the application')
  for (const [label, text] of [['used', used.text], ['elsewhere', elsewhere.text], ['stale', stale.text]] as const) noJargon(t, text, label)
})

t.test('the expired sign-in link in Chromium, at 1280 and 390 px', async (t) => {
  // Long enough for Chromium to follow the link and show the sign-in page on a loaded machine: with 300 ms, CI's page
  // loaded after the request had already expired.
  const TTL_MS = 2000
  const server = await startServer(t, { config: { authRequestTtlMs: TTL_MS } })
  const client = await registerClient(server, { client_name: 'Hint Client' })
  const browser = await launchBrowser(t)
  for (const viewport of [{ width: 1280, height: 800 }, { width: 390, height: 844 }]) {
    const page = await browser.newPage({ viewport })
    await page.goto(authorizeUrl(server, client, pkce()))
    t.equal(await page.title(), 'Sign in', `${viewport.width} px: on the sign-in page`)
    // The request was made during goto, so it has expired once TTL_MS have passed since goto ended.
    await sleep(TTL_MS + 100)
    const again = await page.reload()
    t.equal(again?.status(), 400)
    t.equal(await page.getByRole('alert').textContent(), 'This sign-in link has expired. Go back to Hint Client and connect again.', `${viewport.width} px: the expired page`)
    await screenshot(page, `oauth-link-expired-${viewport.width}`)
    await page.close()
  }
})

t.test('an invalid sign-in link: user terms first, the reason as small print for the developer', async (t) => {
  const server = await startServer(t)
  const client = await registerClient(server)
  const res = await request(authorizeUrl(server, client, pkce(), { client_id: 'mcp_unknown' }))
  const text = await res.body.text()
  t.equal(res.statusCode, 400)
  t.strictSame(readPage(text), {
    title: 'This sign-in link is not valid',
    h1: 'This sign-in link is not valid',
    alert: 'This sign-in link is not valid. Go back to the application and connect again.',
    next: 'If this happens again, the application is misconfigured: tell its developer what is written below.',
    link: undefined,
    detail: 'Unknown client_id: register the client first',
  })
})

t.test('account page refusals speak to the person, with a way back', async (t) => {
  const server = await startServer(t)
  const visitor = new FormBrowser(server.url)
  const form = await visitor.get('/account/signin')
  await visitor.post('/account/signin', { csrf: formValue(form.text, 'csrf') ?? '', email: OWNER_EMAIL, password: OWNER_PASSWORD })

  const missing = await visitor.get('/account/keys/key_nope/revoke')
  t.equal(missing.status, 404)
  t.strictSame(readPage(missing.text), {
    title: 'Not found',
    h1: 'Not found',
    alert: 'No such active API key in your account',
    next: undefined,
    link: ['/account', 'Back to your account'],
    detail: undefined,
  })
  noJargon(t, missing.text, 'unknown key')

  const noToken = await visitor.post('/account/keys', { name: 'x', membership: (await ownerMembership(server)).id, scope: 'mcp:read' })
  t.equal(noToken.status, 403)
  t.match(readPage(noToken.text), { title: 'Form expired', next: 'Reload the page and submit the form again.', link: ['/account', 'Back to your account'] })

  const signedOut = new FormBrowser(server.url)
  const anon = await signedOut.get('/account/signin')
  const refused = await signedOut.post('/account/keys', { csrf: formValue(anon.text, 'csrf') ?? '', name: 'x', membership: (await ownerMembership(server)).id, scope: 'mcp:read' })
  t.equal(refused.status, 401)
  t.match(readPage(refused.text), { title: 'Sign in again', alert: 'Sign in to continue', next: 'Your sign-in has ended. Sign in again, then repeat what you were doing.' })
  t.equal((await signedOut.get('/account/keys/key_nope/revoke')).location, '/account/signin', 'a confirmation page asks a signed-out browser to sign in')
})

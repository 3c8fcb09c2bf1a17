import type { Browser, Page } from 'playwright-core'
import t, { type Test } from 'tap'
import { hashPassword } from '../../src/lib/crypto.js'
import { launchBrowser, screenshot } from '../helpers/browser.js'
import { authorizeUrl, callbackServer, pkce, registerClient, tokenRequest, type RegisteredClient } from '../helpers/oauth.js'
import { startServer, type TestServer } from '../helpers/server.js'

// The consent page of a member of two organizations opens with their own organization chosen (the one they have
// belonged to longest), not the alphabetically first; once they choose one for a client, that one is chosen for that
// client next time.

// Runs inside the page (serialized by Playwright); the project compiles without the DOM lib.
declare const document: { documentElement: { scrollWidth: number } }

const EMAIL = 'pat@example.com'
const PASSWORD = 'pat password 1'

let browserPromise: Promise<Browser> | undefined
function browser(): Promise<Browser> {
  browserPromise ??= launchBrowser(t)
  return browserPromise
}

/** Pat: owner of "Zeta Works" (their own, joined first) and, later, developer in "Acme", which sorts first. */
async function seedPat(server: TestServer) {
  const repos = server.app.repos
  const zeta = await repos.organizations.create({ slug: 'zeta-works', name: 'Zeta Works' })
  const pat = await repos.users.create({ email: EMAIL, name: 'Pat', passwordHash: await hashPassword(PASSWORD) })
  const own = await repos.memberships.upsert({ userId: pat.id, organizationId: zeta.id, role: 'owner' })
  await new Promise((resolve) => setTimeout(resolve, 5))
  const acme = await repos.organizations.create({ slug: 'acme', name: 'Acme' })
  const later = await repos.memberships.upsert({ userId: pat.id, organizationId: acme.id, role: 'developer' })
  return { zeta, acme, own, later }
}

async function newPage(t: Test, viewport = { width: 1280, height: 900 }): Promise<Page> {
  const context = await (await browser()).newContext({ viewport })
  context.setDefaultTimeout(5000)
  t.teardown(() => context.close())
  return context.newPage()
}

/** Opens the authorization URL; signs Pat in when asked; returns on the consent page. */
async function toConsent(page: Page, url: string): Promise<void> {
  await page.goto(url)
  if ((await page.locator('#password').count()) > 0) {
    await page.fill('#email', EMAIL)
    await page.fill('#password', PASSWORD)
    await Promise.all([page.waitForURL(/\/oauth\/interaction\/[^/]+$/), page.getByRole('button', { name: 'Sign in' }).click()])
  }
}

/** The organization radios in page order: membership id and checked state. */
async function radios(page: Page): Promise<Array<[string, boolean]>> {
  const out: Array<[string, boolean]> = []
  for (const radio of await page.locator('input[name=membership][type=radio]').all()) out.push([(await radio.getAttribute('value')) ?? '', await radio.isChecked()])
  return out
}

async function allow(page: Page, callback: string): Promise<URL> {
  await Promise.all([page.waitForURL((u) => u.href.startsWith(callback)), page.getByRole('button', { name: 'Allow', exact: true }).click()])
  return new URL(page.url())
}

t.test('a member of two organizations: their own is chosen, then the one last chosen for the client', async (t) => {
  const server = await startServer(t)
  const { acme, own, later } = await seedPat(server)
  const callback = await callbackServer(t)
  const client: RegisteredClient = await registerClient(server, { client_name: 'Org Client', redirect_uris: [callback] })
  const page = await newPage(t)

  const p1 = pkce()
  await toConsent(page, authorizeUrl(server, client, p1))
  t.equal(await page.title(), 'Authorize Org Client', 'on the consent page')
  t.same(await radios(page), [[later.id, false], [own.id, true]], 'listed alphabetically (Acme, Zeta Works), Zeta Works chosen: the oldest membership')
  await screenshot(page, 'consent-org-own-1280')

  // Pat picks Acme for this client.
  await page.getByLabel(/Acme/).check()
  const landed = await allow(page, callback)
  const exchanged = await tokenRequest(server, { grant_type: 'authorization_code', code: landed.searchParams.get('code') ?? '', redirect_uri: callback, client_id: client.client_id, code_verifier: p1.verifier })
  t.equal(exchanged.status, 200)
  const claims = JSON.parse(Buffer.from(String(exchanged.json.access_token).split('.')[1]!, 'base64url').toString())
  t.equal(claims.org, acme.id, 'the grant is for Acme, as chosen')

  // The same client again: Acme, the organization last chosen for it.
  await toConsent(page, authorizeUrl(server, client, pkce()))
  t.same(await radios(page), [[later.id, true], [own.id, false]], 'the same client: the organization last chosen for it')

  // Another client: Pat's own organization again.
  const other = await registerClient(server, { client_name: 'Other Client', redirect_uris: [callback] })
  await toConsent(page, authorizeUrl(server, other, pkce()))
  t.same(await radios(page), [[later.id, false], [own.id, true]], 'another client: the own organization')
  const second = await allow(page, callback)
  t.ok(second.searchParams.get('code'), 'and Allow grants it')
  // A choice counts once it is a grant, at the code's exchange: this one is not exchanged, so nothing is remembered.
  t.equal(await server.app.repos.oauthGrants.lastChosenMembership((await server.app.repos.users.byEmail(EMAIL))!.id, other.client_id), undefined, 'an unexchanged code is no grant')

  // Phone-sized: the same choice, nothing wider than the screen.
  const phone = await newPage(t, { width: 390, height: 844 })
  await toConsent(phone, authorizeUrl(server, other, pkce()))
  t.same(await radios(phone), [[later.id, false], [own.id, true]], '390 px: the own organization chosen')
  t.ok((await phone.evaluate(() => document.documentElement.scrollWidth)) <= 390, '390 px: no horizontal scrolling')
  await screenshot(phone, 'consent-org-own-390')
})

t.test('a last choice that can no longer grant anything gives way to the own organization', async (t) => {
  const server = await startServer(t)
  const { acme, own, later } = await seedPat(server)
  const callback = await callbackServer(t)
  const client = await registerClient(server, { client_name: 'Writer', redirect_uris: [callback], scope: 'mcp:write' })
  const page = await newPage(t)

  const p1 = pkce()
  await toConsent(page, authorizeUrl(server, client, p1, { scope: 'mcp:write' }))
  await page.getByLabel(/Acme/).check()
  const landed = await allow(page, callback)
  t.equal((await tokenRequest(server, { grant_type: 'authorization_code', code: landed.searchParams.get('code') ?? '', redirect_uri: callback, client_id: client.client_id, code_verifier: p1.verifier })).status, 200)

  // Pat becomes a viewer in Acme: the write-only request cannot be granted there any more.
  await server.app.repos.memberships.upsert({ userId: later.userId, organizationId: acme.id, role: 'viewer' })
  await toConsent(page, authorizeUrl(server, client, pkce(), { scope: 'mcp:write' }))
  t.ok(await page.locator(`input[value="${later.id}"]`).isDisabled(), 'Acme cannot be chosen')
  t.same(await radios(page), [[later.id, false], [own.id, true]], 'the own organization is chosen instead')
})

// test-backends: sqlite-only (how the pages look and behave in a browser; account-browser.test.ts covers their storage)
import type { Browser, BrowserContext, Page } from 'playwright-core'
import t, { type Test } from 'tap'
import { launchBrowser, openPage, screenshot } from '../helpers/browser.js'
import { authorizeUrl, callbackServer, pkce, registerClient } from '../helpers/oauth.js'
import { OWNER_EMAIL, OWNER_PASSWORD, startServer, type TestServer } from '../helpers/server.js'

// The server's pages as a person sees them in headless Chromium, at a phone's width (390 px) and a laptop's (1280 px):
// the landing page, the sign-in page, the consent page and the account page with a key shown once. Each is
// screenshot to test-artifacts/screenshots/pages-<page>-<width>.png, to be looked at; the tests check what a
// screenshot cannot be trusted to show by itself: nothing wider than the screen, no CSP refusal, no page error.

// Runs inside the page (serialized by Playwright); the project compiles without the DOM lib.
declare const document: { documentElement: { scrollWidth: number } }
declare const navigator: { clipboard: { readText(): Promise<string> } }
declare const window: { getSelection(): { toString(): string } | null }
declare function getComputedStyle(el: unknown): { getPropertyValue(name: string): string }

const WIDTHS = [390, 1280] as const

let browserPromise: Promise<Browser> | undefined
function browser(): Promise<Browser> {
  browserPromise ??= launchBrowser(t)
  return browserPromise
}

async function signIn(page: Page): Promise<void> {
  await page.fill('#email', OWNER_EMAIL)
  await page.fill('#password', OWNER_PASSWORD)
  await Promise.all([page.waitForURL((u) => !u.pathname.endsWith('/signin')), page.getByRole('button', { name: 'Sign in' }).click()])
}

/** The page fits the width (no sideways scrolling), raised nothing, and is saved for a person to look at. */
async function fitsAndShoot(t: Test, page: Page, problems: string[], name: string, width: number): Promise<void> {
  const scroll = await page.evaluate(() => document.documentElement.scrollWidth)
  t.ok(scroll <= width, `${name} at ${width} px: no sideways scrolling (scrollWidth ${scroll})`)
  t.same(problems, [], `${name} at ${width} px: no CSP refusal or page error`)
  await screenshot(page, `pages-${name}-${width}`)
}

/** The vertical middle of an element's box. */
async function middle(locator: ReturnType<Page['locator']>): Promise<number> {
  const box = await locator.boundingBox()
  if (!box) throw new Error('the element is not laid out')
  return box.y + box.height / 2
}

/**
 * "Organization: … · owner" used to wrap with the role alone on the next line. Now the slug and the role badge stay on
 * one line at any width, and at 1280 px the name joins them.
 */
async function organizationsReadWell(t: Test, page: Page, name: string, width: number): Promise<void> {
  const orgs = await page.locator('.org').all()
  t.ok(orgs.length > 0, `${name} at ${width} px: the organization is shown`)
  for (const org of orgs) {
    const role = await middle(org.locator('.role'))
    t.ok(Math.abs((await middle(org.locator('.mono'))) - role) < 4, `${name} at ${width} px: the slug and the role on one line`)
    if (width >= 1280) t.ok(Math.abs((await middle(org.locator('strong'))) - role) < 4, `${name} at ${width} px: the name beside them`)
  }
}

t.test('screenshots at 390 and 1280 px: landing, sign-in, consent, account', async (t) => {
  const server: TestServer = await startServer(t)
  const callback = await callbackServer(t)
  const client = await registerClient(server, { client_name: 'Screenshot Client', redirect_uris: [callback] })
  for (const width of WIDTHS) {
    const { page, problems } = await openPage(t, await browser(), { width, height: 900 })
    const landing = await page.goto(`${server.url}/`)
    t.equal(landing?.status(), 200, 'a browser gets the landing page at /')
    t.equal(await page.locator('#mcp-url').textContent(), server.mcpUrl)
    t.ok(await page.getByRole('button', { name: 'Copy address' }).isVisible(), 'the script showed the Copy button')
    await fitsAndShoot(t, page, problems, 'landing', width)

    await page.goto(authorizeUrl(server, client, pkce()))
    t.equal(await page.title(), 'Sign in')
    await fitsAndShoot(t, page, problems, 'sign-in', width)
    await signIn(page)
    t.equal(await page.title(), 'Authorize Screenshot Client')
    await organizationsReadWell(t, page, 'consent', width)
    await fitsAndShoot(t, page, problems, 'consent', width)

    await page.goto(`${server.url}/account`)
    t.equal(await page.title(), 'Your account', 'already signed in')
    await page.fill('#key-name', `laptop ${width}`)
    await Promise.all([page.waitForURL(`${server.url}/account`), page.getByRole('button', { name: 'Create key' }).click()])
    t.match((await page.locator('#new-key').textContent()) ?? '', /^service_mcp_/)
    t.ok(await page.getByRole('button', { name: 'Copy key' }).isVisible(), 'the key has a Copy button')
    await organizationsReadWell(t, page, 'account', width)
    await fitsAndShoot(t, page, problems, 'account', width)
  }
})

/** Clicks the Copy button `name` and returns what the page then says about it. */
async function copy(page: Page, name: string): Promise<string> {
  await page.getByRole('button', { name }).click()
  const status = page.locator('.copy-status')
  await status.filter({ hasText: /\S/ }).waitFor()
  return (await status.textContent()) ?? ''
}

async function clipboardOf(context: BrowserContext, server: TestServer): Promise<string> {
  // A page of the server's origin, where the permission was granted; the clipboard is the browser's, not the page's.
  const reader = await context.newPage()
  await reader.goto(`${server.url}/favicon.svg`)
  return reader.evaluate(() => navigator.clipboard.readText())
}

t.test('Copy buttons put the MCP address and the new key on the clipboard', async (t) => {
  const server = await startServer(t)
  const { context, page, problems } = await openPage(t, await browser(), { width: 1280, height: 900 })
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url })

  await page.goto(`${server.url}/`)
  t.equal(await copy(page, 'Copy address'), 'Copied.', 'the landing page says it copied')
  t.equal(await clipboardOf(context, server), server.mcpUrl, 'the clipboard holds the MCP address')

  await page.goto(`${server.url}/account`)
  await signIn(page)
  await page.fill('#key-name', 'copied key')
  await Promise.all([page.waitForURL(`${server.url}/account`), page.getByRole('button', { name: 'Create key' }).click()])
  const key = (await page.locator('#new-key').textContent()) ?? ''
  t.match(key, /^service_mcp_[A-Za-z0-9_-]{43}$/)
  t.equal(await copy(page, 'Copy key'), 'Copied.', 'the account page says it copied')
  t.equal(await clipboardOf(context, server), key, 'the clipboard holds exactly the key')
  await screenshot(page, 'pages-account-copied-1280')
  t.same(problems, [], 'the CSP let the script run: no refusal, no page error')
})

t.test('without the Clipboard API the text is selected and copied the older way', async (t) => {
  const server = await startServer(t)
  const { context, page, problems } = await openPage(t, await browser(), { width: 390, height: 844 })
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url })
  // As on a plain-http address that is not loopback (no secure context): no navigator.clipboard for this page.
  await page.addInitScript(() => Object.defineProperty(navigator, 'clipboard', { value: undefined }))
  await page.goto(`${server.url}/`)
  t.equal(await page.evaluate(() => typeof navigator.clipboard), 'undefined', 'the page has no Clipboard API')
  t.equal(await copy(page, 'Copy address'), 'Copied.', 'copied through the selection')
  t.equal(await page.evaluate(() => window.getSelection()?.toString()), server.mcpUrl, 'the address is selected')
  t.equal(await clipboardOf(context, server), server.mcpUrl, 'and on the clipboard')
  await screenshot(page, 'pages-landing-copied-390')
  t.same(problems, [], 'no CSP refusal or page error')
})

t.test('without JavaScript there is no dead button, and the text stays selectable', async (t) => {
  const server = await startServer(t)
  const context = await (await browser()).newContext({ javaScriptEnabled: false, viewport: { width: 390, height: 844 } })
  context.setDefaultTimeout(5000)
  t.teardown(() => context.close())
  const page = await context.newPage()
  await page.goto(`${server.url}/`)
  t.equal(await page.locator('button[data-copy="mcp-url"]').count(), 1, 'the button is in the page')
  t.notOk(await page.locator('button[data-copy="mcp-url"]').isVisible(), 'but hidden')
  t.ok(await page.locator('#mcp-url').isVisible(), 'the address is shown')
  await page.locator('#mcp-url').click()
  t.equal(await page.locator('#mcp-url').evaluate((el) => getComputedStyle(el).getPropertyValue('user-select')), 'all', 'one click selects all of it')
})

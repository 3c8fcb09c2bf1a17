import type { Browser, BrowserContext, Locator, Page } from 'playwright-core'
import t, { type Test } from 'tap'
import { request } from 'undici'
import { launchBrowser, openPage, screenshot } from '../helpers/browser.js'
import { callTool, initializeMessage, openSession, post } from '../helpers/mcp.js'
import { FormBrowser, formAction, formValue, oauthTokens } from '../helpers/oauth.js'
import { defaultOrganization, ownerMembership } from '../helpers/seed.js'
import { injectServer } from '../helpers/inject.js'
import { OWNER_EMAIL, OWNER_PASSWORD, startServer, type TestServer } from '../helpers/server.js'

// The account page's changes in headless Chromium: POST-redirect-GET (a new key shown exactly once, a reload creates
// nothing), confirmation before revoking or rotating, the notice after, the audit log entries, and the key and
// application tables usable at 390 px.

// Runs inside the page (serialized by Playwright); the project compiles without the DOM lib.
declare const document: {
  documentElement: { scrollWidth: number; clientWidth: number }
  elementFromPoint(x: number, y: number): { closest(selector: string): unknown } | null
}
declare function getComputedStyle(el: unknown): { display: string }

const KEY_PATTERN = /^service_mcp_[A-Za-z0-9_-]{43}$/
const PHONE = { width: 390, height: 844 }
const DESKTOP = { width: 1280, height: 900 }

let browserPromise: Promise<Browser> | undefined
function browser(): Promise<Browser> {
  browserPromise ??= launchBrowser(t)
  return browserPromise
}

async function newPage(t: Test, viewport = DESKTOP): Promise<{ context: BrowserContext; page: Page; problems: string[] }> {
  return openPage(t, await browser(), viewport)
}

async function signIn(page: Page, server: TestServer): Promise<void> {
  await page.goto(`${server.url}/account`)
  await page.fill('#email', OWNER_EMAIL)
  await page.fill('#password', OWNER_PASSWORD)
  await Promise.all([page.waitForURL(`${server.url}/account`), page.getByRole('button', { name: 'Sign in' }).click()])
}

/** Clicks something that submits a form; returns the POST's response once the page it leads to has loaded. */
async function submit(page: Page, click: () => Promise<void>) {
  const [response] = await Promise.all([page.waitForResponse((r) => r.request().method() === 'POST'), click()])
  await page.waitForLoadState('load')
  return response
}

/** The cookies of the page's context as one Cookie header, for raw requests as that browser. */
async function cookieHeader(context: BrowserContext, server: TestServer): Promise<string> {
  return (await context.cookies(server.url)).map((c) => `${c.name}=${c.value}`).join('; ')
}

async function ownKeys(server: TestServer) {
  return server.app.repos.apiKeys.listForMembership((await ownerMembership(server)).id)
}

async function auditEntries(server: TestServer, action: string) {
  return (await server.app.repos.audit.page((await defaultOrganization(server)).id, 50, undefined, action)).items
}

const occurrences = (haystack: string, needle: string) => haystack.split(needle).length - 1

t.test('creating a key: 303 to /account, the key shown exactly once, a reload creates nothing', async (t) => {
  const server = await startServer(t)
  const { context, page, problems } = await newPage(t)
  await signIn(page, server)
  const before = (await ownKeys(server)).length

  // Every document the browser receives, to count where the key ever appears.
  const documents: Array<{ method: string; url: string; status: number; text: string }> = []
  page.on('response', async (r) => {
    if (r.request().resourceType() !== 'document') return
    documents.push({ method: r.request().method(), url: r.url(), status: r.status(), text: await r.text().catch(() => '') })
  })

  await page.fill('#key-name', 'reload me')
  const posted = await submit(page, () => page.getByRole('button', { name: 'Create key' }).click())
  t.equal(posted.status(), 303, 'the POST answers 303')
  t.equal(posted.headers().location, '/account', 'to /account, with nothing in the URL')
  t.equal(page.url(), `${server.url}/account`, 'the browser is on /account')
  const key = (await page.locator('#new-key').textContent()) ?? ''
  t.match(key, KEY_PATTERN, 'the new key is shown')
  t.match(await page.locator('main').textContent(), 'Copy your new key now — it will not be shown again')
  t.equal((await ownKeys(server)).length, before + 1, 'one key created')
  await screenshot(page, 'account-pages-new-key-1280')

  const reloaded = await page.reload()
  t.equal(reloaded?.status(), 200, 'the reload is a GET of /account')
  t.equal(reloaded?.request().method(), 'GET')
  t.equal(await page.locator('#new-key').count(), 0, 'the reload shows no key')
  t.notOk((await page.content()).includes(key), 'nor anywhere on the page')
  t.equal((await ownKeys(server)).length, before + 1, 'and creates nothing')

  const raw = await request(`${server.url}/account`, { headers: { cookie: await cookieHeader(context, server) } })
  const rawText = await raw.body.text()
  t.equal(raw.statusCode, 200, 'a raw re-GET with the same cookies: 200')
  t.match(rawText, /<h1>Your account<\/h1>/, 'the account page')
  t.notOk(rawText.includes(key) || rawText.includes('id="new-key"'), 'without the key')
  t.equal((await ownKeys(server)).length, before + 1, 'still one key created')

  await page.waitForLoadState('load')
  const all = documents.map((d) => d.text).join('\n')
  t.equal(occurrences(all + rawText, key), 1, 'the key was sent exactly once, in one page')
  const shownIn = documents.filter((d) => d.text.includes(key))
  t.same(shownIn.map((d) => [d.method, new URL(d.url).pathname, d.status]), [['GET', '/account', 200]], 'in the GET that followed the 303')
  t.notOk(documents.some((d) => d.url.includes(key)), 'never in a URL')

  // The audit log, read through the repository and through service_audit_list.
  const created = (await ownKeys(server)).find((k) => k.name === 'reload me')!
  const entries = await auditEntries(server, 'api_key.create')
  t.equal(entries.length, 1, 'one api_key.create entry')
  const entry = entries[0]!
  t.equal(entry.organizationId, (await defaultOrganization(server)).id, 'in the organization of the key')
  t.equal(entry.userId, (await ownerMembership(server)).userId, 'by the signed-in user')
  t.equal(entry.membershipId, (await ownerMembership(server)).id, 'through their membership')
  t.equal(entry.credentialKind, 'account_page', 'on the account page')
  t.equal(entry.credentialId, null)
  t.equal(entry.targetType, 'api_key')
  t.equal(entry.targetId, created.id, 'naming the key by id')
  t.equal(entry.outcome, 'succeeded')
  t.match(entry.details, { name: 'reload me', key_prefix: created.displayPrefix, scopes: 'mcp:read', membership_id: (await ownerMembership(server)).id, expires_at: null })
  t.type(entry.details?.request_id, 'string', 'with the request id')
  t.notOk(JSON.stringify(entry).includes(key), 'never the key')

  const session = await openSession(server.mcpUrl, server.apiKey)
  const listed = await post(server.mcpUrl, callTool('service_audit_list', { action: 'api_key.create' }), session.headers)
  t.equal(listed.json?.result?.isError, false, 'service_audit_list answers')
  const view = listed.json.result.structuredContent.entries as Array<Record<string, any>>
  t.equal(view.length, 1, 'service_audit_list shows the entry')
  t.match(view[0], { action: 'api_key.create', target_type: 'api_key', target_id: created.id, outcome: 'succeeded', actor: { user_id: entry.userId, membership_id: entry.membershipId, credential_kind: 'account_page', credential_id: null, client_id: null } })
  t.same(problems, [], 'no CSP violations or page errors')
})

t.test('revoking a key asks first, says what happened once, and is audited', async (t) => {
  const server = await startServer(t)
  const { context, page, problems } = await newPage(t)
  await signIn(page, server)
  const { key, record } = await server.app.repos.apiKeys.create({ membershipId: (await ownerMembership(server)).id, name: 'deploy bot', scopes: ['mcp:read'] })
  const label = `key “deploy bot” (${record.displayPrefix}…)`
  await page.goto(`${server.url}/account`)
  const row = page.locator(`tr[data-key-id="${record.id}"]`)

  // Revoke leads to a question; Cancel changes nothing.
  await Promise.all([page.waitForURL(`${server.url}/account/keys/${record.id}/revoke`), row.getByRole('link', { name: 'Revoke', exact: true }).click()])
  t.equal(await page.title(), `Revoke ${label}?`, 'the confirmation page names the key')
  t.equal(await page.getByRole('heading', { level: 1 }).textContent(), `Revoke ${label}?`)
  t.match(await page.locator('main').textContent(), 'Clients using it are refused from their next request, and its open sessions end. This cannot be undone.')
  t.equal(await page.getByRole('button').count(), 1, 'one button: Revoke')
  t.equal(await page.getByRole('button', { name: 'Revoke', exact: true }).count(), 1)
  await screenshot(page, 'account-pages-confirm-revoke-1280')
  await Promise.all([page.waitForURL(`${server.url}/account`), page.getByRole('link', { name: 'Cancel' }).click()])
  t.equal((await server.app.repos.apiKeys.byId(record.id))?.revokedAt, null, 'Cancel: the key is still active')
  t.equal(await page.locator('.notice').count(), 0, 'and nothing is said')
  t.same(await auditEntries(server, 'api_key.revoke'), [], 'nor audited')

  await Promise.all([page.waitForURL(`${server.url}/account/keys/${record.id}/revoke`), row.getByRole('link', { name: 'Revoke', exact: true }).click()])
  const csrf = await page.locator('input[name=csrf]').getAttribute('value')
  const revoked = await submit(page, () => page.getByRole('button', { name: 'Revoke', exact: true }).click())
  t.equal(revoked.status(), 303, 'the confirmed revoke answers 303')
  t.equal(page.url(), `${server.url}/account`)
  const notice = `Key “deploy bot” (${record.displayPrefix}…) revoked; clients using it are refused from their next request.`
  t.equal(await page.getByRole('status').filter({ hasText: 'revoked;' }).textContent(), notice, 'the notice says what happened')
  t.equal(await row.locator('.status-revoked').textContent(), 'revoked')
  t.not((await server.app.repos.apiKeys.byId(record.id))?.revokedAt, null, 'the key is revoked')
  const refused = await post(server.mcpUrl, initializeMessage(), { authorization: `Bearer ${key}` })
  t.equal(refused.json?.error?.code, 'TOKEN_REVOKED', 'and refused on /mcp')
  await screenshot(page, 'account-pages-revoked-notice-1280')
  await page.reload()
  t.equal(await page.locator('.notice').count(), 0, 'the notice is shown once: a reload shows none')

  // The confirmation posted again (a double click, the back button): nothing more happens.
  const cookie = await cookieHeader(context, server)
  const again = await request(`${server.url}/account/keys/${record.id}/revoke`, {
    method: 'POST',
    headers: { cookie, origin: server.url, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ csrf: csrf ?? '', confirm: 'yes' }).toString(),
  })
  await again.body.text()
  t.equal(again.statusCode, 303, 'posting the confirmation again: 303')

  const entries = await auditEntries(server, 'api_key.revoke')
  t.equal(entries.length, 1, 'one api_key.revoke entry')
  t.match(entries[0], {
    organizationId: (await defaultOrganization(server)).id,
    userId: (await ownerMembership(server)).userId,
    membershipId: (await ownerMembership(server)).id,
    credentialKind: 'account_page',
    targetType: 'api_key',
    targetId: record.id,
    outcome: 'succeeded',
    details: { name: 'deploy bot', key_prefix: record.displayPrefix, membership_id: (await ownerMembership(server)).id },
  })

  // One click from a stale page (a POST without the confirmation step) only asks the question.
  const other = await server.app.repos.apiKeys.create({ membershipId: (await ownerMembership(server)).id, name: 'stale', scopes: ['mcp:read'] })
  const oneClick = await request(`${server.url}/account/keys/${other.record.id}/revoke`, {
    method: 'POST',
    headers: { cookie, origin: server.url, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ csrf: csrf ?? '' }).toString(),
  })
  const oneClickText = await oneClick.body.text()
  t.equal(oneClick.statusCode, 200, 'a one-click post gets the confirmation page')
  t.match(oneClickText, `<h1>Revoke key “stale” (${other.record.displayPrefix}…)?</h1>`)
  t.equal((await server.app.repos.apiKeys.byId(other.record.id))?.revokedAt, null, 'and revokes nothing')
  t.same(problems, [], 'no CSP violations or page errors')
})

t.test('rotating asks first; the new key is shown once with the notice', async (t) => {
  const server = await startServer(t)
  const { page } = await newPage(t)
  await signIn(page, server)
  const { key, record } = await server.app.repos.apiKeys.create({ membershipId: (await ownerMembership(server)).id, name: 'laptop', scopes: ['mcp:read'] })
  await page.goto(`${server.url}/account/keys/${record.id}/rotate`)
  t.equal(await page.getByRole('heading', { level: 1 }).textContent(), `Rotate key “laptop” (${record.displayPrefix}…)?`)
  const rotated = await submit(page, () => page.getByRole('button', { name: 'Rotate', exact: true }).click())
  t.equal(rotated.status(), 303)
  const next = (await page.locator('#new-key').textContent()) ?? ''
  t.match(next, KEY_PATTERN, 'the new key is shown')
  t.equal(await page.getByRole('status').filter({ hasText: 'rotated' }).textContent(),
    `Key “laptop” rotated: the previous key ${record.displayPrefix}… is revoked; clients using it are refused from their next request.`)
  await page.reload()
  t.equal(await page.locator('#new-key, .notice').count(), 0, 'a reload shows neither again')
  t.equal((await post(server.mcpUrl, initializeMessage(), { authorization: `Bearer ${key}` })).json?.error?.code, 'TOKEN_REVOKED', 'the old key is refused')
  const created = await auditEntries(server, 'api_key.create')
  const revoked = await auditEntries(server, 'api_key.revoke')
  t.equal(created.length, 1)
  t.equal(revoked.length, 1)
  t.equal(created[0]!.details?.rotated_from, record.id, 'audited as a new key replacing the old one')
  t.equal(revoked[0]!.details?.replaced_by, created[0]!.targetId)
})

t.test('revoking an application asks first, says what happened once, and is audited', async (t) => {
  const server = await startServer(t)
  const { page, problems } = await newPage(t)
  await signIn(page, server)
  const { client, tokens } = await oauthTokens(server, { metadata: { client_name: 'Notes App' } })
  const jti = JSON.parse(Buffer.from(tokens.access_token.split('.')[1]!, 'base64url').toString()).jti as string
  const grantId = (await server.app.repos.oauthGrants.accessTokenState(jti))!.grantId
  await page.goto(`${server.url}/account`)
  const row = page.locator(`tr[data-client-id="${client.client_id}"]`)

  await Promise.all([page.waitForURL(/\/account\/clients\/.+\/revoke$/), row.getByRole('link', { name: 'Revoke access' }).click()])
  t.equal(await page.getByRole('heading', { level: 1 }).textContent(), 'Revoke access of “Notes App”?')
  t.match(await page.locator('main').textContent(), 'It can no longer act for you in Default organization: its tokens are refused from its next request, and it must be authorized again to connect.')
  await screenshot(page, 'account-pages-confirm-client-1280')
  const response = await submit(page, () => page.getByRole('button', { name: 'Revoke access' }).click())
  t.equal(response.status(), 303)
  t.equal(await page.getByRole('status').filter({ hasText: 'Notes App' }).textContent(),
    'Access of “Notes App” revoked; it is refused from its next request and must be authorized again to connect.')
  t.equal(await row.count(), 0, 'the application is no longer listed')
  t.equal((await post(server.mcpUrl, initializeMessage(), { authorization: `Bearer ${tokens.access_token}` })).json?.error?.code, 'TOKEN_REVOKED')
  await page.reload()
  t.equal(await page.locator('.notice').count(), 0, 'the notice is shown once')

  const entries = await auditEntries(server, 'oauth_grant.revoke')
  t.equal(entries.length, 1, 'one oauth_grant.revoke entry')
  t.match(entries[0], {
    organizationId: (await defaultOrganization(server)).id,
    userId: (await ownerMembership(server)).userId,
    membershipId: (await ownerMembership(server)).id,
    credentialKind: 'account_page',
    clientId: null,
    targetType: 'oauth_grant',
    targetId: grantId,
    outcome: 'succeeded',
    details: { client_id: client.client_id, scope: 'mcp:read mcp:write', access_tokens_revoked: 1 },
  })
  t.same(problems, [], 'no CSP violations or page errors')
})

/** Asserts the element is inside the viewport and is what is drawn at its centre (not clipped or covered). */
async function inView(t: Test, page: Page, el: Locator, viewport: { width: number; height: number }, label: string): Promise<void> {
  await el.scrollIntoViewIfNeeded()
  const box = await el.boundingBox()
  if (!box) return void t.fail(`${label}: not rendered`)
  t.ok(box.x >= 0 && box.y >= 0 && box.x + box.width <= viewport.width && box.y + box.height <= viewport.height,
    `${label}: inside the ${viewport.width}×${viewport.height} viewport (${Math.round(box.x)},${Math.round(box.y)} ${Math.round(box.width)}×${Math.round(box.height)})`)
  const hit = await el.evaluate((node, p) => {
    const top = document.elementFromPoint(p.x, p.y) as unknown as { closest?: unknown } | null
    return top !== null && (top === node || (node as { contains(n: unknown): boolean }).contains(top))
  }, { x: box.x + box.width / 2, y: box.y + box.height / 2 })
  t.ok(hit, `${label}: visible at its centre`)
}

/** Keys in every state, with long names, and two applications: the widest the tables get. */
async function seedAccount(server: TestServer) {
  const repos = server.app.repos
  const m = (await ownerMembership(server)).id
  await repos.apiKeys.create({ membershipId: m, name: 'a rather long key name for the continuous integration runner', scopes: ['mcp:read', 'mcp:write'] })
  await repos.apiKeys.create({ membershipId: m, name: 'expiring', scopes: ['mcp:read'], expiresAt: Date.now() + 86_400_000 })
  const gone = await repos.apiKeys.create({ membershipId: m, name: 'revoked one', scopes: ['mcp:read'] })
  await repos.apiKeys.revoke(gone.record.id)
  await oauthTokens(server, { metadata: { client_name: 'An application with a long name, Inc.' } })
  await oauthTokens(server, { metadata: { client_name: 'Cursor' }, scope: 'mcp:read' })
}

t.test('at 390 px every key and application row shows its status and actions, without horizontal scrolling', async (t) => {
  const server = await startServer(t)
  await seedAccount(server)

  for (const viewport of [PHONE, DESKTOP]) {
    const { page, problems } = await newPage(t, viewport)
    await signIn(page, server)
    const width = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth }))
    t.ok(width.scroll <= viewport.width, `${viewport.width} px: the document does not scroll sideways (scrollWidth ${width.scroll})`)
    await screenshot(page, `account-pages-tables-${viewport.width}`)
    // Nothing hides in a sideways-scrolling box either (a table wider than its wrapper would scroll there).
    const boxes = await page.locator('.table-wrap').evaluateAll((els) => els.map((el) => {
      const box = el as unknown as { scrollWidth: number; clientWidth: number }
      return box.scrollWidth - box.clientWidth
    }))
    t.same(boxes, [0, 0], `${viewport.width} px: neither table scrolls sideways inside its box`)

    const rowDisplay = await page.locator('tr[data-key-id]').first().evaluate((el) => getComputedStyle(el).display)
    t.equal(rowDisplay, viewport === PHONE ? 'block' : 'table-row', `${viewport.width} px: rows are ${viewport === PHONE ? 'stacked cards' : 'table rows'}`)

    const keyRows = await page.locator('tr[data-key-id]').all()
    t.equal(keyRows.length, 4, 'four keys listed')
    let active = 0
    for (const row of keyRows) {
      const name = ((await row.locator('td').first().textContent()) ?? '').slice(0, 24)
      await inView(t, page, row.locator('[class^="status-"]'), viewport, `${viewport.width} px, key ${name}: status`)
      if ((await row.locator('.status-active').count()) === 0) continue
      active++
      await inView(t, page, row.getByRole('link', { name: 'Revoke', exact: true }), viewport, `${viewport.width} px, key ${name}: Revoke`)
      await inView(t, page, row.getByRole('link', { name: 'Rotate', exact: true }), viewport, `${viewport.width} px, key ${name}: Rotate`)
    }
    t.equal(active, 3, 'three active keys with actions')
    const clientRows = await page.locator('tr[data-client-id]').all()
    t.equal(clientRows.length, 2, 'two applications listed')
    for (const row of clientRows) {
      const name = ((await row.locator('td').first().textContent()) ?? '').slice(0, 24)
      await inView(t, page, row.getByRole('link', { name: 'Revoke access' }), viewport, `${viewport.width} px, application ${name}: Revoke access`)
    }

    // The confirmation page fits too.
    const firstActive = page.locator('tr[data-key-id]').filter({ has: page.locator('.status-active') }).first()
    await Promise.all([page.waitForURL(/\/revoke$/), firstActive.getByRole('link', { name: 'Revoke', exact: true }).click()])
    t.ok((await page.evaluate(() => document.documentElement.scrollWidth)) <= viewport.width, `${viewport.width} px: the confirmation page does not scroll sideways`)
    await inView(t, page, page.getByRole('button', { name: 'Revoke', exact: true }), viewport, `${viewport.width} px: the confirmation's Revoke`)
    await inView(t, page, page.getByRole('link', { name: 'Cancel' }), viewport, `${viewport.width} px: the confirmation's Cancel`)
    await screenshot(page, `account-pages-confirm-${viewport.width}`)
    t.same(problems, [], `${viewport.width} px: no CSP violations or page errors`)
  }

  // A new key at 390 px: the key box wraps the key inside the screen.
  const { page } = await newPage(t, PHONE)
  await signIn(page, server)
  await page.fill('#key-name', 'phone key')
  await submit(page, () => page.getByRole('button', { name: 'Create key' }).click())
  await inView(t, page, page.locator('#new-key'), PHONE, '390 px: the new key')
  t.ok((await page.evaluate(() => document.documentElement.scrollWidth)) <= PHONE.width, '390 px: the page with the new key does not scroll sideways')
  await screenshot(page, 'account-pages-new-key-390')
})

t.test('a key nobody came for is dropped after SERVICE_ACCOUNT_NOTICE_TTL_MS; sign-out drops it too', async (t) => {
  // The inject tier (test/helpers/inject.ts): the notice's lifetime is decided by the server's clock, moved below.
  const server = await injectServer(t, { config: { accountNoticeTtlMs: 1500 } })
  const visitor = new FormBrowser(server.url)
  const signin = await visitor.get('/account/signin')
  await visitor.post('/account/signin', { csrf: formValue(signin.text, 'csrf') ?? '', email: OWNER_EMAIL, password: OWNER_PASSWORD })
  const page = await visitor.get('/account')
  const csrf = formValue(page.text, 'csrf') ?? ''
  const create = async (name: string) => visitor.post('/account/keys', { csrf, name, membership: (await ownerMembership(server)).id, scope: 'mcp:read' })

  t.equal((await create('never fetched')).status, 303, 'created; the redirect is not followed')
  await server.clock.advance(1500)
  const late = await visitor.get('/account')
  t.equal(late.status, 200)
  t.notMatch(late.text, 'id="new-key"', 'past the TTL the key is not shown')
  t.ok((await ownKeys(server)).some((k) => k.name === 'never fetched'), 'though it exists (and can be revoked)')

  t.equal((await create('signed out')).status, 303)
  const out = await visitor.post('/account/signout', { csrf })
  t.equal(out.status, 303, 'signed out before fetching it')
  const again = await visitor.get('/account/signin')
  await visitor.post('/account/signin', { csrf: formValue(again.text, 'csrf') ?? '', email: OWNER_EMAIL, password: OWNER_PASSWORD })
  t.notMatch((await visitor.get('/account')).text, 'id="new-key"', 'a new sign-in is not shown the key of the old one')

  // Control: followed 1 ms before the TTL, it is shown.
  const shown = await create('fetched')
  await server.clock.advance(1499)
  t.match((await visitor.get(shown.location!)).text, 'id="new-key"', 'control: followed within the TTL, the key is shown')
  const question = await visitor.get(`/account/keys/${(await ownKeys(server)).find((k) => k.name === 'fetched')!.id}/revoke`)
  t.equal(question.status, 200)
  t.equal(formAction(question.text), `/account/keys/${(await ownKeys(server)).find((k) => k.name === 'fetched')!.id}/revoke`, 'the confirmation posts to the same path')
})

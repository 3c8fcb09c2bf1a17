import { createHash } from 'node:crypto'
import t from 'tap'
import { prefersHtml } from '../../src/web/accept.js'
import { COPY_SCRIPT, COPY_SCRIPT_HASH } from '../../src/web/copy-script.js'
import { pageHeaders } from '../../src/web/headers.js'
import { escapeHtml, html, raw, SafeHtml, STYLESHEET, STYLESHEET_HASH } from '../../src/web/html.js'
import {
  accountPage,
  confirmPage,
  consentPage,
  errorPage,
  landingPage,
  serverLabel,
  signInPage,
  type AccountPageData,
  type ConsentPageData,
} from '../../src/web/pages.js'

const EVIL = `<script>alert(1)</script>"'&`
const EVIL_ESCAPED = '&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;'
const NOW = Date.UTC(2026, 10, 21, 12, 0)

const consentData = (orgs: ConsentPageData['organizations']): ConsentPageData => ({
  action: '/authorize/consent?request=r1',
  csrf: 'csrf-token',
  clientName: EVIL,
  clientId: 'mcp_client"1',
  redirectHost: 'app.example.com',
  userEmail: 'dev@acme.test',
  scopes: [
    { name: 'mcp:read', description: 'List and read' },
    { name: 'mcp:write', description: 'Create, change and delete' },
  ],
  organizations: orgs,
  server: 'mcp.example.com',
})

const accountData = (over: Partial<AccountPageData> = {}): AccountPageData => ({
  csrf: 'csrf-token',
  userEmail: 'dev@acme.test',
  memberships: [{ membershipId: 'mem_1', organizationName: 'Acme', organizationSlug: 'acme', role: 'developer' }],
  keys: [
    {
      id: 'key_active',
      name: 'laptop',
      displayPrefix: 'service_mcp_abcd',
      scopes: 'mcp:read mcp:write',
      organizationName: 'Acme',
      createdAt: Date.UTC(2026, 0, 2, 3, 4),
      lastUsedAt: null,
      expiresAt: null,
      revokedAt: null,
    },
    {
      id: 'key_revoked',
      name: 'old',
      displayPrefix: 'service_mcp_efgh',
      scopes: 'mcp:read',
      organizationName: 'Acme',
      createdAt: Date.UTC(2025, 5, 1),
      lastUsedAt: Date.UTC(2025, 6, 1),
      expiresAt: null,
      revokedAt: Date.UTC(2025, 7, 1),
    },
    {
      id: 'key_expired',
      name: 'ci',
      displayPrefix: 'service_mcp_ijkl',
      scopes: 'mcp:read',
      organizationName: 'Acme',
      createdAt: Date.UTC(2025, 5, 1),
      lastUsedAt: null,
      expiresAt: NOW - 1,
      revokedAt: null,
    },
    {
      id: 'a/b"c',
      name: EVIL,
      displayPrefix: 'service_mcp_mnop',
      scopes: 'mcp:read',
      organizationName: 'Acme',
      createdAt: NOW,
      lastUsedAt: null,
      expiresAt: NOW + 86_400_000,
      revokedAt: null,
    },
  ],
  clients: [
    {
      clientId: 'mcp_x/y"z',
      clientName: EVIL,
      organizationName: 'Acme',
      scopes: 'mcp:read',
      authorizedAt: NOW,
      lastUsedAt: null,
    },
  ],
  now: NOW,
  ...over,
})

function allPages(): Record<string, string> {
  return {
    signIn: signInPage({ action: '/signin', csrf: 'c', server: EVIL, clientName: EVIL, email: EVIL, error: EVIL }),
    consentOne: consentPage(consentData([{ membershipId: 'm1', name: EVIL, slug: 'acme', role: 'owner' }])),
    consentMany: consentPage(
      consentData([
        { membershipId: 'm1', name: 'Acme', slug: 'acme', role: 'owner' },
        { membershipId: 'm2', name: EVIL, slug: 'beta', role: 'viewer' },
      ]),
    ),
    consentNone: consentPage(consentData([])),
    // A client identified by its metadata document: its host and its claimed name both come from outside.
    consentDocument: consentPage({ ...consentData([{ membershipId: 'm1', name: 'Acme', slug: 'acme', role: 'owner' }]), clientHost: EVIL, loopbackRedirect: true }),
    error: errorPage({ title: EVIL, message: EVIL, next: EVIL, detail: EVIL, link: { href: EVIL, label: EVIL } }),
    confirm: confirmPage({ question: EVIL, consequence: EVIL, action: '/account/keys/k/revoke', csrf: 'c', confirmLabel: EVIL, cancelHref: '/account' }),
    account: accountPage(accountData({ newKey: { name: EVIL, key: 'service_mcp_' + 'K'.repeat(43) }, notice: EVIL })),
    accountEmpty: accountPage(accountData({ keys: [], clients: [], memberships: [] })),
    accountDocumentClient: accountPage(accountData({ clients: [{ clientId: 'https://a.example/c"1', clientName: EVIL, clientHost: EVIL, organizationName: 'Acme', scopes: 'mcp:read', authorizedAt: NOW, lastUsedAt: null }] })),
    landing: landingPage({ server: EVIL, mcpUrl: EVIL }),
  }
}

t.test('escapeHtml and the html tag', async (t) => {
  t.equal(escapeHtml(EVIL), EVIL_ESCAPED)
  t.equal(escapeHtml(null), '')
  t.equal(escapeHtml(undefined), '')
  t.equal(escapeHtml(42), '42')
  const inner = html`<b>${'<i>'}</b>`
  t.ok(inner instanceof SafeHtml)
  t.equal(String(html`<p>${inner}${['<', raw('<hr>'), html`${'&'}`]}${null}${undefined}${false}</p>`), '<p><b>&lt;i&gt;</b>&lt;<hr>&amp;</p>')
  t.equal(html`<a title="${`" onclick="x`}">`.value, '<a title="&quot; onclick=&quot;x">')
})

/** The pages with something to copy: the one script, nothing else. */
const WITH_COPY = new Set(['account', 'landing'])

t.test('every page is a complete document without other scripts than the Copy buttons\' or style attributes', async (t) => {
  for (const [name, page] of Object.entries(allPages())) {
    t.ok(page.startsWith('<!doctype html>\n<html lang="en">'), `${name}: doctype and lang`)
    t.match(page, '<meta charset="utf-8">', `${name}: charset`)
    t.match(page, '<meta name="viewport" content="width=device-width,initial-scale=1">', `${name}: viewport`)
    t.match(page, '<meta name="referrer" content="no-referrer">', `${name}: referrer`)
    t.match(page, '<link rel="icon" href="/favicon.svg" type="image/svg+xml">', `${name}: the icon`)
    const scripts = page.match(/<script[\s\S]*?<\/script>/gi) ?? []
    t.same(scripts, WITH_COPY.has(name) ? [`<script>${COPY_SCRIPT}</script>`] : [], `${name}: ${WITH_COPY.has(name) ? 'only the copy script' : 'no script element'}`)
    t.equal(page.split(/<script/i).length - 1, scripts.length, `${name}: no other script element`)
    t.notMatch(page, /\sstyle=/i, `${name}: no style attribute (the CSP would block it)`)
    t.notMatch(page, /\son[a-z]+=/i, `${name}: no event handler attribute`)
    t.equal(page.split('<style>').length, 2, `${name}: exactly one style element`)
    for (const form of page.match(/<form[^>]*>/g) ?? []) t.match(form, 'method="post"', `${name}: ${form}`)
    const forms = page.split('<form').length - 1
    t.equal(page.split('<input type="hidden" name="csrf"').length - 1, forms, `${name}: a csrf field in each form`)
  }
})

t.test('the CSP hash matches the embedded stylesheet', async (t) => {
  const page = signInPage({ action: '/signin', csrf: 'c', server: 's' })
  const embedded = /<style>([\s\S]*?)<\/style>/.exec(page)?.[1]
  t.equal(embedded, STYLESHEET)
  const hash = 'sha256-' + createHash('sha256').update(embedded ?? '', 'utf8').digest('base64')
  t.equal(hash, STYLESHEET_HASH)
  const csp = pageHeaders()['content-security-policy'] ?? ''
  t.match(csp, `style-src '${hash}'`)
  t.match(csp, "default-src 'none'")
  t.match(csp, "frame-ancestors 'none'")
  t.notMatch(csp, 'form-action', 'form-action would block the consent redirect in Chromium')
  t.notMatch(STYLESHEET, /<\/style/i)
  t.notMatch(STYLESHEET, /url\(|@import/, 'no external resources')
})

t.test('the CSP allows the copy script by its hash, and nothing else', async (t) => {
  const page = landingPage({ server: 's', mcpUrl: 'http://s/mcp' })
  const embedded = /<script>([\s\S]*?)<\/script>/.exec(page)?.[1]
  t.equal(embedded, COPY_SCRIPT)
  const hash = 'sha256-' + createHash('sha256').update(embedded ?? '', 'utf8').digest('base64')
  t.equal(hash, COPY_SCRIPT_HASH)
  const csp = pageHeaders()['content-security-policy'] ?? ''
  t.match(csp, `script-src '${hash}'`)
  t.notMatch(csp, /unsafe-inline|unsafe-eval|strict-dynamic|'self'[^;]*;.*script|script-src[^;]*'self'/, 'no other way for a script to run')
  t.notMatch(COPY_SCRIPT, /<\/script/i)
  t.notMatch(COPY_SCRIPT, /fetch\(|XMLHttpRequest|import\(|eval\(|innerHTML/, 'it loads nothing and writes no markup')
})

t.test('page headers', async (t) => {
  t.same(pageHeaders(), {
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-store',
    pragma: 'no-cache',
    'x-frame-options': 'DENY',
    'referrer-policy': 'no-referrer',
    'x-content-type-options': 'nosniff',
    'content-security-policy': `default-src 'none'; style-src '${STYLESHEET_HASH}'; script-src '${COPY_SCRIPT_HASH}'; img-src 'self'; base-uri 'none'; frame-ancestors 'none'`,
    'cross-origin-opener-policy': 'same-origin',
  })
})

t.test('sign-in page', async (t) => {
  const page = signInPage({ action: '/authorize/signin?r=1&x=2', csrf: 'tok"en', server: 'mcp.example.com', clientName: EVIL, error: 'Wrong email or password.' })
  t.match(page, '<title>Sign in</title>')
  t.match(page, '<h1>Sign in</h1>')
  t.match(page, '<p>to your account on</p>\n<p class="host mono" id="server-host">mcp.example.com</p>', 'names the server the password is for')
  t.match(signInPage({ action: '/signin', csrf: 'c', server: EVIL }), `id="server-host">${EVIL_ESCAPED}</p>`, 'as text')
  t.match(page, `to continue to <strong>${EVIL_ESCAPED}</strong>`)
  t.notMatch(page, EVIL)
  t.match(page, 'action="/authorize/signin?r=1&amp;x=2"')
  t.match(page, '<input type="hidden" name="csrf" value="tok&quot;en">')
  t.match(page, /<input id="email" name="email" type="email" autocomplete="username" required autofocus/)
  t.match(page, /<input id="password" name="password" type="password" autocomplete="current-password" required>/)
  t.match(page, '<div class="error" role="alert">Wrong email or password.</div>')
  t.match(page, /<button type="submit"[^>]*>Sign in<\/button>/)

  const plain = signInPage({ action: '/signin', csrf: 'c', server: 's' })
  t.notMatch(plain, 'to continue to')
  t.notMatch(plain, 'role="alert"')

  const again = signInPage({ action: '/signin', csrf: 'c', server: 's', email: EVIL })
  t.match(again, `value="${EVIL_ESCAPED}"`)
  t.notMatch(again, EVIL)
  t.match(again, /id="password"[^>]*autofocus/, 'a kept email moves the focus to the password')
  t.notMatch(again, /id="email"[^>]*autofocus/)
})

t.test('consent page of a client identified by its metadata document', async (t) => {
  const data = consentData([{ membershipId: 'm1', name: 'Acme', slug: 'acme', role: 'owner' }])
  const page = consentPage({ ...data, clientName: 'Claude', clientHost: 'claude.ai', loopbackRedirect: true })
  t.match(page, '<h1>Authorize claude.ai</h1>', 'the host is the heading')
  t.match(page, '<title>Authorize claude.ai</title>')
  t.match(page, 'it calls itself <strong>Claude</strong> (a name it gives itself, not checked by this server)')
  t.match(page, 'id="loopback-notice"')
  const https = consentPage({ ...data, clientName: 'claude.ai', clientHost: 'claude.ai', loopbackRedirect: false })
  t.notMatch(https, 'calls itself', 'a document without a name of its own: nothing to mark as a claim')
  t.notMatch(https, 'loopback-notice')
  const evil = consentPage({ ...data, clientHost: EVIL, loopbackRedirect: true })
  t.notMatch(evil, EVIL, 'host and name are escaped')
})

t.test('consent page', async (t) => {
  const one = consentPage(consentData([{ membershipId: 'mem"1', name: 'Acme', slug: 'acme', role: 'owner' }]))
  t.match(one, `<title>Authorize ${EVIL_ESCAPED}</title>`)
  t.match(one, `<h1>Authorize ${EVIL_ESCAPED}</h1>`)
  t.notMatch(one, EVIL)
  t.match(one, '<p class="host mono" id="redirect-host">app.example.com</p>')
  t.match(one, 'wants to access your account on <strong class="mono" id="server-host">mcp.example.com</strong> as <strong>dev@acme.test</strong>', 'names the server and the account')
  t.match(one, '<span class="field-label">Organization</span>\n<p><span class="org"><strong>Acme</strong> <span class="org-meta"><span class="mono muted">acme</span> <span class="role">owner</span></span></span></p>', 'the one organization, its role a badge')
  t.notMatch(one, ' · ', 'no separator left to dangle at the start of a line')
  t.match(one, '<span class="mono">mcp:read</span>: List and read')
  t.match(one, '<span class="mono">mcp:write</span>: Create, change and delete')
  t.match(one, '<input type="hidden" name="membership" value="mem&quot;1">')
  t.notMatch(one, 'type="radio"')
  t.match(one, '<button type="submit" name="decision" value="approve">Allow</button>')
  t.match(one, /<button type="submit" name="decision" value="deny"[^>]*>Deny<\/button>/)
  t.ok(one.indexOf('value="deny"') < one.indexOf('value="approve"'), 'Deny is the implicit submission')
  t.match(one, 'Client ID: <span class="mono">mcp_client&quot;1</span>')
  t.equal(one.split('<form').length, 2, 'both buttons in one form')

  const many = consentPage(
    consentData([
      { membershipId: 'm1', name: 'Acme', slug: 'acme', role: 'owner' },
      { membershipId: 'm2', name: EVIL, slug: 'beta', role: 'viewer' },
    ]),
  )
  t.match(many, '<input type="radio" name="membership" value="m1" checked><span><span class="org"><strong>Acme</strong> <span class="org-meta"><span class="mono muted">acme</span> <span class="role">owner</span></span></span></span>')
  t.match(many, '<input type="radio" name="membership" value="m2">')
  t.equal(many.split(' checked').length - 1, 1, 'only the first is checked')
  const chosen = consentPage({ ...consentData([
    { membershipId: 'm1', name: 'Acme', slug: 'acme', role: 'owner' },
    { membershipId: 'm2', name: 'Zeta', slug: 'zeta', role: 'viewer' },
  ]), preselected: 'm2' })
  t.match(chosen, '<input type="radio" name="membership" value="m2" checked>', 'the preselected membership is checked')
  t.equal(chosen.split(' checked').length - 1, 1, 'and only it')
  const ungrantable = consentPage({ ...consentData([
    { membershipId: 'm1', name: 'Acme', slug: 'acme', role: 'owner' },
    { membershipId: 'm2', name: 'Zeta', slug: 'zeta', role: 'viewer', grantable: false },
  ]), preselected: 'm2' })
  t.match(ungrantable, '<input type="radio" name="membership" value="m1" checked>', 'a preselection that cannot grant falls back to the first that can')
  t.notMatch(many, 'type="hidden" name="membership"')
  t.notMatch(many, EVIL)

  const none = consentPage(consentData([]))
  t.notMatch(none, 'value="approve"', 'nothing to approve without an organization')
  t.match(none, 'value="deny"')
})

t.test('error page', async (t) => {
  const page = errorPage({ title: 'Invalid redirect URI', message: EVIL, next: 'Go back.', detail: 'redirect_uri mismatch', link: { href: '/account', label: 'Back to your account' } })
  t.match(page, '<title>Invalid redirect URI</title>')
  t.match(page, '<h1>Invalid redirect URI</h1>')
  t.match(page, EVIL_ESCAPED)
  t.notMatch(page, EVIL)
  t.match(page, '<p>Go back.</p>')
  t.match(page, '<p><a href="/account">Back to your account</a></p>')
  t.match(page, '<p class="small muted mono">redirect_uri mismatch</p>')
  const bare = errorPage({ title: 'x', message: 'y' })
  t.notMatch(bare, 'mono">')
  t.notMatch(bare, '<a ')
})

t.test('confirmation page', async (t) => {
  const page = confirmPage({
    question: `Revoke key “${EVIL}” (service_mcp_abcd…)?`,
    consequence: 'Clients using it are refused from their next request.',
    action: '/account/keys/a%2Fb/revoke',
    csrf: 'tok"en',
    confirmLabel: 'Revoke',
    cancelHref: '/account',
  })
  t.match(page, `<title>Revoke key “${EVIL_ESCAPED}” (service_mcp_abcd…)?</title>`)
  t.match(page, `<h1>Revoke key “${EVIL_ESCAPED}” (service_mcp_abcd…)?</h1>`)
  t.notMatch(page, EVIL)
  t.match(page, '<p>Clients using it are refused from their next request.</p>')
  t.match(page, '<form method="post" action="/account/keys/a%2Fb/revoke">')
  t.match(page, '<input type="hidden" name="csrf" value="tok&quot;en">')
  t.match(page, '<input type="hidden" name="confirm" value="yes">', 'the second step is marked')
  t.match(page, '<a class="button secondary" href="/account">Cancel</a>')
  t.match(page, '<button type="submit" class="destructive">Revoke</button>')
  t.equal(page.split('<form').length, 2, 'one form')
})

t.test('account page', async (t) => {
  const newKey = 'service_mcp_' + 'K'.repeat(43)
  const page = accountPage(accountData({ newKey: { name: 'laptop', key: newKey }, notice: 'Key created.' }))
  t.match(page, '<h1>Your account</h1>')
  t.match(page, 'dev@acme.test')
  t.match(page, /<form method="post" action="\/account\/signout"[^>]*><input type="hidden" name="csrf" value="csrf-token">/)
  t.match(page, '<div class="notice" role="status">Key created.</div>')
  t.match(page, 'Copy your new key now — it will not be shown again')
  t.match(page, `<div class="copyable"><code class="secret" id="new-key">${newKey}</code><button type="button" class="secondary small" data-copy="new-key" hidden>Copy key</button></div>\n<p class="copy-status" role="status"></p>`, 'the key, and a Copy button hidden until the script shows it')
  t.match(page, `<script>${COPY_SCRIPT}</script>`, 'with the script')
  t.notMatch(accountPage(accountData()), '<script', 'no script without a key to copy')
  t.equal(page.split(newKey).length - 1, 1, 'the new key appears once')
  t.notMatch(accountPage(accountData()), 'id="new-key"', 'no key box without a new key')

  t.match(page, '<tr data-key-id="key_active">')
  t.match(page, '<td data-label="Created">2026-01-02 03:04 UTC</td>')
  t.match(page, '<span class="status-active">active</span>')
  // Rotate and Revoke lead to confirmation pages (GET); the rows hold no form that changes anything.
  t.match(page, '<a class="button secondary small" href="/account/keys/key_active/rotate">Rotate</a>')
  t.match(page, '<a class="button danger small" href="/account/keys/key_active/revoke">Revoke</a>')
  t.notMatch(page, /action="\/account\/(keys|clients)\/[^"]+\/(rotate|revoke)"/, 'no one-click revoke or rotate form')

  const row = (id: string) => page.split('<tr ').find((r) => r.startsWith(`data-key-id="${id}"`))?.split('</tr>')[0] ?? ''
  t.match(row('key_revoked'), '<span class="status-revoked">revoked</span>')
  t.match(row('key_revoked'), '<td class="row-actions"></td>', 'no actions on a revoked key')
  t.match(row('key_expired'), '<span class="status-expired">expired</span>')
  t.match(row('key_expired'), '<td class="row-actions"></td>', 'no actions on an expired key')
  t.match(row('a/b&quot;c'), 'expires 2026-11-22 12:00 UTC')
  // Every cell but the actions names its column for the narrow (stacked) layout.
  t.match(row('key_active'), '<td data-label="Name">laptop<br>')
  t.match(row('key_active'), '<td data-label="Status" class="wrap"><span class="status-active">active</span>')

  // Ids are URI-encoded in paths, then HTML-escaped like everything else.
  t.match(page, '<tr data-key-id="a/b&quot;c">')
  t.match(page, 'href="/account/keys/a%2Fb%22c/rotate"')
  t.match(page, 'href="/account/keys/a%2Fb%22c/revoke"')
  t.match(page, '<tr data-client-id="mcp_x/y&quot;z">')
  t.match(page, '<a class="button danger small" href="/account/clients/mcp_x%2Fy%22z/revoke">Revoke access</a>')
  t.match(page, '<table class="stack" id="keys">')
  t.match(page, '<table class="stack" id="clients">')
  t.notMatch(page, EVIL)
  t.match(page, EVIL_ESCAPED)

  t.match(page, '<form method="post" action="/account/keys">')
  t.match(page, /<input id="key-name" name="name" type="text" required maxlength="100"/)
  t.match(page, '<span class="field-label">Organization</span>\n<p><span class="org"><strong>Acme</strong> <span class="org-meta"><span class="mono muted">acme</span> <span class="role">developer</span></span></span></p>\n<input type="hidden" name="membership" value="mem_1">', 'the one organization of the form, under its label')
  t.match(page, '<li><span class="org"><strong>Acme</strong> <span class="org-meta"><span class="mono muted">acme</span> <span class="role">developer</span></span></span></li>', 'the memberships list alike')
  t.notMatch(page, '<select')
  t.match(page, '<input type="checkbox" name="scope" value="mcp:read" checked>')
  t.match(page, '<input type="checkbox" name="scope" value="mcp:write">')
  t.match(page, /<button type="submit">Create key<\/button>/)

  const two = accountPage(
    accountData({
      memberships: [
        { membershipId: 'mem_1', organizationName: 'Acme', organizationSlug: 'acme', role: 'developer' },
        { membershipId: 'mem_2', organizationName: 'Beta', organizationSlug: 'beta', role: 'viewer' },
      ],
    }),
  )
  t.match(two, '<select id="key-membership" name="membership">')
  t.match(two, '<option value="mem_2">Beta (beta) · viewer</option>')
  t.notMatch(two, 'type="hidden" name="membership"')

  const empty = accountPage(accountData({ keys: [], clients: [], memberships: [] }))
  t.match(empty, 'You have no API keys.')
  t.match(empty, 'No applications are authorized to use your account.')
  t.notMatch(empty, '<table')
  t.notMatch(empty, 'action="/account/keys"', 'no create form without a membership')
})

t.test('landing page', async (t) => {
  const page = landingPage({ server: '127.0.0.1:3000', mcpUrl: 'http://127.0.0.1:3000/mcp' })
  t.match(page, '<title>MCP server at 127.0.0.1:3000</title>')
  t.match(page, '<p class="host mono" id="server-host">127.0.0.1:3000</p>')
  t.match(page, '<div class="copyable"><code class="copy-text" id="mcp-url">http://127.0.0.1:3000/mcp</code><button type="button" class="secondary small" data-copy="mcp-url" hidden>Copy address</button></div>', 'the MCP URL, with a Copy button')
  t.match(page, '<a href="/account">Sign in to your account</a>')
  t.match(page, '<code>README.md</code>', 'where the documentation is')
  t.notMatch(page, '<form', 'nothing to post')
  const evil = landingPage({ server: EVIL, mcpUrl: EVIL })
  t.notMatch(evil, EVIL)
  t.match(evil, `id="mcp-url">${EVIL_ESCAPED}</code>`)
})

t.test('serverLabel: the base URL without its scheme', async (t) => {
  t.equal(serverLabel('http://127.0.0.1:3000'), '127.0.0.1:3000')
  t.equal(serverLabel('https://mcp.example.com'), 'mcp.example.com')
  t.equal(serverLabel('https://mcp.example.com:8443'), 'mcp.example.com:8443')
  t.equal(serverLabel('https://example.com/team'), 'example.com/team')
  t.equal(serverLabel('http://[::1]:3000'), '[::1]:3000')
})

t.test('prefersHtml: a browser page load, not an API client', async (t) => {
  const chromium = 'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7'
  const firefox = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8'
  for (const accept of [chromium, firefox, 'text/html', 'TEXT/HTML', 'application/json;q=0.5, text/html']) t.ok(prefersHtml(accept), accept)
  for (const accept of [undefined, '', '*/*', 'application/json', 'application/json, text/event-stream', 'text/*', 'application/json, text/html', 'text/html;q=0', 'text/html;q=0.4, application/json;q=0.5', 'text/html;q=x', 'text/html;q=2']) {
    t.notOk(prefersHtml(accept), String(accept))
  }
})

import { html, layout, type SafeHtml } from './html.js'

export interface SignInPageData {
  action: string
  csrf: string
  /** The server the account is on (serverLabel): a person should know where they type their password. */
  server: string
  email?: string
  error?: string
  clientName?: string
  /** Upstream identity providers, one button each above the password form (docs/decisions/single-sign-on.md). */
  providers?: SignInProviderButton[]
  /** false when the operator turned password sign-in off: no password form. */
  passwordSignIn?: boolean
}

/** A "Sign in with <title>" button: a form posting the page's CSRF token (and its pending authorization) to `action`. */
export interface SignInProviderButton {
  action: string
  title: string
  /** The pending authorization request the sign-in continues, when it started at /oauth/interaction. */
  interaction?: string
}

export interface ConsentScope {
  name: string
  description: string
}

export interface ConsentOrganization {
  membershipId: string
  name: string
  slug: string
  role: string
  /** Said when the role narrows the requested scope ("As a viewer in Acme you can only grant read access"). */
  notice?: string
  /** false when the role can use none of the requested scope: this organization cannot be chosen. */
  grantable?: boolean
}

export interface ConsentPageData {
  action: string
  csrf: string
  clientName: string
  clientId: string
  /**
   * For a client identified by its metadata document: the document's host, its verified identity, shown as the
   * application (its name is only what it says of itself).
   */
  clientHost?: string
  /** With clientHost: the redirect goes to a loopback address, where any program on the computer could listen. */
  loopbackRedirect?: boolean
  redirectHost: string
  scopes: ConsentScope[]
  organizations: ConsentOrganization[]
  /**
   * The membership chosen when the page opens (the plugin's rule: the organization last chosen for this client, else
   * the member's own). Ignored when it cannot grant anything; then the first organization that can is chosen.
   */
  preselected?: string
  userEmail: string
  /** The server the application wants to act on (serverLabel). */
  server: string
}

export interface LandingPageData {
  /** The server (serverLabel). */
  server: string
  /** The address to give an MCP client: the base URL's /mcp. */
  mcpUrl: string
}

export interface ErrorPageData {
  title: string
  /** What happened, in the reader's terms. */
  message: string
  /** What to do next, when the message does not already say it. */
  next?: string
  /** Technical detail for whoever develops the application (small print, monospace). */
  detail?: string
  /** A way on, such as back to the account page. */
  link?: { href: string; label: string }
}

/** A question before a change that cannot be undone: the change is a POST of this page's form, Cancel a link. */
export interface ConfirmPageData {
  /** The question, naming exactly what changes: "Revoke key “ci” (service_mcp_ab12…)?" */
  question: string
  /** What follows from it, said before it happens. */
  consequence: string
  action: string
  csrf: string
  confirmLabel: string
  cancelHref: string
}

export interface AccountMembership {
  membershipId: string
  organizationName: string
  organizationSlug: string
  role: string
}

export interface AccountKey {
  id: string
  name: string
  displayPrefix: string
  scopes: string
  organizationName: string
  createdAt: number
  lastUsedAt: number | null
  expiresAt: number | null
  revokedAt: number | null
}

export interface AccountClient {
  clientId: string
  clientName: string
  /** A client identified by its metadata document: the document's host, shown as the application. */
  clientHost?: string
  organizationName: string
  scopes: string
  authorizedAt: number
  lastUsedAt: number | null
}

export interface AccountPageData {
  csrf: string
  userEmail: string
  memberships: AccountMembership[]
  keys: AccountKey[]
  clients: AccountClient[]
  /** Shown once, right after creation or rotation. */
  newKey?: { name: string; key: string }
  notice?: string
  /** Clock for the expired status; defaults to Date.now(). */
  now?: number
}

/**
 * How the pages name this server to a person: the base URL without its scheme (`mcp.example.com`,
 * `127.0.0.1:3000`, or `example.com/team` behind a path).
 */
export function serverLabel(baseUrl: string): string {
  const url = new URL(baseUrl)
  return url.host + url.pathname.replace(/\/+$/, '')
}

/**
 * Text to copy (the element `id`) and its Copy button. The button stays hidden unless the page's script (COPY_SCRIPT,
 * layout's `copy`) runs; the text is selectable either way. The paragraph after the row says what the click did.
 */
function copyable(id: string, className: string, text: string, label: string): SafeHtml {
  return html`<div class="copyable"><code class="${className}" id="${id}">${text}</code><button type="button" class="secondary small" data-copy="${id}" hidden>${label}</button></div>
<p class="copy-status" role="status"></p>`
}

function csrfField(csrf: string): SafeHtml {
  return html`<input type="hidden" name="csrf" value="${csrf}">`
}

/** `YYYY-MM-DD HH:MM UTC`, or an em dash for never. */
export function formatDate(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms)) return '—'
  return new Date(ms).toISOString().slice(0, 16).replace('T', ' ') + ' UTC'
}

export function signInPage(p: SignInPageData): string {
  const hasEmail = p.email !== undefined && p.email !== ''
  const providers = p.providers ?? []
  const passwordForm = p.passwordSignIn !== false
  // After a failed attempt the email is kept, so the cursor goes straight to the password.
  const body = html`<h1>Sign in</h1>
<p>to your account on</p>
<p class="host mono" id="server-host">${p.server}</p>
${p.clientName !== undefined && html`<p class="muted">to continue to <strong>${p.clientName}</strong></p>`}
${p.error !== undefined && html`<div class="error" role="alert">${p.error}</div>`}
${providers.map((b) => providerButton(b, p.csrf, passwordForm))}
${providers.length > 0 && passwordForm && html`<p class="muted small" id="password-divider">or with your email and password</p>`}
${passwordForm && html`<form method="post" action="${p.action}">
${csrfField(p.csrf)}
<label for="email">Email</label>
<input id="email" name="email" type="email" autocomplete="username" required${hasEmail ? '' : html` autofocus`} value="${p.email ?? ''}">
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required${hasEmail ? html` autofocus` : ''}>
<button type="submit" class="block">Sign in</button>
</form>`}`
  return layout({ title: 'Sign in', body })
}

/** With a password form below, the provider buttons are the secondary style, so the page keeps one primary action. */
function providerButton(b: SignInProviderButton, csrf: string, passwordForm: boolean): SafeHtml {
  return html`<form method="post" action="${b.action}" class="provider">
${csrfField(csrf)}
${b.interaction !== undefined && html`<input type="hidden" name="interaction" value="${b.interaction}">`}
<button type="submit" class="block${passwordForm ? ' secondary' : ''}">Sign in with ${b.title}</button>
</form>
`
}

function grantable(o: ConsentOrganization): boolean {
  return o.grantable !== false
}

/**
 * An organization and the member's role in it: the name, then the slug and the role (a badge) as one part that never
 * breaks inside. A narrow line wraps after the name, instead of leaving the role alone after a dangling "·".
 */
function organization(name: string, slug: string, role: string): SafeHtml {
  return html`<span class="org"><strong>${name}</strong> <span class="org-meta"><span class="mono muted">${slug}</span> <span class="role">${role}</span></span></span>`
}

/** The one organization a form acts in when the member has no other: shown under a label, sent as a hidden field. */
function onlyOrganization(membershipId: string, shown: SafeHtml): SafeHtml {
  return html`<span class="field-label">Organization</span>
<p>${shown}</p>
<input type="hidden" name="membership" value="${membershipId}">`
}

/** One organization to choose: disabled when its role can grant nothing asked for; its narrowing said beside it. */
function organizationChoice(o: ConsentOrganization, checked: boolean): SafeHtml {
  const state = !grantable(o) ? html` disabled` : checked ? html` checked` : ''
  return html`<label class="choice"><input type="radio" name="membership" value="${o.membershipId}"${state}><span>${organization(o.name, o.slug, o.role)}${o.notice !== undefined && html`<br><span class="small">${o.notice}</span>`}</span></label>
`
}

export function consentPage(p: ConsentPageData): string {
  const [first, ...others] = p.organizations
  const firstGrantable = p.organizations.find(grantable)
  const chosen = p.organizations.find((o) => o.membershipId === p.preselected && grantable(o)) ?? firstGrantable
  let orgChooser: SafeHtml
  if (first === undefined) {
    orgChooser = html`<div class="error" role="alert">You are not a member of any organization, so this application cannot be authorized.</div>`
  } else if (others.length === 0) {
    orgChooser = html`${onlyOrganization(first.membershipId, organization(first.name, first.slug, first.role))}
${first.notice !== undefined && html`<div class="${grantable(first) ? 'notice' : 'error'}" role="status" id="scope-notice">${first.notice}</div>
`}`
  } else {
    orgChooser = html`<fieldset>
<legend>Organization</legend>
${p.organizations.map((o) => organizationChoice(o, o === chosen))}</fieldset>`
  }
  const shown = p.clientHost ?? p.clientName
  // Deny comes first in the form so an implicit submission (Enter) is the harmless choice.
  const body = html`<h1>Authorize ${shown}</h1>
${p.clientHost !== undefined && documentClientIdentity(p.clientHost, p.clientName, p.loopbackRedirect === true)}
<p>The application at</p>
<p class="host mono" id="redirect-host">${p.redirectHost}</p>
<p>wants to access your account on <strong class="mono" id="server-host">${p.server}</strong> as <strong>${p.userEmail}</strong>. Continue only if you recognise the application's address: you will be sent back to it.</p>
<h2>It will be able to</h2>
<ul>
${p.scopes.map((s) => html`<li><span class="mono">${s.name}</span>: ${s.description}</li>
`)}</ul>
<form method="post" action="${p.action}">
${csrfField(p.csrf)}
${orgChooser}
<div class="actions">
<button type="submit" name="decision" value="deny" class="secondary">Deny</button>
${firstGrantable !== undefined && html`<button type="submit" name="decision" value="approve">Allow</button>`}
</div>
</form>
<p class="small muted">Client ID: <span class="mono">${p.clientId}</span></p>`
  return layout({ title: `Authorize ${shown}`, body })
}

/**
 * Who a metadata-document client is: its host was checked (the document is served there), its name is its own claim.
 * Its redirect to a loopback address gets a warning (MCP 2025-11-25, "Localhost Redirect URI Risks"): any program on
 * the computer can present a well-known client's document and listen there.
 */
function documentClientIdentity(host: string, name: string, loopback: boolean): SafeHtml {
  return html`<p id="client-identity">This application is identified by its client document at <strong class="mono">${host}</strong>${name !== host && html`; it calls itself <strong>${name}</strong> (a name it gives itself, not checked by this server)`}.</p>
${loopback && html`<div class="notice" role="status" id="loopback-notice">You will be sent back to a program on this computer. Any program here can claim to be ${host}: continue only if you started connecting from that application just now.</div>
`}`
}

/**
 * `/` for a browser: what this is, the address to give an MCP client, where to manage keys and where the documentation
 * is. The README is named, not linked: the server knows no address of it that would hold for every self-hoster.
 */
export function landingPage(p: LandingPageData): string {
  const body = html`<h1>MCP server</h1>
<p class="host mono" id="server-host">${p.server}</p>
<p>A remote <a href="https://modelcontextprotocol.io">Model Context Protocol</a> server: AI applications connect to it and use its tools for a member of an organization, with that member's role.</p>
<h2>Connect a client</h2>
<p>Give your MCP client this address:</p>
${copyable('mcp-url', 'copy-text', p.mcpUrl, 'Copy address')}
<p class="small muted">A client that speaks OAuth opens a sign-in page of this server in your browser; any other client sends an API key as <code>Authorization: Bearer service_mcp_…</code>.</p>
<h2>Your account</h2>
<p><a href="/account">Sign in to your account</a> to create API keys and to see the applications you authorized.</p>
<h2>Documentation</h2>
<p><code>README.md</code>, which comes with the server (in its source repository and its npm package), says how to run, configure and connect to it.</p>`
  return layout({ title: `MCP server at ${p.server}`, body, copy: true })
}

export function errorPage(p: ErrorPageData): string {
  const body = html`<h1>${p.title}</h1>
<div class="error" role="alert">${p.message}</div>
${p.next !== undefined && html`<p>${p.next}</p>`}
${p.link !== undefined && html`<p><a href="${p.link.href}">${p.link.label}</a></p>`}
${p.detail !== undefined && html`<p class="small muted mono">${p.detail}</p>`}`
  return layout({ title: p.title, body })
}

export function confirmPage(p: ConfirmPageData): string {
  // `confirm` marks the second step: a post without it (a stale page's one-click form) only asks the question again.
  const body = html`<h1>${p.question}</h1>
<p>${p.consequence}</p>
<form method="post" action="${p.action}">
${csrfField(p.csrf)}
<input type="hidden" name="confirm" value="yes">
<div class="actions">
<a class="button secondary" href="${p.cancelHref}">Cancel</a>
<button type="submit" class="destructive">${p.confirmLabel}</button>
</div>
</form>`
  return layout({ title: p.question, body })
}

function keyStatus(k: AccountKey, now: number): 'active' | 'revoked' | 'expired' {
  if (k.revokedAt !== null) return 'revoked'
  if (k.expiresAt !== null && k.expiresAt <= now) return 'expired'
  return 'active'
}

/**
 * Rotate and Revoke lead to a confirmation page (a GET: showing the question changes nothing); the change itself is
 * that page's form. Cells carry `data-label`, which the narrow layout shows beside each value (STYLESHEET).
 */
function keyRow(k: AccountKey, now: number): SafeHtml {
  const status = keyStatus(k, now)
  const id = encodeURIComponent(k.id)
  const actions =
    status === 'active'
      ? html`<a class="button secondary small" href="/account/keys/${id}/rotate">Rotate</a> <a class="button danger small" href="/account/keys/${id}/revoke">Revoke</a>`
      : ''
  const expiry = status === 'active' && k.expiresAt !== null ? html`<br><span class="muted">expires ${formatDate(k.expiresAt)}</span>` : ''
  return html`<tr data-key-id="${k.id}">
<td data-label="Name">${k.name}<br><span class="mono muted">${k.displayPrefix}…</span></td>
<td data-label="Organization">${k.organizationName}</td>
<td data-label="Scopes" class="mono wrap">${k.scopes}</td>
<td data-label="Created">${formatDate(k.createdAt)}</td>
<td data-label="Last used">${formatDate(k.lastUsedAt)}</td>
<td data-label="Status" class="wrap"><span class="status-${status}">${status}</span>${expiry}</td>
<td class="row-actions">${actions}</td>
</tr>
`
}

function clientRow(c: AccountClient): SafeHtml {
  return html`<tr data-client-id="${c.clientId}">
<td data-label="Application">${c.clientHost !== undefined ? html`${c.clientHost} <span class="small muted">(client document; calls itself ${c.clientName})</span>` : c.clientName}<br><span class="mono muted">${c.clientId}</span></td>
<td data-label="Organization">${c.organizationName}</td>
<td data-label="Scopes" class="mono wrap">${c.scopes}</td>
<td data-label="Authorized">${formatDate(c.authorizedAt)}</td>
<td data-label="Last used">${formatDate(c.lastUsedAt)}</td>
<td class="row-actions"><a class="button danger small" href="/account/clients/${encodeURIComponent(c.clientId)}/revoke">Revoke access</a></td>
</tr>
`
}

/** An organization as an `<option>`, which holds text only. */
function membershipLabel(m: AccountMembership): string {
  return `${m.organizationName} (${m.organizationSlug}) · ${m.role}`
}

function membershipOrganization(m: AccountMembership): SafeHtml {
  return organization(m.organizationName, m.organizationSlug, m.role)
}

function createKeyForm(p: AccountPageData): SafeHtml {
  const [first, ...others] = p.memberships
  if (first === undefined) return html`<p class="muted">You need to be a member of an organization to create a key.</p>`
  const membership =
    others.length === 0
      ? onlyOrganization(first.membershipId, membershipOrganization(first))
      : html`<label for="key-membership">Organization</label>
<select id="key-membership" name="membership">
${p.memberships.map((m) => html`<option value="${m.membershipId}">${membershipLabel(m)}</option>
`)}</select>`
  return html`<form method="post" action="/account/keys">
${csrfField(p.csrf)}
<label for="key-name">Name</label>
<input id="key-name" name="name" type="text" required maxlength="100" autocomplete="off">
${membership}
<fieldset>
<legend>Scopes</legend>
<label class="choice"><input type="checkbox" name="scope" value="mcp:read" checked><span><span class="mono">mcp:read</span>: list and read</span></label>
<label class="choice"><input type="checkbox" name="scope" value="mcp:write"><span><span class="mono">mcp:write</span>: create, change and delete</span></label>
</fieldset>
<button type="submit">Create key</button>
</form>`
}

export function accountPage(p: AccountPageData): string {
  const now = p.now ?? Date.now()
  const body = html`<div class="header">
<h1>Your account</h1>
<form method="post" action="/account/signout" class="inline">${csrfField(p.csrf)}<button type="submit" class="secondary small">Sign out</button></form>
</div>
<p>Signed in as <strong>${p.userEmail}</strong></p>
${p.notice !== undefined && html`<div class="notice" role="status">${p.notice}</div>`}
${
  p.memberships.length > 0 &&
  html`<ul class="small">
${p.memberships.map((m) => html`<li>${membershipOrganization(m)}</li>
`)}</ul>`
}
<h2>API keys</h2>
${
  p.newKey !== undefined &&
  html`<div class="notice" role="status">
<strong>Copy your new key now — it will not be shown again</strong>
<p class="small">Name: ${p.newKey.name}</p>
${copyable('new-key', 'secret', p.newKey.key, 'Copy key')}
</div>`
}
${
  p.keys.length === 0
    ? html`<p class="muted">You have no API keys.</p>`
    : html`<div class="table-wrap"><table class="stack" id="keys">
<thead><tr><th>Name and prefix</th><th>Organization</th><th>Scopes</th><th>Created</th><th>Last used</th><th>Status</th><th><span class="visually-hidden">Actions</span></th></tr></thead>
<tbody>
${p.keys.map((k) => keyRow(k, now))}</tbody>
</table></div>`
}
<h2>Create a key</h2>
${createKeyForm(p)}
<h2>Authorized applications</h2>
${
  p.clients.length === 0
    ? html`<p class="muted">No applications are authorized to use your account.</p>`
    : html`<div class="table-wrap"><table class="stack" id="clients">
<thead><tr><th>Application</th><th>Organization</th><th>Scopes</th><th>Authorized</th><th>Last used</th><th><span class="visually-hidden">Actions</span></th></tr></thead>
<tbody>
${p.clients.map((c) => clientRow(c))}</tbody>
</table></div>`
}`
  return layout({ title: 'Your account', body, wide: true, copy: p.newKey !== undefined })
}

import { createHash, randomBytes } from 'node:crypto'
import { createServer as createHttpServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { request } from 'undici'
import { OWNER_EMAIL, OWNER_PASSWORD, type TestServer } from './server.js'

export interface Pkce {
  verifier: string
  challenge: string
}

export function pkce(): Pkce {
  const verifier = randomBytes(32).toString('base64url')
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') }
}

export interface RegisteredClient {
  client_id: string
  redirect_uris: string[]
  grant_types: string[]
  scope: string
  [key: string]: unknown
}

export async function registerClient(server: TestServer, metadata: Record<string, unknown> = {}): Promise<RegisteredClient> {
  const res = await request(`${server.url}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: 'Test client', redirect_uris: ['http://127.0.0.1:9999/callback'], ...metadata }),
  })
  const body = await res.body.json() as RegisteredClient
  if (res.statusCode !== 201) throw new Error(`registration failed: ${res.statusCode} ${JSON.stringify(body)}`)
  return body
}

export function authorizeUrl(server: TestServer, client: RegisteredClient, p: Pkce, overrides: Record<string, string | null> = {}): string {
  const params: Record<string, string | null> = {
    response_type: 'code',
    client_id: client.client_id,
    redirect_uri: client.redirect_uris[0]!,
    scope: 'mcp:read mcp:write',
    state: randomBytes(12).toString('base64url'),
    code_challenge: p.challenge,
    code_challenge_method: 'S256',
    resource: server.url,
    ...overrides,
  }
  const q = new URLSearchParams()
  for (const [k, v] of Object.entries(params)) if (v !== null) q.append(k, v)
  return `${server.url}/oauth/authorize?${q}`
}

/** A minimal cookie-keeping browser over undici: enough to walk the server's own pages, with a real browser's headers. */
export class FormBrowser {
  readonly cookies = new Map<string, string>()

  constructor(readonly origin: string) {}

  async get(url: string) {
    return this.#send('GET', url)
  }

  async post(url: string, fields: Record<string, string>) {
    return this.#send('POST', url, new URLSearchParams(fields).toString())
  }

  async #send(method: string, url: string, body?: string) {
    const headers: Record<string, string> = {}
    if (this.cookies.size > 0) headers.cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ')
    if (body !== undefined) {
      headers['content-type'] = 'application/x-www-form-urlencoded'
      // What Chromium sends for a form post from a page on `origin` with Referrer-Policy: no-referrer.
      headers.origin = 'null'
      headers['sec-fetch-site'] = new URL(url, this.origin).origin === this.origin ? 'same-origin' : 'cross-site'
    }
    const res = await request(new URL(url, this.origin).href, { method, headers, ...(body !== undefined ? { body } : {}) })
    const setCookie = res.headers['set-cookie']
    for (const line of Array.isArray(setCookie) ? setCookie : setCookie ? [setCookie] : []) {
      const [pair] = line.split(';')
      const eq = pair!.indexOf('=')
      const name = pair!.slice(0, eq)
      const value = pair!.slice(eq + 1)
      if (value === '' || /Max-Age=0/i.test(line)) this.cookies.delete(name)
      else this.cookies.set(name, value)
    }
    const text = await res.body.text()
    return { status: res.statusCode, headers: res.headers, text, location: typeof res.headers.location === 'string' ? res.headers.location : undefined }
  }
}

export function formValue(page: string, name: string): string | undefined {
  const m = new RegExp(`name="${name}"[^>]*value="([^"]*)"`).exec(page) ?? new RegExp(`value="([^"]*)"[^>]*name="${name}"`).exec(page)
  return m?.[1]?.replace(/&amp;/g, '&').replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>')
}

export function formAction(page: string): string {
  const m = /<form[^>]*action="([^"]+)"/.exec(page)
  if (!m) throw new Error('no form on the page')
  return m[1]!.replace(/&amp;/g, '&')
}

/**
 * Walks authorize → sign-in → consent with the given decision, as a person would, and returns the final redirect
 * (to the client) parsed.
 */
export async function browserAuthorize(
  server: TestServer,
  url: string,
  options: { email?: string; password?: string; decision?: 'approve' | 'deny'; membership?: string; browser?: FormBrowser } = {},
): Promise<{ redirect: URL; browser: FormBrowser }> {
  const browser = options.browser ?? new FormBrowser(server.url)
  const start = await browser.get(url)
  if (start.status !== 303 || !start.location) throw new Error(`authorize answered ${start.status}: ${start.text.slice(0, 300)}`)
  if (!start.location.startsWith('/oauth/interaction/')) return { redirect: new URL(start.location), browser }
  let page = await browser.get(start.location)
  if (page.text.includes('name="password"')) {
    const signin = await browser.post(formAction(page.text), {
      csrf: formValue(page.text, 'csrf') ?? '',
      email: options.email ?? OWNER_EMAIL,
      password: options.password ?? OWNER_PASSWORD,
    })
    if (signin.status !== 303) throw new Error(`sign-in answered ${signin.status}`)
    page = await browser.get(signin.location!)
  }
  if (page.status !== 200) throw new Error(`consent page answered ${page.status}: ${page.text.slice(0, 300)}`)
  const membership = options.membership ?? formValue(page.text, 'membership') ?? ''
  const consent = await browser.post(formAction(page.text), { csrf: formValue(page.text, 'csrf') ?? '', decision: options.decision ?? 'approve', membership })
  if (consent.status !== 303 || !consent.location) throw new Error(`consent answered ${consent.status}: ${consent.text.slice(0, 300)}`)
  return { redirect: new URL(consent.location), browser }
}

export async function tokenRequest(server: TestServer, fields: Record<string, string>, headers: Record<string, string> = {}) {
  const res = await request(`${server.url}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(fields).toString(),
  })
  const text = await res.body.text()
  return { status: res.statusCode, headers: res.headers, json: text ? JSON.parse(text) : undefined }
}

export async function revokeRequest(server: TestServer, fields: Record<string, string>) {
  const res = await request(`${server.url}/oauth/revoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields).toString(),
  })
  const text = await res.body.text()
  return { status: res.statusCode, json: text ? JSON.parse(text) : undefined }
}

/** Register, authorize in the form browser, exchange: the tokens of a full code flow. */
export async function oauthTokens(server: TestServer, options: { scope?: string; metadata?: Record<string, unknown> } = {}) {
  const client = await registerClient(server, options.metadata)
  const p = pkce()
  const url = authorizeUrl(server, client, p, options.scope ? { scope: options.scope } : {})
  const { redirect } = await browserAuthorize(server, url)
  const code = redirect.searchParams.get('code')
  if (!code) throw new Error(`no code in ${redirect.href}`)
  const res = await tokenRequest(server, { grant_type: 'authorization_code', code, redirect_uri: client.redirect_uris[0]!, client_id: client.client_id, code_verifier: p.verifier, resource: server.url })
  if (res.status !== 200) throw new Error(`token exchange failed: ${res.status} ${JSON.stringify(res.json)}`)
  return { client, pkce: p, code, tokens: res.json as { access_token: string; refresh_token: string; expires_in: number; scope: string; token_type: string } }
}

/** A redirect target for browser flows: answers every request with 200 "done"; its `/callback` URL. */
export async function callbackServer(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const server = createHttpServer((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('done'))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => {
    server.closeAllConnections()
    server.close(() => resolve())
  }))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback`
}

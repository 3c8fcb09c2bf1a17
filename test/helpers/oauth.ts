import { createHash, randomBytes } from 'node:crypto'
import { createServer as createHttpServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { request } from 'undici'
import { FormBrowser, walkAuthorization } from '../../scripts/lib/form-browser.js'
import { OWNER_EMAIL, OWNER_PASSWORD, type TestServer } from './server.js'

export { FormBrowser, formAction, formValue } from '../../scripts/lib/form-browser.js'

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

/**
 * Walks authorize → sign-in → consent with the given decision, as a person would (the owner unless told otherwise),
 * and returns the final redirect (to the client) parsed.
 */
export async function browserAuthorize(
  server: TestServer,
  url: string,
  options: { email?: string; password?: string; decision?: 'approve' | 'deny'; membership?: string; browser?: FormBrowser } = {},
): Promise<{ redirect: URL; browser: FormBrowser }> {
  return walkAuthorization(server.url, url, { ...options, email: options.email ?? OWNER_EMAIL, password: options.password ?? OWNER_PASSWORD })
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

/**
 * Dynamic client registration (RFC 7591) over HTTP: 201 with the server-chosen client, every refusal as a 400 OAuth
 * body with the right code, the body limit, and the headers of the endpoint.
 */
import t, { type Test } from 'tap'
import { request } from 'undici'
import type { Config } from '../../src/config.js'
import { startServer, type TestServer } from '../helpers/server.js'

type Headers = Record<string, string | string[] | undefined>

interface Reply {
  status: number
  headers: Headers
  json: any
}

const GOOD = {
  client_name: 'Registration test',
  redirect_uris: ['http://127.0.0.1:43117/callback'],
  grant_types: ['authorization_code', 'refresh_token'],
  response_types: ['code'],
  token_endpoint_auth_method: 'none',
  scope: 'mcp:read mcp:write',
}

async function register(server: TestServer, body: unknown, contentType = 'application/json'): Promise<Reply> {
  const res = await request(`${server.url}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': contentType },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  })
  const text = await res.body.text()
  let json: unknown
  try {
    json = text ? JSON.parse(text) : undefined
  } catch {
    json = undefined
  }
  return { status: res.statusCode, headers: res.headers as Headers, json }
}

/**
 * The contract limits registration to 10 per hour per IP. Every test here comes from 127.0.0.1, so requests are spread
 * over fresh servers, a few per server, to stay valid once that limiter exists.
 */
function registrar(t: Test, config: Partial<Config> = {}) {
  let server: TestServer | undefined
  let used = 0
  return async (body: unknown, contentType?: string): Promise<Reply> => {
    if (!server || used >= 8) {
      server = await startServer(t, { config })
      used = 0
    }
    used++
    return register(server, body, contentType)
  }
}

function noStore(t: Test, headers: Headers, label: string): void {
  t.match(String(headers['cache-control']), /no-store/, `${label}: Cache-Control no-store`)
  t.equal(headers['access-control-allow-origin'], '*', `${label}: CORS for any origin`)
}

/** A refusal: status, the OAuth error body and nothing else in it, the right code. */
function refused(t: Test, res: Reply, status: number, code: string | string[], label: string): void {
  t.equal(res.status, status, `${label}: ${status}`)
  t.match(String(res.headers['content-type']), /^application\/json/, `${label}: JSON`)
  t.strictSame(Object.keys(res.json ?? {}).sort(), ['error', 'error_description'], `${label}: OAuth error body`)
  if (Array.isArray(code)) t.ok(code.includes(res.json?.error), `${label}: error is one of ${code.join(', ')} (got ${res.json?.error})`)
  else t.equal(res.json?.error, code, `${label}: ${code}`)
  t.type(res.json?.error_description, 'string', `${label}: error_description is a string`)
  t.ok(String(res.json?.error_description).length > 0, `${label}: error_description is not empty`)
  noStore(t, res.headers, label)
}

t.test('a valid registration is answered 201 with the server-chosen client', async (t) => {
  const server = await startServer(t)
  const before = Math.floor(Date.now() / 1000)
  const res = await register(server, GOOD)
  const after = Math.ceil(Date.now() / 1000)
  t.equal(res.status, 201)
  t.match(String(res.headers['content-type']), /^application\/json/)
  noStore(t, res.headers, 'registration')
  const c = res.json
  t.match(c.client_id, /^mcp_[A-Za-z0-9_-]+$/, 'client_id begins with mcp_')
  t.ok(Number.isInteger(c.client_id_issued_at), 'client_id_issued_at is an integer')
  t.ok(c.client_id_issued_at >= before && c.client_id_issued_at <= after, `client_id_issued_at is Unix time in seconds (${c.client_id_issued_at})`)
  t.equal(c.pkce_required, true)
  t.equal(c.client_name, GOOD.client_name)
  t.strictSame(c.redirect_uris, GOOD.redirect_uris)
  t.strictSame(c.grant_types, GOOD.grant_types)
  t.strictSame(c.response_types, ['code'])
  t.equal(c.token_endpoint_auth_method, 'none')
  t.equal(c.scope, 'mcp:read mcp:write')
  t.equal(c.client_secret, undefined, 'no secret is issued')

  const second = await register(server, GOOD)
  t.equal(second.status, 201)
  t.not(second.json.client_id, c.client_id, 'each registration gets its own client_id')

  const minimal = await register(server, { redirect_uris: ['https://app.example.com/oauth/callback', 'http://[::1]/cb', 'http://localhost:8080/cb'] })
  t.equal(minimal.status, 201, 'only redirect_uris is required')
  t.strictSame(minimal.json.redirect_uris, ['https://app.example.com/oauth/callback', 'http://[::1]/cb', 'http://localhost:8080/cb'], 'https and every loopback form are accepted, kept as sent')
  t.strictSame(minimal.json.response_types, ['code'])
  t.equal(minimal.json.token_endpoint_auth_method, 'none')
  t.type(minimal.json.scope, 'string')

  const narrow = await register(server, { ...GOOD, grant_types: ['authorization_code'], scope: 'mcp:read' })
  t.equal(narrow.status, 201)
  t.strictSame(narrow.json.grant_types, ['authorization_code'], 'a client may register without refresh_token')
  t.equal(narrow.json.scope, 'mcp:read', 'and with a narrower scope')
})

t.test('unknown fields are stripped and client-chosen ids or secrets ignored', async (t) => {
  const server = await startServer(t)
  const res = await register(server, {
    ...GOOD,
    client_id: 'mcp_chosen_by_the_client',
    client_secret: 'hunter2',
    client_id_issued_at: 1,
    pkce_required: false,
    software_statement: 'eyJ...',
    x_custom: { nested: true },
  })
  t.equal(res.status, 201)
  t.not(res.json.client_id, 'mcp_chosen_by_the_client', 'the server chooses the client_id')
  t.not(res.json.client_id_issued_at, 1)
  t.equal(res.json.pkce_required, true, 'PKCE cannot be switched off')
  t.strictSame(
    Object.keys(res.json).sort(),
    ['client_id', 'client_id_issued_at', 'client_name', 'grant_types', 'pkce_required', 'redirect_uris', 'response_types', 'scope', 'token_endpoint_auth_method'],
    'only the known fields come back',
  )

  // A literal __proto__ key (only expressible in raw JSON) is refused outright rather than merged anywhere.
  const poisoned = await register(server, `{"redirect_uris":["https://app.example.com/cb"],"__proto__":{"polluted":true}}`)
  refused(t, poisoned, 400, ['invalid_client_metadata', 'invalid_request'], '__proto__ in the body')
  t.equal(({} as Record<string, unknown>).polluted, undefined, 'no prototype pollution')
})

t.test('unacceptable redirect URIs are invalid_redirect_uri', async (t) => {
  const reg = registrar(t)
  const cases: Array<[string, unknown]> = [
    ['http on a non-loopback host', ['http://app.example.com/callback']],
    ['javascript:', ['javascript:alert(1)']],
    ['data:', ['data:text/html,<script>alert(1)</script>']],
    ['file:', ['file:///etc/passwd']],
    ['a fragment', ['https://app.example.com/callback#frag']],
    ['an empty fragment', ['http://127.0.0.1:8080/callback#']],
    ['userinfo', ['https://user:pass@app.example.com/callback']],
    ['userinfo on loopback', ['http://evil@127.0.0.1/callback']],
    ['a private-use scheme the operator did not allow', ['cursor://anysphere.cursor-retrieval/oauth/callback']],
    ['an upper-case scheme', ['HTTP://localhost/callback']],
    ['an upper-case host', ['https://App.Example.com/callback']],
    ['a relative URI', ['/callback']],
    ['an empty list', []],
    ['missing redirect_uris', undefined],
    ['one good, one bad', ['https://app.example.com/cb', 'http://evil.example/cb']],
  ]
  for (const [label, uris] of cases) {
    const body: Record<string, unknown> = { ...GOOD }
    if (uris === undefined) delete body.redirect_uris
    else body.redirect_uris = uris
    refused(t, await reg(body), 400, 'invalid_redirect_uri', label)
  }
})

t.test('a private-use scheme is accepted when the operator allows it', async (t) => {
  const reg = registrar(t, { redirectSchemes: ['cursor'] })
  const ok = await reg({ ...GOOD, redirect_uris: ['cursor://anysphere.cursor-retrieval/oauth/user-service/callback'] })
  t.equal(ok.status, 201, 'cursor:// with redirectSchemes [cursor]')
  t.strictSame(ok.json.redirect_uris, ['cursor://anysphere.cursor-retrieval/oauth/user-service/callback'])
  refused(t, await reg({ ...GOOD, redirect_uris: ['vscode://vscode.github-authentication/did-authenticate'] }), 400, 'invalid_redirect_uri', 'another private scheme stays refused')
  refused(t, await reg({ ...GOOD, redirect_uris: ['cursor://x/cb#f'] }), 400, 'invalid_redirect_uri', 'an allowed scheme with a fragment')
  refused(t, await reg({ ...GOOD, redirect_uris: ['javascript://x/%0aalert(1)'] }), 400, 'invalid_redirect_uri', 'javascript: whatever the configuration')
})

t.test('invalid metadata is invalid_client_metadata', async (t) => {
  const reg = registrar(t)
  const cases: Array<[string, unknown]> = [
    ['a JSON array body', []],
    ['a JSON null body', null],
    ['a JSON string body', 'just a string'],
    ['a JSON number body', 42],
    ['token_endpoint_auth_method client_secret_basic', { ...GOOD, token_endpoint_auth_method: 'client_secret_basic' }],
    ['token_endpoint_auth_method client_secret_post', { ...GOOD, token_endpoint_auth_method: 'client_secret_post' }],
    ['grant_types [implicit]', { ...GOOD, grant_types: ['implicit'] }],
    ['grant_types without authorization_code', { ...GOOD, grant_types: ['refresh_token'] }],
    ['grant_types with client_credentials', { ...GOOD, grant_types: ['authorization_code', 'client_credentials'] }],
    ['an unknown scope', { ...GOOD, scope: 'mcp:read mcp:admin' }],
    ['response_types [token]', { ...GOOD, response_types: ['token'] }],
    ['response_types [code, token]', { ...GOOD, response_types: ['code', 'token'] }],
    ['client_name not a string', { ...GOOD, client_name: 42 }],
    ['grant_types not an array', { ...GOOD, grant_types: 'authorization_code' }],
    ['scope not a string', { ...GOOD, scope: ['mcp:read'] }],
    ['redirect_uris not an array', { ...GOOD, redirect_uris: 'https://app.example.com/cb' }],
    ['a redirect URI not a string', { ...GOOD, redirect_uris: [42] }],
    ['token_endpoint_auth_method not a string', { ...GOOD, token_endpoint_auth_method: ['none'] }],
    ['client_name with control characters', { ...GOOD, client_name: 'Evil\u202eClient' }],
  ]
  for (const [label, body] of cases) {
    // A bare string body must still go out as JSON text, not as the raw string.
    refused(t, await reg(typeof body === 'string' ? JSON.stringify(body) : body), 400, 'invalid_client_metadata', label)
  }
})

t.test('a body over 64 KiB is 413 with an OAuth body; just under is fine', async (t) => {
  const reg = registrar(t)
  const big = JSON.stringify({ ...GOOD, padding: 'x'.repeat(64 * 1024) })
  const res = await reg(big)
  t.equal(res.status, 413)
  t.strictSame(Object.keys(res.json ?? {}).sort(), ['error', 'error_description'], 'OAuth error body')
  t.equal(res.json?.error, 'invalid_request')
  noStore(t, res.headers, '413')

  const near = JSON.stringify({ ...GOOD, padding: 'x'.repeat(60 * 1024) })
  t.ok(Buffer.byteLength(near) < 64 * 1024)
  const ok = await reg(near)
  t.equal(ok.status, 201, 'a 60 KiB body is accepted (unknown field stripped)')
  t.equal(ok.json.padding, undefined)
})

t.test('only application/json bodies are registered', async (t) => {
  const reg = registrar(t)
  refused(t, await reg(JSON.stringify(GOOD), 'text/plain'), 400, 'invalid_client_metadata', 'text/plain carrying JSON')
  refused(t, await reg(new URLSearchParams({ client_name: 'x', redirect_uris: 'https://app.example.com/cb' }).toString(), 'application/x-www-form-urlencoded'), 400, 'invalid_client_metadata', 'a form body')
  const xml = await reg('<client/>', 'application/xml')
  t.ok(xml.status === 400 || xml.status === 415, `application/xml: 400 or 415 (got ${xml.status})`)
  refused(t, xml, xml.status, ['invalid_client_metadata', 'invalid_request'], 'application/xml')
  const broken = await reg('{"redirect_uris": [', 'application/json')
  refused(t, broken, 400, ['invalid_client_metadata', 'invalid_request'], 'malformed JSON')
  const ok = await reg(JSON.stringify(GOOD), 'application/json; charset=utf-8')
  t.equal(ok.status, 201, 'a charset parameter is fine')
})

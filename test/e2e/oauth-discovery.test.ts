/**
 * Discovery over HTTP: authorization-server metadata (RFC 8414), protected-resource metadata at the root and at /mcp
 * (RFC 9728), the JWKS, their CORS, and the 401 challenge on /mcp that points a client at them.
 */
import { createPublicKey, verify as verifySignature } from 'node:crypto'
import t, { type Test } from 'tap'
import { request } from 'undici'
import { initializeMessage, post } from '../helpers/mcp.js'
import { oauthTokens } from '../helpers/oauth.js'
import { startServer } from '../helpers/server.js'

type Headers = Record<string, string | string[] | undefined>

async function get(url: string, headers: Record<string, string> = {}) {
  const res = await request(url, { method: 'GET', headers })
  const text = await res.body.text()
  const type = String(res.headers['content-type'] ?? '')
  return { status: res.statusCode, headers: res.headers as Headers, text, json: type.startsWith('application/json') && text ? JSON.parse(text) : undefined }
}

async function preflight(url: string, method: string) {
  const res = await request(url, {
    method: 'OPTIONS',
    headers: { origin: 'https://inspector.example', 'access-control-request-method': method, 'access-control-request-headers': 'content-type' },
  })
  await res.body.text()
  return { status: res.statusCode, headers: res.headers as Headers }
}

const requestIds = new Set<string>()

/** X-Service-MCP-Version (a date) and a fresh X-Request-Id on every response, errors and preflights included. */
function commonHeaders(t: Test, headers: Headers, label: string): void {
  t.match(String(headers['x-service-mcp-version']), /^\d{4}-\d{2}-\d{2}$/, `${label}: X-Service-MCP-Version is date-shaped`)
  const id = headers['x-request-id']
  t.ok(typeof id === 'string' && id.length > 0, `${label}: X-Request-Id present`)
  t.notOk(requestIds.has(String(id)), `${label}: X-Request-Id is unique`)
  requestIds.add(String(id))
}

function jsonDocument(t: Test, res: { status: number; headers: Headers; json: unknown }, label: string): void {
  t.equal(res.status, 200, `${label}: 200`)
  t.match(String(res.headers['content-type']), /^application\/json/, `${label}: JSON`)
  t.equal(res.headers['access-control-allow-origin'], '*', `${label}: readable from any origin`)
  t.equal(res.headers['access-control-allow-credentials'], undefined, `${label}: never with credentials`)
  commonHeaders(t, res.headers, label)
}

t.test('authorization-server metadata names every endpoint and requirement', async (t) => {
  const server = await startServer(t)
  const base = server.url
  const res = await get(`${base}/.well-known/oauth-authorization-server`)
  jsonDocument(t, res, 'AS metadata')
  const m = res.json
  t.equal(m.issuer, base, 'issuer is the base URL, byte for byte (no trailing slash)')
  t.equal(m.authorization_endpoint, `${base}/oauth/authorize`)
  t.equal(m.token_endpoint, `${base}/oauth/token`)
  t.equal(m.registration_endpoint, `${base}/oauth/register`)
  t.equal(m.revocation_endpoint, `${base}/oauth/revoke`)
  t.equal(m.jwks_uri, `${base}/.well-known/jwks.json`)
  t.strictSame(m.response_types_supported, ['code'])
  t.strictSame([...m.grant_types_supported].sort(), ['authorization_code', 'refresh_token'])
  t.strictSame(m.code_challenge_methods_supported, ['S256'], 'S256 only, never plain')
  t.strictSame(m.token_endpoint_auth_methods_supported, ['none'], 'public clients only')
  t.strictSame([...m.scopes_supported].sort(), ['mcp:read', 'mcp:write'])
  t.equal(m.authorization_response_iss_parameter_supported, true)

  // Every advertised endpoint is really served (an OPTIONS/POST answer that is not 404).
  for (const [name, method] of [['authorization_endpoint', 'GET'], ['token_endpoint', 'POST'], ['registration_endpoint', 'POST'], ['revocation_endpoint', 'POST']] as const) {
    const r = await request(m[name], { method, ...(method === 'POST' ? { headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: '' } : {}) })
    await r.body.text()
    t.not(r.statusCode, 404, `${name} is served`)
  }
  const jwks = await get(m.jwks_uri)
  t.equal(jwks.status, 200, 'jwks_uri is served')
})

t.test('protected-resource metadata at the root and at /mcp', async (t) => {
  const server = await startServer(t)
  const base = server.url
  const root = await get(`${base}/.well-known/oauth-protected-resource`)
  jsonDocument(t, root, 'PRM root')
  t.equal(root.json.resource, base, 'root PRM: resource is the base URL')
  t.strictSame(root.json.authorization_servers, [base], 'names this server as its authorization server')
  t.strictSame([...root.json.scopes_supported].sort(), ['mcp:read', 'mcp:write'])

  const mcp = await get(`${base}/.well-known/oauth-protected-resource/mcp`)
  jsonDocument(t, mcp, 'PRM /mcp')
  t.equal(mcp.json.resource, `${base}/mcp`, '/mcp PRM: resource is the MCP endpoint')
  t.strictSame(mcp.json.authorization_servers, [base])
  t.strictSame([...mcp.json.scopes_supported].sort(), ['mcp:read', 'mcp:write'])

  // The issuer named there serves its metadata at the RFC 8414 well-known path.
  const as = await get(`${mcp.json.authorization_servers[0]}/.well-known/oauth-authorization-server`)
  t.equal(as.json.issuer, mcp.json.authorization_servers[0], 'authorization_servers[0] is byte-identical to the issuer')
})

t.test('the JWKS publishes the public key that verifies issued access tokens', async (t) => {
  const server = await startServer(t)
  const res = await get(`${server.url}/.well-known/jwks.json`)
  jsonDocument(t, res, 'JWKS')
  const keys = res.json.keys as Array<Record<string, string>>
  t.ok(Array.isArray(keys) && keys.length >= 1, 'at least one key')
  for (const k of keys) {
    t.equal(k.kty, 'EC')
    t.equal(k.crv, 'P-256')
    t.equal(k.alg, 'ES256')
    t.equal(k.use, 'sig')
    t.type(k.kid, 'string')
    t.equal(k.d, undefined, 'no private component is published')
  }

  const { tokens } = await oauthTokens(server)
  const [h, p, s] = tokens.access_token.split('.') as [string, string, string]
  const header = JSON.parse(Buffer.from(h, 'base64url').toString('utf8'))
  const jwk = keys.find((k) => k.kid === header.kid)
  t.ok(jwk, 'the access token kid is in the JWKS')
  const key = createPublicKey({ key: { ...jwk! }, format: 'jwk' })
  const ok = verifySignature('sha256', Buffer.from(`${h}.${p}`), { key, dsaEncoding: 'ieee-p1363' }, Buffer.from(s, 'base64url'))
  t.ok(ok, 'the published key verifies the access token signature')
})

t.test('CORS preflights on the discovery documents and the machine endpoints', async (t) => {
  const server = await startServer(t)
  for (const path of ['/.well-known/oauth-authorization-server', '/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp', '/.well-known/jwks.json']) {
    const res = await preflight(`${server.url}${path}`, 'GET')
    t.ok(res.status === 204 || res.status === 200, `${path}: preflight succeeds (${res.status})`)
    t.equal(res.headers['access-control-allow-origin'], '*', `${path}: preflight allows any origin`)
    t.match(String(res.headers['access-control-allow-methods']), /\bGET\b/, `${path}: GET allowed`)
    t.equal(res.headers['access-control-allow-credentials'], undefined, `${path}: never with credentials`)
    commonHeaders(t, res.headers, `${path} preflight`)
  }
  for (const path of ['/oauth/register', '/oauth/token', '/oauth/revoke']) {
    const res = await preflight(`${server.url}${path}`, 'POST')
    t.ok(res.status === 204 || res.status === 200, `${path}: preflight succeeds (${res.status})`)
    t.equal(res.headers['access-control-allow-origin'], '*', `${path}: preflight allows any origin`)
    t.match(String(res.headers['access-control-allow-methods']), /\bPOST\b/, `${path}: POST allowed`)
    t.match(String(res.headers['access-control-allow-headers']), /content-type/i, `${path}: Content-Type allowed`)
    commonHeaders(t, res.headers, `${path} preflight`)
  }
})

t.test('every response carries the version and request id headers', async (t) => {
  const server = await startServer(t)
  const responses: Array<[string, Headers]> = []
  responses.push(['404', (await get(`${server.url}/no-such-path`)).headers])
  responses.push(['authorize error page', (await get(`${server.url}/oauth/authorize`)).headers])
  const token = await request(`${server.url}/oauth/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'grant_type=password' })
  await token.body.text()
  responses.push(['token error', token.headers as Headers])
  const reg = await request(`${server.url}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '[]' })
  await reg.body.text()
  responses.push(['register error', reg.headers as Headers])
  responses.push(['/mcp 401', (await post(server.mcpUrl, initializeMessage())).headers])
  for (const [label, headers] of responses) commonHeaders(t, headers, label)
})

t.test('a 401 from /mcp points at the /mcp protected-resource metadata, which is fetchable', async (t) => {
  const server = await startServer(t)
  const expected = `${server.url}/.well-known/oauth-protected-resource/mcp`

  const bare = await post(server.mcpUrl, initializeMessage())
  t.equal(bare.status, 401, 'no Authorization: 401')
  t.equal(bare.json.error.code, 'INVALID_TOKEN')
  const challenge = String(bare.headers['www-authenticate'] ?? '')
  t.match(challenge, /^Bearer /, 'a Bearer challenge')
  const m = /resource_metadata="([^"]+)"/.exec(challenge)
  t.ok(m, 'carries resource_metadata')
  t.equal(m?.[1], expected, 'resource_metadata names the /mcp PRM document')
  t.notMatch(challenge, /error=/, 'no error code when no credentials were sent (RFC 6750 §3.1)')

  const bad = await post(server.mcpUrl, initializeMessage(), { authorization: 'Bearer eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln' })
  t.equal(bad.status, 401, 'an invalid token: 401')
  t.match(String(bad.headers['www-authenticate']), /error="invalid_token"/, 'error="invalid_token" when a token was sent')
  t.match(String(bad.headers['www-authenticate']), `resource_metadata="${expected}"`)

  const prm = await get(m![1]!)
  t.equal(prm.status, 200, 'the PRM document in the challenge is fetchable')
  t.equal(prm.json.resource, server.mcpUrl, 'and names /mcp as the resource')
  const as = await get(`${prm.json.authorization_servers[0]}/.well-known/oauth-authorization-server`)
  t.equal(as.status, 200, 'from there the authorization server metadata is reachable')
})

/**
 * POST /oauth/revoke over HTTP (RFC 7009): revoked credentials end their sessions and streams; unknown and foreign
 * tokens get 200 with no effect; API keys are never touched through /oauth/*.
 */
import t, { type Test } from 'tap'
import { request } from 'undici'
import { callTool, initializeMessage, openSession, post } from '../helpers/mcp.js'
import { authorizeUrl, browserAuthorize, FormBrowser, pkce, registerClient, tokenRequest, type RegisteredClient } from '../helpers/oauth.js'
import { createMember } from '../helpers/seed.js'
import { startServer, type TestServer } from '../helpers/server.js'
import { openLive, type LiveStream } from '../helpers/stream.js'

type Headers = Record<string, string | string[] | undefined>

interface Tokens {
  access_token: string
  refresh_token: string
}

async function revoke(server: TestServer, fields: Record<string, string>) {
  const res = await request(`${server.url}/oauth/revoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields).toString(),
  })
  const text = await res.body.text()
  return { status: res.statusCode, headers: res.headers as Headers, json: text ? JSON.parse(text) : undefined }
}

async function setup(t: Test) {
  const server = await startServer(t, { config: { sessionSweepMs: 50 } })
  const browser = new FormBrowser(server.url)
  async function tokens(client?: RegisteredClient) {
    const c = client ?? (await registerClient(server))
    const p = pkce()
    const { redirect } = await browserAuthorize(server, authorizeUrl(server, c, p), { browser })
    const res = await tokenRequest(server, { grant_type: 'authorization_code', code: redirect.searchParams.get('code') ?? '', redirect_uri: c.redirect_uris[0]!, client_id: c.client_id, code_verifier: p.verifier })
    if (res.status !== 200) throw new Error(`exchange failed: ${res.status} ${JSON.stringify(res.json)}`)
    return { client: c, tokens: res.json as Tokens }
  }
  async function mcp(token: string) {
    const res = await post(server.mcpUrl, initializeMessage(), { authorization: `Bearer ${token}` })
    return { status: res.status, code: res.json?.error?.code as string | undefined }
  }
  async function stream(t: Test, headers: Record<string, string>): Promise<LiveStream> {
    const live = await openLive(server.mcpUrl, { method: 'GET', headers: { ...headers, accept: 'text/event-stream' } })
    t.teardown(() => live.close())
    t.equal(live.status, 200, 'a GET stream is open')
    return live
  }
  return { server, tokens, mcp, stream }
}

function revokedOk(t: Test, res: Awaited<ReturnType<typeof revoke>>, label: string): void {
  t.equal(res.status, 200, `${label}: 200`)
  t.match(String(res.headers['cache-control']), /no-store/, `${label}: no-store`)
  t.equal(res.headers['access-control-allow-origin'], '*', `${label}: CORS for any origin`)
}

function oauthError(t: Test, res: Awaited<ReturnType<typeof revoke>>, status: number, code: string, label: string): void {
  t.equal(res.status, status, `${label}: ${status}`)
  t.strictSame(Object.keys(res.json ?? {}).sort(), ['error', 'error_description'], `${label}: OAuth error body`)
  t.equal(res.json?.error, code, `${label}: ${code}`)
  t.match(String(res.headers['cache-control']), /no-store/, `${label}: no-store`)
}

t.test('revoking an access token ends its sessions and streams', async (t) => {
  const { server, tokens, mcp, stream } = await setup(t)
  const { client, tokens: tok } = await tokens()
  const a = await openSession(server.mcpUrl, tok.access_token)
  const b = await openSession(server.mcpUrl, tok.access_token)
  const live = await stream(t, a.headers)
  const { tokens: other } = await tokens(client)
  const untouched = await openSession(server.mcpUrl, other.access_token)

  revokedOk(t, await revoke(server, { token: tok.access_token, client_id: client.client_id }), 'revoke access token')
  await live.ended(2000)
  t.ok(live.endedByServer, 'the open GET stream was closed by the server')
  t.equal(await server.app.sessions.get(a.sessionId), undefined, 'the session with the stream ended')
  t.equal(await server.app.sessions.get(b.sessionId), undefined, 'every session bound to the token ended')

  const refused = await post(server.mcpUrl, callTool('service_whoami'), a.headers)
  t.equal(refused.status, 401, 'the token on its old session: 401')
  t.equal(refused.json.error.code, 'TOKEN_REVOKED')
  t.match(String(refused.headers['www-authenticate']), /error="invalid_token"/)
  const again = await mcp(tok.access_token)
  t.equal(again.status, 401, 'initialize with it: 401')
  t.equal(again.code, 'TOKEN_REVOKED')

  t.equal((await post(server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'ping' }, untouched.headers)).status, 200, 'another grant of the same client is untouched')
  revokedOk(t, await revoke(server, { token: tok.access_token, client_id: client.client_id }), 'revoking it again')
})

t.test('revoking a refresh token revokes its family with every access token', async (t) => {
  const { server, tokens, mcp, stream } = await setup(t)
  const { client, tokens: first } = await tokens()
  const rotated = await tokenRequest(server, { grant_type: 'refresh_token', refresh_token: first.refresh_token, client_id: client.client_id })
  t.equal(rotated.status, 200)
  const second = rotated.json as Tokens
  const session = await openSession(server.mcpUrl, second.access_token)
  const live = await stream(t, session.headers)

  revokedOk(t, await revoke(server, { token: second.refresh_token, client_id: client.client_id, token_type_hint: 'refresh_token' }), 'revoke refresh token')
  for (const [label, tok] of [['first', first], ['second', second]] as const) {
    const r = await mcp(tok.access_token)
    t.equal(r.status, 401, `${label} access token: 401`)
    t.equal(r.code, 'TOKEN_REVOKED', `${label} access token: TOKEN_REVOKED`)
  }
  const refresh = await tokenRequest(server, { grant_type: 'refresh_token', refresh_token: second.refresh_token, client_id: client.client_id })
  t.equal(refresh.status, 400)
  t.equal(refresh.json.error, 'invalid_grant', 'the revoked refresh token is invalid_grant')
  await live.ended(2000)
  t.ok(live.endedByServer, 'the stream of a family session was closed by the server')
  t.equal(await server.app.sessions.get(session.sessionId), undefined, 'the session ended')
})

t.test('a wrong token_type_hint does not stop the revocation', async (t) => {
  const { server, tokens, mcp } = await setup(t)
  const { client, tokens: tok } = await tokens()
  revokedOk(t, await revoke(server, { token: tok.access_token, client_id: client.client_id, token_type_hint: 'refresh_token' }), 'access token hinted as refresh token')
  t.equal((await mcp(tok.access_token)).code, 'TOKEN_REVOKED')
})

t.test('unknown tokens: 200, nothing happens', async (t) => {
  const { server, tokens, mcp } = await setup(t)
  const { client, tokens: tok } = await tokens()
  for (const [label, token] of [
    ['random text', 'not-a-token'],
    ['an unknown refresh token', 'mcp_rt_' + 'A'.repeat(43)],
    ['a malformed JWT', 'eyJhbGciOiJFUzI1NiJ9.eyJ9.c2ln'],
    ['a JWT signed by nobody here', tok.access_token.replace(/\.[^.]+$/, '.' + 'A'.repeat(86))],
  ] as const) {
    revokedOk(t, await revoke(server, { token, client_id: client.client_id }), label)
  }
  t.equal((await mcp(tok.access_token)).status, 200, 'the real token still works')
})

t.test("another client's tokens: 200, and they keep working", async (t) => {
  const { server, tokens, mcp } = await setup(t)
  const { client, tokens: tok } = await tokens()
  const other = await registerClient(server)
  revokedOk(t, await revoke(server, { token: tok.access_token, client_id: other.client_id }), "another client's access token")
  revokedOk(t, await revoke(server, { token: tok.refresh_token, client_id: other.client_id }), "another client's refresh token")
  t.equal((await mcp(tok.access_token)).status, 200, 'the access token still works')
  const refresh = await tokenRequest(server, { grant_type: 'refresh_token', refresh_token: tok.refresh_token, client_id: client.client_id })
  t.equal(refresh.status, 200, 'the refresh token still works')
})

t.test('an API key at /oauth/revoke: 200, and the key still works', async (t) => {
  const { server, mcp } = await setup(t)
  const client = await registerClient(server)
  const member = await createMember(server, { role: 'viewer' })
  const session = await openSession(server.mcpUrl, member.key)
  revokedOk(t, await revoke(server, { token: member.key, client_id: client.client_id }), 'an API key')
  revokedOk(t, await revoke(server, { token: server.apiKey, client_id: client.client_id }), "the owner's API key")
  t.equal((await mcp(member.key)).status, 200, 'the API key still works')
  t.equal((await mcp(server.apiKey)).status, 200, "the owner's key still works")
  t.equal((await post(server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'ping' }, session.headers)).status, 200, 'and its session is untouched')
  t.equal((await server.app.repos.apiKeys.byId(member.keyId))?.revokedAt ?? null, null, 'the key is not revoked in the database')
})

t.test('missing token: invalid_request; unknown client: 401 invalid_client', async (t) => {
  const { server, tokens, mcp } = await setup(t)
  const { client, tokens: tok } = await tokens()
  oauthError(t, await revoke(server, { client_id: client.client_id }), 400, 'invalid_request', 'missing token')
  oauthError(t, await revoke(server, { token: '', client_id: client.client_id }), 400, 'invalid_request', 'empty token')
  oauthError(t, await revoke(server, { token: tok.access_token, client_id: 'mcp_unknown' }), 401, 'invalid_client', 'unknown client')
  oauthError(t, await revoke(server, { token: tok.access_token, client_id: client.client_id, client_secret: 'x' }), 401, 'invalid_client', 'a client secret')
  t.equal((await mcp(tok.access_token)).status, 200, 'none of these revoked anything')

  const json = await request(`${server.url}/oauth/revoke`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: tok.access_token, client_id: client.client_id }) })
  const body = JSON.parse(await json.body.text())
  t.equal(json.statusCode, 400, 'a JSON body: 400')
  t.equal(body.error, 'invalid_request')
  t.equal((await mcp(tok.access_token)).status, 200, 'and it revoked nothing')
})

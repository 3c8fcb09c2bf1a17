/**
 * Interoperability: the official MCP TypeScript SDK client runs ITS OWN OAuth flow against the server (discovery from
 * the 401 challenge, dynamic registration, PKCE, `resource`, code exchange, refresh), with only the browser step (sign
 * in as the owner, approve) played by the test's form browser.
 */
import { randomBytes } from 'node:crypto'
import { auth, UnauthorizedError, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js'
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js'
import t, { type Test } from 'tap'
import { browserAuthorize } from '../helpers/oauth.js'
import { startServer, type TestServer } from '../helpers/server.js'

/** One HTTP request the SDK made, as seen by the fetch it was given. */
interface Sent {
  method: string
  url: URL
  /** Form or JSON body, when there was one. */
  form?: URLSearchParams
  json?: Record<string, unknown>
  status?: number
  wwwAuthenticate?: string | null
}

/** A fetch that records every request before passing it on to the real one. */
function recordingFetch(): { fetch: FetchLike; sent: Sent[] } {
  const sent: Sent[] = []
  const fetchFn: FetchLike = async (input, init) => {
    const entry: Sent = { method: (init?.method ?? 'GET').toUpperCase(), url: new URL(String(input)) }
    const body = init?.body
    if (body instanceof URLSearchParams) entry.form = new URLSearchParams(body)
    else if (typeof body === 'string') {
      try {
        const parsed = JSON.parse(body) as unknown
        if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) entry.json = parsed as Record<string, unknown>
      } catch {
        // not JSON: nothing to record
      }
    }
    sent.push(entry)
    const res = await fetch(input, init)
    entry.status = res.status
    entry.wwwAuthenticate = res.headers.get('www-authenticate')
    return res
  }
  return { fetch: fetchFn, sent }
}

/**
 * An in-memory OAuthClientProvider whose "browser" is the test's form browser: redirectToAuthorization walks sign-in
 * and consent and keeps the code from the final redirect, as a desktop client's loopback listener would.
 */
class TestProvider implements OAuthClientProvider {
  clientInfo: OAuthClientInformationMixed | undefined
  storedTokens: OAuthTokens | undefined
  verifier: string | undefined
  /** Every authorization URL the SDK built, and the redirect the browser came back with. */
  readonly authorizations: Array<{ url: URL; redirect: URL }> = []
  readonly savedTokens: OAuthTokens[] = []
  lastState: string | undefined
  /** The code of the last approved authorization, for finishAuth. */
  code: string | undefined

  /** The SDK sends `state` only when the provider has this method. */
  state?: () => string

  constructor(readonly server: TestServer, readonly port: number, options: { withState?: boolean } = {}) {
    if (options.withState !== false) {
      this.state = () => {
        this.lastState = `state-${randomBytes(12).toString('base64url')}`
        return this.lastState
      }
    }
  }

  get redirectUrl(): string {
    return `http://127.0.0.1:${this.port}/callback`
  }

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'SDK OAuth test client',
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      scope: 'mcp:read mcp:write',
    }
  }

  clientInformation() {
    return this.clientInfo
  }

  saveClientInformation(info: OAuthClientInformationMixed) {
    this.clientInfo = info
  }

  tokens() {
    return this.storedTokens
  }

  saveTokens(tokens: OAuthTokens) {
    this.storedTokens = tokens
    this.savedTokens.push(tokens)
  }

  async redirectToAuthorization(url: URL) {
    const { redirect } = await browserAuthorize(this.server, url.href)
    this.authorizations.push({ url, redirect })
    this.code = redirect.searchParams.get('code') ?? undefined
  }

  saveCodeVerifier(verifier: string) {
    this.verifier = verifier
  }

  codeVerifier(): string {
    if (!this.verifier) throw new Error('no code verifier saved')
    return this.verifier
  }
}

const FAST_FAIL = { maxReconnectionDelay: 100, initialReconnectionDelay: 10, reconnectionDelayGrowFactor: 1, maxRetries: 0 }

function connectable(server: TestServer, provider: TestProvider, fetchFn: FetchLike) {
  const transport = new StreamableHTTPClientTransport(new URL(server.mcpUrl), { authProvider: provider, fetch: fetchFn, reconnectionOptions: FAST_FAIL })
  const client = new Client({ name: 'sdk-oauth-test', version: '1.0.0' })
  return { client, transport }
}

/** Payload of a compact JWT, without verifying it (the server verifies; this only reads what the SDK stored). */
function jwtPayload(token: string): Record<string, unknown> {
  const part = token.split('.')[1]
  if (!part) throw new Error('not a JWT')
  return JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as Record<string, unknown>
}

interface Whoami {
  user: { email: string }
  role: string
  scopes: string[]
  credential: { kind: string; id: string; client_id?: string }
}

/** The SDK's full flow up to a connected client: 401 → discovery → registration → browser → finishAuth → connect. */
async function sdkSignIn(t: Test, server: TestServer, provider: TestProvider, fetchFn: FetchLike) {
  const first = connectable(server, provider, fetchFn)
  const err = await first.client.connect(first.transport).then(() => null, (e: unknown) => e)
  t.type(err, UnauthorizedError, 'the first connect stops at the authorization redirect')
  await first.client.close()
  t.ok(provider.code, 'the browser came back with a code')
  await first.transport.finishAuth(provider.code!)
  const second = connectable(server, provider, fetchFn)
  t.teardown(() => second.client.close())
  await second.client.connect(second.transport)
  return second
}

t.test('SDK client: its own OAuth flow, discovery, registration, tools and refresh', async (t) => {
  const server = await startServer(t)
  const { fetch: fetchFn, sent } = recordingFetch()
  const provider = new TestProvider(server, 45_123)
  const { client, transport } = await sdkSignIn(t, server, provider, fetchFn)

  // Discovery: the 401 challenge names the path-inserted protected-resource metadata, which names us as the AS.
  const challenge = sent.find((s) => s.url.pathname === '/mcp' && s.status === 401)
  t.ok(challenge, 'the first POST without a token got 401')
  t.equal(challenge?.wwwAuthenticate, `Bearer resource_metadata="${server.url}/.well-known/oauth-protected-resource/mcp"`)
  const gets = sent.filter((s) => s.method === 'GET').map((s) => s.url.pathname)
  t.ok(gets.includes('/.well-known/oauth-protected-resource/mcp'), 'fetched the protected-resource metadata of /mcp')
  t.ok(gets.includes('/.well-known/oauth-authorization-server'), 'fetched the authorization-server metadata')
  t.notOk(gets.includes('/.well-known/openid-configuration'), 'needed no OpenID fallback')

  // Dynamic registration with the provider's metadata.
  const registrations = sent.filter((s) => s.method === 'POST' && s.url.pathname === '/oauth/register')
  t.equal(registrations.length, 1, 'registered once')
  t.equal(registrations[0]!.status, 201)
  t.same(registrations[0]!.json?.redirect_uris, [provider.redirectUrl])
  t.equal(registrations[0]!.json?.token_endpoint_auth_method, 'none')
  const clientId = provider.clientInfo?.client_id
  t.type(clientId, 'string', 'the SDK saved the client id it was given')
  const row = await server.app.repos.oauthClients.byId(clientId!)
  t.ok(row, 'the registration is a client row on the server')
  t.equal(row?.name, 'SDK OAuth test client')
  t.same(row?.redirectUris, [provider.redirectUrl])
  t.same(row?.grantTypes, ['authorization_code', 'refresh_token'])
  t.equal(row?.scope, 'mcp:read mcp:write')

  // The authorization request the SDK built.
  t.equal(provider.authorizations.length, 1, 'one trip through the browser')
  const { url: authUrl, redirect } = provider.authorizations[0]!
  t.equal(authUrl.origin + authUrl.pathname, `${server.url}/oauth/authorize`, 'the authorization_endpoint from the metadata')
  t.equal(authUrl.searchParams.get('resource'), server.mcpUrl, 'resource is the PRM resource, sent verbatim')
  t.equal(authUrl.searchParams.get('code_challenge_method'), 'S256')
  t.equal(authUrl.searchParams.get('scope'), 'mcp:read mcp:write', 'scope from the PRM scopes_supported')
  t.equal(authUrl.searchParams.get('client_id'), clientId)
  t.equal(authUrl.searchParams.get('redirect_uri'), provider.redirectUrl)
  t.equal(redirect.origin + redirect.pathname, provider.redirectUrl, 'the browser came back to the redirect URI')
  t.equal(redirect.searchParams.get('state'), provider.lastState, 'state came back unchanged')
  t.equal(redirect.searchParams.get('iss'), server.url, 'iss (RFC 9207) names the server')

  // The code exchange.
  const tokenPosts = sent.filter((s) => s.method === 'POST' && s.url.pathname === '/oauth/token')
  t.equal(tokenPosts.length, 1, 'one token request so far')
  const exchange = tokenPosts[0]!.form!
  t.equal(tokenPosts[0]!.status, 200)
  t.equal(exchange.get('grant_type'), 'authorization_code')
  t.equal(exchange.get('resource'), server.mcpUrl, 'resource sent again at the token endpoint')
  t.equal(exchange.get('client_id'), clientId, 'public client: client_id in the body')
  t.notOk(exchange.has('client_secret'), 'no secret')
  t.equal(exchange.get('code_verifier'), provider.verifier)

  // What the SDK stored verifies on /mcp.
  const tokens = provider.storedTokens!
  t.ok(tokens, 'the SDK saved tokens')
  t.equal(tokens.token_type.toLowerCase(), 'bearer')
  t.match(tokens.refresh_token, /^mcp_rt_/)
  const claims = jwtPayload(tokens.access_token)
  t.equal(claims.aud, server.url, 'audience: this server, whatever form of resource was sent')
  t.equal(claims.client_id, clientId)
  t.equal(claims.scope, 'mcp:read mcp:write')

  const { tools } = await client.listTools()
  const names = tools.map((x) => x.name)
  t.ok(names.includes('service_whoami'), 'service_whoami listed')
  t.ok(names.includes('service_apps_list'), 'service_apps_list listed')

  const who = await client.callTool({ name: 'service_whoami', arguments: {} })
  t.equal(who.isError, false)
  const me = who.structuredContent as unknown as Whoami
  t.equal(me.credential.kind, 'oauth', 'the session runs on the OAuth access token')
  t.equal(me.credential.id, claims.jti, 'the token the provider stores is the one in use')
  t.equal(me.credential.client_id, clientId)
  t.equal(me.user.email, 'owner@example.com')
  t.equal(me.role, 'owner')
  t.same([...me.scopes].sort(), ['mcp:read', 'mcp:write'])

  const apps = await client.callTool({ name: 'service_apps_list', arguments: {} })
  t.equal(apps.isError, false)
  t.same((apps.structuredContent as { apps: unknown[] }).apps, [], 'no apps yet')

  // The session is bound to this access token: end it while the provider still holds that token.
  await transport.terminateSession()
  t.equal(transport.sessionId, undefined)

  // Refresh through the SDK's own entry point: auth() with stored tokens refreshes rather than redirecting.
  const before = provider.storedTokens!
  const result = await auth(provider, { serverUrl: new URL(server.mcpUrl), fetchFn })
  t.equal(result, 'AUTHORIZED', 'auth() refreshed without a browser')
  t.equal(provider.authorizations.length, 1, 'no second trip through the browser')
  const refreshPost = sent.filter((s) => s.method === 'POST' && s.url.pathname === '/oauth/token').at(-1)!
  t.equal(refreshPost.form?.get('grant_type'), 'refresh_token')
  t.equal(refreshPost.form?.get('refresh_token'), before.refresh_token)
  t.equal(refreshPost.form?.get('resource'), server.mcpUrl)
  t.equal(refreshPost.status, 200)
  const after = provider.storedTokens!
  t.not(after.access_token, before.access_token, 'a new access token')
  t.not(after.refresh_token, before.refresh_token, 'the refresh token was rotated')
  t.match(after.refresh_token, /^mcp_rt_/)
  t.equal(provider.savedTokens.length, 2, 'tokens saved twice: the exchange and the refresh')

  // The refreshed token opens a new session.
  const again = connectable(server, provider, fetchFn)
  t.teardown(() => again.client.close())
  await again.client.connect(again.transport)
  const who2 = (await again.client.callTool({ name: 'service_whoami', arguments: {} })).structuredContent as unknown as Whoami
  t.equal(who2.credential.kind, 'oauth')
  t.equal(who2.credential.id, jwtPayload(after.access_token).jti, 'the new session runs on the refreshed token')
  t.not(who2.credential.id, me.credential.id)

  await again.transport.terminateSession()
})

t.test('SDK client: an expired access token is refreshed on 401, then a new session works', async (t) => {
  // Tokens live 2-3 s (exp is whole seconds): long enough to connect, short enough to wait out.
  const server = await startServer(t, { config: { accessTokenTtlMs: 3000 } })
  const { fetch: fetchFn, sent } = recordingFetch()
  const provider = new TestProvider(server, 45_124)
  const { client } = await sdkSignIn(t, server, provider, fetchFn)
  const first = provider.storedTokens!
  const who = (await client.callTool({ name: 'service_whoami', arguments: {} })).structuredContent as unknown as Whoami
  t.equal(who.credential.kind, 'oauth')

  const exp = jwtPayload(first.access_token).exp as number
  const wait = exp * 1000 - Date.now() + 100
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))

  // The POST gets 401 (expired); the SDK refreshes on its own and re-sends. The session was bound to the expired
  // token, so the re-sent call is refused with 404 (interface.md: "Expired token: refresh, then initialize a new
  // session"); the SDK v1 client does not re-initialize by itself.
  const mark = sent.length
  const err = await client.callTool({ name: 'service_whoami', arguments: {} }).then(() => null, (e: unknown) => e)
  const during = sent.slice(mark)
  const expired = during.find((s) => s.method === 'POST' && s.url.pathname === '/mcp' && s.status === 401)
  t.ok(expired, 'the expired token got 401 on /mcp')
  t.match(expired?.wwwAuthenticate, /^Bearer error="invalid_token", .*resource_metadata="/, 'an invalid_token challenge')
  const refreshes = during.filter((s) => s.url.pathname === '/oauth/token')
  t.equal(refreshes.length, 1, 'the SDK refreshed once on the 401')
  t.equal(refreshes[0]!.form?.get('grant_type'), 'refresh_token')
  t.equal(refreshes[0]!.form?.get('refresh_token'), first.refresh_token)
  t.equal(refreshes[0]!.status, 200)
  t.equal(provider.authorizations.length, 1, 'no re-authorization in the browser')
  const refreshed = provider.storedTokens!
  t.not(refreshed.access_token, first.access_token, 'the provider holds a new access token')
  t.not(refreshed.refresh_token, first.refresh_token, 'and a rotated refresh token')
  // A session is never rebound to a refreshed token: the SDK's re-sent call on the old session must fail.
  t.type(err, StreamableHTTPError, 'the re-sent call failed at the transport')
  t.equal((err as StreamableHTTPError | null)?.code, 404, 'the old session is not usable with the new token')

  // As the contract says: a new session with the refreshed token.
  const next = connectable(server, provider, fetchFn)
  t.teardown(() => next.client.close())
  await next.client.connect(next.transport)
  const result = await next.client.callTool({ name: 'service_whoami', arguments: {} })
  t.equal(result.isError, false)
  const me = result.structuredContent as unknown as Whoami
  t.equal(me.credential.kind, 'oauth')
  t.equal(me.credential.id, jwtPayload(refreshed.access_token).jti, 'the new session runs on the refreshed token')
  const apps = await next.client.callTool({ name: 'service_apps_list', arguments: {} })
  t.equal(apps.isError, false)
  await next.transport.terminateSession()
})

t.test('SDK client: a provider without state() is refused at /oauth/authorize (state is required here)', async (t) => {
  const server = await startServer(t)
  const { fetch: fetchFn } = recordingFetch()
  const provider = new TestProvider(server, 45_125, { withState: false })
  t.equal(provider.state, undefined, 'the provider offers no state()')
  const { client, transport } = connectable(server, provider, fetchFn)
  const err = await client.connect(transport).then(() => null, (e: unknown) => e)
  t.type(err, UnauthorizedError)
  await client.close()
  t.equal(provider.authorizations.length, 1)
  const { url, redirect } = provider.authorizations[0]!
  t.notOk(url.searchParams.has('state'), 'the SDK sends no state without state()')
  t.equal(redirect.searchParams.get('error'), 'invalid_request', 'interface.md makes state required')
  t.match(redirect.searchParams.get('error_description'), /^state is required: send a random, unguessable value of at least 22 characters .*\(RFC 6749 section 10\.12\)$/, 'and the description says what to send')
  t.equal(redirect.searchParams.get('iss'), server.url)
  t.notOk(provider.code, 'no code was issued')
})

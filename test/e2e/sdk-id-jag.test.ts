/**
 * The "must show" of enterprise-managed authorization: the official SDK v2 client's CrossAppAccessProvider gets an
 * ID-JAG from a test identity provider's token exchange endpoint (RFC 8693, through the SDK's own
 * requestJwtAuthorizationGrant), exchanges it at our token endpoint with the jwt-bearer grant, and calls a tool, over
 * real sockets.
 *
 * What the SDK sends to /oauth/token, as observed here: grant_type, assertion, scope, resource (the protected-resource
 * metadata's `{base}/mcp`) and client_id in the body, and no client secret: its client authentication follows our
 * metadata's token_endpoint_auth_methods_supported (`none`), so the secret the provider's options require is never sent.
 */
import { Client, CrossAppAccessProvider, requestJwtAuthorizationGrant, StreamableHTTPClientTransport, type FetchLike } from '@modelcontextprotocol/client'
import t from 'tap'
import { startIdp } from '../helpers/id-jag.js'
import { registerClient } from '../helpers/oauth.js'
import { OWNER_EMAIL, startServer } from '../helpers/server.js'

t.test('CrossAppAccessProvider: ID-JAG from the identity provider, tokens from us, then a tool call', async (t) => {
  let mcpClientId = ''
  // The identity provider maps the user of the ID token to its subject and email, and knows which client_id the MCP
  // client has at our server (configured out of band, as the extension says).
  const idp = await startIdp(t, { subjectOf: (idToken) => ({ sub: `sub-of-${idToken}`, email: OWNER_EMAIL, client_id: mcpClientId }) })
  const server = await startServer(t, { config: { trustedIssuers: [{ issuer: idp.issuer, jwksUri: idp.jwksUri, algorithms: ['ES256'] }] } })
  mcpClientId = (await registerClient(server)).client_id

  const tokenRequests: URLSearchParams[] = []
  const tokenHeaders: Headers[] = []
  const watching: FetchLike = async (url, init) => {
    if (String(url) === `${server.url}/oauth/token`) {
      tokenRequests.push(new URLSearchParams(String(init?.body)))
      tokenHeaders.push(new Headers(init?.headers))
    }
    return fetch(url, init)
  }
  const provider = new CrossAppAccessProvider({
    assertion: async (ctx) => {
      const grant = await requestJwtAuthorizationGrant({
        tokenEndpoint: idp.tokenEndpoint,
        audience: ctx.authorizationServerUrl,
        resource: ctx.resourceUrl,
        idToken: 'owner-id-token',
        clientId: 'mcp-client-at-the-idp',
        ...(ctx.scope ? { scope: ctx.scope } : {}),
        fetchFn: ctx.fetchFn,
      })
      return grant.jwtAuthGrant
    },
    clientId: mcpClientId,
    // Required by the provider's options; never sent, since our metadata offers public clients only (see above).
    clientSecret: 'unused-by-a-public-client',
    expectedIssuer: server.url,
    fetchFn: watching,
  })
  const client = new Client({ name: 'id-jag-test', version: '1.0.0' })
  const transport = new StreamableHTTPClientTransport(new URL(server.mcpUrl), { authProvider: provider, fetch: watching })
  await client.connect(transport)
  t.teardown(() => client.close())

  const who = await client.callTool({ name: 'service_whoami', arguments: {} })
  const me = who.structuredContent as { user: { email: string }; credential: { kind: string; client_id: string }; scopes: string[] }
  t.equal(me.user.email, OWNER_EMAIL, 'the tool runs as the member the identity provider asserted')
  t.equal(me.credential.kind, 'oauth')
  t.equal(me.credential.client_id, mcpClientId, 'for the client the assertion names')
  t.same(me.scopes, ['mcp:read', 'mcp:write'])

  t.equal(tokenRequests.length, 1, 'one token request')
  const sent = tokenRequests[0]!
  t.equal(sent.get('grant_type'), 'urn:ietf:params:oauth:grant-type:jwt-bearer')
  t.ok(sent.get('assertion'), 'the assertion')
  t.equal(sent.get('client_id'), mcpClientId, 'client_id in the body')
  t.equal(sent.get('client_secret'), null, 'no secret in the body')
  t.equal(tokenHeaders[0]!.get('authorization'), null, 'no Basic authentication')
  t.equal(sent.get('resource'), server.mcpUrl, 'the resource of the protected-resource metadata')
  t.equal(provider.tokens()?.refresh_token, undefined, 'no refresh token was issued')
})

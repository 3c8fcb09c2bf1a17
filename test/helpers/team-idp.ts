import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { decodeJwt, decodeProtectedHeader, exportJWK, generateKeyPair, importJWK, SignJWT, type JWTPayload } from 'jose'
import Provider from 'oidc-provider'

/**
 * The team's identity provider for end-to-end tests: a real `oidc-provider` (9.x) on 127.0.0.1, port 0, with its
 * development login (any login name; the account's claims come from `accounts`) and one confidential client, ours.
 * `tamper` makes its token endpoint misbehave: the ID token it answers is re-signed with the provider's own key after
 * the test changed its claims (a wrong nonce, another audience, an expired token), as a broken or hostile provider
 * would send it.
 */
export interface TeamIdp {
  issuer: string
  clientId: string
  clientSecret: string
  /** Changes the next ID tokens' claims (cleared by setting undefined). */
  tamper: ((claims: JWTPayload) => JWTPayload) | undefined
  /** The client's redirect URI must be known before the provider is made: call once the server's address is known. */
  register(redirectUri: string): void
}

export interface Account {
  email: string
  email_verified: boolean
  groups: string[]
}

export async function teamIdp(t: { teardown(fn: () => unknown): void }, accounts: Record<string, Account>): Promise<TeamIdp> {
  const http = createServer()
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  const issuer = `http://127.0.0.1:${(http.address() as AddressInfo).port}`
  t.teardown(() => new Promise<void>((resolve) => {
    http.closeAllConnections()
    http.close(() => resolve())
  }))
  const { privateKey } = await generateKeyPair('RS256', { extractable: true })
  const signingJwk = { ...(await exportJWK(privateKey)), kid: 'team-idp-1', alg: 'RS256', use: 'sig' }
  const resignKey = await importJWK(signingJwk, 'RS256')

  const idp: TeamIdp = {
    issuer,
    clientId: 'mcp-server',
    clientSecret: 'a-long-client-secret-for-the-mcp-server-0123456789',
    tamper: undefined,
    register(redirectUri) {
      const provider = new Provider(issuer, {
        clients: [{
          client_id: idp.clientId,
          client_secret: idp.clientSecret,
          redirect_uris: [redirectUri],
          grant_types: ['authorization_code'],
          response_types: ['code'],
          token_endpoint_auth_method: 'client_secret_basic',
        }],
        jwks: { keys: [signingJwk] },
        cookies: { keys: ['team-idp-cookie-key-for-tests-only'] },
        scopes: ['openid', 'email', 'profile', 'groups'],
        claims: { openid: ['sub'], email: ['email', 'email_verified'], groups: ['groups'] },
        // The claims of the granted scopes in the ID token itself (the server reads no userinfo).
        conformIdTokenClaims: false,
        features: { devInteractions: { enabled: true } },
        pkce: { required: () => true },
        findAccount: async (_ctx: unknown, sub: string) => {
          const account = accounts[sub]
          if (!account) return undefined
          return { accountId: sub, claims: async () => ({ sub, ...account }) }
        },
      })
      provider.use(async (ctx, next) => {
        await next()
        const body = ctx.body as { id_token?: string } | undefined
        if (ctx.path !== '/token' || !idp.tamper || typeof body?.id_token !== 'string') return
        const header = decodeProtectedHeader(body.id_token)
        body.id_token = await new SignJWT(idp.tamper(decodeJwt(body.id_token)))
          .setProtectedHeader({ alg: header.alg!, kid: header.kid! })
          .sign(resignKey)
      })
      http.on('request', provider.callback())
    },
  }
  return idp
}

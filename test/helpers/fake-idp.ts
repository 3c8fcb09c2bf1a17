import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { exportJWK, generateKeyPair, SignJWT, type JWTPayload } from 'jose'

type SigningKey = Parameters<SignJWT['sign']>[0]

/**
 * A small OpenID Connect provider for inject tests, on a real socket (127.0.0.1, port 0): discovery, a JWKS of one
 * test key and a token endpoint that answers every code with an ID token the test shapes (`next`). It misbehaves on
 * request: other claims, another key, another algorithm, an error. The real provider (oidc-provider) runs in the
 * end-to-end test; this one lets a test say exactly what comes back.
 */
export interface IdTokenPlan {
  /** Claims laid over the defaults (iss, aud, sub, nonce from the request, email, email_verified, groups, iat, exp). */
  claims?: Record<string, unknown>
  /** Claims removed from the defaults. */
  omit?: string[]
  /** Sign with a key the JWKS does not hold (its kid unknown), or with an HMAC secret, or unsigned. */
  signing?: 'known' | 'unknown-key' | 'hs256' | 'none'
  /** The token endpoint answers this error instead. */
  error?: { status: number; error: string }
}

export interface FakeIdp {
  issuer: string
  clientId: string
  clientSecret: string
  /** The next code exchange's ID token (reset after each). */
  next: IdTokenPlan
  /** The token requests received: form fields and the Authorization header. */
  tokenRequests: Array<{ form: URLSearchParams; authorization: string | undefined }>
  /** The nonce the ID token carries by default: set by the test from the authorization URL. */
  nonce: string
  /** The clock the ID token's iat and exp are computed from (ms). */
  now: () => number
}

export async function fakeIdp(t: { teardown(fn: () => unknown): void }, options: { now?: () => number; algs?: string[] } = {}): Promise<FakeIdp> {
  const known = await generateKeyPair('ES256')
  const other = await generateKeyPair('ES256')
  const jwk = { ...(await exportJWK(known.publicKey)), kid: 'known', alg: 'ES256', use: 'sig' }
  let issuer = ''
  const idp: FakeIdp = {
    issuer: '',
    clientId: 'mcp-server',
    clientSecret: 'idp-client-secret',
    next: {},
    tokenRequests: [],
    nonce: '',
    now: options.now ?? Date.now,
  }
  const server = createServer((req, res) => {
    void (async () => {
      const path = new URL(req.url ?? '/', issuer).pathname
      const json = (status: number, body: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' })
        res.end(JSON.stringify(body))
      }
      if (path === '/.well-known/openid-configuration') {
        return json(200, {
          issuer,
          authorization_endpoint: `${issuer}/authorize`,
          token_endpoint: `${issuer}/token`,
          jwks_uri: `${issuer}/jwks`,
          id_token_signing_alg_values_supported: options.algs ?? ['ES256', 'RS256', 'HS256', 'none'],
        })
      }
      if (path === '/jwks') return json(200, { keys: [jwk] })
      if (path === '/token' && req.method === 'POST') {
        const form = new URLSearchParams(await bodyOf(req))
        idp.tokenRequests.push({ form, authorization: req.headers.authorization })
        const plan = idp.next
        idp.next = {}
        if (plan.error) return json(plan.error.status, { error: plan.error.error, error_description: 'refused by the test' })
        return json(200, { access_token: 'idp-access-token', token_type: 'Bearer', id_token: await idToken(idp, plan, known.privateKey, other.privateKey) })
      }
      json(404, { error: 'not_found' })
    })()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  idp.issuer = issuer
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return idp
}

async function idToken(idp: FakeIdp, plan: IdTokenPlan, key: SigningKey, otherKey: SigningKey): Promise<string> {
  const now = Math.floor(idp.now() / 1000)
  const claims: JWTPayload = {
    iss: idp.issuer,
    aud: idp.clientId,
    sub: 'subject-1',
    nonce: idp.nonce,
    email: 'alice@example.com',
    email_verified: true,
    groups: [],
    iat: now,
    exp: now + 300,
    ...plan.claims,
  }
  for (const name of plan.omit ?? []) delete claims[name]
  const signing = plan.signing ?? 'known'
  if (signing === 'none') {
    const part = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url')
    return `${part({ alg: 'none', typ: 'JWT' })}.${part(claims)}.`
  }
  if (signing === 'hs256') return new SignJWT(claims).setProtectedHeader({ alg: 'HS256', kid: 'known' }).sign(new TextEncoder().encode(idp.clientSecret.padEnd(32, 'x')))
  return new SignJWT(claims).setProtectedHeader({ alg: 'ES256', kid: signing === 'known' ? 'known' : 'stranger' }).sign(signing === 'known' ? key : otherKey)
}

async function bodyOf(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks).toString('utf8')
}

import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { randomUUID } from 'node:crypto'
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK, type JWTPayload } from 'jose'

export const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer'
const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange'
const ID_JAG_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:id-jag'

interface Teardown {
  teardown(fn: () => unknown): void
}

/** The claims of an assertion a test signs; any may be replaced or removed (undefined). */
export type AssertionClaims = Record<string, unknown>

/**
 * A test enterprise identity provider on 127.0.0.1 (a real socket, port 0): its JWK Set at /jwks, and a token exchange
 * endpoint at /token (RFC 8693, as the SDK's requestJwtAuthorizationGrant calls it) that answers any `subject_token`
 * with an ID-JAG for `subjectOf(subject_token)`. It signs assertions with an ES256 key whose public half it publishes.
 */
export interface TestIdp {
  issuer: string
  jwksUri: string
  tokenEndpoint: string
  privateKey: CryptoKey
  publicJwk: JWK
  /** How many times /jwks was read. */
  jwksFetches(): number
  /** An ID-JAG; `now` in ms (the server's clock). `header` overrides the protected header. */
  sign(claims: AssertionClaims, options?: { now?: number; header?: Record<string, unknown>; key?: CryptoKey }): Promise<string>
}

export async function startIdp(t: Teardown, options: { defaults?: (now: number) => AssertionClaims; subjectOf?: (subjectToken: string) => AssertionClaims } = {}): Promise<TestIdp> {
  const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true })
  const publicJwk = { ...(await exportJWK(publicKey)), kid: 'test-key-1', alg: 'ES256', use: 'sig' }
  let fetches = 0
  let idp: TestIdp

  const server = createServer((req, res) => {
    void (async () => {
      if (req.method === 'GET' && req.url === '/jwks') {
        fetches++
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [publicJwk] }))
        return
      }
      if (req.method === 'POST' && req.url === '/token') {
        const form = new URLSearchParams(await bodyOf(req))
        if (form.get('grant_type') !== TOKEN_EXCHANGE || form.get('requested_token_type') !== ID_JAG_TOKEN_TYPE) {
          res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'unsupported_grant_type' }))
          return
        }
        const extra = options.subjectOf?.(form.get('subject_token') ?? '') ?? {}
        const scope = form.get('scope') ?? undefined
        const assertion = await idp.sign({ aud: form.get('audience'), resource: form.get('resource'), ...(scope ? { scope } : {}), ...extra })
        res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' })
          .end(JSON.stringify({ issued_token_type: ID_JAG_TOKEN_TYPE, access_token: assertion, token_type: 'N_A', expires_in: 300, ...(scope ? { scope } : {}) }))
        return
      }
      res.writeHead(404).end()
    })()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`

  idp = {
    issuer,
    jwksUri: `${issuer}/jwks`,
    tokenEndpoint: `${issuer}/token`,
    privateKey,
    publicJwk,
    jwksFetches: () => fetches,
    async sign(claims, signOptions = {}) {
      const now = signOptions.now ?? Date.now()
      const iat = Math.floor(now / 1000)
      const payload: JWTPayload = { iss: issuer, jti: randomUUID(), iat, exp: iat + 300, ...options.defaults?.(now), ...claims }
      for (const [k, v] of Object.entries(payload)) if (v === undefined) delete payload[k]
      return new SignJWT(payload)
        .setProtectedHeader({ alg: 'ES256', typ: 'oauth-id-jag+jwt', kid: publicJwk.kid, ...signOptions.header } as { alg: string })
        .sign(signOptions.key ?? privateKey)
    },
  }
  return idp
}

function bodyOf(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = ''
    req.setEncoding('utf8')
    req.on('data', (chunk: string) => (text += chunk))
    req.on('end', () => resolve(text))
    req.on('error', reject)
  })
}

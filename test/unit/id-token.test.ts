import { createLocalJWKSet, exportJWK, generateKeyPair, SignJWT, type JWTPayload } from 'jose'
import t from 'tap'
import { allowedAlgorithms, checkIdToken, IdTokenRefused, type IdTokenExpectations } from '../../src/identity/id-token.js'

// The ID token checks of OpenID Connect Core §3.1.3.7 (src/identity/id-token.ts), with keys made here by jose and the
// server's clock fixed: each case changes one thing of a valid token and must be refused, naming why.

const NOW = Date.UTC(2026, 0, 1, 12, 0, 0)
const ISSUER = 'https://idp.example.com/realms/acme'
const CLIENT = 'mcp-server'
const NONCE = 'n-0S6_WzA2Mj'

const known = await generateKeyPair('ES256')
const stranger = await generateKeyPair('ES256')
const rsa = await generateKeyPair('RS256')
const keys = createLocalJWKSet({
  keys: [
    { ...(await exportJWK(known.publicKey)), kid: 'k1', alg: 'ES256' },
    { ...(await exportJWK(rsa.publicKey)), kid: 'r1', alg: 'RS256' },
  ],
})

const expect: IdTokenExpectations = {
  keys,
  issuer: ISSUER,
  clientId: CLIENT,
  announcedAlgorithms: ['ES256', 'RS256', 'HS256', 'none'],
  nonce: NONCE,
  now: NOW,
  toleranceMs: 30_000,
  maxAgeMs: 600_000,
}

const seconds = (ms: number) => Math.floor(ms / 1000)

function claims(over: Record<string, unknown> = {}): JWTPayload {
  return { iss: ISSUER, aud: CLIENT, sub: 'user-1', nonce: NONCE, iat: seconds(NOW), exp: seconds(NOW) + 300, email: 'a@example.com', ...over }
}

async function signed(payload: JWTPayload, header: { alg: string; kid?: string } = { alg: 'ES256', kid: 'k1' }, key = known.privateKey): Promise<string> {
  return new SignJWT(payload).setProtectedHeader(header).sign(key)
}

async function refusal(token: string, over: Partial<IdTokenExpectations> = {}): Promise<string> {
  try {
    await checkIdToken(token, { ...expect, ...over })
  } catch (err) {
    if (err instanceof IdTokenRefused) return err.message
    throw err
  }
  return 'accepted'
}

t.test('a valid token is accepted and its claims returned', async (t) => {
  const payload = await checkIdToken(await signed(claims()), expect)
  t.equal(payload.sub, 'user-1')
  t.equal(payload.email, 'a@example.com')
  const viaRsa = await checkIdToken(await signed(claims(), { alg: 'RS256', kid: 'r1' }, rsa.privateKey), expect)
  t.equal(viaRsa.sub, 'user-1', 'RS256, also announced, works too')
})

t.test('a wrong nonce, or none, is refused', async (t) => {
  t.match(await refusal(await signed(claims({ nonce: 'another' }))), /nonce/)
  t.match(await refusal(await signed(claims({ nonce: undefined }))), /nonce/)
})

t.test('a token for another audience is refused', async (t) => {
  t.match(await refusal(await signed(claims({ aud: 'another-client' }))), /another client \(aud\)/)
})

t.test('azp: several audiences need azp = our client id; an azp of another party is refused', async (t) => {
  t.match(await refusal(await signed(claims({ aud: [CLIENT, 'other'] }))), /azp/)
  t.match(await refusal(await signed(claims({ aud: [CLIENT, 'other'], azp: 'other' }))), /azp/)
  t.match(await refusal(await signed(claims({ azp: 'other' }))), /azp/)
  t.equal(await refusal(await signed(claims({ aud: [CLIENT, 'other'], azp: CLIENT }))), 'accepted')
})

t.test('expiry, with the clock tolerance', async (t) => {
  t.match(await refusal(await signed(claims({ iat: seconds(NOW) - 400, exp: seconds(NOW) - 31 }))), /expired/)
  t.equal(await refusal(await signed(claims({ iat: seconds(NOW) - 400, exp: seconds(NOW) - 29 }))), 'accepted', 'within the tolerance')
  t.match(await refusal(await signed(claims({ iat: seconds(NOW) - 400, exp: seconds(NOW) - 5 })), { toleranceMs: 0 }), /expired/)
  t.match(await refusal(await signed(claims({ exp: undefined }))), /exp/)
})

t.test('not yet valid: iat in the future beyond the tolerance, nbf ahead, or older than a sign-in may last', async (t) => {
  t.match(await refusal(await signed(claims({ iat: seconds(NOW) + 120, exp: seconds(NOW) + 600 }))), /not valid now \(iat\)/)
  t.match(await refusal(await signed(claims({ nbf: seconds(NOW) + 120 }))), /not valid now \(nbf\)/)
  t.match(await refusal(await signed(claims({ iat: seconds(NOW) - 3600, exp: seconds(NOW) + 600 }))), /issued before this sign-in started/)
})

t.test('a wrong issuer is refused', async (t) => {
  t.match(await refusal(await signed(claims({ iss: 'https://evil.example.com' }))), /another issuer/)
  t.match(await refusal(await signed(claims({ iss: `${ISSUER}/` }))), /another issuer/, 'compared exactly')
})

t.test('an unknown kid, or a key the provider does not publish, is refused', async (t) => {
  t.match(await refusal(await signed(claims(), { alg: 'ES256', kid: 'nobody' }, stranger.privateKey)), /key the provider does not publish/)
  t.match(await refusal(await signed(claims(), { alg: 'ES256', kid: 'k1' }, stranger.privateKey)), /signature does not verify/)
})

t.test('alg none and HS256 are refused even when the provider announces them', async (t) => {
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url')
  t.match(await refusal(`${part({ alg: 'none' })}.${part(claims())}.`), /algorithm that is not allowed|not valid/)
  const hs = await new SignJWT(claims()).setProtectedHeader({ alg: 'HS256', kid: 'k1' }).sign(new TextEncoder().encode('x'.repeat(32)))
  t.match(await refusal(hs), /algorithm that is not allowed/)
  t.match(await refusal(await signed(claims(), { alg: 'RS256', kid: 'r1' }, rsa.privateKey), { announcedAlgorithms: ['ES256'] }), /algorithm that is not allowed/, 'an algorithm not announced')
})

t.test('allowed algorithms: the announced ones that are asymmetric; RS256 when none are announced', async (t) => {
  t.same(allowedAlgorithms(['HS256', 'none', 'ES256', 'PS256']), ['ES256', 'PS256'])
  t.same(allowedAlgorithms(undefined), ['RS256'])
  t.same(allowedAlgorithms(['HS512']), [])
  t.match(await refusal(await signed(claims()), { announcedAlgorithms: ['HS256'] }), /no asymmetric/)
})

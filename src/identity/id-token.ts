import { errors, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose'

/**
 * The ID token of an upstream sign-in, checked as OpenID Connect Core §3.1.3.7 says (docs/decisions/single-sign-on.md):
 * the signature by a key of the provider's JWKS with an asymmetric algorithm the provider announces, `iss` equal to
 * the configured issuer, our client id among `aud` (and as `azp` when there are other audiences, or whenever `azp` is
 * sent), `exp` not passed and `iat` not in the future nor older than the sign-in flow may last (both within the
 * clock tolerance, on the server's clock), and the `nonce` we sent.
 */

/** Algorithms an ID token may be signed with: asymmetric only (never `none`, never an HMAC keyed by our secret). */
export const ASYMMETRIC_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'] as const

export interface IdTokenExpectations {
  /** The provider's key set (createRemoteJWKSet: fetched again when a `kid` is unknown). */
  keys: JWTVerifyGetKey
  issuer: string
  clientId: string
  /** What the provider announces (`id_token_signing_alg_values_supported`); only asymmetric ones are kept. */
  announcedAlgorithms: readonly string[] | undefined
  nonce: string
  /** The server clock's now, in ms. */
  now: number
  toleranceMs: number
  /** The oldest an ID token may be (its `iat`): no older than the sign-in it answers. */
  maxAgeMs: number
}

/** Why an ID token was refused: a short reason for the log and the page's small print (never the token). */
export class IdTokenRefused extends Error {
  override name = 'IdTokenRefused'
}

/** The asymmetric algorithms among those announced; RS256 (which OpenID Connect requires) when none are announced. */
export function allowedAlgorithms(announced: readonly string[] | undefined): string[] {
  const list = announced && announced.length > 0 ? announced : ['RS256']
  return list.filter((alg) => (ASYMMETRIC_ALGORITHMS as readonly string[]).includes(alg))
}

export async function checkIdToken(token: string, x: IdTokenExpectations): Promise<JWTPayload & { sub: string }> {
  const algorithms = allowedAlgorithms(x.announcedAlgorithms)
  if (algorithms.length === 0) throw new IdTokenRefused('the provider announces no asymmetric ID token signing algorithm')
  let payload: JWTPayload
  try {
    ({ payload } = await jwtVerify(token, x.keys, {
      issuer: x.issuer,
      audience: x.clientId,
      algorithms,
      currentDate: new Date(x.now),
      clockTolerance: Math.floor(x.toleranceMs / 1000),
      maxTokenAge: Math.ceil(x.maxAgeMs / 1000),
      requiredClaims: ['sub', 'exp', 'iat'],
    }))
  } catch (err) {
    throw new IdTokenRefused(refusalOf(err), { cause: err })
  }
  const audiences = Array.isArray(payload.aud) ? payload.aud : [payload.aud]
  if ((audiences.length > 1 || payload.azp !== undefined) && payload.azp !== x.clientId) {
    throw new IdTokenRefused('the ID token was issued to another party (azp is not our client id)')
  }
  if (typeof payload.nonce !== 'string' || payload.nonce !== x.nonce) throw new IdTokenRefused('the ID token\'s nonce is not the one this sign-in sent')
  if (typeof payload.sub !== 'string' || payload.sub === '') throw new IdTokenRefused('the ID token has no subject')
  return payload as JWTPayload & { sub: string }
}

function refusalOf(err: unknown): string {
  // jose reports a token older than maxTokenAge as expired too, naming iat.
  if (err instanceof errors.JWTExpired) return err.claim === 'iat' ? 'the ID token was issued before this sign-in started (iat)' : 'the ID token has expired'
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === 'iss') return 'the ID token comes from another issuer'
    if (err.claim === 'aud') return 'the ID token was issued for another client (aud)'
    if (err.claim === 'iat' || err.claim === 'nbf') return `the ID token is not valid now (${err.claim})`
    return `the ID token's ${err.claim} claim is missing or wrong`
  }
  if (err instanceof errors.JOSEAlgNotAllowed) return 'the ID token is signed with an algorithm that is not allowed'
  if (err instanceof errors.JWKSNoMatchingKey) return 'the ID token is signed by a key the provider does not publish'
  if (err instanceof errors.JWSSignatureVerificationFailed) return 'the ID token\'s signature does not verify'
  if (err instanceof errors.JWKSTimeout) return 'the provider\'s keys could not be fetched in time'
  if (err instanceof errors.JOSEError) return `the ID token is not valid (${err.code})`
  return 'the ID token could not be checked'
}

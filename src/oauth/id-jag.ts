import { createRemoteJWKSet, decodeJwt, decodeProtectedHeader, errors, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose'
import { fail } from '../errors/service-error.js'
import type { Clock } from '../lib/clock.js'
import type { TrustedIssuer } from '../lib/trusted-issuers.js'
import { resourceAudience } from './resource.js'

/** RFC 7523's grant type, which carries the assertion. */
export const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer'
/** The authorization grant profile of draft-ietf-oauth-identity-assertion-authz-grant, advertised in the metadata. */
export const ID_JAG_PROFILE = 'urn:ietf:params:oauth:grant-profile:id-jag'
/** The explicit type an ID-JAG carries in its header (RFC 8725 §3.11); `application/` may prefix it (RFC 7515 §4.1.9). */
const ID_JAG_TYPES = ['oauth-id-jag+jwt', 'application/oauth-id-jag+jwt']
/** Longer than any assertion an identity provider signs; a bigger one is refused before it is parsed. */
const MAX_ASSERTION_LENGTH = 8192
const MAX_JTI_LENGTH = 255

/** What a verified assertion says, once every check of the draft's processing rules has passed. */
export interface VerifiedAssertion {
  issuer: TrustedIssuer
  subject: string
  email: string | undefined
  /** The client the identity provider issued it to, at this server. */
  clientId: string
  jti: string
  /** `exp`, in ms. */
  expiresAt: number
  /** The `scope` claim as sent, or undefined when the identity provider did not narrow the scope. */
  scope: string | undefined
}

/** Where the keys of an issuer come from: its remote JWK Set, or a test's key set. */
export type IssuerKeys = (issuer: TrustedIssuer) => JWTVerifyGetKey

export interface IdJagVerifierOptions {
  issuers: readonly TrustedIssuer[]
  /** This authorization server's issuer identifier (the assertion's `aud`). */
  issuerId: () => string
  /** The base URL the `resource` claim must name (src/oauth/resource.ts). */
  baseUrl: () => string
  maxLifetimeMs: number
  clockToleranceMs: number
  clock: Clock
  keys: IssuerKeys
}

/**
 * Checks an Identity Assertion JWT Authorization Grant (draft-ietf-oauth-identity-assertion-authz-grant, the MCP
 * enterprise-managed authorization extension): explicit type, issuer among the trusted ones, signature by that issuer's
 * keys under its algorithm allow-list, audience, resource, lifetime and the claims the exchange needs. Every refusal is
 * `invalid_grant` with a description of the check that failed; none echoes the assertion. Replay is not its concern:
 * the exchange remembers the `jti` in the same transaction that issues the tokens.
 */
export class IdJagVerifier {
  readonly #o: IdJagVerifierOptions
  readonly #byIssuer: Map<string, TrustedIssuer>

  constructor(options: IdJagVerifierOptions) {
    this.#o = options
    this.#byIssuer = new Map(options.issuers.map((i) => [i.issuer, i]))
  }

  async verify(assertion: string): Promise<VerifiedAssertion> {
    const { header, unverified } = decode(assertion)
    if (typeof header.typ !== 'string' || !ID_JAG_TYPES.includes(header.typ.toLowerCase())) {
      throw refused('The assertion is not an identity assertion grant: its header typ must be oauth-id-jag+jwt')
    }
    const issuer = typeof unverified.iss === 'string' ? this.#byIssuer.get(unverified.iss) : undefined
    if (!issuer) throw refused('The assertion\'s issuer (iss) is not a trusted issuer of this server')
    if (typeof header.alg !== 'string' || !issuer.algorithms.includes(header.alg)) {
      throw refused(`The assertion is signed with an algorithm this issuer is not trusted with; accepted: ${issuer.algorithms.join(', ')}`)
    }
    const payload = await this.#verifySignature(assertion, issuer)
    return this.#claims(payload, issuer)
  }

  async #verifySignature(assertion: string, issuer: TrustedIssuer): Promise<JWTPayload> {
    const now = this.#o.clock.now()
    try {
      const { payload } = await jwtVerify(assertion, this.#o.keys(issuer), {
        algorithms: issuer.algorithms,
        issuer: issuer.issuer,
        currentDate: new Date(now),
        clockTolerance: Math.floor(this.#o.clockToleranceMs / 1000),
        requiredClaims: ['exp', 'iat'],
      })
      return payload
    } catch (err) {
      throw refused(joseProblem(err), err)
    }
  }

  #claims(payload: JWTPayload, issuer: TrustedIssuer): VerifiedAssertion {
    const { maxLifetimeMs, clockToleranceMs } = this.#o
    const now = this.#o.clock.now()
    if (!audienceIsUs(payload.aud, this.#o.issuerId())) {
      throw refused('The assertion\'s audience (aud) is not this authorization server\'s issuer identifier')
    }
    const exp = payload.exp! * 1000
    const iat = payload.iat! * 1000
    if (iat > now + clockToleranceMs) throw refused('The assertion was issued in the future (iat); check the clocks')
    if (exp - iat > maxLifetimeMs) throw refused(`The assertion lives longer (exp − iat) than the ${Math.round(maxLifetimeMs / 1000)} s this server accepts`)
    if (!resourceIsUs(payload.resource, this.#o.baseUrl())) throw refused('The assertion\'s resource claim is missing or does not name this server')
    const subject = nonEmpty(payload.sub, 'sub')
    const clientId = nonEmpty(payload.client_id, 'client_id')
    const jti = nonEmpty(payload.jti, 'jti')
    if (jti.length > MAX_JTI_LENGTH) throw refused(`The assertion's jti is longer than ${MAX_JTI_LENGTH} characters`)
    if (payload.scope !== undefined && typeof payload.scope !== 'string') throw refused('The assertion\'s scope claim must be a space-separated string')
    const email = typeof payload.email === 'string' && payload.email !== '' ? payload.email : undefined
    return { issuer, subject, email, clientId, jti, expiresAt: exp, scope: payload.scope }
  }
}

/** Each trusted issuer's remote key set, fetched on first use and again for a key id not known yet (after a cooldown). */
export function remoteIssuerKeys(options: { timeoutMs: number; cooldownMs: number; cacheMs: number }): IssuerKeys {
  const sets = new Map<string, JWTVerifyGetKey>()
  return (issuer) => {
    let set = sets.get(issuer.issuer)
    if (!set) {
      set = createRemoteJWKSet(new URL(issuer.jwksUri), { timeoutDuration: options.timeoutMs, cooldownDuration: options.cooldownMs, cacheMaxAge: options.cacheMs })
      sets.set(issuer.issuer, set)
    }
    return set
  }
}

function refused(message: string, cause?: unknown): Error {
  return fail('OAUTH_INVALID_GRANT', { message, ...(cause !== undefined ? { cause } : {}) })
}

function decode(assertion: string): { header: ReturnType<typeof decodeProtectedHeader>; unverified: JWTPayload } {
  if (assertion.length > MAX_ASSERTION_LENGTH) throw refused(`The assertion is longer than ${MAX_ASSERTION_LENGTH} characters`)
  try {
    return { header: decodeProtectedHeader(assertion), unverified: decodeJwt(assertion) }
  } catch (err) {
    throw refused('The assertion is not a signed JWT (compact serialization)', err)
  }
}

function nonEmpty(value: unknown, claim: string): string {
  if (typeof value !== 'string' || value === '') throw refused(`The assertion has no ${claim} claim`)
  return value
}

/** A string, or an array of exactly one string (the draft's rule against audience injection), equal to our issuer. */
function audienceIsUs(aud: unknown, issuerId: string): boolean {
  if (typeof aud === 'string') return aud === issuerId
  return Array.isArray(aud) && aud.length === 1 && aud[0] === issuerId
}

/** A string or an array of strings, one of which names this server as `resource` does at the token endpoint. */
function resourceIsUs(resource: unknown, baseUrl: string): boolean {
  const values = typeof resource === 'string' ? [resource] : Array.isArray(resource) ? resource : []
  return values.some((r) => typeof r === 'string' && resourceAudience(r, baseUrl) !== null)
}

/** The check of jwtVerify that failed, said without the assertion. */
function joseProblem(err: unknown): string {
  if (err instanceof errors.JWTExpired) return 'The assertion has expired (exp)'
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === 'nbf') return 'The assertion is not valid yet (nbf)'
    if (err.claim === 'iss') return 'The assertion\'s issuer (iss) is not a trusted issuer of this server'
    return `The assertion's ${err.claim} claim is missing or invalid`
  }
  if (err instanceof errors.JOSEAlgNotAllowed) return 'The assertion is signed with an algorithm this issuer is not trusted with'
  if (err instanceof errors.JWSSignatureVerificationFailed) return 'The assertion\'s signature does not verify with the issuer\'s keys'
  if (err instanceof errors.JWKSNoMatchingKey) return 'No signing key of the issuer matches the assertion (kid)'
  if (err instanceof errors.JWKSTimeout) return 'The issuer\'s signing keys could not be fetched in time; try again later'
  if (err instanceof errors.JWTInvalid || err instanceof errors.JWSInvalid) return 'The assertion is not a valid signed JWT'
  return 'The issuer\'s signing keys could not be fetched or used; try again later'
}

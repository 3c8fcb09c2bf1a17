import { createPublicKey, generateKeyPairSync, randomBytes } from 'node:crypto'
import { createSigner, createVerifier, TokenError } from 'fast-jwt'
import type { Repos } from '../db/repos/index.js'
import type { SigningKey } from '../db/repos/signing-keys.js'
import { fail } from '../errors/service-error.js'
import { systemClock, type Clock } from '../lib/clock.js'

export const ACCESS_TOKEN_TYP = 'at+jwt'
const ALG = 'ES256'
/** Clocks of one host agree; this only absorbs a token signed in the last instant before a clock step. */
const IAT_LEEWAY_MS = 30_000

/** The claims of our access tokens (docs/decisions/oauth.md). */
export interface AccessTokenClaims {
  iss: string
  aud: string
  sub: string
  org: string
  mid: string
  scope: string
  client_id: string
  jti: string
  iat: number
  exp: number
}

/** A new ES256 key pair, as stored: the public half as a JWK, the private half as PKCS#8 PEM. */
export function generateSigningKey(now = Date.now()): Omit<SigningKey, 'retiredAt'> {
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
  const kid = randomBytes(12).toString('base64url')
  const jwk = publicKey.export({ format: 'jwk' }) as Record<string, string>
  return {
    kid,
    alg: ALG,
    publicJwk: { kty: 'EC', crv: 'P-256', x: jwk.x!, y: jwk.y!, kid, alg: ALG, use: 'sig' },
    privateKey: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
    createdAt: now,
  }
}

type Verify = (token: string) => AccessTokenClaims

/** Signs access-token claims with one key (Keyring.signer). */
export type Sign = (claims: AccessTokenClaims) => string

/** What signing fails with when the database holds no key that is not retired. */
export function noSigningKey(): Error {
  return new Error('no signing key: the database has none that is not retired')
}

/**
 * Signs and verifies access tokens with the keys in the database. Signing always uses the current key as stored (the
 * CLI may rotate it from another process); verifiers are built once per key id and a key id we do not know yet is
 * looked up again before a token is refused. A retired key verifies until the tokens it signed have expired.
 *
 * Verifying with a key this process already holds is synchronous (the credential check of a request); only a key id
 * not seen yet, or one whose retirement must be read again, makes `verify` answer with a promise.
 */
export class Keyring {
  readonly #repos: Repos
  readonly #issuer: () => string
  readonly #audience: () => string
  readonly #tokenTtlMs: number
  readonly #clock: Clock
  readonly #signers = new Map<string, (payload: Record<string, unknown>) => string>()
  readonly #verifiers = new Map<string, { verify: Verify; key: SigningKey }>()

  /** Issuer and audience are read when first needed: with port 0 the base address is known only once listening. */
  constructor(repos: Repos, options: { issuer: () => string; audience: () => string; accessTokenTtlMs: number; clock?: Clock }) {
    this.#repos = repos
    this.#clock = options.clock ?? systemClock
    this.#issuer = options.issuer
    this.#audience = options.audience
    this.#tokenTtlMs = options.accessTokenTtlMs
  }

  /** Creates the first key on an empty database (before the server is ready). */
  async ensureKey(): Promise<void> {
    if (!(await this.#repos.signingKeys.current())) await this.#repos.signingKeys.rotate(generateSigningKey(this.#clock.now()))
  }

  /**
   * What signs with the current key as stored now, synchronously (read before a transaction that issues tokens, signed
   * after it); undefined when the database has no key that is not retired.
   */
  async signer(): Promise<Sign | undefined> {
    const key = await this.#repos.signingKeys.current()
    if (!key) return undefined
    let signer = this.#signers.get(key.kid)
    if (!signer) {
      signer = createSigner({ algorithm: ALG, key: key.privateKey, kid: key.kid, header: { alg: ALG, typ: ACCESS_TOKEN_TYP } })
      this.#signers.set(key.kid, signer)
    }
    const sign = signer
    return (claims) => sign({ ...claims })
  }

  async sign(claims: AccessTokenClaims): Promise<string> {
    const sign = await this.signer()
    if (!sign) throw noSigningKey()
    return sign(claims)
  }

  /**
   * Verifies signature, algorithm, typ, issuer, audience (one string, exactly ours), expiry and an `iat` not in the
   * future. Throws (or rejects with) TOKEN_EXPIRED for an expired token and INVALID_TOKEN for anything else, never
   * saying more than that to the client. A promise only when the key must be read from the database.
   */
  verify(token: string): AccessTokenClaims | Promise<AccessTokenClaims> {
    const kid = readKid(token)
    if (kid === undefined) throw fail('INVALID_TOKEN')
    const known = this.#verifiers.get(kid)
    if (known && this.#published(known.key, this.#clock.now())) return this.#verifyWith(known, token)
    return this.#verifierFor(kid).then((entry) => {
      if (!entry) throw fail('INVALID_TOKEN')
      return this.#verifyWith(entry, token)
    })
  }

  #verifyWith(entry: { verify: Verify }, token: string): AccessTokenClaims {
    const now = this.#clock.now()
    let claims: AccessTokenClaims
    try {
      claims = entry.verify(token)
    } catch (err) {
      // The library checks expiry before aud and iss: an expired token with another audience was TOKEN_EXPIRED and is.
      if (err instanceof TokenError && err.code === TokenError.codes.invalidClaimValue && expiredAt(readPayload(token)?.exp, now)) throw fail('TOKEN_EXPIRED')
      throw fail('INVALID_TOKEN', { cause: err })
    }
    const { exp } = claims as { exp: unknown }
    if (typeof exp !== 'number' || !Number.isFinite(exp)) throw fail('INVALID_TOKEN', { cause: new Error('exp is not a number') })
    if (expiredAt(exp, now)) throw fail('TOKEN_EXPIRED')
    this.#checkClaimShapes(claims, now)
    return claims
  }

  /**
   * Defence in depth beyond the library's checks, for tokens bearing our signature that we never issued in this form:
   * `aud` and `iss` exactly our one string (fast-jwt accepts an array of audiences when one of them matches), and an
   * `iat` that is not in the future.
   */
  #checkClaimShapes(claims: AccessTokenClaims, now: number): void {
    const { aud, iss, iat } = claims as { aud: unknown; iss: unknown; iat: unknown }
    if (typeof aud !== 'string' || aud !== this.#audience()) throw fail('INVALID_TOKEN', { cause: new Error('aud is not exactly this server') })
    if (typeof iss !== 'string' || iss !== this.#issuer()) throw fail('INVALID_TOKEN', { cause: new Error('iss is not exactly this server') })
    if (typeof iat !== 'number' || !Number.isFinite(iat) || iat * 1000 > now + IAT_LEEWAY_MS) throw fail('INVALID_TOKEN', { cause: new Error('iat is in the future') })
  }

  /** The JWKS: every key that signs or may still have signed an unexpired token. */
  async jwks(now = this.#clock.now()): Promise<{ keys: Array<Record<string, string>> }> {
    return { keys: (await this.#repos.signingKeys.all()).filter((k) => this.#published(k, now)).map((k) => k.publicJwk) }
  }

  #published(key: SigningKey, now: number): boolean {
    return key.retiredAt === null || key.retiredAt + this.#tokenTtlMs > now
  }

  /** The verifier of a key id not seen yet (read from the database), or of one whose retirement must be read again. */
  async #verifierFor(kid: string): Promise<{ verify: Verify } | undefined> {
    let entry = this.#verifiers.get(kid)
    if (!entry) {
      const key = await this.#repos.signingKeys.byKid(kid)
      if (!key) return undefined
      const publicPem = createPublicKey({ key: { ...key.publicJwk }, format: 'jwk' }).export({ format: 'pem', type: 'spki' }).toString()
      const verify = createVerifier({
        key: publicPem,
        algorithms: [ALG],
        checkTyp: ACCESS_TOKEN_TYP,
        allowedIss: this.#issuer(),
        allowedAud: this.#audience(),
        requiredClaims: ['iss', 'aud', 'sub', 'org', 'mid', 'scope', 'client_id', 'jti', 'iat', 'exp'],
        clockTolerance: 0,
        // Expiry is checked against the server's clock (verifyWith), which the library's fixed timestamp cannot follow.
        ignoreExpiration: true,
      }) as Verify
      // Another request may have built it meanwhile: one verifier per key id.
      entry = this.#verifiers.get(kid) ?? { verify, key }
      this.#verifiers.set(kid, entry)
    }
    // A key retired long ago is no longer published, so nothing it signed is accepted either.
    if (!this.#published(entry.key, this.#clock.now())) {
      const fresh = await this.#repos.signingKeys.byKid(kid)
      if (!fresh || !this.#published(fresh, this.#clock.now())) return undefined
      entry.key = fresh
    }
    return entry
  }
}

/** As the library judged `exp` with no clock tolerance: expired once `now` is past it. */
function expiredAt(exp: unknown, now: number): boolean {
  return typeof exp === 'number' && now > exp * 1000
}

/** The claims of a compact JWS, unverified: only to tell which of two refusals a token already refused gets. */
function readPayload(token: string): { exp?: unknown } | undefined {
  try {
    const payload = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as unknown
    return typeof payload === 'object' && payload !== null ? (payload as { exp?: unknown }) : undefined
  } catch {
    return undefined
  }
}

/** The `kid` of a compact JWS header, without trusting anything else in it. */
function readKid(token: string): string | undefined {
  const dot = token.indexOf('.')
  if (dot <= 0 || dot > 512) return undefined
  try {
    const header = JSON.parse(Buffer.from(token.slice(0, dot), 'base64url').toString('utf8')) as unknown
    const kid = typeof header === 'object' && header !== null ? (header as { kid?: unknown }).kid : undefined
    return typeof kid === 'string' && kid.length > 0 && kid.length <= 64 ? kid : undefined
  } catch {
    return undefined
  }
}

import { createRemoteJWKSet, importJWK, SignJWT, type JWTPayload, type JWTVerifyGetKey } from 'jose'
import type { Clock } from '../lib/clock.js'
import { randomSecret } from '../lib/crypto.js'
import type { SignInProvider } from '../lib/sign-in-providers.js'
import { checkIdToken } from './id-token.js'

/** The parts of a provider's discovery document this server uses. */
export interface Discovery {
  issuer: string
  authorization_endpoint: string
  token_endpoint: string
  jwks_uri: string
  id_token_signing_alg_values_supported?: string[]
}

/** A provider could not be used (down, misconfigured, answered nonsense): what went wrong, for the log and small print. */
export class UpstreamUnavailable extends Error {
  override name = 'UpstreamUnavailable'
}

/** The provider refused to exchange our code (its `error` and `error_description`). */
export class UpstreamRefused extends Error {
  override name = 'UpstreamRefused'
}

export interface UpstreamSettings {
  timeoutMs: number
  discoveryTtlMs: number
  toleranceMs: number
  flowTtlMs: number
}

/**
 * One configured provider as this server talks to it: its discovery document, fetched at first use and reused for
 * `discoveryTtlMs` (a failed fetch is not kept: the next sign-in tries again, so a provider briefly down at start does
 * not stop the server), its key set through jose (cached; fetched again for an unknown `kid`), the authorization URL
 * of a sign-in, and the code exchange with the configured client authentication. Only caches live in memory: a flow's
 * state is in the database (sign_in_flows), so any process can finish it.
 */
export class UpstreamProvider {
  readonly config: SignInProvider
  readonly #settings: UpstreamSettings
  readonly #clock: Clock
  #discovery: { value: Discovery; at: number } | undefined
  #pending: Promise<Discovery> | undefined
  #keys: { uri: string; set: JWTVerifyGetKey } | undefined

  constructor(config: SignInProvider, settings: UpstreamSettings, clock: Clock) {
    this.config = config
    this.#settings = settings
    this.#clock = clock
  }

  get name(): string {
    return this.config.name
  }

  async discovery(): Promise<Discovery> {
    const cached = this.#discovery
    if (cached && this.#clock.now() - cached.at < this.#settings.discoveryTtlMs) return cached.value
    // Concurrent sign-ins share one fetch.
    this.#pending ??= this.#fetchDiscovery().finally(() => (this.#pending = undefined))
    return this.#pending
  }

  async #fetchDiscovery(): Promise<Discovery> {
    const url = `${this.config.issuer}/.well-known/openid-configuration`
    const doc = await this.#json(url, { headers: { accept: 'application/json' } }, 'discovery document')
    const d = doc as Partial<Discovery>
    for (const field of ['issuer', 'authorization_endpoint', 'token_endpoint', 'jwks_uri'] as const) {
      if (typeof d[field] !== 'string' || d[field] === '') throw new UpstreamUnavailable(`its discovery document at ${url} has no ${field}`)
    }
    // OpenID Connect Discovery §4.3: the issuer in the document is the one configured, exactly (a trailing slash aside).
    if (d.issuer!.replace(/\/+$/, '') !== this.config.issuer) {
      throw new UpstreamUnavailable(`its discovery document names the issuer ${d.issuer}, not the configured ${this.config.issuer}`)
    }
    const value = d as Discovery
    this.#discovery = { value, at: this.#clock.now() }
    return value
  }

  /** The provider's key set, made once per jwks_uri. */
  #keySet(discovery: Discovery): JWTVerifyGetKey {
    if (this.#keys?.uri !== discovery.jwks_uri) {
      this.#keys = { uri: discovery.jwks_uri, set: createRemoteJWKSet(new URL(discovery.jwks_uri), { timeoutDuration: this.#settings.timeoutMs }) }
    }
    return this.#keys.set
  }

  /** Where the browser goes to sign in: the code flow with PKCE (S256), state and nonce. */
  async authorizationUrl(p: { redirectUri: string; state: string; nonce: string; codeChallenge: string }): Promise<string> {
    const d = await this.discovery()
    const url = new URL(d.authorization_endpoint)
    const params: Record<string, string> = {
      response_type: 'code',
      client_id: this.config.clientId,
      redirect_uri: p.redirectUri,
      scope: this.config.scopes,
      state: p.state,
      nonce: p.nonce,
      code_challenge: p.codeChallenge,
      code_challenge_method: 'S256',
    }
    for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v)
    return url.href
  }

  /** Exchanges the code at the token endpoint and returns the ID token's checked claims. */
  async signIn(p: { code: string; codeVerifier: string; redirectUri: string; nonce: string }): Promise<JWTPayload & { sub: string }> {
    const d = await this.discovery()
    const form = new URLSearchParams({ grant_type: 'authorization_code', code: p.code, redirect_uri: p.redirectUri, code_verifier: p.codeVerifier })
    const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' }
    await this.#authenticate(form, headers, d.token_endpoint)
    const response = await this.#fetch(d.token_endpoint, { method: 'POST', headers, body: form.toString() }, 'token endpoint')
    const body = await this.#body(response, 'token endpoint')
    if (!response.ok) {
      const b = (body ?? {}) as Record<string, unknown>
      const error = typeof b.error === 'string' ? b.error : `HTTP ${response.status}`
      const description = typeof b.error_description === 'string' ? `: ${b.error_description.slice(0, 200)}` : ''
      throw new UpstreamRefused(`the token endpoint refused the code (${error}${description})`)
    }
    const idToken = (body as Record<string, unknown> | undefined)?.id_token
    if (typeof idToken !== 'string') throw new UpstreamUnavailable('its token endpoint answered without an id_token (is "openid" among the scopes?)')
    return checkIdToken(idToken, {
      keys: this.#keySet(d),
      issuer: this.config.issuer,
      clientId: this.config.clientId,
      announcedAlgorithms: d.id_token_signing_alg_values_supported,
      nonce: p.nonce,
      now: this.#clock.now(),
      toleranceMs: this.#settings.toleranceMs,
      maxAgeMs: this.#settings.flowTtlMs,
    })
  }

  /** Client authentication at the token endpoint, as configured (RFC 6749 §2.3.1; OpenID Connect Core §9). */
  async #authenticate(form: URLSearchParams, headers: Record<string, string>, tokenEndpoint: string): Promise<void> {
    const c = this.config
    if (c.clientAuth === 'client_secret_basic') {
      // RFC 6749 §2.3.1: each part form-urlencoded before base64.
      const encode = (s: string) => encodeURIComponent(s).replace(/%20/g, '+')
      headers.authorization = `Basic ${Buffer.from(`${encode(c.clientId)}:${encode(c.clientSecret ?? '')}`).toString('base64')}`
      return
    }
    form.set('client_id', c.clientId)
    if (c.clientAuth === 'client_secret_post') {
      form.set('client_secret', c.clientSecret ?? '')
      return
    }
    const jwk = c.privateKeyJwk!
    const key = await importJWK(jwk, jwk.alg)
    const now = Math.floor(this.#clock.now() / 1000)
    const assertion = await new SignJWT({})
      .setProtectedHeader({ alg: jwk.alg, ...(typeof jwk.kid === 'string' ? { kid: jwk.kid } : {}) })
      .setIssuer(c.clientId)
      .setSubject(c.clientId)
      .setAudience(tokenEndpoint)
      .setJti(randomSecret(16))
      .setIssuedAt(now)
      .setExpirationTime(now + 60)
      .sign(key)
    form.set('client_assertion_type', 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer')
    form.set('client_assertion', assertion)
  }

  async #fetch(url: string, init: RequestInit, what: string): Promise<Response> {
    try {
      return await fetch(url, { ...init, redirect: 'error', signal: AbortSignal.timeout(this.#settings.timeoutMs) })
    } catch (err) {
      throw new UpstreamUnavailable(`its ${what} at ${url} could not be reached (${(err as Error).name === 'TimeoutError' ? 'timed out' : (err as Error).message})`, { cause: err })
    }
  }

  async #body(response: Response, what: string): Promise<unknown> {
    try {
      return await response.json()
    } catch {
      throw new UpstreamUnavailable(`its ${what} answered HTTP ${response.status} without JSON`)
    }
  }

  async #json(url: string, init: RequestInit, what: string): Promise<unknown> {
    const response = await this.#fetch(url, init, what)
    if (!response.ok) throw new UpstreamUnavailable(`its ${what} at ${url} answered HTTP ${response.status}`)
    const body = await this.#body(response, what)
    if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new UpstreamUnavailable(`its ${what} at ${url} is not a JSON object`)
    return body
  }
}

import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Config } from '../../config.js'
import type { Repos } from '../../db/repos/index.js'
import { normalizeEmail } from '../../db/repos/users.js'
import { fail, ServiceError } from '../../errors/service-error.js'
import { systemClock, type Clock } from '../../lib/clock.js'
import { constantTimeEqual, randomSecret, sha256Hex, verifyPassword } from '../../lib/crypto.js'
import { ownOrigins } from '../../lib/own-origins.js'
import { clientAddressKey } from '../../limits/client-address.js'
import { signInRefusal, signInThrottleSettings } from '../../limits/named.js'
import type { SignInGatekeeper } from '../../limits/shared-sign-in-throttle.js'
import { SignInThrottle } from '../../limits/sign-in-throttle.js'

// A fixed, valid scrypt hash to check against when the email is unknown.
const DUMMY_PASSWORD_HASH = 'scrypt$16384$8$1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'
const MAX_EMAIL = 320
const MAX_PASSWORD = 1024

/** What a sign-in form post came to: a user, a wrong email or password, or a refusal by the throttle (unchecked). */
export type SignInResult = { user: { id: string } } | { wrong: true; email: string } | { refused: ServiceError; email: string }

/**
 * Browser state for the sign-in, consent and account pages, in two cookies:
 * - the browser cookie, a random value set on first visit: it binds pending authorization requests to this browser
 *   and keys the CSRF token of forms shown before sign-in;
 * - the sign-in cookie, whose SHA-256 is the id of a browser_sessions row.
 * Over https both use the `__Host-` prefix (Secure, Path=/, no Domain); on plain http, which browsers only trust on
 * loopback, the prefix is not allowed, so the names are bare. HttpOnly and SameSite=Lax always.
 */
export class BrowserState {
  readonly #config: Config
  readonly #repos: Repos
  /**
   * One throttle for both sign-in forms (/account and the OAuth interaction): a failure on one counts on the other.
   * In this process unless one shared by the processes of the deployment is given (SharedSignInThrottle).
   */
  readonly throttle: SignInGatekeeper
  /** Expiry of sign-ins (browser_sessions rows). */
  readonly #clock: Clock

  constructor(config: Config, repos: Repos, throttle?: SignInGatekeeper, clock: Clock = systemClock) {
    this.#config = config
    this.#clock = clock
    this.#repos = repos
    this.throttle = throttle ?? new SignInThrottle(signInThrottleSettings(config), clock)
  }

  get #secure(): boolean {
    return this.#config.baseUrl.startsWith('https:')
  }

  #name(base: string): string {
    return this.#secure ? `__Host-${base}` : base
  }

  #set(reply: FastifyReply, name: string, value: string, maxAgeMs: number | null): void {
    const parts = [`${this.#name(name)}=${value}`, 'Path=/', 'HttpOnly', 'SameSite=Lax']
    if (maxAgeMs !== null) parts.push(`Max-Age=${Math.max(0, Math.floor(maxAgeMs / 1000))}`)
    if (this.#secure) parts.push('Secure')
    const previous = reply.getHeader('set-cookie')
    const list = previous === undefined ? [] : Array.isArray(previous) ? previous.map(String) : [String(previous)]
    reply.header('set-cookie', [...list, parts.join('; ')])
  }

  #get(request: FastifyRequest, name: string): string | undefined {
    const value = readCookie(request.headers.cookie, this.#name(name))
    return value !== undefined && /^[A-Za-z0-9_-]{43}$/.test(value) ? value : undefined
  }

  /** The browser cookie, set now when missing. */
  browserId(request: FastifyRequest, reply: FastifyReply): string {
    const existing = this.#get(request, 'mcp_browser')
    if (existing) return existing
    const value = randomSecret(32)
    this.#set(reply, 'mcp_browser', value, null)
    return value
  }

  existingBrowserId(request: FastifyRequest): string | undefined {
    return this.#get(request, 'mcp_browser')
  }

  /** The signed-in user, or undefined. */
  async user(request: FastifyRequest): Promise<{ id: string; email: string; name: string } | undefined> {
    const id = this.signInId(request)
    return id ? this.#repos.browserSessions.user(id, this.#clock.now()) : undefined
  }

  /** The id of this browser's sign-in (the SHA-256 of its cookie, the browser_sessions row), whether live or not. */
  signInId(request: FastifyRequest): string | undefined {
    const cookie = this.#get(request, 'mcp_signin')
    return cookie ? sha256Hex(cookie) : undefined
  }

  /**
   * A sign-in form post, through the throttle. Every failure and every refusal is logged at warn with the client
   * address and the account, so tools like fail2ban can act on them; the password never is. `form` names the form in
   * the log (with any other context, such as the OAuth client).
   */
  async signInAttempt(request: FastifyRequest, email: unknown, password: unknown, context: Record<string, unknown>): Promise<SignInResult> {
    const shownEmail = typeof email === 'string' ? email.slice(0, MAX_EMAIL) : ''
    // Turned off by the operator (docs/decisions/single-sign-on.md): refused before the throttle or any password check.
    if (this.#config.passwordSignIn === 'off') {
      request.log.warn({ ...context, address: request.ip }, 'password sign-in refused: turned off')
      return { refused: new ServiceError('PASSWORD_SIGN_IN_OFF'), email: shownEmail }
    }
    const account = typeof email === 'string' && email.length <= MAX_EMAIL && email.trim() !== '' ? normalizeEmail(email) : null
    const gate = await this.throttle.begin(account, clientAddressKey(request.ip))
    if (!gate.allowed) {
      const retryAfter = Math.max(1, Math.ceil(gate.retryAfterMs / 1000))
      request.log.warn({ ...context, address: request.ip, account, throttledBy: gate.by, retryAfter }, 'sign-in refused: too many failed sign-ins')
      return { refused: signInRefusal(gate.by, retryAfter), email: shownEmail }
    }
    const user = await this.#checkPassword(email, password)
    if (user) {
      await this.throttle.succeeded(gate.attempt)
      request.log.info({ ...context, address: request.ip, account, user: user.id }, 'signed in')
      return { user }
    }
    const { accountFailures, addressFailures } = gate.attempt
    request.log.warn({ ...context, address: request.ip, account, accountFailures, addressFailures }, 'sign-in failed')
    return { wrong: true, email: shownEmail }
  }

  /** The user whose email and password these are, if enabled; unknown emails cost the same time as wrong passwords. */
  async #checkPassword(email: unknown, password: unknown): Promise<{ id: string } | null> {
    if (typeof email !== 'string' || typeof password !== 'string' || email.length > MAX_EMAIL || password.length > MAX_PASSWORD) return null
    const user = await this.#repos.users.byEmail(email)
    const ok = await verifyPassword(password, user?.passwordHash ?? DUMMY_PASSWORD_HASH)
    return ok && user && user.passwordHash && user.disabledAt === null ? { id: user.id } : null
  }

  async signIn(reply: FastifyReply, userId: string): Promise<void> {
    const value = randomSecret(32)
    await this.#repos.browserSessions.create({ id: sha256Hex(value), userId, expiresAt: this.#clock.now() + this.#config.browserSessionTtlMs })
    this.#set(reply, 'mcp_signin', value, this.#config.browserSessionTtlMs)
  }

  async signOut(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const cookie = this.#get(request, 'mcp_signin')
    if (cookie) await this.#repos.browserSessions.delete(sha256Hex(cookie))
    this.#set(reply, 'mcp_signin', '', 0)
  }

  /**
   * The CSRF token of forms in this browser: derived from a cookie the page's origin alone can read, for `purpose`
   * (a pending request id, or "account"). Nothing to store, and useless to anyone who lacks the cookie.
   */
  csrfToken(browserId: string, purpose: string): string {
    return sha256Hex(`csrf\u0000${browserId}\u0000${purpose}`)
  }

  /** Refuses a form POST that is cross-origin or lacks the right CSRF token. */
  checkForm(request: FastifyRequest, purpose: string, token: unknown): string {
    // Our pages send Referrer-Policy: no-referrer, under which browsers send `Origin: null` even on a same-origin
    // form post; Sec-Fetch-Site (which no page can forge) then tells where it came from. A page opened by another
    // loopback name of a loopback base address is ours too (lib/own-origins.ts, docs/decisions/http-errors.md).
    const origin = request.headers.origin
    const site = request.headers['sec-fetch-site']
    const sameOrigin = origin === undefined
      ? site === undefined || site === 'same-origin'
      : ownOrigins(this.#config).isBase(origin) || (origin === 'null' && site === 'same-origin')
    if (!sameOrigin) throw fail('CSRF_FAILED', { message: 'This form was sent from another site' })
    const browserId = this.existingBrowserId(request)
    if (!browserId || typeof token !== 'string' || !constantTimeEqual(token, this.csrfToken(browserId, purpose))) {
      throw fail('CSRF_FAILED')
    }
    return browserId
  }
}

/** One cookie's value from a Cookie header (first occurrence), without decoding: our values are base64url. */
export function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined
  for (const part of header.split(';')) {
    const eq = part.indexOf('=')
    if (eq === -1) continue
    if (part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim()
  }
  return undefined
}

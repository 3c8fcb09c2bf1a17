import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { apiKeyVerifier } from '../auth/api-key-verifier.js'
import { CredentialCache } from '../auth/credential-cache.js'
import { UsageRecorder } from '../auth/usage-recorder.js'
import type { CredentialVerifier, Principal } from '../auth/principal.js'
import { fail } from '../errors/service-error.js'
import { isLoopbackHost } from '../config.js'
import { sha256Hex } from '../lib/crypto.js'
import { PLUGIN } from './names.js'

export interface Auth {
  /** Adds a verifier for another credential form (the OAuth plugin adds JWT access tokens). */
  addVerifier(verifier: CredentialVerifier): void
  /**
   * The Principal for an Authorization header value; throws (or rejects with) INVALID_TOKEN, TOKEN_EXPIRED or
   * TOKEN_REVOKED. A credential the cache holds is answered at once, without a promise (the common case, on the path
   * of every request); one that must be verified against the database is answered with a promise. With the request's
   * `connection` (its socket), a connection that sends the same value again is not hashed again.
   */
  authenticate(authorization: string | undefined, connection?: object): Principal | Promise<Principal>
  /** Called whenever a credential is found revoked, so sessions bound to it end. */
  onRevoked(listener: (credential: string) => void): void
  revoked(credential: string): void
  /**
   * The conformance profile only (src/conformance/profile.ts): a request that sends no Authorization header acts with
   * `token`, which is verified on every request like any credential (a request that sends one is verified as always).
   * Refused (throws) unless the server runs that profile on a loopback address with an in-memory database.
   */
  actWithoutAuthorization(token: string): void
}

declare module 'fastify' {
  interface FastifyInstance {
    auth: Auth
  }
}

/** RFC 6750 §2.1: the scheme name is case-insensitive (RFC 9110 §11.1), one or more spaces, then the token68. */
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i

/**
 * The Authorization value each connection last sent, with the hash the credential cache knows it by. A client sends
 * the same value on every request of a keep-alive connection, so this saves hashing it each time. It lives only as
 * long as the connection (the long-lived cache holds hashes only), and a different value is hashed and verified as
 * always: what the memo answers is just the hash, never whether the credential is still valid.
 */
const lastOnConnection = new WeakMap<object, { authorization: string; key: string }>()

/** One verifier interface for every credential form; API keys are built in. */
const authPlugin: FastifyPluginAsync = async (fastify) => {
  const verifiers: CredentialVerifier[] = []
  const listeners: Array<(credential: string) => void> = []
  const changes = fastify.repos.credentialChanges
  const cache = new CredentialCache({ changed: () => changes.takeChanged() })
  const usage = new UsageRecorder(fastify.repos)
  const { clock } = fastify
  /** Authorization of requests that send none (the conformance profile); null: they are refused (401). */
  let absent: string | null = null
  const flushUsage = async () => {
    try {
      await usage.flush()
    } catch (err) {
      fastify.log.error({ err }, 'could not record credential usage')
    }
  }
  // flushUsage reports its own failure: the system clock does not wait for it (a manual one does, lib/clock.ts).
  const timer = clock.setInterval(flushUsage, fastify.config.sessionTouchFlushMs)
  timer.unref()
  fastify.addHook('onClose', async () => {
    clock.clearTimer(timer)
    await flushUsage()
  })
  const auth: Auth = {
    addVerifier: (v) => void verifiers.push(v),
    onRevoked: (l) => void listeners.push(l),
    revoked(credential) {
      // Whoever reports a revocation may not have gone through a repository write this process can see (the CLI).
      cache.clear()
      for (const l of listeners) l(credential)
    },
    actWithoutAuthorization(token) {
      const { config } = fastify
      if (config.profile !== 'conformance' || config.database !== ':memory:' || !isLoopbackHost(config.host)) {
        throw new Error('Requests without credentials are served only by the conformance profile, on a loopback address, with an in-memory database')
      }
      absent = `Bearer ${token}`
    },
    authenticate(authorization, connection) {
      // Only a request without the header at all: an empty or malformed one is refused as always.
      if (authorization === undefined && absent !== null) authorization = absent
      if (!authorization) throw fail('INVALID_TOKEN', { message: 'The Authorization header is missing' })
      const m = BEARER.exec(authorization)
      if (!m) throw fail('INVALID_TOKEN', { message: 'The Authorization header must be "Bearer <token>"' })
      const token = m[1] as string
      const key = tokenKey(authorization, token, connection)
      const now = clock.now()
      const cached = cache.get(key, now)
      if (cached) {
        usage.record(cached, now)
        return cached
      }
      const verifier = verifiers.find((v) => v.accepts(token))
      if (!verifier) throw fail('INVALID_TOKEN')
      const generation = cache.generation
      return verifier.verify(token).then((principal) => {
        cache.set(key, principal, generation)
        usage.record(principal, clock.now())
        return principal
      })
    },
  }
  auth.addVerifier(apiKeyVerifier(fastify.repos, (credential) => auth.revoked(credential), clock))
  fastify.decorate('auth', auth)
}

/** The hash of `token` (from the `authorization` value), remembered for the connection that sent it. */
function tokenKey(authorization: string, token: string, connection: object | undefined): string {
  if (connection === undefined) return sha256Hex(token)
  const last = lastOnConnection.get(connection)
  if (last !== undefined && last.authorization === authorization) return last.key
  const key = sha256Hex(token)
  lastOnConnection.set(connection, { authorization, key })
  return key
}

export default fp(authPlugin, { name: PLUGIN.auth, fastify: '5.x', dependencies: [PLUGIN.db] })

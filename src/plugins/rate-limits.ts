import type { FastifyPluginAsync, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import type { Principal } from '../auth/principal.js'
import type { DeclaredLimit } from '../limits/fixed-windows.js'
import { McpWindows } from '../limits/mcp-windows.js'
import { openLimitsStore, type LimitsStore } from '../limits/store.js'
import { PLUGIN } from './names.js'

export type { DeclaredLimit }

/**
 * The limits of /mcp: per member (60 with OAuth, 30 with an API key) and per organization (500) for every request,
 * and what its methods declare (a tool's own limit). A request counts in the member and organization windows both or,
 * refused by either, in neither; a declared limit is checked once those fit, and its refusal leaves them counted.
 * A refusal is a RATE_LIMITED service error: thrown, or the rejection of the promise returned.
 *
 * Two steps, because a request's methods are known only once its body is read, and shared limits cost a round trip
 * to Redis each:
 *
 * - `enter`, before the body is read: counted in this process, the member and organization windows are counted there
 *   and then, synchronously. Shared through Redis, a GET or DELETE (no body) is counted at once (a promise); a POST's
 *   windows are left pending for `admit`, so that they cost no round trip of their own.
 * - `admit`, where the intake admits a POST's messages (rpc/intake.ts; the transport knows eras, a method what it
 *   limits): the further messages of a batch and the declared limits, together with the pending windows, in one round trip.
 *
 * A POST answered before it is admitted (malformed, an unknown session…) is counted as it is answered, its answer
 * unchanged.
 */
export interface RateLimits {
  enter(request: FastifyRequest, principal: Principal): void | Promise<void>
  /**
   * `extra`: the messages of a batch beyond the first; `declared`: what its requests' methods declare (one, several
   * for a batch, or null). Synchronous and allocation-free for a request that fits when counted in this process.
   */
  admit(request: FastifyRequest, principal: Principal, extra: number, declared: DeclaredLimit | readonly DeclaredLimit[] | null): void | Promise<void>
}

declare module 'fastify' {
  interface FastifyInstance {
    rateLimits: RateLimits
    /** The counter store every limit counts in (src/limits/store.ts). */
    limits: LimitsStore
  }
  interface FastifyRequest {
    /** Shared limits: the principal whose member and organization windows wait for `admit` (RateLimits); else null. */
    limitsPending: Principal | null
  }
}

/**
 * The contract's Limits table for /mcp and tools, windows from configuration. One process counts in memory; processes
 * coordinated through Redis (SERVICE_REDIS_URL) count there, under SERVICE_REDIS_PREFIX + `rl:`, so the limits hold
 * for the whole deployment rather than once per process.
 */
const rateLimitsPlugin: FastifyPluginAsync = async (fastify) => {
  const { config, coordination } = fastify
  const store = openLimitsStore({ config, log: fastify.log, redis: coordination.redis, key: (k) => coordination.key(k), clock: fastify.clock })
  fastify.decorate('limits', store)
  fastify.addHook('onClose', async () => store.close())
  const windows = new McpWindows(store, config)
  fastify.decorateRequest('limitsPending', null)

  const local: RateLimits = {
    enter(_request, principal) {
      windows.countHere(principal, 1)
    },
    admit(_request, principal, extra, declared) {
      if (extra > 0) windows.countHere(principal, extra)
      windows.countDeclaredHere(principal, declared)
    },
  }

  if (store.shared === null) {
    fastify.decorate('rateLimits', local)
    return
  }

  // Shared: every window of a request in one Redis round trip, in this process while Redis does not answer
  // (docs/decisions/limits.md).
  const take = (principal: Principal, cost: number, declared: DeclaredLimit | readonly DeclaredLimit[] | null) => windows.countShared(principal, cost, declared)

  fastify.decorate('rateLimits', {
    enter(request, principal) {
      // A POST's windows wait for its body (admit); GET and DELETE have none, and are counted now.
      if (request.method === 'POST') request.limitsPending = principal
      else return take(principal, 1, null)
    },
    admit(request, principal, extra, declared) {
      const pending = request.limitsPending === null ? 0 : 1
      request.limitsPending = null
      if (pending + extra === 0 && declared === null) return
      return take(principal, pending + extra, declared)
    },
  } satisfies RateLimits)

  // A POST answered before a front-end admitted it (refused as malformed, or for an unknown session) still counts, its
  // answer unchanged: the count is sent to Redis as the answer goes out, before the client can send another request,
  // and not waited for.
  fastify.addHook('onSend', (request, _reply, payload, done) => {
    const principal = request.limitsPending
    if (principal !== null) {
      request.limitsPending = null
      take(principal, 1, null).catch(() => {})
    }
    done(null, payload)
  })
}

export default fp(rateLimitsPlugin, { name: PLUGIN.rateLimits, fastify: '5.x', dependencies: [PLUGIN.http, PLUGIN.coordination] })

import type { FastifyPluginAsync, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import type { Principal } from '../auth/principal.js'
import type { DeclaredLimit, RateDecision, StagedWindows } from '../limits/fixed-windows.js'
import { mcpMember, mcpOrganization, requestRefusal } from '../limits/named.js'
import { openLimitsStore, type LimitsStore } from '../limits/store.js'
import type { LimiterName } from '../errors/service-error.js'
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
 * - `admit`, where a front-end takes a POST's messages in (the transport knows eras, a method what it limits): the
 *   further messages of a batch and the declared limits, together with the pending windows, in one round trip.
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

function refuse(decision: RateDecision, what: string, limiter: LimiterName): never {
  throw requestRefusal(decision, what, limiter)
}

function refuseMember(principal: Principal, decision: RateDecision): never {
  throw mcpMember.refusal(principal, decision)
}

interface LimiterKeys {
  member: string
  organization: string
  /** By declared limit id. */
  declared: Map<string, string>
}

/**
 * The contract's Limits table for /mcp and tools, windows from configuration. One process counts in memory; processes
 * coordinated through Redis (SERVICE_REDIS_URL) count there, under SERVICE_REDIS_PREFIX + `rl:`, so the limits hold
 * for the whole deployment rather than once per process.
 */
const rateLimitsPlugin: FastifyPluginAsync = async (fastify) => {
  const { config, coordination } = fastify
  const store = openLimitsStore({ config, log: fastify.log, redis: coordination.redis, key: (k) => coordination.key(k) })
  fastify.decorate('limits', store)
  fastify.addHook('onClose', async () => store.close())
  const limiter = store.local
  const window = config.rateLimitWindowMs
  // Redis keys when shared (the in-memory fallback uses the same names), short names otherwise.
  const name = store.name
  fastify.decorateRequest('limitsPending', null)

  /**
   * A principal's counter keys, made once per principal: the credential cache hands every request of a credential the
   * same frozen principal, so the keys are neither built nor hashed again on each request.
   */
  const principalKeys = new WeakMap<Principal, LimiterKeys>()
  function keysOf(principal: Principal): LimiterKeys {
    let keys = principalKeys.get(principal)
    if (keys === undefined) {
      keys = { member: name(mcpMember.key(principal)), organization: name(mcpOrganization.key(principal)), declared: new Map() }
      principalKeys.set(principal, keys)
    }
    return keys
  }

  /** The key of a declared limit's window for this principal's member (`t:<tool>:<membership>` for a tool). */
  function declaredKey(principal: Principal, declared: DeclaredLimit): string {
    const keys = keysOf(principal)
    let key = keys.declared.get(declared.id)
    if (key === undefined) keys.declared.set(declared.id, (key = name(`${declared.id}:${principal.membershipId}`)))
    return key
  }

  const memberLimit = (principal: Principal) => mcpMember.limit(config, principal)

  /** In this process: no promise, and nothing allocated when the request fits. */
  function countMember(principal: Principal, cost: number): void {
    const keys = keysOf(principal)
    const now = Date.now()
    const member = limiter.take(keys.member, memberLimit(principal), window, now, cost)
    if (member !== null) refuseMember(principal, member)
    const org = limiter.take(keys.organization, config.rateLimitOrganization, window, now, cost)
    if (org !== null) {
      // Refused by its organization, the request does not count against its member either.
      limiter.giveBack(keys.member, cost, now)
      throw mcpOrganization.refusal(org)
    }
  }

  function countDeclared(principal: Principal, declared: DeclaredLimit | readonly DeclaredLimit[] | null): void {
    if (declared === null) return
    if (!isList(declared)) return countOneDeclared(principal, declared)
    for (const d of declared) countOneDeclared(principal, d)
  }

  function countOneDeclared(principal: Principal, declared: DeclaredLimit): void {
    const refused = limiter.take(declaredKey(principal, declared), declared.limit, window)
    if (refused !== null) refuse(refused, declared.scope, declared.limiter)
  }

  const local: RateLimits = {
    enter(_request, principal) {
      countMember(principal, 1)
    },
    admit(_request, principal, extra, declared) {
      if (extra > 0) countMember(principal, extra)
      countDeclared(principal, declared)
    },
  }

  if (store.shared === null) {
    fastify.decorate('rateLimits', local)
    return
  }

  /*
   * Shared: one Redis round trip per request (RedisRateLimiter's script checks and counts the member and organization
   * windows, then the declared ones). When Redis cannot answer (connection down, or no answer within the timeout), the
   * check is made in this process instead, with the same limits: the one behaviour of every limit
   * (docs/decisions/limits.md, RedisOutage).
   */
  const { outage } = store
  const shared = store.shared
  /**
   * One round trip: the member and organization windows counting `cost` (none when 0), then the declared ones. In
   * this process instead when Redis does not answer.
   */
  function take(principal: Principal, cost: number, declared: DeclaredLimit | readonly DeclaredLimit[] | null): Promise<void> {
    const windows = sharedWindows(principal, cost, declared)
    return shared.takeStaged(windows, window).then((refused) => {
      outage.answered()
      if (refused === null) return
      const i = refused.index - windows.firstStage
      if (i < 0) {
        if (refused.index === 0) refuseMember(principal, refused)
        throw mcpOrganization.refusal(refused)
      }
      const d = declared !== null && isList(declared) ? declared[i]! : (declared as DeclaredLimit)
      refuse(refused, d.scope, d.limiter)
    }, (err: unknown) => {
      outage.failed('mcp', err)
      if (cost > 0) countMember(principal, cost)
      countDeclared(principal, declared)
    })
  }

  function sharedWindows(principal: Principal, cost: number, declared: DeclaredLimit | readonly DeclaredLimit[] | null): StagedWindows {
    const keys: string[] = []
    const limits: number[] = []
    const costs: number[] = []
    if (cost > 0) {
      const mine = keysOf(principal)
      keys.push(mine.member, mine.organization)
      limits.push(memberLimit(principal), config.rateLimitOrganization)
      costs.push(cost, cost)
    }
    const firstStage = keys.length
    for (const d of declared === null ? [] : isList(declared) ? declared : [declared]) {
      const key = declaredKey(principal, d)
      // A batch calling one tool twice counts twice in its one window.
      const at = keys.indexOf(key, firstStage)
      if (at >= 0) costs[at]!++
      else {
        keys.push(key)
        limits.push(d.limit)
        costs.push(1)
      }
    }
    return { keys, limits, costs, firstStage }
  }

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

function isList(declared: DeclaredLimit | readonly DeclaredLimit[]): declared is readonly DeclaredLimit[] {
  return Array.isArray(declared)
}

export default fp(rateLimitsPlugin, { name: PLUGIN.rateLimits, fastify: '5.x', dependencies: [PLUGIN.http, PLUGIN.coordination] })

import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import type { Principal } from '../auth/principal.js'
import { fail, type LimiterName } from '../errors/service-error.js'
import { RateLimiter, RedisRateLimiter, type RateDecision } from '../lib/rate-limiter.js'
import { PLUGIN } from './names.js'

export interface RateLimits {
  /**
   * /mcp: per member (60 with OAuth, 30 with an API key) and per organization (500), per window. `cost` counts
   * several requests at once (the further messages of a batch). A request counts in both windows or, refused by
   * either, in neither. Synchronous when the limits are counted in this process; a promise when they are shared
   * through Redis. Either way a refusal is a RATE_LIMITED service error (thrown, or the promise's rejection).
   */
  mcpRequest(principal: Principal, cost?: number): void | Promise<void>
  /** tools/call: the tool's declared limit, per member and tool. Synchronous or a promise, as `mcpRequest`. */
  toolCall(principal: Principal, tool: string, perWindow: number): void | Promise<void>
}

declare module 'fastify' {
  interface FastifyInstance {
    rateLimits: RateLimits
  }
}

/**
 * How long a shared check waits for Redis before this process decides alone (a round trip takes well under a
 * millisecond; this bounds what a stalled Redis adds to every request).
 */
export const SHARED_CHECK_TIMEOUT_MS = 1_000
/** While Redis fails, its warning is logged at most this often. */
export const SHARED_WARNING_EVERY_MS = 30_000

function refuse(decision: RateDecision, what: string, limiter: LimiterName): never {
  throw fail('RATE_LIMITED', {
    limiter,
    message: `Too many requests: ${what} allows ${decision.limit} per window`,
    retryAfter: decision.retryAfter,
    details: { limit: decision.limit, retry_after: decision.retryAfter, scope: what },
    headers: { 'x-ratelimit-limit': String(decision.limit), 'x-ratelimit-remaining': '0' },
  })
}

function refuseMember(principal: Principal, decision: RateDecision): never {
  if (principal.kind === 'oauth') refuse(decision, 'this member (OAuth)', 'mcp_member_oauth')
  refuse(decision, 'this member (API key)', 'mcp_member_api_key')
}

interface LimiterKeys {
  member: string
  organization: string
  /** [member, organization]: the windows of one /mcp request, in the order they are checked. */
  mcp: readonly [string, string]
  /** Per tool name. */
  tools: Map<string, string>
}

/**
 * The contract's Limits table for /mcp and tools, windows from configuration. One process counts in memory; processes
 * coordinated through Redis (SERVICE_REDIS_URL) count there, under SERVICE_REDIS_PREFIX + `rl:`, so the limits hold
 * for the whole deployment rather than once per process.
 */
const rateLimitsPlugin: FastifyPluginAsync = async (fastify) => {
  const { config, coordination } = fastify
  const limiter = new RateLimiter()
  const window = config.rateLimitWindowMs
  // Redis keys when shared (the in-memory fallback uses the same names), short names otherwise.
  const name = coordination.redis === null ? (key: string) => key : (key: string) => coordination.key(`rl:${key}`)

  /**
   * A principal's counter keys, made once per principal: the credential cache hands every request of a credential the
   * same frozen principal, so the keys are neither built nor hashed again on each request.
   */
  const principalKeys = new WeakMap<Principal, LimiterKeys>()
  function keysOf(principal: Principal): LimiterKeys {
    let keys = principalKeys.get(principal)
    if (keys === undefined) {
      const member = name(`m:${principal.kind}:${principal.membershipId}`)
      const organization = name(`o:${principal.organizationId}`)
      keys = { member, organization, mcp: [member, organization], tools: new Map() }
      principalKeys.set(principal, keys)
    }
    return keys
  }

  function toolKey(principal: Principal, tool: string): string {
    const keys = keysOf(principal)
    let key = keys.tools.get(tool)
    if (key === undefined) keys.tools.set(tool, (key = name(`t:${tool}:${principal.membershipId}`)))
    return key
  }

  /** In this process: no promise, and nothing allocated when the request fits (every request takes this path). */
  const local: RateLimits = {
    mcpRequest(principal, cost = 1) {
      const keys = keysOf(principal)
      const now = Date.now()
      const perMember = principal.kind === 'oauth' ? config.rateLimitOAuthMember : config.rateLimitApiKeyMember
      const member = limiter.take(keys.member, perMember, window, now, cost)
      if (member !== null) refuseMember(principal, member)
      const org = limiter.take(keys.organization, config.rateLimitOrganization, window, now, cost)
      if (org !== null) {
        // Refused by its organization, the request does not count against its member either.
        limiter.giveBack(keys.member, cost, now)
        refuse(org, 'this organization', 'mcp_organization')
      }
    },
    toolCall(principal, tool, perWindow) {
      const refused = limiter.take(toolKey(principal, tool), perWindow * config.rateLimitToolFactor, window)
      if (refused !== null) refuse(refused, `tool ${tool}`, 'tool')
    },
  }

  const timer = setInterval(() => limiter.sweep(), Math.max(1000, window))
  timer.unref()
  fastify.addHook('onClose', async () => clearInterval(timer))

  const redis = coordination.redis
  if (redis === null) {
    fastify.decorate('rateLimits', local)
    return
  }

  /*
   * Shared: one Redis round trip per check (RedisRateLimiter's script checks and counts the member and organization
   * windows together). When Redis cannot answer (connection down, or no answer within the timeout), the check is made
   * in this process instead, with the same limits: the service stays up (refusing every request with 503 would turn a
   * Redis outage into an outage of /mcp), the credential check still holds, and capacity is still protected, only per
   * process (N processes then allow up to N times the limits) until Redis answers again. That is logged as a warning,
   * at most once per SHARED_WARNING_EVERY_MS, and its end at info.
   */
  const shared = new RedisRateLimiter(redis, { timeoutMs: SHARED_CHECK_TIMEOUT_MS })
  const mcpLimits = { oauth: [config.rateLimitOAuthMember, config.rateLimitOrganization], apiKey: [config.rateLimitApiKeyMember, config.rateLimitOrganization] }
  let degraded = false
  let warnedAt = -Infinity
  const unavailable = (err: unknown) => {
    degraded = true
    const now = Date.now()
    if (now - warnedAt < SHARED_WARNING_EVERY_MS) return
    warnedAt = now
    fastify.log.warn({ err: (err as Error).message }, 'rate limits: Redis did not answer; this process counts on its own until it does')
  }
  const answered = () => {
    if (!degraded) return
    degraded = false
    warnedAt = -Infinity
    fastify.log.info('rate limits: shared through Redis again')
  }

  fastify.decorate('rateLimits', {
    mcpRequest(principal, cost = 1) {
      const limits = principal.kind === 'oauth' ? mcpLimits.oauth : mcpLimits.apiKey
      return shared.take(keysOf(principal).mcp, limits, window, cost).then((refused) => {
        answered()
        if (refused === null) return
        if (refused.index === 0) refuseMember(principal, refused)
        refuse(refused, 'this organization', 'mcp_organization')
      }, (err: unknown) => {
        unavailable(err)
        local.mcpRequest(principal, cost)
      })
    },
    toolCall(principal, tool, perWindow) {
      return shared.take([toolKey(principal, tool)], [perWindow * config.rateLimitToolFactor], window).then((refused) => {
        answered()
        if (refused !== null) refuse(refused, `tool ${tool}`, 'tool')
      }, (err: unknown) => {
        unavailable(err)
        local.toolCall(principal, tool, perWindow)
      })
    },
  } satisfies RateLimits)
}

export default fp(rateLimitsPlugin, { name: PLUGIN.rateLimits, fastify: '5.x', dependencies: [PLUGIN.http, PLUGIN.coordination] })

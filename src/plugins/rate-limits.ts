import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import type { Principal } from '../auth/principal.js'
import { fail, type LimiterName } from '../errors/service-error.js'
import { RateLimiter, type RateDecision } from '../lib/rate-limiter.js'
import { PLUGIN } from './names.js'

export interface RateLimits {
  /**
   * /mcp: per member (60 with OAuth, 30 with an API key) and per organization (500), per window. `cost` counts
   * several requests at once (the further messages of a batch).
   */
  mcpRequest(principal: Principal, cost?: number): void
  /** tools/call: the tool's declared limit, per member and tool. */
  toolCall(principal: Principal, tool: string, perWindow: number): void
}

declare module 'fastify' {
  interface FastifyInstance {
    rateLimits: RateLimits
  }
}

function refuse(decision: RateDecision, what: string, limiter: LimiterName): never {
  throw fail('RATE_LIMITED', {
    limiter,
    message: `Too many requests: ${what} allows ${decision.limit} per window`,
    retryAfter: decision.retryAfter,
    details: { limit: decision.limit, retry_after: decision.retryAfter, scope: what },
    headers: { 'x-ratelimit-limit': String(decision.limit), 'x-ratelimit-remaining': '0' },
  })
}

interface LimiterKeys {
  member: string
  organization: string
  /** Per tool name. */
  tools: Map<string, string>
}

/**
 * A principal's counter keys, made once per principal: the credential cache hands every request of a credential the
 * same frozen principal, so the keys are neither built nor hashed again on each request.
 */
const principalKeys = new WeakMap<Principal, LimiterKeys>()

function keysOf(principal: Principal): LimiterKeys {
  let keys = principalKeys.get(principal)
  if (keys === undefined) {
    keys = { member: `m:${principal.kind}:${principal.membershipId}`, organization: `o:${principal.organizationId}`, tools: new Map() }
    principalKeys.set(principal, keys)
  }
  return keys
}

/** The contract's Limits table for /mcp and tools, in memory, windows from configuration. */
const rateLimitsPlugin: FastifyPluginAsync = async (fastify) => {
  const { config } = fastify
  const limiter = new RateLimiter()
  const window = config.rateLimitWindowMs

  const limits: RateLimits = {
    mcpRequest(principal, cost = 1) {
      const keys = keysOf(principal)
      const now = Date.now()
      const perMember = principal.kind === 'oauth' ? config.rateLimitOAuthMember : config.rateLimitApiKeyMember
      const member = limiter.take(keys.member, perMember, window, now, cost)
      if (member !== null) {
        if (principal.kind === 'oauth') refuse(member, 'this member (OAuth)', 'mcp_member_oauth')
        refuse(member, 'this member (API key)', 'mcp_member_api_key')
      }
      const org = limiter.take(keys.organization, config.rateLimitOrganization, window, now, cost)
      if (org !== null) refuse(org, 'this organization', 'mcp_organization')
    },
    toolCall(principal, tool, perWindow) {
      const keys = keysOf(principal)
      let key = keys.tools.get(tool)
      if (key === undefined) keys.tools.set(tool, (key = `t:${tool}:${principal.membershipId}`))
      const refused = limiter.take(key, perWindow * config.rateLimitToolFactor, window)
      if (refused !== null) refuse(refused, `tool ${tool}`, 'tool')
    },
  }
  fastify.decorate('rateLimits', limits)

  const timer = setInterval(() => limiter.sweep(), Math.max(1000, window))
  timer.unref()
  fastify.addHook('onClose', async () => clearInterval(timer))
}

export default fp(rateLimitsPlugin, { name: PLUGIN.rateLimits, fastify: '5.x', dependencies: [PLUGIN.http] })

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

/** The contract's Limits table for /mcp and tools, in memory, windows from configuration. */
const rateLimitsPlugin: FastifyPluginAsync = async (fastify) => {
  const { config } = fastify
  const limiter = new RateLimiter()
  const window = config.rateLimitWindowMs

  const limits: RateLimits = {
    mcpRequest(principal, cost = 1) {
      const perMember = principal.kind === 'oauth' ? config.rateLimitOAuthMember : config.rateLimitApiKeyMember
      const member = limiter.hit(`m:${principal.kind}:${principal.membershipId}`, perMember, window, Date.now(), cost)
      if (!member.allowed) {
        if (principal.kind === 'oauth') refuse(member, 'this member (OAuth)', 'mcp_member_oauth')
        refuse(member, 'this member (API key)', 'mcp_member_api_key')
      }
      const org = limiter.hit(`o:${principal.organizationId}`, config.rateLimitOrganization, window, Date.now(), cost)
      if (!org.allowed) refuse(org, 'this organization', 'mcp_organization')
    },
    toolCall(principal, tool, perWindow) {
      const decision = limiter.hit(`t:${tool}:${principal.membershipId}`, perWindow * config.rateLimitToolFactor, window)
      if (!decision.allowed) refuse(decision, `tool ${tool}`, 'tool')
    },
  }
  fastify.decorate('rateLimits', limits)

  const timer = setInterval(() => limiter.sweep(), Math.max(1000, window))
  timer.unref()
  fastify.addHook('onClose', async () => clearInterval(timer))
}

export default fp(rateLimitsPlugin, { name: PLUGIN.rateLimits, fastify: '5.x', dependencies: [PLUGIN.http] })

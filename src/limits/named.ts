import type { Principal } from '../auth/principal.js'
import type { Config } from '../config.js'
import { type LimiterName, ServiceError } from '../errors/service-error.js'
import type { RateDecision } from './fixed-windows.js'
import type { SignInThrottleSettings } from './sign-in-throttle.js'

/**
 * Every limit the server enforces, each declared once: what it counts under which key, its window or capacity from
 * configuration, what its refusal says, and which limiter it reports (the `limiter` label of
 * mcp_rate_limit_refusals_total). The counting itself is the store's (fixed-windows.ts, held-open.ts,
 * sign-in-throttle.ts); the behaviour when Redis does not answer is redis-answer.ts's RedisOutage
 * (docs/decisions/limits.md). A tool's own limit is declared by the tool (rateLimitPerMinute) and made into a
 * DeclaredLimit by the tools plugin.
 */

/** A fixed window a request counts in, with what refuses it. */
export interface NamedWindow {
  /** The key's prefix under the deployment's Redis prefix (the in-memory store uses the same names). */
  readonly prefix: string
  readonly limit: number
  readonly windowMs: number
  readonly limiter: LimiterName
  /** The refusal once the window is full (a RATE_LIMITED service error). */
  refusal(decision: RateDecision): ServiceError
}

/** The headers every fixed window's refusal carries. */
function limitHeaders(limit: number): Record<string, string> {
  return { 'x-ratelimit-limit': String(limit), 'x-ratelimit-remaining': '0' }
}

/** /mcp's windows and a tool's: "Too many requests: <scope> allows N per window". */
export function requestRefusal(
  decision: RateDecision,
  scope: string,
  limiter: LimiterName,
  message = `Too many requests: ${scope} allows ${decision.limit} per window`,
): ServiceError {
  return new ServiceError('RATE_LIMITED', {
    limiter,
    message,
    retryAfter: decision.retryAfter,
    details: { limit: decision.limit, retry_after: decision.retryAfter, scope },
    headers: limitHeaders(decision.limit),
  })
}

/** /mcp per member: SERVICE_RATE_LIMIT_OAUTH_MEMBER or SERVICE_RATE_LIMIT_API_KEY_MEMBER per window. */
export const mcpMember = {
  key: (principal: Principal) => `m:${principal.kind}:${principal.membershipId}`,
  limit: (config: Config, principal: Principal) => (principal.kind === 'oauth' ? config.rateLimitOAuthMember : config.rateLimitApiKeyMember),
  refusal(principal: Principal, decision: RateDecision): ServiceError {
    return principal.kind === 'oauth'
      ? requestRefusal(decision, 'this member (OAuth)', 'mcp_member_oauth')
      : requestRefusal(decision, 'this member (API key)', 'mcp_member_api_key')
  },
}

/** /mcp per organization: SERVICE_RATE_LIMIT_ORGANIZATION per window. */
export const mcpOrganization = {
  key: (principal: Principal) => `o:${principal.organizationId}`,
  limit: (config: Config) => config.rateLimitOrganization,
  refusal: (decision: RateDecision) => requestRefusal(decision, 'this organization', 'mcp_organization'),
}

/** POST /oauth/register per client IP (the contract: 10 per hour). */
export function oauthRegister(config: Config): NamedWindow {
  return {
    prefix: 'orl:register:',
    limit: config.registerRateLimit,
    windowMs: config.registerRateLimitWindowMs,
    limiter: 'oauth_register',
    refusal: (decision) => requestRefusal(decision, 'registrations per IP', 'oauth_register', `Too many registrations from this address: ${decision.limit} per window`),
  }
}

/** GET /oauth/authorize per client address (clientAddressKey). */
export function oauthAuthorize(config: Config): NamedWindow {
  return {
    prefix: 'orl:authorize:',
    limit: config.authorizeRateLimit,
    windowMs: config.authorizeRateLimitWindowMs,
    limiter: 'oauth_authorize',
    refusal: (decision) => requestRefusal(decision, 'authorization requests per address', 'oauth_authorize', `Too many sign-in requests from your network; try again in ${inWords(decision.retryAfter)}.`),
  }
}

/**
 * Client metadata document fetches per document host (SERVICE_CLIENT_DOCUMENT_FETCH_LIMIT per window; cached answers
 * are not counted). Its refusal is the client's `invalid_client`, like every other reason a document cannot be used
 * (docs/decisions/client-metadata-documents.md).
 */
export function clientDocumentFetches(config: Config): NamedWindow {
  return {
    prefix: 'orl:client-document:',
    limit: config.clientDocumentFetchLimit,
    windowMs: config.clientDocumentFetchLimitWindowMs,
    limiter: 'client_document_fetch',
    refusal: (decision) => new ServiceError('OAUTH_INVALID_CLIENT', {
      limiter: 'client_document_fetch',
      message: `too many client metadata document fetches from this host; try again in ${inWords(decision.retryAfter)}`,
      retryAfter: decision.retryAfter,
    }),
  }
}

/**
 * Unanswered authorization requests per client address (SERVICE_PENDING_AUTHORIZATIONS_PER_ADDRESS). Counted in the
 * database, where the requests themselves are (the rows are what the bound protects): shared by every process without
 * Redis, and never counted in memory.
 */
export function pendingAuthorizationsRefusal(config: Config, retryAfter: number): ServiceError {
  return new ServiceError('RATE_LIMITED', {
    limiter: 'pending_authorizations',
    message: `Too many sign-ins are in progress from your network. Finish or cancel one of them, or try again in ${inWords(retryAfter)}.`,
    retryAfter,
    details: { limit: config.pendingAuthorizationsPerAddress, retry_after: retryAfter, scope: 'pending authorizations per address' },
  })
}

/** Open subscriptions/listen streams per member (SERVICE_LISTEN_MAX_PER_MEMBER), held open in held-open.ts. */
export const listenStreams = {
  key: (principal: Principal) => `ls:${principal.membershipId}`,
  capacity: (config: Config) => config.listenMaxPerMember,
  refusal(config: Config): ServiceError {
    const max = config.listenMaxPerMember
    return new ServiceError('RATE_LIMITED', {
      limiter: 'listen_streams',
      message: `A member may keep ${max} subscriptions/listen streams open; close one first`,
      retryAfter: 60,
      details: { limit: max, scope: 'open subscriptions/listen streams of this member' },
      headers: limitHeaders(max),
    })
  },
}

/** Failed sign-ins per account and per address (sign-in-throttle.ts), from configuration. */
export function signInThrottleSettings(config: Config): SignInThrottleSettings {
  return {
    freeAttempts: config.signInFreeAttempts,
    addressFreeAttempts: config.signInAddressFreeAttempts,
    delayMs: config.signInDelayMs,
    maxDelayMs: config.signInMaxDelayMs,
  }
}

/** The sign-in throttle's refusal: a 429 whose message tells the person what to wait for, and how long. */
export function signInRefusal(by: 'account' | 'address', retryAfter: number): ServiceError {
  const whose = by === 'account' ? 'for this account' : 'from your network'
  return new ServiceError('RATE_LIMITED', {
    limiter: by === 'account' ? 'sign_in_account' : 'sign_in_address',
    message: `Too many failed sign-ins ${whose}; try again in ${inWords(retryAfter)}.`,
    retryAfter,
    details: { retry_after: retryAfter, scope: by === 'account' ? 'failed sign-ins per account' : 'failed sign-ins per address' },
  })
}

/** `1 second`, `42 seconds`, or whole minutes from two minutes on. */
export function inWords(seconds: number): string {
  if (seconds < 120) return seconds === 1 ? '1 second' : `${seconds} seconds`
  return `${Math.ceil(seconds / 60)} minutes`
}

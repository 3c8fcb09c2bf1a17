import { catalog, type ErrorCode } from './catalog.js'

export interface FailOptions {
  /** Public, structured detail for the client (validation paths, the offending value's name). */
  details?: unknown
  /** Replaces the catalog message with a more specific, still public, sentence. */
  message?: string
  /** Internal cause, logged but never sent. */
  cause?: unknown
  /** Extra response headers (WWW-Authenticate, Retry-After …). */
  headers?: Record<string, string>
  /** Seconds until a retry may succeed (rate limits). */
  retryAfter?: number
  /** Which limiter refused (RATE_LIMITED), for the metrics; never sent. */
  limiter?: LimiterName
}

/** Every limiter that answers RATE_LIMITED: the `limiter` label of mcp_rate_limit_refusals_total. */
export type LimiterName =
  | 'mcp_member_oauth'
  | 'mcp_member_api_key'
  | 'mcp_organization'
  | 'tool'
  | 'listen_streams'
  | 'oauth_register'
  | 'oauth_authorize'
  | 'pending_authorizations'
  | 'sign_in_account'
  | 'sign_in_address'
  | 'client_document_fetch'


/** The limiters of a whole /mcp request (its member's and organization's windows), not of one of its messages. */
export const REQUEST_LIMITERS: ReadonlySet<LimiterName> = new Set<LimiterName>(['mcp_member_oauth', 'mcp_member_api_key', 'mcp_organization'])

/** The only error type the server throws on purpose. Everything else is masked as INTERNAL_ERROR. */
export class ServiceError extends Error {
  readonly code: ErrorCode
  readonly status: number
  readonly details: unknown
  readonly action: string
  readonly headers: Record<string, string> | undefined
  readonly retryAfter: number | undefined
  readonly limiter: LimiterName | undefined

  constructor(code: ErrorCode, options: FailOptions = {}) {
    const spec = catalog[code]
    super(options.message ?? spec.message, options.cause === undefined ? undefined : { cause: options.cause })
    this.name = 'ServiceError'
    this.code = code
    this.status = spec.status
    this.details = options.details ?? null
    this.action = spec.action
    this.headers = options.headers
    this.retryAfter = options.retryAfter
    this.limiter = options.limiter
  }
}

/**
 * Throws the catalog error `code`: a handler's way to fail. It throws rather than returns, so `fail('X')` written
 * without `throw` still stops the handler, and TypeScript treats the code after it as unreachable (a value checked by
 * `if (!app) fail('RESOURCE_NOT_FOUND')` is narrowed). `throw fail('X')` reads the same and does the same. Code that
 * needs the error as a value (to return, reject or pass on) builds it with `new ServiceError(code, options)`.
 * (docs/decisions/tool-failures.md)
 */
export function fail(code: ErrorCode, options?: FailOptions): never {
  const error = new ServiceError(code, options)
  // The stack starts where the handler failed, not in here.
  Error.captureStackTrace(error, fail)
  throw error
}

export function isServiceError(value: unknown): value is ServiceError {
  return value instanceof ServiceError
}

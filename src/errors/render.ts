import type { Era } from '../rpc/types.js'
import { catalog, type ErrorSpec } from './catalog.js'
import { ServiceError, isServiceError } from './service-error.js'

/**
 * Renderers: the only place error bodies are built. Anything that is not a ServiceError, or whose catalog entry is not
 * exposed, is rendered as INTERNAL_ERROR so that stack traces, SQL and internal messages never reach a client.
 */

export function toServiceError(err: unknown): ServiceError {
  if (isServiceError(err)) {
    const spec: ErrorSpec = catalog[err.code]
    if (spec.expose === false || (spec.status >= 500 && spec.expose !== true)) return new ServiceError('INTERNAL_ERROR', { cause: err })
    return err
  }
  return new ServiceError('INTERNAL_ERROR', { cause: err })
}

export interface ServiceErrorBody {
  error: { code: string; message: string; details: unknown; action: string }
}

export function toServiceBody(err: unknown): ServiceErrorBody {
  const e = toServiceError(err)
  return { error: { code: e.code, message: e.message, details: e.details ?? null, action: e.action } }
}

export interface OAuthErrorBody {
  error: string
  error_description: string
}

export function toOAuthBody(err: unknown): OAuthErrorBody {
  const e = toServiceError(err)
  const spec: ErrorSpec = catalog[e.code]
  return { error: spec.oauth ?? 'invalid_request', error_description: e.message }
}

export interface RpcErrorObject {
  code: number
  message: string
  data?: { code: string; details?: unknown; action: string; [specField: string]: unknown }
}

/**
 * Exposed codes without a JSON-RPC number of their own: -32000, the generic implementation-defined server error, in
 * session requests. The 2026-07-28 revision asks new implementations to keep out of -32000…-32019, so stateless
 * requests get an application code outside the reserved range instead.
 */
export const LEGACY_SERVER_ERROR = -32000
export const MODERN_SERVER_ERROR = -31000

/** The JSON-RPC error of `err` as `era` numbers it (sessions keep the codes of their revision, e.g. -32002). */
export function toRpcError(err: unknown, era: Era = 'legacy'): RpcErrorObject {
  const e = toServiceError(err)
  const spec: ErrorSpec = catalog[e.code]
  const code = era === 'legacy' ? spec.rpcInSessions ?? spec.rpc ?? LEGACY_SERVER_ERROR : spec.rpc ?? MODERN_SERVER_ERROR
  const hasDetails = e.details !== null && e.details !== undefined
  const data: NonNullable<RpcErrorObject['data']> = spec.rpcDataIsDetails && hasDetails && typeof e.details === 'object' && !Array.isArray(e.details)
    ? { ...(e.details as Record<string, unknown>), code: e.code, action: e.action }
    : { code: e.code, action: e.action }
  if (hasDetails && !spec.rpcDataIsDetails) data.details = e.details
  return { code, message: e.message, data }
}

export interface ToolErrorResult {
  isError: true
  content: Array<{ type: 'text'; text: string }>
  _meta?: { guidance: { action: string; retryAfter?: number } }
  [key: string]: unknown
}

export function toToolResult(err: unknown): ToolErrorResult {
  const e = toServiceError(err)
  const guidance: { action: string; retryAfter?: number } = { action: e.action }
  if (e.retryAfter !== undefined) guidance.retryAfter = e.retryAfter
  return {
    isError: true,
    // `details` only when the error has some: the model reads them (a quota's limit and usage, a deployment's id).
    content: [{ type: 'text', text: JSON.stringify(e.details === null ? { code: e.code, message: e.message } : { code: e.code, message: e.message, details: e.details }) }],
    _meta: { guidance },
  }
}

/** Builds the RFC 6750 / RFC 9728 challenge from one place. */
export function wwwAuthenticate(params: {
  resourceMetadata: string
  error?: string
  errorDescription?: string
  scope?: string
}): string {
  const parts: string[] = []
  if (params.error) parts.push(`error="${params.error}"`)
  if (params.errorDescription) parts.push(`error_description="${params.errorDescription.replace(/["\\]/g, '')}"`)
  if (params.scope) parts.push(`scope="${params.scope}"`)
  parts.push(`resource_metadata="${params.resourceMetadata}"`)
  return `Bearer ${parts.join(', ')}`
}

/** JSON-RPC 2.0 shapes and the MCP protocol revisions this server speaks. */

export type RequestId = string | number

export interface JsonRpcRequest {
  jsonrpc: '2.0'
  id: RequestId
  method: string
  params?: Record<string, unknown>
}

export interface JsonRpcNotification {
  jsonrpc: '2.0'
  method: string
  params?: Record<string, unknown>
}

export interface JsonRpcErrorObject {
  code: number
  message: string
  data?: unknown
}

export interface JsonRpcResponse {
  jsonrpc: '2.0'
  id: RequestId | null
  result?: Record<string, unknown>
  error?: JsonRpcErrorObject
}

export type JsonRpcMessage = JsonRpcRequest | JsonRpcNotification | JsonRpcResponse

export type Classified =
  | { kind: 'request'; message: JsonRpcRequest }
  | { kind: 'notification'; message: JsonRpcNotification }
  | { kind: 'response'; message: JsonRpcResponse }
  | { kind: 'invalid'; id: RequestId | null; details: unknown }

/**
 * The two eras of MCP served on one endpoint. `legacy`: the session-based revisions, reached through `initialize`.
 * `modern`: the stateless revisions, where every request names its revision in `_meta` (2026-07-28 on).
 */
export type Era = 'legacy' | 'modern'
export const ERAS: readonly Era[] = ['legacy', 'modern']

/** Session-based revisions, newest first. The negotiated one is stored on the session and governs it. */
export const LEGACY_PROTOCOL_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26'] as const
export type LegacyProtocolVersion = (typeof LEGACY_PROTOCOL_VERSIONS)[number]
export const LATEST_LEGACY_PROTOCOL_VERSION: LegacyProtocolVersion = '2025-11-25'

/** Stateless revisions: what `server/discover` and the -32022 error list. */
export const MODERN_PROTOCOL_VERSIONS = ['2026-07-28'] as const
export type ModernProtocolVersion = (typeof MODERN_PROTOCOL_VERSIONS)[number]

export const PROTOCOL_VERSIONS = [...MODERN_PROTOCOL_VERSIONS, ...LEGACY_PROTOCOL_VERSIONS] as const
export type ProtocolVersion = LegacyProtocolVersion | ModernProtocolVersion

export function isLegacyProtocolVersion(value: string): value is LegacyProtocolVersion {
  return (LEGACY_PROTOCOL_VERSIONS as readonly string[]).includes(value)
}

export function isModernProtocolVersion(value: string): value is ModernProtocolVersion {
  return (MODERN_PROTOCOL_VERSIONS as readonly string[]).includes(value)
}

/** True when `version` is `since` or newer (revisions are date strings, so they compare lexically). */
export function atLeast(version: ProtocolVersion, since: ProtocolVersion): boolean {
  return version >= since
}

export const LOG_LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'] as const
export type LogLevel = (typeof LOG_LEVELS)[number]

export function logLevelRank(level: LogLevel): number {
  return LOG_LEVELS.indexOf(level)
}

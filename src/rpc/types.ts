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

/** Newest first. The negotiated revision is stored on the session and governs it. */
export const PROTOCOL_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26'] as const
export type ProtocolVersion = (typeof PROTOCOL_VERSIONS)[number]
export const LATEST_PROTOCOL_VERSION: ProtocolVersion = '2025-11-25'

export function isProtocolVersion(value: string): value is ProtocolVersion {
  return (PROTOCOL_VERSIONS as readonly string[]).includes(value)
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

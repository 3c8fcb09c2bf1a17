import { request as undiciRequest } from 'undici'
import { ACCEPT_BOTH, readReply, type RpcReply } from './mcp.js'
import { openLive, type LiveStream } from './stream.js'

/**
 * Stateless (2026-07-28) requests as a conforming client sends them: every POST carries the revision, capabilities and
 * client info in `params._meta`, and the MCP-Protocol-Version, Mcp-Method and Mcp-Name headers that mirror the body.
 */

export const MODERN = '2026-07-28'
export const PROTOCOL_VERSION_KEY = 'io.modelcontextprotocol/protocolVersion'
export const CLIENT_CAPABILITIES_KEY = 'io.modelcontextprotocol/clientCapabilities'
export const CLIENT_INFO_KEY = 'io.modelcontextprotocol/clientInfo'
export const LOG_LEVEL_KEY = 'io.modelcontextprotocol/logLevel'
export const SERVER_INFO_KEY = 'io.modelcontextprotocol/serverInfo'
export const SUBSCRIPTION_ID_KEY = 'io.modelcontextprotocol/subscriptionId'
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks'

/** Capabilities a test client declares: elicitation (form), the tasks extension, or nothing. */
export const ELICITING = { elicitation: {} }
export const WITH_TASKS = { elicitation: {}, extensions: { [TASKS_EXTENSION]: {} } }

export interface ModernOptions {
  /** Declared in `_meta` (default: none, `{}`). */
  capabilities?: Record<string, unknown>
  /** Extra `_meta` keys (logLevel, progressToken); they win over the defaults. */
  meta?: Record<string, unknown>
  /** Headers added to (or, with `undefined`, removed from) the conforming set. */
  headers?: Record<string, string | undefined>
  id?: number | string
}

/** `params._meta` of a conforming request. */
export function modernMeta(capabilities: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    [PROTOCOL_VERSION_KEY]: MODERN,
    [CLIENT_CAPABILITIES_KEY]: capabilities,
    [CLIENT_INFO_KEY]: { name: 'test', version: '1.0.0' },
    ...extra,
  }
}

/** The value Mcp-Name mirrors for `method`, if any. */
function nameOf(method: string, params: Record<string, unknown>): string | undefined {
  const source = method === 'resources/read' ? 'uri' : method.startsWith('tasks/') ? 'taskId' : method === 'tools/call' || method === 'prompts/get' ? 'name' : undefined
  const value = source === undefined ? undefined : params[source]
  return typeof value === 'string' ? value : undefined
}

/** The body and headers of a conforming request (exposed for tests that then break one part). */
export function modernRequest(token: string, method: string, params: Record<string, unknown> = {}, options: ModernOptions = {}) {
  const body = {
    jsonrpc: '2.0',
    id: options.id ?? 1,
    method,
    params: { ...params, _meta: modernMeta(options.capabilities, options.meta) },
  }
  const headers: Record<string, string> = {
    authorization: `Bearer ${token}`,
    'content-type': 'application/json',
    accept: ACCEPT_BOTH,
    'mcp-protocol-version': MODERN,
    'mcp-method': method,
  }
  const name = nameOf(method, params)
  if (name !== undefined) headers['mcp-name'] = name
  for (const [k, v] of Object.entries(options.headers ?? {})) {
    if (v === undefined) delete headers[k.toLowerCase()]
    else headers[k.toLowerCase()] = v
  }
  return { body, headers }
}

/** POSTs a conforming stateless request and reads the whole answer (JSON or a finite SSE stream). */
export async function modernPost(mcpUrl: string, token: string, method: string, params: Record<string, unknown> = {}, options: ModernOptions = {}): Promise<RpcReply> {
  const { body, headers } = modernRequest(token, method, params, options)
  return rawPost(mcpUrl, body, headers)
}

/** POSTs any body with exactly these headers. */
export async function rawPost(mcpUrl: string, body: unknown, headers: Record<string, string>): Promise<RpcReply> {
  const res = await undiciRequest(mcpUrl, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) })
  return readReply(res)
}

/** Opens a conforming stateless request and reads its answer live (a long call, a subscriptions/listen stream). */
export function modernLive(mcpUrl: string, token: string, method: string, params: Record<string, unknown> = {}, options: ModernOptions = {}): Promise<LiveStream> {
  const { body, headers } = modernRequest(token, method, params, options)
  return openLive(mcpUrl, { method: 'POST', headers, body: JSON.stringify(body) })
}

/** The JSON-RPC answer to request `id` in a reply (JSON, or the response event of an SSE answer). */
export function answerOf(reply: RpcReply, id: number | string = 1): any {
  if (reply.json) return reply.json
  return reply.messages.find((m) => m.id === id && ('result' in m || 'error' in m))
}

/** A stateless tools/call; the arguments and any MRTR fields (`requestState`, `inputResponses`) go in `extra`. */
export function modernCall(mcpUrl: string, token: string, name: string, args: Record<string, unknown> = {}, options: ModernOptions & { extra?: Record<string, unknown> } = {}): Promise<RpcReply> {
  return modernPost(mcpUrl, token, 'tools/call', { name, arguments: args, ...options.extra }, options)
}

/** The answer to a confirmation, as an MRTR input response. */
export function confirmAnswer(action: 'accept' | 'decline' | 'cancel' = 'accept', confirm: unknown = true): Record<string, unknown> {
  return { action, ...(action === 'accept' ? { content: { confirm } } : {}) }
}

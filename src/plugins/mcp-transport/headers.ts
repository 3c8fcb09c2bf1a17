import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Config } from '../../config.js'
import { fail } from '../../errors/service-error.js'
import { messageJson } from '../../lib/message-json.js'
import { ownOrigins } from '../../lib/own-origins.js'
import type { JsonRpcMessage } from '../../rpc/types.js'

export interface Acceptance {
  readonly json: boolean
  readonly sse: boolean
}

const ACCEPT_ANY: Acceptance = Object.freeze({ json: true, sse: true })
// Clients send one Accept value over and over; remember the last few parsed ones (bounded, so junk cannot grow it).
const acceptMemo = new Map<string, Acceptance>()
const ACCEPT_MEMO_SIZE = 64

/** Reads Accept: `*\/*` and `application/*` count for JSON; `q=0` excludes a type; no header accepts anything. */
export function parseAccept(header: string | undefined): Acceptance {
  if (header === undefined) return ACCEPT_ANY
  const known = acceptMemo.get(header)
  if (known !== undefined) return known
  const parsed = Object.freeze(parseAcceptValue(header))
  if (acceptMemo.size >= ACCEPT_MEMO_SIZE) acceptMemo.delete(acceptMemo.keys().next().value as string)
  acceptMemo.set(header, parsed)
  return parsed
}

function parseAcceptValue(header: string): Acceptance {
  if (header.trim() === '') return ACCEPT_ANY
  const out = { json: false, sse: false }
  for (const part of header.split(',')) {
    const [rawType, ...params] = part.split(';')
    const type = (rawType ?? '').trim().toLowerCase()
    const q = params.map((p) => p.trim().toLowerCase()).find((p) => p.startsWith('q='))
    if (q !== undefined && Number(q.slice(2)) === 0) continue
    if (type === 'application/json' || type === 'application/*') out.json = true
    if (type === 'text/event-stream' || type === 'text/*') out.sse = true
    if (type === '*/*') out.json = out.sse = true
  }
  return out
}

export function isJsonContentType(header: string | undefined): boolean {
  if (!header) return false
  if (header === 'application/json') return true
  return header.split(';')[0]!.trim().toLowerCase() === 'application/json'
}

/**
 * DNS-rebinding defence and CORS: a request with an Origin must come from the base address (any loopback name of a
 * loopback one) or an allowed origin, and for a loopback base address its Host must name this server (a rebound name
 * is refused even on a request a browser sends without Origin). Allowed browser origins get CORS headers that expose
 * Mcp-Session-Id and WWW-Authenticate. Which origins and hosts are ours: lib/own-origins.ts,
 * docs/decisions/http-errors.md.
 */
export function checkOriginAndHost(config: Config, request: FastifyRequest, reply: FastifyReply): void {
  const own = ownOrigins(config)
  const origin = request.headers.origin
  if (origin !== undefined && !own.isAllowed(origin)) throw fail('FORBIDDEN_ORIGIN', { details: { origin } })
  const host = request.headers.host
  if (!own.acceptsHost(host)) {
    throw fail('FORBIDDEN_ORIGIN', { message: `The Host of this request is not a name of this server: call it by ${config.baseUrl}`, details: { host } })
  }
  if (origin === undefined) return
  reply.header('access-control-allow-origin', origin)
  reply.header('vary', 'Origin')
  reply.header('access-control-expose-headers', 'Mcp-Session-Id, WWW-Authenticate, X-Request-Id, X-Service-MCP-Version, MCP-Protocol-Version, Retry-After, X-RateLimit-Limit, X-RateLimit-Remaining')
}

/** Request headers a browser client may send: both eras' (2026-07-28 adds Mcp-Method, Mcp-Name and Mcp-Param-*). */
const ALLOWED_REQUEST_HEADERS = ['Authorization', 'Content-Type', 'Accept', 'Mcp-Session-Id', 'MCP-Protocol-Version', 'Last-Event-ID', 'Mcp-Method', 'Mcp-Name']
const ALLOWED_LOWER = new Set(ALLOWED_REQUEST_HEADERS.map((h) => h.toLowerCase()))
const PARAM_HEADER = /^mcp-param-[!#$%&'*+\-.^_`|~0-9a-z]+$/

/**
 * CORS preflight. `Mcp-Param-{Name}` headers depend on each tool's schema and cannot be listed in advance (and `*`
 * does not cover Authorization), so the headers a preflight asks for are echoed when every one is allowed.
 */
export function preflightHeaders(request: FastifyRequest, reply: FastifyReply): void {
  reply.header('access-control-allow-methods', 'GET, POST, DELETE, OPTIONS')
  const asked = String(request.headers['access-control-request-headers'] ?? '').split(',').map((h) => h.trim().toLowerCase()).filter(Boolean)
  const params = asked.filter((h) => PARAM_HEADER.test(h))
  const acceptable = asked.every((h) => ALLOWED_LOWER.has(h) || PARAM_HEADER.test(h))
  reply.header('access-control-allow-headers', [...ALLOWED_REQUEST_HEADERS, ...(acceptable ? params : [])].join(', '))
  reply.header('access-control-max-age', '600')
  reply.header('vary', 'Origin, Access-Control-Request-Headers')
}

const SESSION_ID = /^[\x21-\x7e]{1,128}$/

export function sessionIdHeader(request: FastifyRequest): string | undefined {
  const value = request.headers['mcp-session-id']
  if (typeof value !== 'string' || !SESSION_ID.test(value)) return undefined
  return value
}

/** The media type of every JSON answer of /mcp (what Fastify itself gives serialized objects). */
const JSON_ANSWER_TYPE = 'application/json; charset=utf-8'

/** A JSON answer carrying JSON-RPC messages, serialized by the one serializer of messages (rpc/message-json.ts). */
export function sendJsonRpc(reply: FastifyReply, message: JsonRpcMessage | readonly JsonRpcMessage[], status = 200): FastifyReply {
  return reply.code(status).type(JSON_ANSWER_TYPE).send(messageJson(message))
}

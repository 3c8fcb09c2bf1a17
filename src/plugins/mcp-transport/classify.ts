import { ServiceError } from '../../errors/service-error.js'
import { isModernProtocolVersion, type JsonRpcNotification, type JsonRpcRequest, type RequestId } from '../../rpc/types.js'

/**
 * Which era a POST to /mcp belongs to, decided once from the parsed body (body-primary, as the 2026-07-28 spec's
 * dual-era servers and the official SDKs do); the MCP-Protocol-Version header only cross-checks.
 *
 * | POST body                                                        | route                                   |
 * |------------------------------------------------------------------|-----------------------------------------|
 * | request or notification whose `params._meta` claims a revision   | modern (validated there)                |
 * | the handshake without a claim naming a modern revision           | legacy handshake                        |
 * | the handshake without a claim, header naming a modern revision   | 400 / -32020 (headers and body disagree)|
 * | no claim, header naming a modern revision                        | 400 / -32602 naming the missing `_meta` |
 * | no claim, header legacy or absent                                | legacy session request                  |
 * | JSON-RPC response (answer to a legacy `elicitation/create`)      | legacy                                  |
 * | batch of legacy messages / batch with any modern element         | legacy / 400 / -32600                   |
 * | anything else (not JSON-RPC)                                     | legacy, which answers 400 / -32600      |
 *
 * The handshake is the method that opens a session (`initialize`): the dispatcher says which (`opensSession`, from the
 * method's own declaration), so the transport names no method. GET and DELETE never reach this: they are session
 * operations of the legacy era.
 */

export const PROTOCOL_VERSION_META_KEY = 'io.modelcontextprotocol/protocolVersion'
export const CLIENT_CAPABILITIES_META_KEY = 'io.modelcontextprotocol/clientCapabilities'

export type Route =
  | { era: 'legacy' }
  | { era: 'modern'; kind: 'request'; message: JsonRpcRequest; claim: unknown }
  | { era: 'modern'; kind: 'notification'; message: JsonRpcNotification; claim: unknown }
  | { era: 'reject'; id: RequestId | null; error: ServiceError }

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** `params._meta` of a message, when it is an object. */
export function metaOf(message: unknown): Record<string, unknown> | undefined {
  if (!isObject(message) || !isObject(message.params)) return undefined
  const meta = message.params._meta
  return isObject(meta) ? meta : undefined
}

/** The claim: the reserved protocol-version key is present in `params._meta` (whatever its value). */
export function hasClaim(message: unknown): boolean {
  const meta = metaOf(message)
  return meta !== undefined && PROTOCOL_VERSION_META_KEY in meta
}

/**
 * True for a header value naming a stateless revision: one we serve, or any later date (a newer client speaking a
 * revision we do not know yet is still a modern client, and is told which revisions we serve).
 */
export function namesModernRevision(header: string | undefined): boolean {
  if (header === undefined) return false
  return isModernProtocolVersion(header) || (/^\d{4}-\d{2}-\d{2}$/.test(header) && header > '2026-07-28')
}

function readableId(message: Record<string, unknown>): RequestId | null {
  const id = message.id
  return typeof id === 'string' || (typeof id === 'number' && Number.isInteger(id)) ? id : null
}

function isRequestShape(value: Record<string, unknown>): boolean {
  return typeof value.method === 'string' && 'id' in value
}

export function classify(body: unknown, protocolVersionHeader: string | undefined, opensSession: (method: string) => boolean): Route {
  if (Array.isArray(body)) {
    if (body.some(hasClaim)) {
      return { era: 'reject', id: null, error: new ServiceError('INVALID_REQUEST', { message: 'A batch must not contain 2026-07-28 requests: send each one in its own POST' }) }
    }
    return { era: 'legacy' }
  }
  if (!isObject(body) || typeof body.method !== 'string') return { era: 'legacy' } // responses and junk: legacy answers them
  const headerIsModern = namesModernRevision(protocolVersionHeader)
  const claim = metaOf(body)?.[PROTOCOL_VERSION_META_KEY]
  const claimed = hasClaim(body)

  if (opensSession(body.method) && !(claimed && typeof claim === 'string' && namesModernRevision(claim))) {
    if (headerIsModern) {
      return {
        era: 'reject',
        id: readableId(body),
        error: new ServiceError('HEADER_MISMATCH', {
          message: `${body.method} is the session handshake of the 2025 revisions, but MCP-Protocol-Version names ${protocolVersionHeader}: a 2026-07-28 client sends no ${body.method}`,
          details: { header: 'MCP-Protocol-Version', value: protocolVersionHeader },
        }),
      }
    }
    return { era: 'legacy' }
  }
  if (claimed) {
    return isRequestShape(body)
      ? { era: 'modern', kind: 'request', message: body as unknown as JsonRpcRequest, claim }
      : { era: 'modern', kind: 'notification', message: body as unknown as JsonRpcNotification, claim }
  }
  if (headerIsModern) {
    if (!isRequestShape(body)) return { era: 'modern', kind: 'notification', message: body as unknown as JsonRpcNotification, claim: protocolVersionHeader }
    const missing = metaOf(body) === undefined ? ['_meta'] : [PROTOCOL_VERSION_META_KEY]
    return {
      era: 'reject',
      id: readableId(body),
      error: new ServiceError('INVALID_PARAMS', {
        message: `MCP-Protocol-Version names ${protocolVersionHeader}, but the request lacks what every request of that revision carries: params.${missing.join(', ')}`,
        details: { missing: missing.map((k) => (k === '_meta' ? 'params._meta' : `params._meta["${k}"]`)) },
      }),
    }
  }
  return { era: 'legacy' }
}

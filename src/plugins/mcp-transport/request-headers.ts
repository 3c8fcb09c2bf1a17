import type { IncomingHttpHeaders } from 'node:http'
import { ServiceError } from '../../errors/service-error.js'
import type { ParamHeader } from '../../rpc/header-mirror.js'
import { valueAt } from '../tools/param-headers.js'

/**
 * The request headers of 2026-07-28 (Streamable HTTP "Request Metadata"): `MCP-Protocol-Version`, `Mcp-Method` and
 * `Mcp-Name` mirror the body so intermediaries can route without parsing it, and `Mcp-Param-{Name}` mirrors tool
 * arguments a tool declares with `x-mcp-header`. A server that reads the body must refuse any disagreement with
 * 400 / -32020 (HeaderMismatch). Header names are case-insensitive (Node lowercases them), values case-sensitive;
 * surrounding whitespace is not part of a value (Node trims it).
 */

const SENTINEL_PREFIX = '=?base64?'
const SENTINEL_SUFFIX = '?='
/** RFC 4648 base64 with its padding: the spec's examples pad, and unpadded values are refused. */
const CANONICAL_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/
/** What an HTTP field value may hold as is: visible ASCII, space and tab. */
const PLAIN_VALUE = /^[\x20-\x7e\t]*$/
const DECIMAL = /^-?\d+(?:\.\d+)?$/

/**
 * A header value as the client meant it: a `=?base64?…?=` sentinel is decoded (UTF-8), anything else is taken
 * literally. Undefined when the sentinel's base64 is malformed or the bytes are not UTF-8, or when a literal value
 * holds characters a header may not carry.
 */
export function decodeHeaderValue(value: string): string | undefined {
  if (value.length >= SENTINEL_PREFIX.length + SENTINEL_SUFFIX.length && value.startsWith(SENTINEL_PREFIX) && value.endsWith(SENTINEL_SUFFIX)) {
    const b64 = value.slice(SENTINEL_PREFIX.length, value.length - SENTINEL_SUFFIX.length)
    if (!CANONICAL_BASE64.test(b64)) return undefined
    try {
      return new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(b64, 'base64'))
    } catch {
      return undefined
    }
  }
  return PLAIN_VALUE.test(value) ? value : undefined
}

/** A request header's value (lowercase `name`); repeated headers are joined as HTTP joins them. */
export function headerValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name]
  return Array.isArray(v) ? v.join(', ') : v
}

function mismatch(message: string, details: Record<string, unknown>): ServiceError {
  return new ServiceError('HEADER_MISMATCH', { message, details })
}

/**
 * `MCP-Protocol-Version` and `Mcp-Method` present on a request POST, `Mcp-Name` present, decodable and equal to
 * `params[source]` when the method mirrors one (`source`: its declared `mirroredName`). (Mismatches of a header that is
 * present are found earlier, by the era ladder.)
 */
export function standardHeadersProblem(headers: IncomingHttpHeaders, method: string, params: Record<string, unknown> | undefined, source: string | undefined): ServiceError | null {
  if (headerValue(headers, 'mcp-protocol-version') === undefined) {
    return mismatch('The MCP-Protocol-Version header is missing: every 2026-07-28 request carries it', { header: 'MCP-Protocol-Version' })
  }
  if (headerValue(headers, 'mcp-method') === undefined) {
    return mismatch(`The Mcp-Method header is missing: send Mcp-Method: ${method}`, { header: 'Mcp-Method' })
  }
  const bodyValue = source === undefined ? undefined : params?.[source]
  if (source === undefined || typeof bodyValue !== 'string') return null // params validation reports a missing or malformed body value
  const raw = headerValue(headers, 'mcp-name')
  if (raw === undefined) return mismatch(`The Mcp-Name header is missing: ${method} requests carry params.${source} in it`, { header: 'Mcp-Name' })
  const decoded = decodeHeaderValue(raw)
  if (decoded === undefined) return mismatch('The Mcp-Name header holds invalid characters or a malformed =?base64?…?= value', { header: 'Mcp-Name' })
  if (decoded !== bodyValue) {
    return mismatch(`The Mcp-Name header (${JSON.stringify(decoded)}) differs from params.${source} (${JSON.stringify(bodyValue)})`, { header: 'Mcp-Name', body: `params.${source}` })
  }
  return null
}

/** The string a client puts in `Mcp-Param-*` for a body value, or undefined for values that are never mirrored. */
function asHeaderString(value: unknown): string | undefined {
  if (typeof value === 'string') return value
  if (typeof value === 'boolean') return value ? 'true' : 'false'
  if (typeof value === 'number' && Number.isSafeInteger(value)) return String(value)
  return undefined
}

/**
 * Every `Mcp-Param-{Name}` a tool declares, checked against its arguments: present whenever the argument is (absent or
 * null arguments expect no header), decodable, and equal (integers compare numerically, so `42.0` matches 42). A
 * recognized header is refused when it holds invalid characters, and when it names a value the arguments do not have
 * (a gateway routing on it would act on something the server never runs).
 */
export function paramHeadersProblem(headers: IncomingHttpHeaders, declared: readonly ParamHeader[], args: unknown): ServiceError | null {
  for (const d of declared) {
    const name = `Mcp-Param-${d.name}`
    const raw = headerValue(headers, name.toLowerCase())
    const decoded = raw === undefined ? undefined : decodeHeaderValue(raw)
    if (raw !== undefined && decoded === undefined) return mismatch(`The ${name} header holds invalid characters or a malformed =?base64?…?= value`, { header: name })
    const value = valueAt(args, d.path)
    if (value === undefined || value === null) {
      if (raw === undefined) continue
      return mismatch(`The ${name} header is set, but arguments.${d.path.join('.')} is not: send the header only with the argument`, { header: name, body: `arguments.${d.path.join('.')}` })
    }
    const expected = asHeaderString(value)
    if (expected === undefined) continue // not the declared primitive: argument validation reports it
    if (decoded === undefined) return mismatch(`The ${name} header is missing: arguments.${d.path.join('.')} is set, and the tool mirrors it into that header`, { header: name })
    const same = d.type === 'integer' && typeof value === 'number' && DECIMAL.test(decoded) ? Number(decoded) === value : decoded === expected
    if (!same) {
      return mismatch(`The ${name} header (${JSON.stringify(decoded)}) differs from arguments.${d.path.join('.')} (${JSON.stringify(value)})`, { header: name, body: `arguments.${d.path.join('.')}` })
    }
  }
  return null
}

/**
 * RFC 8707 `resource` (docs/decisions/oauth.md): `{base_url}`, `{base_url}/` and `{base_url}/mcp` all name this server,
 * and the token audience is always `{base_url}` itself.
 *
 * The comparison is done on the raw strings rather than on WHATWG-parsed URLs, because parsing silently rewrites
 * what we must refuse or keep exact: it strips tabs and newlines, resolves dot segments and `\`, decodes IPv4
 * shorthand (`127.1`) and drops an empty `?` or `#`. Only scheme and host are case-insensitive (RFC 3986 §6.2.2.1).
 *
 * Default ports: an explicit default port (`https://host:443`, `http://host:80`) is treated as the same authority as
 * the bare host, as URL parsing would; any other port must match literally.
 */

const MAX_LENGTH = 2048
const ABSOLUTE = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)(.*)$/
const DEFAULT_PORT: Readonly<Record<string, string>> = { http: '80', https: '443' }

interface Split {
  scheme: string
  authority: string
  path: string
}

function split(uri: string): Split | null {
  const m = ABSOLUTE.exec(uri)
  if (!m) return null
  const scheme = (m[1] ?? '').toLowerCase()
  let authority = (m[2] ?? '').toLowerCase()
  const port = DEFAULT_PORT[scheme]
  if (port !== undefined && authority.endsWith(`:${port}`)) authority = authority.slice(0, -(port.length + 1))
  return { scheme, authority, path: m[3] ?? '' }
}

/**
 * The audience named by a `resource` value, which is exactly `baseUrl`, or null when the value does not name this
 * server (other path, any query or fragment even empty, userinfo, relative or unparsable).
 */
export function resourceAudience(raw: string, baseUrl: string): string | null {
  if (typeof raw !== 'string' || raw.length === 0 || raw.length > MAX_LENGTH) return null
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i)
    if (c <= 0x20 || c >= 0x7f) return null
  }
  if (raw.includes('#') || raw.includes('?')) return null
  const r = split(raw)
  const b = split(baseUrl)
  if (!r || !b || r.authority === '' || r.authority.includes('@')) return null
  try {
    new URL(raw)
  } catch {
    return null
  }
  if (r.scheme !== b.scheme || r.authority !== b.authority) return null
  const basePath = b.path.endsWith('/') ? b.path.slice(0, -1) : b.path
  return r.path === basePath || r.path === `${basePath}/` || r.path === `${basePath}/mcp` ? baseUrl : null
}

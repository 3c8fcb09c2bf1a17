import { FORBIDDEN_REDIRECT_SCHEMES } from '../config.js'

/**
 * Redirect URI rules (docs/decisions/oauth.md, RFC 8252, RFC 9700). A registered URI is kept literally and later
 * compared as a raw string, so registration only accepts URIs already in their one canonical form: any two spellings of
 * the same address would otherwise be two different registrations of which only one ever matches.
 *
 * Every reason returned here ends up in `error_description`, so reasons are plain ASCII without `"` or `\`
 * (RFC 6749 §5.2); the only client text they repeat is the scheme name, whose alphabet is safe.
 */

export const MAX_REDIRECT_URI_LENGTH = 2000

const SCHEME = /^([A-Za-z][A-Za-z0-9+.-]*):/
// Unreserved, reserved and '%' (RFC 3986 §2): anything else is not a URI character and is spelt differently by
// different parsers (for example `\` is a `/` to WHATWG but not to an OS scheme handler). Client metadata document
// URLs (client-documents/url.ts) are held to the same three rules.
export const URI_CHARS = /^[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=%]*$/
export const BAD_PERCENT = /%(?![0-9A-Fa-f]{2})/
export const DOT_SEGMENT = /^(?:\.|%2e){1,2}$/i
// Raw loopback form. The port, when present, is 1-65535 without leading zeros (checked again in isLoopbackRedirect).
const LOOPBACK = /^http:\/\/(localhost|127\.0\.0\.1|\[::1\])(?::([1-9][0-9]{0,4}))?([/?][^#]*)?$/

interface RawParts {
  scheme: string
  authority: string | null
  path: string
}

function rawParts(raw: string, scheme: string): RawParts {
  const rest = raw.slice(scheme.length + 1)
  if (!rest.startsWith('//')) return { scheme, authority: null, path: rest.split('?')[0] ?? '' }
  const afterSlashes = rest.slice(2)
  const end = afterSlashes.search(/[/?]/)
  const authority = end === -1 ? afterSlashes : afterSlashes.slice(0, end)
  const pathAndQuery = end === -1 ? '' : afterSlashes.slice(end)
  return { scheme, authority, path: pathAndQuery.split('?')[0] ?? '' }
}

/** Splits a raw loopback redirect URI into host, port and path-with-query; null when it is not one. */
function loopbackParts(uri: string): { host: string; port: string | undefined; rest: string } | null {
  if (typeof uri !== 'string') return null
  const m = LOOPBACK.exec(uri)
  if (!m) return null
  const port = m[2]
  if (port !== undefined && Number(port) > 65535) return null
  return { host: m[1] ?? '', port, rest: m[3] ?? '' }
}

/** True for an `http:` URI on a literal loopback host (`localhost`, `127.0.0.1`, `[::1]`), compared on the raw string. */
export function isLoopbackRedirect(uri: string): boolean {
  return loopbackParts(uri) !== null
}

/**
 * Checks one redirect URI offered at registration. Returns null when it is acceptable, else a short reason.
 * `privateSchemes` are the operator-allowed private-use schemes (lowercase names without `:`).
 */
export function checkRedirectUri(raw: unknown, options: { privateSchemes: readonly string[] }): string | null {
  if (typeof raw !== 'string') return 'must be a string'
  if (raw.length === 0) return 'must not be empty'
  if (raw.length > MAX_REDIRECT_URI_LENGTH) return `must be at most ${MAX_REDIRECT_URI_LENGTH} characters`
  const m = SCHEME.exec(raw)
  const scheme = m?.[1] ?? ''
  const lower = scheme.toLowerCase()
  // Forbidden schemes are reported before anything else (case, characters): that is the real reason.
  if (m && FORBIDDEN_REDIRECT_SCHEMES.includes(lower)) return `the ${lower}: scheme is never allowed`
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i)
    if (c <= 0x20 || c >= 0x7f) return 'must not contain whitespace, control or non-ASCII characters'
  }
  if (!m) return 'must be an absolute URI with a scheme'
  if (scheme !== lower) return 'the scheme must be lowercase'

  // Checked on the raw string: WHATWG URL drops an empty fragment, so `url.hash` cannot see a bare trailing '#'.
  if (raw.includes('#')) return 'must not contain a fragment (#)'
  if (!URI_CHARS.test(raw)) return 'contains a character that is not allowed in a URI'
  if (BAD_PERCENT.test(raw)) return 'contains a malformed percent-encoding'

  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return 'is not a valid absolute URI'
  }

  const parts = rawParts(raw, scheme)
  if (parts.authority !== null && parts.authority.includes('@')) return 'must not contain userinfo (user@host)'
  if (parts.path.split('/').some((segment) => DOT_SEGMENT.test(segment))) return 'must not contain . or .. path segments'

  if (scheme === 'https') {
    if (!parts.authority) return 'an https URI must have a host'
  } else if (scheme === 'http') {
    if (!isLoopbackRedirect(raw)) return 'http is only allowed on localhost, 127.0.0.1 or [::1]; use https'
  } else if (!options.privateSchemes.includes(scheme)) {
    // Private-use schemes (cursor:, vscode:) are off until the operator names them; the client's developer cannot
    // change that, so the refusal says who can, and how.
    return `the ${scheme}: scheme is not allowed on this server; the operator can allow it by adding ${scheme} to SERVICE_REDIRECT_SCHEMES`
  } else if (raw.length === scheme.length + 1) {
    return 'must have something after the scheme'
  }

  // The stored form is compared literally, so it must already be the normalised form (host case, default port,
  // percent-encoded host, empty port, IPv4 shorthand...). A bare origin only gains a trailing '/'.
  if (url.href !== raw && url.href !== raw + '/') return 'must be in normalised form (lowercase host, no default or empty port)'
  return null
}

/**
 * Exact string match against the registered URIs; only for loopback `http:` URIs may the port differ (RFC 8252 §7.3),
 * and then host, path and query must still be literally identical (`localhost` never matches `127.0.0.1`).
 */
export function redirectUriMatches(registered: readonly string[], requested: string): boolean {
  if (typeof requested !== 'string') return false
  if (registered.includes(requested)) return true
  const want = loopbackParts(requested)
  if (!want) return false
  return registered.some((entry) => {
    const have = loopbackParts(entry)
    return have !== null && have.host === want.host && have.rest === want.rest
  })
}

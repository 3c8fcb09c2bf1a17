import { BAD_PERCENT, DOT_SEGMENT, URI_CHARS } from '../redirect-uri.js'

/**
 * The client_id URL of a client metadata document (docs/decisions/client-metadata-documents.md). The draft's rules
 * (https, a path, no fragment, userinfo or dot segments) plus ours: no query, no character outside RFC 3986, and only
 * the one normalised spelling, so that the string the client sent is the URL fetched, the key cached under and the
 * `client_id` the document must repeat. Every check reads the raw string: WHATWG URL parsing would quietly fix (and so
 * hide) dot segments, an empty fragment, a default port or an upper-case host.
 *
 * Reasons go into error_description: plain ASCII without `"` or `\`, never repeating the URL.
 */

export const MAX_CLIENT_ID_URL_LENGTH = 2000

const HTTPS = 'https://'

/** True when `clientId` is meant as a document URL: such an id is never looked up among registered clients. */
export function isDocumentUrl(clientId: string): boolean {
  return /^https?:\/\//i.test(clientId)
}

export type UrlCheck = { ok: true; url: URL } | { ok: false; reason: string }

function refused(reason: string): UrlCheck {
  return { ok: false, reason: `client_id URL ${reason}` }
}

export function checkDocumentUrl(raw: string): UrlCheck {
  if (raw.length > MAX_CLIENT_ID_URL_LENGTH) return refused(`must be at most ${MAX_CLIENT_ID_URL_LENGTH} characters`)
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i)
    if (c <= 0x20 || c >= 0x7f) return refused('must not contain whitespace, control or non-ASCII characters')
  }
  if (!raw.startsWith(HTTPS)) {
    return refused(/^https:/i.test(raw) ? 'must start with https:// in lowercase' : 'must use https')
  }
  if (raw.includes('#')) return refused('must not contain a fragment (#)')
  if (!URI_CHARS.test(raw)) return refused('contains a character that is not allowed in a URI')
  if (BAD_PERCENT.test(raw)) return refused('contains a malformed percent-encoding')

  const rest = raw.slice(HTTPS.length)
  const authorityEnd = rest.search(/[/?]/)
  const authority = authorityEnd === -1 ? rest : rest.slice(0, authorityEnd)
  const pathAndQuery = authorityEnd === -1 ? '' : rest.slice(authorityEnd)
  if (authority === '') return refused('must have a host')
  if (authority.includes('@')) return refused('must not contain userinfo (user@host)')
  // A query would let one endpoint mint any number of client identities, each cached and rate-limited apart.
  if (pathAndQuery.includes('?')) return refused('must not contain a query (?)')
  if (pathAndQuery === '' || pathAndQuery === '/') return refused('must have a path other than /, e.g. https://app.example.com/client.json')
  if (pathAndQuery.split('/').some((segment) => DOT_SEGMENT.test(segment))) return refused('must not contain . or .. path segments')

  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return refused('is not a valid URL')
  }
  if (url.href !== raw) return refused('must be in normalised form (lowercase host, no default or empty port)')
  return { ok: true, url }
}

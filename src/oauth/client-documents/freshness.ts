import type { IncomingHttpHeaders } from 'node:http'

/**
 * How long a fetched document may be reused (docs/decisions/client-metadata-documents.md): what its response says,
 * in `Cache-Control: max-age` (less `Age`) or else `Expires`, clamped to the operator's bounds. `no-store` and
 * `no-cache` ask for no reuse at all, which here means the shortest: every authorization and token request resolves
 * the client, and a document fetched each time would put its host's availability and our rate limit in every sign-in.
 * A response that says nothing is kept the shortest time too.
 */

export interface FreshnessBounds {
  minMs: number
  maxMs: number
}

export function freshnessMs(headers: IncomingHttpHeaders, nowMs: number, bounds: FreshnessBounds): number {
  const said = declaredMs(headers, nowMs)
  return Math.min(bounds.maxMs, Math.max(bounds.minMs, said ?? bounds.minMs))
}

/** What the response declares, in ms from now; null when it declares nothing usable. */
function declaredMs(headers: IncomingHttpHeaders, nowMs: number): number | null {
  const directives = (headers['cache-control'] ?? '').toLowerCase().split(',').map((d) => d.trim())
  if (directives.includes('no-store') || directives.includes('no-cache')) return 0
  for (const directive of directives) {
    const m = /^max-age\s*=\s*"?(\d+)"?$/.exec(directive)
    if (m) return Math.max(0, Number(m[1]) - ageSeconds(headers)) * 1000
  }
  const expires = headers.expires
  if (expires === undefined) return null
  const at = Date.parse(expires)
  // RFC 9111 §5.3: an Expires that is not a date means already expired.
  if (Number.isNaN(at)) return 0
  // Against the response's own Date when it has one: both from the document server's clock, so no skew between us.
  const date = headers.date === undefined ? NaN : Date.parse(headers.date)
  return at - (Number.isNaN(date) ? nowMs : date)
}

function ageSeconds(headers: IncomingHttpHeaders): number {
  const age = headers.age
  return age !== undefined && /^\d+$/.test(age) ? Number(age) : 0
}

/**
 * Whether an Accept header asks for HTML rather than JSON: a browser loading a page names `text/html`, an API client
 * names `application/json` or nothing, and curl sends `*\/*`. Only the two types named outright count (a wildcard
 * prefers nothing), with their `q`; a tie goes to JSON, the answer every client got before there were pages.
 */
export function prefersHtml(accept: string | undefined): boolean {
  if (accept === undefined) return false
  let html = 0
  let json = 0
  for (const range of accept.split(',')) {
    const [type = '', ...params] = range.split(';').map((s) => s.trim().toLowerCase())
    const q = params.find((p) => p.startsWith('q='))
    const weight = q === undefined ? 1 : Number(q.slice(2))
    if (!(weight >= 0 && weight <= 1)) continue
    if (type === 'text/html') html = Math.max(html, weight)
    else if (type === 'application/json') json = Math.max(json, weight)
  }
  return html > json
}

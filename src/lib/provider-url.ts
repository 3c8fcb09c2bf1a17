/**
 * The URLs an operator gives for an identity provider (an issuer, a key set): `https`, or `http` on a loopback host
 * only (a test's or a local proxy's own machine); no credentials, query or fragment. Shared by the sign-in providers
 * and the trusted issuers of identity assertions, so both refuse the same addresses in the same words.
 */
export function providerUrlProblem(raw: string): string | undefined {
  let u: URL
  try {
    u = new URL(raw)
  } catch {
    return `must be an absolute URL, got ${JSON.stringify(raw)}`
  }
  if (u.username || u.password || u.search || u.hash) return 'must not contain credentials, a query or a fragment'
  if (u.protocol === 'https:') return undefined
  if (u.protocol === 'http:' && ['127.0.0.1', 'localhost', '[::1]'].includes(u.hostname)) return undefined
  return `must use https (http only on a loopback host), got ${JSON.stringify(raw)}`
}

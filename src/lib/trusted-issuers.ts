import { jsonSetting } from './json-setting.js'
import { providerUrlProblem } from './provider-url.js'

/**
 * The `trustedIssuers` setting: the enterprise identity providers whose identity assertions (ID-JAG) the token endpoint
 * exchanges for access tokens (docs/decisions/enterprise-managed-authorization.md). Parsed and checked once, at start;
 * every refusal is a sentence naming the issuer and the field. It lives beside the settings (config.ts calls it), so it
 * throws plain errors that config.ts turns into its ConfigError.
 */

/** One identity provider the operator trusts to assert who a member is. */
export interface TrustedIssuer {
  /** Its issuer identifier, compared exactly with the assertion's `iss`. */
  issuer: string
  /** Where its signing keys are published (a JWK Set). */
  jwksUri: string
  /** The signature algorithms accepted from it; never `none` nor a MAC. */
  algorithms: string[]
  /** The client_ids it may assert for; undefined: any client this server knows. */
  clients?: string[]
  /** The slug of the organization its assertions act in; undefined: the member's only organization. */
  organization?: string
}

/** Asymmetric JWS algorithms only: a MAC would let whoever holds the published key forge assertions. */
export const ASSERTION_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'] as const
export const DEFAULT_ASSERTION_ALGORITHMS = ['RS256', 'PS256', 'ES256', 'EdDSA', 'Ed25519']

const FIELDS = ['issuer', 'jwksUri', 'algorithms', 'clients', 'organization']
const SLUG = /^[a-z0-9][a-z0-9-]{0,62}$/

/** `raw`: the parsed JSON array (config file) or its text (environment variable, flag). Throws Error on any problem. */
export function parseTrustedIssuers(raw: unknown): TrustedIssuer[] {
  const value = jsonSetting(raw, () => new Error('must be a JSON array like [{"issuer": "https://idp.example.com", "jwksUri": "https://idp.example.com/keys"}]'))
  if (value === undefined) return []
  if (!Array.isArray(value)) throw new Error('must be an array of trusted issuers ({"issuer", "jwksUri", ...})')
  const seen = new Set<string>()
  return value.map((entry, i) => {
    const issuer = parseEntry(entry, i)
    if (seen.has(issuer.issuer)) throw new Error(`issuer ${issuer.issuer} is listed twice`)
    seen.add(issuer.issuer)
    return issuer
  })
}

function parseEntry(entry: unknown, index: number): TrustedIssuer {
  if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) throw new Error(`entry ${index} must be an object with "issuer" and "jwksUri"`)
  const e = entry as Record<string, unknown>
  if (typeof e.issuer !== 'string' || e.issuer === '') throw new Error(`entry ${index} needs "issuer", the identity provider's issuer URL`)
  const name = `issuer ${e.issuer}`
  for (const key of Object.keys(e)) {
    if (!FIELDS.includes(key)) throw new Error(`${name}: unknown field ${JSON.stringify(key)} (the fields are ${FIELDS.join(', ')})`)
  }
  const problem = providerUrlProblem(e.issuer)
  if (problem) throw new Error(`${name}: "issuer" ${problem}`)
  if (typeof e.jwksUri !== 'string') throw new Error(`${name}: "jwksUri" is required: the URL of its JSON Web Key Set (jwks_uri in its discovery document)`)
  const jwksProblem = providerUrlProblem(e.jwksUri)
  if (jwksProblem) throw new Error(`${name}: "jwksUri" ${jwksProblem}`)
  const out: TrustedIssuer = { issuer: e.issuer, jwksUri: e.jwksUri, algorithms: parseAlgorithms(e.algorithms, name) }
  if (e.clients !== undefined) {
    if (!Array.isArray(e.clients) || e.clients.length === 0 || !e.clients.every((c) => typeof c === 'string' && c !== '')) {
      throw new Error(`${name}: "clients" must be a non-empty array of client_ids (leave it out to allow every known client)`)
    }
    out.clients = [...new Set(e.clients as string[])]
  }
  if (e.organization !== undefined) {
    if (typeof e.organization !== 'string' || !SLUG.test(e.organization)) throw new Error(`${name}: "organization" must be an organization slug such as "default"`)
    out.organization = e.organization
  }
  return out
}

function parseAlgorithms(raw: unknown, name: string): string[] {
  if (raw === undefined) return [...DEFAULT_ASSERTION_ALGORITHMS]
  if (!Array.isArray(raw) || raw.length === 0 || !raw.every((a) => typeof a === 'string')) {
    throw new Error(`${name}: "algorithms" must be a non-empty array such as ["RS256", "ES256"]`)
  }
  for (const alg of raw as string[]) {
    if (!(ASSERTION_ALGORITHMS as readonly string[]).includes(alg)) {
      throw new Error(`${name}: algorithm ${JSON.stringify(alg)} is not accepted; use asymmetric ones only (${ASSERTION_ALGORITHMS.join(', ')}), never none or HS*`)
    }
  }
  return [...new Set(raw as string[])]
}

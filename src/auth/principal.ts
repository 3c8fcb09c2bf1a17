import { isRole, roleAllows, ROLES, type Role } from '../lib/roles.js'

export const SCOPES = ['mcp:read', 'mcp:write'] as const
export type Scope = (typeof SCOPES)[number]

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value)
}

export function parseScopes(value: string): Scope[] {
  return [...new Set(value.split(/\s+/).filter(isScope))]
}

/**
 * Who is calling, re-established from the bearer credential on every request (sessions never authenticate). Shared
 * between requests through the credential cache, so it is frozen: never mutate one.
 */
export interface Principal {
  kind: 'api_key' | 'oauth'
  /** Binding key for sessions: `key:<api key id>` or `jwt:<jti>`. */
  credential: string
  credentialId: string
  userId: string
  membershipId: string
  organizationId: string
  /** The member's current role, read at verification time. */
  role: Role
  /** Scopes granted to the credential; effective permission is scopes ∩ role. */
  scopes: readonly Scope[]
  /** When the credential stops being valid (ms since epoch), or null for a key without expiry. */
  expiresAt: number | null
  clientId?: string
  /** OAuth: the grant (one consent) the token was issued under; refreshed tokens keep it. */
  grantId?: string
}

/**
 * What outlives one access token: the API key, or the OAuth grant (a refresh issues a new token under the same
 * grant). State handed to a client across requests (a confirmation's requestState) is bound to it, so it keeps working
 * after a refresh and stops with a revocation.
 */
export function lastingCredential(principal: Principal): string {
  return principal.kind === 'oauth' && principal.grantId !== undefined ? `grant:${principal.grantId}` : principal.credential
}

/** Turns a bearer credential into a Principal or throws INVALID_TOKEN / TOKEN_EXPIRED / TOKEN_REVOKED. */
export interface CredentialVerifier {
  /** True when this verifier recognises the credential's form. */
  accepts(token: string): boolean
  verify(token: string): Promise<Principal>
}

/** Who may use a tool, prompt or resource: the token's scope must cover `scope` AND the member's role reach `role`. */
export interface Audience {
  scope: Scope
  role: Role
}

/** Visibility everywhere (lists, reads, calls): scope ∩ role. */
export function canUse(principal: Principal, audience: Audience): boolean {
  return principal.scopes.includes(audience.scope) && roleAllows(principal.role, audience.role)
}

/**
 * The audience a definition declares, checked when it is registered: an embedder's typo (`mcp:admin`, `admn`) stops
 * the start with a message instead of hiding the definition from everyone. `defaults` fills what is left out (resources
 * and prompts read; a tool must say who may use it).
 */
export function declaredAudience(what: string, declared: { scope?: unknown; role?: unknown }, defaults?: Audience): Audience {
  const scope = declared.scope ?? defaults?.scope
  const role = declared.role ?? defaults?.role
  if (typeof scope !== 'string' || !isScope(scope)) throw new Error(`${what}: scope must be one of ${SCOPES.join(', ')}, got ${JSON.stringify(scope)}`)
  if (typeof role !== 'string' || !isRole(role)) throw new Error(`${what}: role must be one of ${ROLES.join(', ')}, got ${JSON.stringify(role)}`)
  return { scope, role: role as Role }
}

/** What a resource or prompt needs unless it says otherwise: reading, as a viewer. */
export const READER: Audience = Object.freeze({ scope: 'mcp:read', role: 'viewer' })

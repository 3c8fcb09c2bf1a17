import { SCOPES, type Scope } from '../auth/principal.js'
import { roleAllows } from '../lib/roles.js'
import type { Role } from '../lib/roles.js'

export const SCOPE_DESCRIPTIONS: Record<(typeof SCOPES)[number], string> = {
  'mcp:read': 'Read your organization: apps, deployments, logs, members and audit entries your role can see',
  'mcp:write': 'Change your organization: create, update and delete apps, env vars and deployments your role allows',
}

/**
 * A space-separated scope string reduced to known scopes, de-duplicated and in canonical order; null when it names
 * an unknown scope or none at all.
 */
export function normalizeScope(value: string): string | null {
  const parts = value.split(' ').filter((s) => s !== '')
  if (parts.length === 0 || parts.some((s) => !(SCOPES as readonly string[]).includes(s))) return null
  return SCOPES.filter((s) => parts.includes(s)).join(' ')
}

/**
 * The lowest role that can use each scope: every built-in tool needing mcp:write needs at least a developer
 * (docs/decisions/tool-catalog.md), so a viewer can use read access only. A grant never claims more than the approving
 * member's role can use (interface.md: granted scope is subject to the member's permissions).
 */
export const SCOPE_LOWEST_ROLE: Record<Scope, Role> = {
  'mcp:read': 'viewer',
  'mcp:write': 'developer',
}

/** The scopes a role can use, in canonical order. */
export function scopesForRole(role: Role): Scope[] {
  return SCOPES.filter((s) => roleAllows(role, SCOPE_LOWEST_ROLE[s]))
}

/**
 * A canonical scope string cut down to what `role` can use, in canonical order: '' when nothing is left. Applied when
 * a code is issued, when it is exchanged and on every refresh, so no path mints a token claiming more.
 */
export function narrowScope(scope: string, role: Role): string {
  const usable = new Set<string>(scopesForRole(role))
  return scope.split(' ').filter((s) => usable.has(s)).join(' ')
}

/** The consent page's sentence for a role that cannot use all of `scope`, or undefined when it can. */
export function narrowingNotice(scope: string, role: Role, organization: string): string | undefined {
  const granted = narrowScope(scope, role)
  if (granted === scope) return undefined
  const article = /^[aeiou]/.test(role) ? 'an' : 'a'
  if (granted === '') return `As ${article} ${role} in ${organization} you cannot grant what this application asks for (${scope}).`
  const only = granted === 'mcp:read' ? 'read access' : granted
  return `As ${article} ${role} in ${organization} you can only grant ${only} (${granted}).`
}

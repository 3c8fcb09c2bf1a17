import { SCOPES } from '../auth/principal.js'

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

import type { Scope } from '../../src/auth/principal.js'
import { roleAllows } from '../../src/lib/roles.js'
import type { Role } from '../../src/lib/roles.js'
import { builtinTools } from '../../src/plugins/tools/builtin/index.js'

/** Names of the built-in tools a member with `role` and `scopes` sees, in tools/list order, then `extra`. */
export function visibleCatalog(role: Role, scopes: readonly Scope[] = ['mcp:read', 'mcp:write'], extra: string[] = []): string[] {
  return [...builtinTools.filter((t) => scopes.includes(t.scope) && roleAllows(role, t.role)).map((t) => t.name), ...extra]
}

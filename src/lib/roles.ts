/**
 * A member's role in an organization. The roles belong to authorization, not to storage: the database stores the name
 * (every backend's schema takes its list of values from here), and what a role allows is decided here.
 */
export const ROLES = ['viewer', 'developer', 'admin', 'owner'] as const
export type Role = (typeof ROLES)[number]

export function isRole(value: string): value is Role {
  return (ROLES as readonly string[]).includes(value)
}

const ROLE_RANK: Record<Role, number> = { viewer: 0, developer: 1, admin: 2, owner: 3 }

/** Roles include the ones below them: owner ⊃ admin ⊃ developer ⊃ viewer. */
export function roleAllows(role: Role, lowest: Role): boolean {
  return ROLE_RANK[role] >= ROLE_RANK[lowest]
}

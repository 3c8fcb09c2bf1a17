import type { Role } from '../../src/lib/roles.js'
import { OWNER_EMAIL, type TestServer } from './server.js'

let counter = 0

export async function defaultOrganization(server: TestServer) {
  const org = await server.app.repos.organizations.bySlug('default')
  if (!org) throw new Error('the default organization was not bootstrapped')
  return org
}

export async function ownerMembership(server: TestServer) {
  const user = await server.app.repos.users.byEmail(OWNER_EMAIL)
  if (!user) throw new Error('the owner was not bootstrapped')
  const membership = await server.app.repos.memberships.find(user.id, (await defaultOrganization(server)).id)
  if (!membership) throw new Error('the owner has no membership in the default organization')
  return membership
}

/** A new API key for an existing membership. */
export async function createKey(server: TestServer, membershipId: string, scopes: string[] = ['mcp:read', 'mcp:write']) {
  return server.app.repos.apiKeys.create({ membershipId, name: `test-${++counter}`, scopes })
}

/** A new user with a membership (default organization unless given) and an API key. */
export async function createMember(
  server: TestServer,
  options: { role: Role; scopes?: string[]; organizationId?: string },
) {
  const repos = server.app.repos
  const n = ++counter
  const user = await repos.users.create({ email: `member${n}-${Date.now()}@example.com`, passwordHash: null })
  const membership = await repos.memberships.upsert({ userId: user.id, organizationId: options.organizationId ?? (await defaultOrganization(server)).id, role: options.role })
  const { key, record } = await createKey(server, membership.id, options.scopes)
  return { user, membership, key, keyId: record.id }
}

import type { Config } from './config.js'
import type { Repos } from './db/repos/index.js'
import { hashPassword, randomSecret } from './lib/crypto.js'

export interface BootstrapResult {
  email: string
  organization: string
  /** Present only when generated here (so it is printed once); absent when the operator supplied it. */
  generatedPassword?: string
  generatedApiKey?: string
}

/**
 * On an empty database: organization `default`, an owner, their password and an API key with both scopes. Nothing
 * happens when any user exists, so restarts never create or print anything again.
 */
export async function bootstrap(repos: Repos, config: Config): Promise<BootstrapResult | null> {
  if (repos.users.count() > 0 || repos.organizations.count() > 0) return null
  const password = config.bootstrapPassword || randomSecret(18)
  const passwordHash = await hashPassword(password)
  return repos.transaction(() => {
    if (repos.users.count() > 0) return null
    const org = repos.organizations.create({ slug: 'default', name: 'Default organization' })
    const user = repos.users.create({ email: config.bootstrapEmail, name: 'Owner', passwordHash })
    const membership = repos.memberships.upsert({ userId: user.id, organizationId: org.id, role: 'owner' })
    const { key } = repos.apiKeys.create({
      membershipId: membership.id,
      name: 'bootstrap',
      scopes: ['mcp:read', 'mcp:write'],
      ...(config.bootstrapApiKey ? { plainKey: config.bootstrapApiKey } : {}),
    })
    const result: BootstrapResult = { email: user.email, organization: org.slug }
    if (!config.bootstrapPassword) result.generatedPassword = password
    if (!config.bootstrapApiKey) result.generatedApiKey = key
    return result
  })
}

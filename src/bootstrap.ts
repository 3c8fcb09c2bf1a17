import type { Config } from './config.js'
import type { Repos } from './db/repos/index.js'
import { ServiceError } from './errors/service-error.js'
import { hashPassword, randomSecret } from './lib/crypto.js'

export interface BootstrapResult {
  email: string
  organization: string
  /** Present only when generated here (so it is printed once); absent when the operator supplied it. */
  generatedPassword?: string
  generatedApiKey?: string
}

/** A bootstrap whose slow part (hashing the password) is done; `commit` writes it in one transaction. */
export interface PendingBootstrap {
  /** The organization, owner and key, all or nothing; null when another process bootstrapped the database meanwhile. */
  commit(): Promise<BootstrapResult | null>
}

/**
 * On an empty database: organization `default`, an owner, their password and an API key with both scopes. Nothing
 * happens when any user exists, so restarts never create or print anything again. In two steps, so that a server
 * writes it only once it listens (createServer): a start that cannot listen (a port in use) leaves the database empty,
 * and the next start prints the credentials that are shown once. The write is one transaction: no request ever sees an
 * owner without a key.
 */
export async function prepareBootstrap(repos: Repos, config: Config): Promise<PendingBootstrap | null> {
  if ((await repos.users.count()) > 0 || (await repos.organizations.count()) > 0) return null
  // A given hash is used as it is: the password behind it is never known here (and never printed).
  const password = config.bootstrapPassword || randomSecret(18)
  const passwordHash = config.bootstrapPasswordHash || await hashPassword(password)
  return {
    // Replicas started together on an empty PostgreSQL database may all find it empty: the first commit wins, and the
    // others meet its organization or owner as a taken slug or email (CONFLICT), rolled back, and bootstrap nothing.
    commit: () => repos.transaction(async (tx) => {
      if ((await tx.users.count()) > 0 || (await tx.organizations.count()) > 0) return null
      const org = await tx.organizations.create({ slug: 'default', name: 'Default organization' })
      const user = await tx.users.create({ email: config.bootstrapEmail, name: 'Owner', passwordHash })
      const membership = await tx.memberships.upsert({ userId: user.id, organizationId: org.id, role: 'owner' })
      const { key } = await tx.apiKeys.create({
        membershipId: membership.id,
        name: 'bootstrap',
        scopes: ['mcp:read', 'mcp:write'],
        ...(config.bootstrapApiKey ? { plainKey: config.bootstrapApiKey } : {}),
      })
      const result: BootstrapResult = { email: user.email, organization: org.slug }
      if (!config.bootstrapPassword && !config.bootstrapPasswordHash) result.generatedPassword = password
      if (!config.bootstrapApiKey) result.generatedApiKey = key
      return result
    }).catch((err: unknown) => {
      if (err instanceof ServiceError && err.code === 'CONFLICT') return null
      throw err
    }),
  }
}

/** Both steps at once (buildApp, which never listens). */
export async function bootstrap(repos: Repos, config: Config): Promise<BootstrapResult | null> {
  return (await (await prepareBootstrap(repos, config))?.commit()) ?? null
}

/**
 * What the first start says about the owner it created: the command line prints it, and so does createServer unless
 * the embedder handles `onBootstrap` itself. Secrets appear only when generated (they exist nowhere else).
 */
export function firstStartMessage(result: BootstrapResult): string {
  return [
    `First start: created organization "${result.organization}" with an owner account.`,
    `  email:    ${result.email}`,
    result.generatedPassword ? `  password: ${result.generatedPassword}` : '  password: (from SERVICE_BOOTSTRAP_PASSWORD)',
    result.generatedApiKey ? `  API key:  ${result.generatedApiKey}` : '  API key:  (from SERVICE_BOOTSTRAP_API_KEY)',
    'These are shown once. Store them now.',
  ].join('\n') + '\n'
}

/** The default `onBootstrap`: the first-start message on stdout (not the log: it holds secrets). */
export function printFirstStart(result: BootstrapResult): void {
  process.stdout.write(firstStartMessage(result))
}

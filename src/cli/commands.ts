import { parseScopes, SCOPES } from '../auth/principal.js'
import { ConfigError } from '../config.js'
import { checkEnvKey, resetEnvKey, valuesPhrase } from '../db/env-key.js'
import type { Repos } from '../db/repos/index.js'
import { hashPassword, randomSecret } from '../lib/crypto.js'
import { maskCredentials } from '../lib/mask-credentials.js'
import { isRole, ROLES, type Role } from '../lib/roles.js'
import { generateStateKey } from '../mrtr/state-sealer.js'
import { generateSigningKey } from '../oauth/keyring.js'
import { auditExport, auditVerify } from './audit.js'
import { backup, restore } from './backups.js'
import { UsageError, type Command, type Context } from './command.js'
import { quotasList, quotasReset, quotasSet } from './quotas.js'
import { QUOTA_NAMES } from '../limits/quotas.js'

/** The settings the quota commands read (an organization without its own value follows them). */
const QUOTA_SETTINGS = ['quotaApps', 'quotaEnvVarsPerApp', 'quotaConcurrentDeployments', 'quotaDeploymentOutputMb'] as const

/**
 * The commands of `service-mcp`, in the order of the global usage, under their headings. Each declares its options and
 * what it may do to the database (command.ts); this table is the only list of them.
 */
export const SECTIONS: ReadonlyArray<{ heading: string; commands: readonly Command[] }> = [
  {
    heading: 'Server',
    commands: [
      {
        name: 'serve',
        about: 'Run the server in the foreground (migrates, bootstraps an empty database; stops cleanly on SIGTERM or SIGINT).',
        variants: [['serve --profile conformance', 'The reference server of the official MCP conformance suite: its fixtures only, no authentication, in-memory database, loopback only (see docs/conformance.md)']],
        database: 'create',
        settings: 'all',
        needsEnvKey: true,
        // The server is loaded only to serve: the other commands need the database alone, and start in half the time
        // without it (the suite runs a few hundred of them).
        run: async (c) => (await import('./serve.js')).serve(c.settingsArgv),
      },
      {
        name: 'migrate',
        about: 'Apply database migrations and exit (creates the database when missing).',
        database: 'create',
        run: async (c) => {
          await c.repos()
          c.out(`migrations applied to ${maskCredentials(c.config.database)}`)
        },
      },
    ],
  },
  {
    heading: 'Backups and the env key',
    commands: [
      {
        name: 'backup',
        args: '<file>',
        about: 'Online backup of the database (safe while the server runs) to a new file, mode 600. The env key is not in it: keep SERVICE_ENV_KEY or env.key too, stored apart from it.',
        options: [{ flag: '--force', about: 'Replace an existing file' }],
        database: 'existing',
        settings: ['envKey', 'envKeyFile'],
        run: backup,
      },
      {
        name: 'restore',
        args: '<file>',
        about: 'Replace the database with a backup (no server may run on it); the old one is kept as <database>.before-restore-<time>. Refused when the env key does not open the backup.',
        options: [{ flag: '--force', about: 'Restore it even when the env key does not open it (then: env-key reset)' }],
        database: 'create',
        settings: ['envKey', 'envKeyFile'],
        run: restore,
      },
      {
        name: 'env-key check',
        about: 'Does the env key (SERVICE_ENV_KEY, or env.key) open this database\'s env vars?',
        database: 'existing',
        settings: ['envKey', 'envKeyFile'],
        needsEnvKey: true,
        run: envKeyCheck,
      },
      {
        name: 'env-key reset',
        about: 'Only when the key is lost: delete the env var values it sealed and bind the database to the current key (created when missing).',
        options: [{ flag: '--force', about: 'Needed when env var values would be deleted' }],
        database: 'existing',
        settings: ['envKey', 'envKeyFile'],
        needsEnvKey: true,
        run: envKeyReset,
      },
    ],
  },
  {
    heading: 'The audit trail',
    commands: [
      {
        name: 'audit verify',
        about: 'Check each organization\'s audit chain: names the first entry deleted, inserted or edited (exit code 1), or says how far it is signed.',
        options: [
          { flag: '--org', value: '<slug>', about: 'Only this organization' },
          { flag: '--keys', value: '<file|url>', about: 'Trust only this JWK set (the one published at /.well-known/jwks.json), not the database\'s keys' },
          { flag: '--file', value: '<export.jsonl>', about: 'Verify an export instead of the database (with --keys)' },
        ],
        database: 'existing',
        run: auditVerify,
      },
      {
        name: 'audit export',
        about: 'Write one organization\'s audit trail as JSON lines, its head signed first, for someone to verify with the published keys.',
        options: [
          { flag: '--org', value: '<slug>', about: 'The organization (required)' },
          { flag: '--since', value: '<date>', about: 'Only entries from this date or time on (ISO 8601)' },
          { flag: '--format', value: 'jsonl', about: 'The only format: one JSON object per line' },
          { flag: '--output', value: '<file>', about: 'Write to this file (mode 600) instead of stdout' },
        ],
        database: 'existing',
        run: auditExport,
      },
    ],
  },
  {
    heading: 'Organizations',
    commands: [
      { name: 'orgs list', about: 'The organizations.', database: 'existing', run: async (c) => table(c, (await (await c.repos()).organizations.list()).map((o) => ({ id: o.id, slug: o.slug, name: o.name, created: when(o.createdAt) }))) },
      {
        name: 'orgs create',
        args: '<slug>',
        about: 'A new organization.',
        options: [{ flag: '--name', value: '<name>', about: 'Its display name (default: the slug)' }],
        database: 'create',
        run: async (c) => {
          const [slug] = c.args as [string]
          if (!/^[a-z0-9][a-z0-9-]{0,62}$/.test(slug)) throw new UsageError('slug must be lowercase letters, digits and dashes', 'orgs create')
          const repos = await c.repos()
          if (await repos.organizations.bySlug(slug)) throw new UsageError(`organization ${slug} already exists`)
          const o = await repos.organizations.create({ slug, name: c.options.name ?? slug })
          c.out(`created organization ${o.slug} (${o.id})`)
        },
      },
    ],
  },
  {
    heading: 'Quotas',
    commands: [
      {
        name: 'quotas list',
        about: 'Each organization\'s quotas: value, whether it is the setting or the organization\'s own, and usage.',
        options: [{ flag: '--org', value: '<slug>', about: 'Only this organization' }],
        database: 'existing',
        settings: QUOTA_SETTINGS,
        run: quotasList,
      },
      {
        name: 'quotas set',
        args: '<org-slug> <quota> <value>',
        about: `Give an organization its own value of a quota (${QUOTA_NAMES.join(', ')}); 0 = unlimited. Audited.`,
        database: 'existing',
        settings: QUOTA_SETTINGS,
        run: quotasSet,
      },
      {
        name: 'quotas reset',
        args: '<org-slug> <quota>',
        about: 'Put an organization\'s quota back on the server\'s setting. Audited.',
        database: 'existing',
        settings: QUOTA_SETTINGS,
        run: quotasReset,
      },
    ],
  },
  {
    heading: 'Users',
    commands: [
      { name: 'users list', about: 'The users.', database: 'existing', run: async (c) => table(c, (await (await c.repos()).users.list()).map((u) => ({ id: u.id, email: u.email, name: u.name, disabled: when(u.disabledAt), created: when(u.createdAt) }))) },
      {
        name: 'users create',
        args: '<email>',
        about: 'A new user; the password is generated and printed when omitted.',
        options: [
          { flag: '--name', value: '<name>', about: 'Their display name' },
          { flag: '--password', value: '<password>', about: 'Their password, 8 characters or more (default: generated, printed once)' },
        ],
        database: 'create',
        run: async (c) => {
          const [email] = c.args as [string]
          if (!/^[^@\s]+@[^@\s]+$/.test(email)) throw new UsageError('not an email address', 'users create')
          const password = newPassword(c)
          const repos = await c.repos()
          if (await repos.users.byEmail(email)) throw new UsageError(`user ${email} already exists`)
          const u = await repos.users.create({ email, ...(c.options.name ? { name: c.options.name } : {}), passwordHash: await hashPassword(password) })
          c.out(`created user ${u.email} (${u.id})`)
          if (!c.options.password) c.out(`password: ${password}`)
        },
      },
      {
        name: 'users set-password',
        args: '<email>',
        about: 'A new password for a user; generated and printed when omitted.',
        options: [{ flag: '--password', value: '<password>', about: 'The new password, 8 characters or more (default: generated, printed once)' }],
        database: 'existing',
        run: async (c) => {
          const password = newPassword(c)
          const repos = await c.repos()
          const u = await user(repos, c.args[0]!)
          await repos.users.setPasswordHash(u.id, await hashPassword(password))
          c.out(`password changed for ${u.email}`)
          if (!c.options.password) c.out(`password: ${password}`)
        },
      },
      { name: 'users disable', args: '<email>', about: 'The user can no longer sign in or use their keys and tokens.', database: 'existing', changesCredentials: true, run: (c) => setDisabled(c, true) },
      { name: 'users enable', args: '<email>', about: 'The user can sign in again.', database: 'existing', changesCredentials: true, run: (c) => setDisabled(c, false) },
    ],
  },
  {
    heading: 'Memberships',
    commands: [
      {
        name: 'members list',
        about: 'Who is a member of which organization, with their role.',
        options: [{ flag: '--org', value: '<slug>', about: 'Only this organization' }],
        database: 'existing',
        run: async (c) => {
          const repos = await c.repos()
          const orgs = c.options.org ? [await org(repos, c.options.org)] : await repos.organizations.list()
          const list = []
          for (const o of orgs) list.push(...await repos.memberships.forOrganization(o.id))
          table(c, list.map((m) => ({ id: m.id, email: m.email, organization: m.organizationSlug, role: m.role })))
        },
      },
      {
        name: 'members set',
        args: '<email> <org-slug> <role>',
        about: `Add a member or change their role (${ROLES.join(', ')}).`,
        database: 'existing',
        changesCredentials: true,
        run: async (c) => {
          const [email, slug, role] = c.args as [string, string, string]
          if (!isRole(role)) throw new UsageError(`role must be one of ${ROLES.join(', ')}`, 'members set')
          const repos = await c.repos()
          const u = await user(repos, email)
          const o = await org(repos, slug)
          // Asked first for a clear refusal (exit 2); upsert enforces the same rule in its transaction.
          const conflict = await repos.memberships.lastOwnerConflict(u.id, o.id, role as Role)
          if (conflict) throw new UsageError(`cannot make ${u.email} ${role} of ${o.slug}: ${conflict}`)
          await repos.memberships.upsert({ userId: u.id, organizationId: o.id, role: role as Role })
          c.out(`${u.email} is ${role} of ${o.slug}`)
        },
      },
      {
        name: 'members remove',
        args: '<email> <org-slug>',
        about: 'Remove a member from an organization.',
        database: 'existing',
        changesCredentials: true,
        run: async (c) => {
          const repos = await c.repos()
          const u = await user(repos, c.args[0]!)
          const o = await org(repos, c.args[1]!)
          const conflict = await repos.memberships.lastOwnerConflict(u.id, o.id, null)
          if (conflict) throw new UsageError(`cannot remove ${u.email} from ${o.slug}: ${conflict}`)
          if (!(await repos.memberships.remove(u.id, o.id))) throw new UsageError(`${u.email} is not a member of ${o.slug}`)
          c.out(`removed ${u.email} from ${o.slug}`)
        },
      },
    ],
  },
  {
    heading: 'API keys (service_mcp_…)',
    commands: [
      {
        name: 'keys create',
        args: '<email>',
        about: 'A new API key for a member of an organization. Prints only the new key on stdout; it is not shown again.',
        options: [
          { flag: '--org', value: '<slug>', about: 'The organization (needed when the user is a member of several)' },
          { flag: '--name', value: '<name>', about: 'Its name, shown by keys list (default: cli)' },
          { flag: '--scopes', value: '"mcp:read mcp:write"', about: 'Its scopes (default: both)' },
          { flag: '--expires-days', value: '<n>', about: 'It expires after n days (default: never)' },
        ],
        // It needs a member, so an empty database can never have one to give a key to.
        database: 'existing',
        run: keysCreate,
      },
      {
        name: 'keys list',
        about: 'Every API key, shown by its prefix only.',
        options: [{ flag: '--org', value: '<slug>', about: 'Only this organization\'s' }],
        database: 'existing',
        run: async (c) => {
          const list = (await (await c.repos()).apiKeys.listAll()).filter((k) => !c.options.org || k.organizationSlug === c.options.org)
          table(c, list.map((k) => ({ id: k.id, key: `${k.displayPrefix}…`, name: k.name, email: k.email, organization: k.organizationSlug, scopes: k.scopes, created: when(k.createdAt), expires: when(k.expiresAt), revoked: when(k.revokedAt) })))
        },
      },
      {
        name: 'keys revoke',
        args: '<key-id>',
        about: 'Revoke a key; sessions bound to it end at their next request.',
        database: 'existing',
        changesCredentials: true,
        run: async (c) => {
          const [id] = c.args as [string]
          const repos = await c.repos()
          if (!(await repos.apiKeys.byId(id))) throw new UsageError(`no API key ${id}`)
          if (!(await repos.apiKeys.revoke(id, { via: 'cli' }))) return c.out(`${id} was already revoked`)
          c.out(`revoked ${id}; sessions bound to it end at their next request`)
        },
      },
    ],
  },
  {
    heading: 'OAuth',
    commands: [
      { name: 'clients list', about: 'OAuth clients: registered ones, and those identified by their metadata document.', database: 'existing', run: async (c) => table(c, (await (await c.repos()).oauthClients.list()).map((o) => ({ id: o.id, source: o.source, name: o.name, redirect_uris: o.redirectUris.join(' '), scope: o.scope, created: when(o.createdAt), last_used: when(o.lastUsedAt) }))) },
      {
        name: 'signing-keys list',
        about: 'Access-token signing keys (the newest unretired one signs).',
        database: 'existing',
        settings: ['accessTokenTtlMs'],
        run: async (c) => {
          const now = Date.now()
          table(c, (await (await c.repos()).signingKeys.all()).map((k) => ({
            kid: k.kid,
            alg: k.alg,
            created: when(k.createdAt),
            retired: when(k.retiredAt),
            state: k.retiredAt === null ? 'signing' : k.retiredAt + c.config.accessTokenTtlMs > now ? 'verifying' : 'unpublished',
          })))
        },
      },
      {
        name: 'signing-keys rotate',
        about: 'New signing key; older ones keep verifying until their tokens expire.',
        database: 'create',
        settings: ['accessTokenTtlMs'],
        run: async (c) => {
          const key = generateSigningKey()
          await (await c.repos()).signingKeys.rotate(key)
          c.out(`new signing key ${key.kid}; earlier keys keep verifying for ${Math.round(c.config.accessTokenTtlMs / 1000)} s (the access-token lifetime)`)
        },
      },
      { name: 'state-keys list', about: 'Keys sealing the requestState of 2026-07-28 confirmations.', database: 'existing', run: async (c) => table(c, (await (await c.repos()).requestStateKeys.all()).map((k) => ({ kid: k.kid, created: when(k.createdAt), retired: when(k.retiredAt), state: k.retiredAt === null ? 'sealing' : 'opening' }))) },
      {
        name: 'state-keys rotate',
        about: 'New sealing key; older ones keep opening what they sealed (pruned after a day).',
        database: 'create',
        settings: ['elicitationTimeoutMs'],
        run: async (c) => {
          const key = generateStateKey()
          const repos = await c.repos()
          await repos.requestStateKeys.rotate(key)
          // A requestState lives as long as its confirmation may wait; a day is far beyond any configured timeout.
          const pruned = await repos.requestStateKeys.pruneRetiredBefore(Date.now() - Math.max(86_400_000, c.config.elicitationTimeoutMs * 2))
          c.out(`new requestState key ${key.kid}; earlier keys keep opening the states they sealed${pruned > 0 ? ` (${pruned} retired more than a day ago removed)` : ''}`)
        },
      },
    ],
  },
]

export const COMMANDS: readonly Command[] = SECTIONS.flatMap((s) => s.commands)

function table(c: Context, rows: Array<Record<string, unknown>>): void {
  if (rows.length === 0) return c.out('(none)')
  const cols = Object.keys(rows[0]!)
  const width = cols.map((col) => Math.max(col.length, ...rows.map((r) => String(r[col] ?? '').length)))
  c.out(cols.map((col, i) => col.padEnd(width[i]!)).join('  '))
  for (const r of rows) c.out(cols.map((col, i) => String(r[col] ?? '').padEnd(width[i]!)).join('  '))
}

function when(ms: number | null): string {
  return ms === null ? '' : new Date(ms).toISOString()
}

async function org(repos: Repos, slug: string) {
  const o = await repos.organizations.bySlug(slug)
  if (!o) throw new UsageError(`no organization with slug ${slug}`)
  return o
}

async function user(repos: Repos, email: string) {
  const u = await repos.users.byEmail(email)
  if (!u) throw new UsageError(`no user with email ${email}`)
  return u
}

/** --password, checked, or a generated one (printed by the command). */
function newPassword(c: Context): string {
  const password = c.options.password ?? randomSecret(18)
  if (password.length < 8) throw new UsageError('password must be at least 8 characters')
  return password
}

async function setDisabled(c: Context, disabled: boolean): Promise<void> {
  const repos = await c.repos()
  const u = await user(repos, c.args[0]!)
  await repos.users.setDisabled(u.id, disabled)
  c.out(`${disabled ? 'disabled' : 'enabled'} ${u.email}`)
}

async function keysCreate(c: Context): Promise<void> {
  const { options } = c
  const scopes = options.scopes ? parseScopes(options.scopes) : [...SCOPES]
  if (scopes.length === 0) throw new UsageError(`--scopes must name ${SCOPES.join(' and/or ')}`, 'keys create')
  let expiresAt: number | null = null
  if (options['expires-days'] !== undefined) {
    const days = Number(options['expires-days'])
    if (!Number.isInteger(days) || days < 1) throw new UsageError('--expires-days must be a positive integer', 'keys create')
    expiresAt = Date.now() + days * 86_400_000
  }
  const repos = await c.repos()
  const u = await user(repos, c.args[0]!)
  const memberships = await repos.memberships.forUser(u.id)
  const m = options.org ? memberships.find((x) => x.organizationSlug === options.org) : memberships.length === 1 ? memberships[0] : undefined
  if (!m) throw new UsageError(options.org ? `${u.email} is not a member of ${options.org}` : `${u.email} has ${memberships.length} memberships: name one with --org`)
  const { key } = await repos.apiKeys.create({ membershipId: m.id, name: options.name ?? 'cli', scopes, expiresAt, by: { via: 'cli' } })
  c.out(key)
}

async function envKeyCheck(c: Context): Promise<void> {
  const result = await checkEnvKey(c.config, await c.repos())
  if (!result.bound) return c.out(`the database holds nothing sealed yet: the env key ${result.location.describe} will be bound to it at the next start`)
  c.out(`the env key ${result.location.describe} opens this database (${valuesPhrase(result.values)})`)
}

async function envKeyReset(c: Context): Promise<void> {
  const repos = await c.repos()
  let problem: string | undefined
  try {
    await checkEnvKey(c.config, repos)
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    problem = err.message
  }
  if (problem === undefined) return c.out('the env key already opens this database: nothing to reset')
  const values = await repos.envVars.count()
  // Nothing is lost when no value is stored: --force is asked for only when values would be deleted.
  if (values > 0 && c.options.force !== 'true') {
    throw new UsageError(`env-key reset deletes the ${valuesPhrase(values)} sealed with the lost key and binds the database to the current one; add --force if that key is really lost`, 'env-key reset')
  }
  const result = await resetEnvKey(c.config, repos)
  c.out(`deleted ${valuesPhrase(result.deleted)}; the database is now bound to the env key ${result.location.describe}. Set the apps' env vars again before deploying them`)
}

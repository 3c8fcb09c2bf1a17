#!/usr/bin/env node
/**
 * service-mcp command line: `serve`, `migrate`, and admin commands for organizations, users, memberships, API keys,
 * OAuth clients and signing keys.
 * Settings come from SERVICE_* variables or the flags of the configuration table (`--database`, `--port`, …).
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseScopes, SCOPES } from './auth/principal.js'
import { ConfigError, loadConfig, type Config } from './config.js'
import { backupDatabase, restoreDatabase } from './db/sqlite/backup.js'
import { storageFailure as storageFailureOf } from './db/open.js'
import { checkEnvKey, resetEnvKey, valuesPhrase } from './db/env-key.js'
import { openRepos } from './db/open-repos.js'
import type { Repos } from './db/repos/index.js'
import { isPostgresUrl } from './lib/database-url.js'
import { maskCredentials } from './lib/mask-credentials.js'
import { isRole, ROLES, type Role } from './lib/roles.js'
import { hashPassword, randomSecret } from './lib/crypto.js'
import { envKeyLocation } from './lib/secret-box.js'
import { packageRoot } from './lib/package-root.js'
import { generateStateKey } from './mrtr/state-sealer.js'
import { generateSigningKey } from './oauth/keyring.js'
import { SERVICE_MCP_VERSION } from './version.js'

class UsageError extends Error {}

/** A command area named without a command of it (`keys`), or with one it does not have: its usage lines follow. */
class AreaUsageError extends UsageError {
  constructor(message: string, readonly lines: string[]) {
    super(message)
  }
}

const USAGE = `Usage: service-mcp <command> [options]

Server
  serve                                   Run the server in the foreground (migrates, bootstraps an empty database)
  serve --profile conformance             The reference server of the official MCP conformance suite: its fixtures
                                          only, no authentication, in-memory database, loopback only (see README)
  migrate                                 Apply database migrations and exit

Backups and the env key
  backup <file> [--force]                 Online backup of the database (safe while the server runs) to a new file,
                                          mode 600; --force replaces an existing one. The env key is not in it: keep
                                          SERVICE_ENV_KEY or env.key too, stored apart from it
  restore <file> [--force]                Replace the database with a backup (no server may run on it); the old one is
                                          kept as <database>.before-restore-<time>. Refused when the env key does not
                                          open the backup; --force restores it anyway (then: env-key reset)
  env-key check                           Does the env key (SERVICE_ENV_KEY, or env.key) open this database's env vars?
  env-key reset [--force]                 Only when the key is lost: delete the env var values it sealed and bind the
                                          database to the current key (created when missing)

Organizations
  orgs list
  orgs create <slug> [--name <name>]

Users
  users list
  users create <email> [--name <name>] [--password <password>]   (password generated and printed when omitted)
  users set-password <email> [--password <password>]
  users disable <email> | users enable <email>

Memberships
  members list [--org <slug>]
  members set <email> <org-slug> <role>   Add a member or change their role (${ROLES.join(', ')})
  members remove <email> <org-slug>

API keys (service_mcp_…)
  keys create <email> [--org <slug>] [--name <name>] [--scopes "mcp:read mcp:write"] [--expires-days <n>]
                                          Prints only the new key on stdout; it is not shown again
  keys list [--org <slug>]
  keys revoke <key-id>

OAuth
  clients list                            Registered OAuth clients
  signing-keys list                       Access-token signing keys (the newest unretired one signs)
  signing-keys rotate                     New signing key; older ones keep verifying until their tokens expire
  state-keys list                         Keys sealing the requestState of 2026-07-28 confirmations
  state-keys rotate                       New sealing key; older ones keep opening what they sealed (pruned after a day)

Other
  -v, --version                           The version of this build
  -h, --help, help                        This text

Settings: SERVICE_* environment variables or flags such as --database <file>, --port <n> (see README).`

/**
 * A command area (`keys`, `users`, …): the commands of USAGE that start with it and its usage lines (continuations
 * included), or undefined when `word` is not one. USAGE is the only list of commands.
 */
function area(word: string | undefined): { verbs: string[]; lines: string[] } | undefined {
  if (!word || !/^[a-z][a-z-]*$/.test(word)) return undefined
  const lines: string[] = []
  let inArea = false
  for (const line of USAGE.split('\n')) {
    if (/^ {2}\S/.test(line)) inArea = line.trimStart().startsWith(`${word} `)
    else if (!/^ {10,}\S/.test(line)) inArea = false
    if (inArea) lines.push(line)
  }
  // Commands are in the first column (up to two spaces); the second one describes them.
  const commands = lines.filter((l) => /^ {2}\S/.test(l)).map((l) => l.trim().split(/\s{2,}/)[0]!)
  const verbs = [...new Set(commands.flatMap((c) => [...c.matchAll(new RegExp(`(?:^|\\s)${word} ([a-z][a-z-]*)`, 'g'))].map((m) => m[1]!)))]
  return verbs.length > 0 ? { verbs, lines } : undefined
}

/** `service-mcp --version`: the package's version and the build's release date. */
function version(): string {
  const pkg = JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string }
  return `service-mcp ${pkg.version} (build ${SERVICE_MCP_VERSION})`
}

interface Parsed {
  words: string[]
  own: Record<string, string>
  configFlags: string[]
}

const OWN_FLAGS = new Set(['--name', '--password', '--scopes', '--org', '--expires-days'])
/** The commands' own flags that take no value. */
const OWN_SWITCHES = new Set(['--force'])

function parseArgs(argv: string[]): Parsed {
  const words: string[] = []
  const own: Record<string, string> = {}
  const configFlags: string[] = []
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (!arg.startsWith('--')) {
      words.push(arg)
      continue
    }
    const [name, inline] = arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined]
    if (OWN_SWITCHES.has(name!) && inline === undefined) {
      own[name!.slice(2)] = 'true'
    } else if (OWN_FLAGS.has(name!)) {
      const value = inline ?? argv[++i]
      if (value === undefined) throw new UsageError(`${name} needs a value`)
      own[name!.slice(2)] = value
    } else {
      configFlags.push(arg)
      if (inline === undefined && argv[i + 1] !== undefined && !argv[i + 1]!.startsWith('--')) configFlags.push(argv[++i]!)
    }
  }
  return { words, own, configFlags }
}

function out(line: string): void {
  process.stdout.write(line + '\n')
}

function table(rows: Array<Record<string, unknown>>): void {
  if (rows.length === 0) return out('(none)')
  const cols = Object.keys(rows[0]!)
  const width = cols.map((c) => Math.max(c.length, ...rows.map((r) => String(r[c] ?? '').length)))
  out(cols.map((c, i) => c.padEnd(width[i]!)).join('  '))
  for (const r of rows) out(cols.map((c, i) => String(r[c] ?? '').padEnd(width[i]!)).join('  '))
}

function when(ms: number | null): string {
  return ms === null ? '' : new Date(ms).toISOString()
}

function need(value: string | undefined, what: string): string {
  if (!value) throw new UsageError(`missing ${what}`)
  return value
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

async function serve(flags: string[]): Promise<void> {
  const profile = loadConfig({ argv: flags }).profile
  // The server is loaded only to serve: the admin commands need the database alone, and start in half the time without
  // it (the suite runs a few hundred of them).
  const conformance = profile === 'conformance' ? await (await import('./conformance/profile.js')).createConformanceServer({ argv: flags }) : null
  // The first-start credentials are printed by createServer's default onBootstrap (bootstrap.ts), once it listens.
  const server = conformance ?? await (await import('./index.js')).createServer({ argv: flags })
  let url: string
  try {
    url = await server.listen()
  } catch (err) {
    // The database is released (and its lock) before the one-line message: a port in use is a setting like any other.
    await server.close().catch(() => {})
    throw err
  }
  // Before the line that says it listens: whoever waits for that line may stop it at once, and a SIGTERM that comes
  // before a handler ends the process without a clean stop.
  server.closeOnSignals()
  if (conformance) process.stderr.write(conformance.banner())
  server.app.log.info({ url: `${url}/mcp` }, 'MCP server listening')
}

async function backup(config: Config, words: string[], own: Record<string, string>): Promise<void> {
  const file = need(words[1], '<file>')
  if (words.length > 2) throw new UsageError(`backup takes one file, got ${words.slice(1).join(' ')}`)
  const result = await backupDatabase(config.database, file, { force: own.force === 'true' })
  out(`backup of ${config.database} written to ${result.file} (${result.bytes} bytes, mode 600)`)
  const key = envKeyLocation(config)
  out(`The env key is NOT in the backup: keep the env key ${key.describe} as well, stored apart from the backup; without it the env var values in the backup cannot be read after a restore`)
}

async function restore(config: Config, words: string[], own: Record<string, string>): Promise<void> {
  const file = need(words[1], '<file>')
  if (words.length > 2) throw new UsageError(`restore takes one file, got ${words.slice(1).join(' ')}`)
  const result = await restoreDatabase(config, file, { ignoreEnvKey: own.force === 'true', warn: (message) => process.stderr.write(`service-mcp: ${message}\n`) })
  out(`restored ${file} into ${result.database} (SERVICE_DATABASE, ${result.bytes} bytes)`)
  if (result.kept) out(`the database it replaced is kept as ${result.kept}; delete it once the restored one serves`)
  const key = result.envKey
  if ('mismatch' in key) out(`the env key does not open it (restored anyway, --force): run service-mcp env-key reset --force before serve`)
  else if (key.bound) out(`the env key ${key.location.describe} opens it (${valuesPhrase(key.values)})`)
  else out('it holds no env var value yet: any env key will do')
}

async function envKeyCommand(config: Config, words: string[], own: Record<string, string>): Promise<void> {
  const { repos, close } = await openRepos(config)
  try {
    switch (words[1]) {
      case 'check': {
        const result = await checkEnvKey(config, repos)
        if (!result.bound) return out(`the database holds nothing sealed yet: the env key ${result.location.describe} will be bound to it at the next start`)
        return out(`the env key ${result.location.describe} opens this database (${valuesPhrase(result.values)})`)
      }
      case 'reset': {
        let problem: string | undefined
        try {
          await checkEnvKey(config, repos)
        } catch (err) {
          if (!(err instanceof ConfigError)) throw err
          problem = err.message
        }
        if (problem === undefined) return out('the env key already opens this database: nothing to reset')
        const values = await repos.envVars.count()
        // Nothing is lost when no value is stored: --force is asked for only when values would be deleted.
        if (values > 0 && own.force !== 'true') {
          throw new UsageError(`env-key reset deletes the ${valuesPhrase(values)} sealed with the lost key and binds the database to the current one; add --force if that key is really lost`)
        }
        const result = await resetEnvKey(config, repos)
        return out(`deleted ${valuesPhrase(result.deleted)}; the database is now bound to the env key ${result.location.describe}. Set the apps' env vars again before deploying them`)
      }
    }
  } finally {
    await close()
  }
}

/**
 * The commands that change what a credential resolves to: servers that share a PostgreSQL database through Redis cache
 * credentials, so these go through the revocation barrier (SERVICE_REDIS_URL and SERVICE_REDIS_PREFIX as the servers
 * have them) and are refused beside such servers without it. Every other command needs no Redis (db/open-repos.ts).
 */
const CREDENTIAL_CHANGES = new Set(['keys revoke', 'users disable', 'users enable', 'members set', 'members remove'])

/** Warnings of the storage and of the barrier (a server that did not acknowledge a change), on stderr. */
function warn(message: string): void {
  process.stderr.write(`service-mcp: ${maskCredentials(message)}\n`)
}

async function admin(config: Config, words: string[], own: Record<string, string>): Promise<void> {
  const [area, verb, ...rest] = words
  const key = `${area ?? ''} ${verb ?? ''}`.trim()
  const { repos, close } = await openRepos(config, warn, { changesCredentials: CREDENTIAL_CHANGES.has(key) })
  try {
    switch (key) {
      case 'orgs list':
        return table((await repos.organizations.list()).map((o) => ({ id: o.id, slug: o.slug, name: o.name, created: when(o.createdAt) })))
      case 'orgs create': {
        const slug = need(rest[0], '<slug>')
        if (!/^[a-z0-9][a-z0-9-]{0,62}$/.test(slug)) throw new UsageError('slug must be lowercase letters, digits and dashes')
        if (await repos.organizations.bySlug(slug)) throw new UsageError(`organization ${slug} already exists`)
        const o = await repos.organizations.create({ slug, name: own.name ?? slug })
        return out(`created organization ${o.slug} (${o.id})`)
      }
      case 'users list':
        return table((await repos.users.list()).map((u) => ({ id: u.id, email: u.email, name: u.name, disabled: when(u.disabledAt), created: when(u.createdAt) })))
      case 'users create': {
        const email = need(rest[0], '<email>')
        if (!/^[^@\s]+@[^@\s]+$/.test(email)) throw new UsageError('not an email address')
        if (await repos.users.byEmail(email)) throw new UsageError(`user ${email} already exists`)
        const password = own.password ?? randomSecret(18)
        if (password.length < 8) throw new UsageError('password must be at least 8 characters')
        const u = await repos.users.create({ email, ...(own.name ? { name: own.name } : {}), passwordHash: await hashPassword(password) })
        out(`created user ${u.email} (${u.id})`)
        if (!own.password) out(`password: ${password}`)
        return
      }
      case 'users set-password': {
        const u = await user(repos, need(rest[0], '<email>'))
        const password = own.password ?? randomSecret(18)
        if (password.length < 8) throw new UsageError('password must be at least 8 characters')
        await repos.users.setPasswordHash(u.id, await hashPassword(password))
        out(`password changed for ${u.email}`)
        if (!own.password) out(`password: ${password}`)
        return
      }
      case 'users disable':
      case 'users enable': {
        const u = await user(repos, need(rest[0], '<email>'))
        await repos.users.setDisabled(u.id, verb === 'disable')
        return out(`${verb}d ${u.email}`)
      }
      case 'members list': {
        let list: Awaited<ReturnType<typeof repos.memberships.forOrganization>>
        if (own.org) list = await repos.memberships.forOrganization((await org(repos, own.org)).id)
        else {
          list = []
          for (const o of await repos.organizations.list()) list.push(...await repos.memberships.forOrganization(o.id))
        }
        return table(list.map((m) => ({ id: m.id, email: m.email, organization: m.organizationSlug, role: m.role })))
      }
      case 'members set': {
        const u = await user(repos, need(rest[0], '<email>'))
        const o = await org(repos, need(rest[1], '<org-slug>'))
        const role = need(rest[2], '<role>')
        if (!isRole(role)) throw new UsageError(`role must be one of ${ROLES.join(', ')}`)
        // Asked first for a clear refusal (exit 2); upsert enforces the same rule in its transaction.
        const conflict = await repos.memberships.lastOwnerConflict(u.id, o.id, role as Role)
        if (conflict) throw new UsageError(`cannot make ${u.email} ${role} of ${o.slug}: ${conflict}`)
        await repos.memberships.upsert({ userId: u.id, organizationId: o.id, role: role as Role })
        return out(`${u.email} is ${role} of ${o.slug}`)
      }
      case 'members remove': {
        const u = await user(repos, need(rest[0], '<email>'))
        const o = await org(repos, need(rest[1], '<org-slug>'))
        const conflict = await repos.memberships.lastOwnerConflict(u.id, o.id, null)
        if (conflict) throw new UsageError(`cannot remove ${u.email} from ${o.slug}: ${conflict}`)
        if (!(await repos.memberships.remove(u.id, o.id))) throw new UsageError(`${u.email} is not a member of ${o.slug}`)
        return out(`removed ${u.email} from ${o.slug}`)
      }
      case 'keys create': {
        const u = await user(repos, need(rest[0], '<email>'))
        const memberships = await repos.memberships.forUser(u.id)
        const m = own.org ? memberships.find((x) => x.organizationSlug === own.org) : memberships.length === 1 ? memberships[0] : undefined
        if (!m) throw new UsageError(own.org ? `${u.email} is not a member of ${own.org}` : `${u.email} has ${memberships.length} memberships: name one with --org`)
        const scopes = own.scopes ? parseScopes(own.scopes) : [...SCOPES]
        if (scopes.length === 0) throw new UsageError(`--scopes must name ${SCOPES.join(' and/or ')}`)
        let expiresAt: number | null = null
        if (own['expires-days'] !== undefined) {
          const days = Number(own['expires-days'])
          if (!Number.isInteger(days) || days < 1) throw new UsageError('--expires-days must be a positive integer')
          expiresAt = Date.now() + days * 86_400_000
        }
        const { key } = await repos.apiKeys.create({ membershipId: m.id, name: own.name ?? 'cli', scopes, expiresAt, by: { via: 'cli' } })
        return out(key)
      }
      case 'keys list': {
        const list = (await repos.apiKeys.listAll()).filter((k) => !own.org || k.organizationSlug === own.org)
        return table(list.map((k) => ({ id: k.id, key: `${k.displayPrefix}…`, name: k.name, email: k.email, organization: k.organizationSlug, scopes: k.scopes, created: when(k.createdAt), expires: when(k.expiresAt), revoked: when(k.revokedAt) })))
      }
      case 'keys revoke': {
        const id = need(rest[0], '<key-id>')
        if (!(await repos.apiKeys.byId(id))) throw new UsageError(`no API key ${id}`)
        if (!(await repos.apiKeys.revoke(id, { via: 'cli' }))) return out(`${id} was already revoked`)
        return out(`revoked ${id}; sessions bound to it end at their next request`)
      }
      case 'clients list':
        return table((await repos.oauthClients.list()).map((c) => ({ id: c.id, name: c.name, redirect_uris: c.redirectUris.join(' '), scope: c.scope, created: when(c.createdAt), last_used: when(c.lastUsedAt) })))
      case 'signing-keys list': {
        const now = Date.now()
        return table((await repos.signingKeys.all()).map((k) => ({
          kid: k.kid,
          alg: k.alg,
          created: when(k.createdAt),
          retired: when(k.retiredAt),
          state: k.retiredAt === null ? 'signing' : k.retiredAt + config.accessTokenTtlMs > now ? 'verifying' : 'unpublished',
        })))
      }
      case 'signing-keys rotate': {
        const key = generateSigningKey()
        await repos.signingKeys.rotate(key)
        return out(`new signing key ${key.kid}; earlier keys keep verifying for ${Math.round(config.accessTokenTtlMs / 1000)} s (the access-token lifetime)`)
      }
      case 'state-keys list':
        return table((await repos.requestStateKeys.all()).map((k) => ({ kid: k.kid, created: when(k.createdAt), retired: when(k.retiredAt), state: k.retiredAt === null ? 'sealing' : 'opening' })))
      case 'state-keys rotate': {
        const key = generateStateKey()
        await repos.requestStateKeys.rotate(key)
        // A requestState lives as long as its confirmation may wait; a day is far beyond any configured timeout.
        const pruned = await repos.requestStateKeys.pruneRetiredBefore(Date.now() - Math.max(86_400_000, config.elicitationTimeoutMs * 2))
        return out(`new requestState key ${key.kid}; earlier keys keep opening the states they sealed${pruned > 0 ? ` (${pruned} retired more than a day ago removed)` : ''}`)
      }
      default:
        throw new UsageError(`unknown command: ${words.join(' ') || '(none)'}`)
    }
  } finally {
    await close()
  }
}

async function main(argv: string[]): Promise<void> {
  const { words, own, configFlags } = parseArgs(argv)
  if (argv.includes('--version') || words[0] === '-v') return out(version())
  if (words.length === 0 || words[0] === 'help' || words[0] === '-h' || argv.includes('--help')) {
    out(USAGE)
    return
  }
  // `keys` alone, or `keys frobnicate`: what that area's commands are, before any setting or file is looked at.
  const commands = area(words[0])
  if (commands && (words.length === 1 || !commands.verbs.includes(words[1]!))) {
    const problem = words.length === 1 ? 'needs a command' : `has no command ${words[1]}; its commands are`
    throw new AreaUsageError(`${words[0]} ${problem}: ${commands.verbs.join(', ')}`, commands.lines)
  }
  if (words[0] === 'serve') return serve(configFlags)
  // Only `env-key` opens env var values; every other command works on a PostgreSQL database without SERVICE_ENV_KEY.
  const config = loadConfig({ argv: configFlags, requireEnvKey: words[0] === 'env-key' })
  if (words[0] === 'migrate') {
    await (await openRepos(config)).close()
    return out(`migrations applied to ${maskCredentials(config.database)}`)
  }
  if ((words[0] === 'backup' || words[0] === 'restore') && isPostgresUrl(config.database)) {
    throw new UsageError(`${words[0]} copies a SQLite file; on PostgreSQL use its own tools (pg_dump, pg_restore)`)
  }
  if (words[0] === 'backup') return backup(config, words, own)
  if (words[0] === 'restore') return restore(config, words, own)
  if (words[0] === 'env-key') return envKeyCommand(config, words, own)
  return admin(config, words, own)
}

/**
 * A storage failure of any command (an admin command on a full disk, a corrupt file) as the one-line DatabaseError
 * naming the file and SERVICE_DATABASE; undefined for anything else.
 */
function storageFailure(argv: string[], err: unknown): Error | undefined {
  let database: string
  try {
    database = loadConfig({ argv: parseArgs(argv).configFlags, requireEnvKey: false }).database
  } catch {
    return undefined
  }
  return storageFailureOf(database, err)
}

main(process.argv.slice(2)).catch((caught: unknown) => {
  const err = caught instanceof ConfigError || caught instanceof UsageError ? caught : storageFailure(process.argv.slice(2), caught) ?? caught
  if (err instanceof UsageError || err instanceof ConfigError) {
    // One line, whatever the message holds: exit code 2 means "fix the command or the settings".
    process.stderr.write(`service-mcp: ${maskCredentials(err.message.replace(/\s*\n\s*/g, ' '))}\n`)
    if (err instanceof AreaUsageError) process.stderr.write(`Usage:\n${err.lines.join('\n')}\n`)
    else if (err instanceof UsageError) process.stderr.write('Run service-mcp help for usage.\n')
    process.exit(2)
  }
  // A driver's error may quote a URL of the settings, password included.
  process.stderr.write(`service-mcp: ${maskCredentials((err as Error).stack ?? String(err))}\n`)
  process.exit(1)
})

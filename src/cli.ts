#!/usr/bin/env node
/**
 * service-mcp command line: `serve`, `migrate`, and admin commands for organizations, users, memberships, API keys,
 * OAuth clients and signing keys.
 * Settings come from SERVICE_* variables or the flags of the configuration table (`--database`, `--port`, …).
 */
import { parseScopes, SCOPES } from './auth/principal.js'
import { ConfigError, loadConfig, type Config } from './config.js'
import { databaseFailure, openDatabase, type DatabaseError } from './db/client.js'
import { createRepos, type Repos } from './db/repos/index.js'
import { ROLES, type Role } from './db/schema.js'
import { hashPassword, randomSecret } from './lib/crypto.js'
import { createConformanceServer } from './conformance/profile.js'
import { createServer } from './index.js'
import { generateStateKey } from './mrtr/state-sealer.js'
import { generateSigningKey } from './oauth/keyring.js'

class UsageError extends Error {}

const USAGE = `Usage: service-mcp <command> [options]

Server
  serve                                   Run the server in the foreground (migrates, bootstraps an empty database)
  serve --profile conformance             The reference server of the official MCP conformance suite: its fixtures
                                          only, no authentication, in-memory database, loopback only (see README)
  migrate                                 Apply database migrations and exit

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

Settings: SERVICE_* environment variables or flags such as --database <file>, --port <n> (see README).`

interface Parsed {
  words: string[]
  own: Record<string, string>
  configFlags: string[]
}

const OWN_FLAGS = new Set(['--name', '--password', '--scopes', '--org', '--expires-days'])

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
    if (OWN_FLAGS.has(name!)) {
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

function org(repos: Repos, slug: string) {
  const o = repos.organizations.bySlug(slug)
  if (!o) throw new UsageError(`no organization with slug ${slug}`)
  return o
}

function user(repos: Repos, email: string) {
  const u = repos.users.byEmail(email)
  if (!u) throw new UsageError(`no user with email ${email}`)
  return u
}

/** Why the server could not listen, as a ConfigError naming the settings when they are the cause; else the error. */
function listenFailure(config: Config, err: unknown): unknown {
  const code = (err as NodeJS.ErrnoException | null)?.code
  const where = `SERVICE_HOST ${config.host}, SERVICE_PORT ${config.port}`
  if (code === 'EADDRINUSE') return new ConfigError(`Cannot listen on ${where}: the address is in use by another process`)
  if (code === 'EACCES') return new ConfigError(`Cannot listen on ${where}: permission denied (ports below 1024 need privileges)`)
  if (code === 'EADDRNOTAVAIL') return new ConfigError(`Cannot listen on ${where}: no such address on this machine`)
  return err
}

async function serve(flags: string[]): Promise<void> {
  const profile = loadConfig({ argv: flags }).profile
  const conformance = profile === 'conformance' ? await createConformanceServer({ argv: flags }) : null
  const server = conformance ?? await createServer({
    argv: flags,
    onBootstrap(result) {
      const lines = [
        'First start: created organization "default" with an owner account.',
        `  email:    ${result.email}`,
        result.generatedPassword ? `  password: ${result.generatedPassword}` : '  password: (from SERVICE_BOOTSTRAP_PASSWORD)',
        result.generatedApiKey ? `  API key:  ${result.generatedApiKey}` : '  API key:  (from SERVICE_BOOTSTRAP_API_KEY)',
        'These are shown once. Store them now.',
      ]
      process.stdout.write(lines.join('\n') + '\n')
    },
  })
  let url: string
  try {
    url = await server.listen()
  } catch (err) {
    // The database is released (and its lock) before the one-line message: a port in use is a setting like any other.
    await server.close().catch(() => {})
    throw listenFailure(server.config, err)
  }
  if (conformance) process.stderr.write(conformance.banner())
  server.app.log.info({ url: `${url}/mcp` }, 'MCP server listening')
  let stopping = false
  const stop = (signal: string) => {
    if (stopping) return
    stopping = true
    server.app.log.info({ signal }, 'shutting down')
    server.close().then(() => process.exit(0), (err) => {
      server.app.log.error({ err }, 'shutdown failed')
      process.exit(1)
    })
  }
  process.on('SIGTERM', () => stop('SIGTERM'))
  process.on('SIGINT', () => stop('SIGINT'))
}

async function admin(config: Config, words: string[], own: Record<string, string>): Promise<void> {
  const handle = openDatabase(config.database)
  const repos = createRepos(handle.db)
  try {
    const [area, verb, ...rest] = words
    const key = `${area ?? ''} ${verb ?? ''}`.trim()
    switch (key) {
      case 'orgs list':
        return table(repos.organizations.list().map((o) => ({ id: o.id, slug: o.slug, name: o.name, created: when(o.createdAt) })))
      case 'orgs create': {
        const slug = need(rest[0], '<slug>')
        if (!/^[a-z0-9][a-z0-9-]{0,62}$/.test(slug)) throw new UsageError('slug must be lowercase letters, digits and dashes')
        if (repos.organizations.bySlug(slug)) throw new UsageError(`organization ${slug} already exists`)
        const o = repos.organizations.create({ slug, name: own.name ?? slug })
        return out(`created organization ${o.slug} (${o.id})`)
      }
      case 'users list':
        return table(repos.users.list().map((u) => ({ id: u.id, email: u.email, name: u.name, disabled: when(u.disabledAt), created: when(u.createdAt) })))
      case 'users create': {
        const email = need(rest[0], '<email>')
        if (!/^[^@\s]+@[^@\s]+$/.test(email)) throw new UsageError('not an email address')
        if (repos.users.byEmail(email)) throw new UsageError(`user ${email} already exists`)
        const password = own.password ?? randomSecret(18)
        if (password.length < 8) throw new UsageError('password must be at least 8 characters')
        const u = repos.users.create({ email, ...(own.name ? { name: own.name } : {}), passwordHash: await hashPassword(password) })
        out(`created user ${u.email} (${u.id})`)
        if (!own.password) out(`password: ${password}`)
        return
      }
      case 'users set-password': {
        const u = user(repos, need(rest[0], '<email>'))
        const password = own.password ?? randomSecret(18)
        if (password.length < 8) throw new UsageError('password must be at least 8 characters')
        repos.users.setPasswordHash(u.id, await hashPassword(password))
        out(`password changed for ${u.email}`)
        if (!own.password) out(`password: ${password}`)
        return
      }
      case 'users disable':
      case 'users enable': {
        const u = user(repos, need(rest[0], '<email>'))
        repos.users.setDisabled(u.id, verb === 'disable')
        return out(`${verb}d ${u.email}`)
      }
      case 'members list': {
        const list = own.org ? repos.memberships.forOrganization(org(repos, own.org).id) : repos.organizations.list().flatMap((o) => repos.memberships.forOrganization(o.id))
        return table(list.map((m) => ({ id: m.id, email: m.email, organization: m.organizationSlug, role: m.role })))
      }
      case 'members set': {
        const u = user(repos, need(rest[0], '<email>'))
        const o = org(repos, need(rest[1], '<org-slug>'))
        const role = need(rest[2], '<role>')
        if (!(ROLES as readonly string[]).includes(role)) throw new UsageError(`role must be one of ${ROLES.join(', ')}`)
        // Asked first for a clear refusal (exit 2); upsert enforces the same rule in its transaction.
        const conflict = repos.memberships.lastOwnerConflict(u.id, o.id, role as Role)
        if (conflict) throw new UsageError(`cannot make ${u.email} ${role} of ${o.slug}: ${conflict}`)
        repos.memberships.upsert({ userId: u.id, organizationId: o.id, role: role as Role })
        return out(`${u.email} is ${role} of ${o.slug}`)
      }
      case 'members remove': {
        const u = user(repos, need(rest[0], '<email>'))
        const o = org(repos, need(rest[1], '<org-slug>'))
        const conflict = repos.memberships.lastOwnerConflict(u.id, o.id, null)
        if (conflict) throw new UsageError(`cannot remove ${u.email} from ${o.slug}: ${conflict}`)
        if (!repos.memberships.remove(u.id, o.id)) throw new UsageError(`${u.email} is not a member of ${o.slug}`)
        return out(`removed ${u.email} from ${o.slug}`)
      }
      case 'keys create': {
        const u = user(repos, need(rest[0], '<email>'))
        const memberships = repos.memberships.forUser(u.id)
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
        const { key } = repos.apiKeys.create({ membershipId: m.id, name: own.name ?? 'cli', scopes, expiresAt })
        return out(key)
      }
      case 'keys list': {
        const list = repos.apiKeys.listAll().filter((k) => !own.org || k.organizationSlug === own.org)
        return table(list.map((k) => ({ id: k.id, key: `${k.displayPrefix}…`, name: k.name, email: k.email, organization: k.organizationSlug, scopes: k.scopes, created: when(k.createdAt), expires: when(k.expiresAt), revoked: when(k.revokedAt) })))
      }
      case 'keys revoke': {
        const id = need(rest[0], '<key-id>')
        if (!repos.apiKeys.byId(id)) throw new UsageError(`no API key ${id}`)
        if (!repos.apiKeys.revoke(id)) return out(`${id} was already revoked`)
        return out(`revoked ${id}; sessions bound to it end at their next request`)
      }
      case 'clients list':
        return table(repos.oauthClients.list().map((c) => ({ id: c.id, name: c.name, redirect_uris: c.redirectUris.join(' '), scope: c.scope, created: when(c.createdAt), last_used: when(c.lastUsedAt) })))
      case 'signing-keys list': {
        const now = Date.now()
        return table(repos.signingKeys.all().map((k) => ({
          kid: k.kid,
          alg: k.alg,
          created: when(k.createdAt),
          retired: when(k.retiredAt),
          state: k.retiredAt === null ? 'signing' : k.retiredAt + config.accessTokenTtlMs > now ? 'verifying' : 'unpublished',
        })))
      }
      case 'signing-keys rotate': {
        const key = generateSigningKey()
        repos.signingKeys.rotate(key)
        return out(`new signing key ${key.kid}; earlier keys keep verifying for ${Math.round(config.accessTokenTtlMs / 1000)} s (the access-token lifetime)`)
      }
      case 'state-keys list':
        return table(repos.requestStateKeys.all().map((k) => ({ kid: k.kid, created: when(k.createdAt), retired: when(k.retiredAt), state: k.retiredAt === null ? 'sealing' : 'opening' })))
      case 'state-keys rotate': {
        const key = generateStateKey()
        repos.requestStateKeys.rotate(key)
        // A requestState lives as long as its confirmation may wait; a day is far beyond any configured timeout.
        const pruned = repos.requestStateKeys.pruneRetiredBefore(Date.now() - Math.max(86_400_000, config.elicitationTimeoutMs * 2))
        return out(`new requestState key ${key.kid}; earlier keys keep opening the states they sealed${pruned > 0 ? ` (${pruned} retired more than a day ago removed)` : ''}`)
      }
      default:
        throw new UsageError(`unknown command: ${words.join(' ') || '(none)'}`)
    }
  } finally {
    handle.close()
  }
}

async function main(argv: string[]): Promise<void> {
  const { words, own, configFlags } = parseArgs(argv)
  if (words.length === 0 || words[0] === 'help' || argv.includes('--help')) {
    out(USAGE)
    return
  }
  if (words[0] === 'serve') return serve(configFlags)
  const config = loadConfig({ argv: configFlags })
  if (words[0] === 'migrate') {
    openDatabase(config.database).close()
    return out(`migrations applied to ${config.database}`)
  }
  return admin(config, words, own)
}

/**
 * A storage failure of any command (an admin command on a full disk, a corrupt file) as the one-line DatabaseError
 * naming the file and SERVICE_DATABASE; undefined for anything else.
 */
function storageFailure(argv: string[], err: unknown): DatabaseError | undefined {
  let database: string
  try {
    database = loadConfig({ argv: parseArgs(argv).configFlags }).database
  } catch {
    return undefined
  }
  return databaseFailure(database, err)
}

main(process.argv.slice(2)).catch((caught: unknown) => {
  const err = caught instanceof ConfigError || caught instanceof UsageError ? caught : storageFailure(process.argv.slice(2), caught) ?? caught
  if (err instanceof UsageError || err instanceof ConfigError) {
    // One line, whatever the message holds: exit code 2 means "fix the command or the settings".
    process.stderr.write(`service-mcp: ${err.message.replace(/\s*\n\s*/g, ' ')}\n`)
    if (err instanceof UsageError) process.stderr.write('Run service-mcp help for usage.\n')
    process.exit(2)
  }
  process.stderr.write(`service-mcp: ${(err as Error).stack ?? String(err)}\n`)
  process.exit(1)
})

import type { Config } from '../config.js'
import { ConfigError } from '../config.js'
import { maskCredentials } from '../lib/mask-credentials.js'
import { newId } from '../lib/crypto.js'
import type { Bus } from '../coordination/bus.js'
import { openStorage } from './open.js'
import type { CredentialChanges } from './repos/credential-changes.js'
import type { Repos } from './repos/index.js'
import type { SharedDatabase, Storage } from './storage.js'

type Where = Pick<Config, 'database' | 'redisUrl' | 'redisPrefix' | 'leaseMs'>

/**
 * The repositories on the database SERVICE_DATABASE names, for the command line: a SQLite file or a postgres:// URL,
 * migrated as the server would. `close` lets go of the connection (or pool).
 *
 * Servers on PostgreSQL serve credentials from their caches, and learn of a change only through the credential barrier
 * (coordination/credential-barrier.ts). A command that changes what a credential resolves to (`changesCredentials`: a
 * key revoked, a user disabled, a role changed) joins it, checks first that the servers hear it, and returns once every
 * server dropped its cache: over Redis beside servers coordinated through it (with their SERVICE_REDIS_URL and
 * SERVICE_REDIS_PREFIX; without them it is refused), over the database itself (db/postgres/bus.ts) beside a server that
 * serves it alone. Any other command (a list, a new key, a new user) needs neither: what it reads or adds reaches the
 * servers through the database alone. `create: false` (a command that only works on an existing database): a SQLite
 * file that does not exist is refused, and nothing is created.
 */
export async function openRepos(where: Where, warn: (message: string) => void = () => {}, options: { changesCredentials?: boolean; create?: boolean } = {}): Promise<{ repos: Repos; close(): Promise<void> }> {
  const { database } = where
  const storage = await openStorage(database, { poolSize: 2, create: options.create !== false, onConnectionError: (err) => warn(`${maskCredentials(database)}: ${err.message}`) })
  const close = () => storage.close()
  const { shared } = storage
  if (!shared) return { repos: storage.repos(), close }
  try {
    if (options.changesCredentials !== true) return { repos: storage.repos(noCredentialChanges(database)), close }
    const servers = await shared.coordinatedServers()
    if (servers === 0) return await withBarrier(where, storage, await databaseLink(where, shared, warn), 'database', warn)
    if (!where.redisUrl) {
      throw new ConfigError(`Database ${maskCredentials(database)} (SERVICE_DATABASE) is served by ${servers} process${servers === 1 ? '' : 'es'} coordinated through Redis, which cache credentials: a command that changes one needs SERVICE_REDIS_URL and SERVICE_REDIS_PREFIX as they have them, so that the change reaches them`)
    }
    return await withBarrier(where, storage, await redisLink(where, warn), 'redis', warn)
  } catch (err) {
    await storage.close()
    throw err
  }
}

/**
 * A command that was not declared to change credentials must not change one: it joined no barrier, so the servers
 * would never hear of it. A repository write that does anyway is a mistake in the command line, reported loudly rather
 * than left to serve a revoked key from a cache.
 */
function noCredentialChanges(database: string): CredentialChanges {
  return {
    bump() {
      throw new Error(`a command of the command line not declared as changing credentials changed one on ${maskCredentials(database)} without telling the servers (a bug: declare it with changesCredentials)`)
    },
    takeChanged: () => true,
  }
}

/**
 * The repositories behind the credential barrier: a change returns once every live server dropped its credential
 * cache. Its bus is Redis's beside servers coordinated through it, and the database's own (LISTEN/NOTIFY,
 * db/postgres/bus.ts) beside a server that serves it alone.
 */
async function withBarrier(where: Where, storage: Storage, link: Link, over: 'redis' | 'database', warn: (message: string) => void) {
  const { credentialBarrier } = await import('../coordination/credential-barrier.js')
  const live = async () => (await repos.processes.live(Date.now())).map((p) => p.id)
  const barrier = credentialBarrier({
    bus: link.bus,
    processId: newId('cli'),
    leaseMs: where.leaseMs,
    liveIds: live,
    warn: (message, details) => warn(`${message}: ${JSON.stringify(details)}`),
  })
  const repos = storage.repos(barrier)
  const close = async () => {
    barrier.stop()
    await link.close()
    await storage.close()
  }
  try {
    await barrier.start({ serving: false })
    // Servers on another Redis or prefix would never hear of the change, and keep serving what it revokes from their
    // caches: asked first, before anything changes. None answering at all is that mistake (servers merely cut off from
    // Redis stop trusting their caches on their own, and some of them would still answer).
    const { live: servers, missing } = await barrier.probe()
    if (servers.length > 0 && missing.length === servers.length) {
      const through = over === 'redis'
        ? `through Redis ${maskCredentials(where.redisUrl)} (SERVICE_REDIS_URL) with prefix ${JSON.stringify(where.redisPrefix)} (SERVICE_REDIS_PREFIX)`
        : 'through the database (LISTEN/NOTIFY; a server of an older version does not listen)'
      throw new ConfigError(`None of the ${servers.length} server process${servers.length === 1 ? '' : 'es'} serving ${maskCredentials(where.database)} answered ${through} within ${where.leaseMs} ms (SERVICE_LEASE_MS): give the command line the servers' own values; nothing was changed`)
    }
  } catch (err) {
    barrier.stop()
    await link.close()
    throw err
  }
  return { repos, close }
}

/** A bus the command line joins the credential barrier on, and how to let go of it. */
interface Link {
  bus: Bus
  close(): Promise<void>
}

async function redisLink(where: Where, warn: (message: string) => void): Promise<Link> {
  const { connectRedis } = await import('../coordination/redis.js')
  return connectRedis(where.redisUrl, where.redisPrefix, 'service-mcp:cli', (err) => warn(`Redis ${maskCredentials(where.redisUrl)}: ${err.message}`))
}

async function databaseLink(where: Where, shared: SharedDatabase, warn: (message: string) => void): Promise<Link> {
  const bus = await shared.bus('cli bus', (err) => warn(`${maskCredentials(where.database)}: ${err.message}`))
  return { bus, close: () => bus.close() }
}

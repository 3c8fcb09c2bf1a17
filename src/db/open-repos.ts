import type { Config } from '../config.js'
import { ConfigError } from '../config.js'
import { isPostgresUrl, maskedUrl } from '../lib/database-url.js'
import { newId } from '../lib/crypto.js'
import { openDatabase } from './client.js'
import type { Bus } from '../coordination/bus.js'
import type { PostgresHandle } from './postgres.js'
import { createRepos, reposOn, type Repos } from './repos/index.js'

type Where = Pick<Config, 'database' | 'redisUrl' | 'redisPrefix' | 'leaseMs'>

/**
 * The repositories on the database SERVICE_DATABASE names, for the command line: a SQLite file or a postgres:// URL,
 * migrated as the server would. `close` lets go of the connection (or pool).
 *
 * Servers on PostgreSQL serve credentials from their caches, and learn of a change only through the credential barrier
 * (coordination/credential-barrier.ts): the command line joins it, over Redis beside servers that coordinate through
 * it (with the same SERVICE_REDIS_URL; without it, it is refused beside them), over the database itself beside a
 * server that serves it alone, and its changes return once every server dropped its cache.
 */
export async function openRepos(where: Where, warn: (message: string) => void = () => {}): Promise<{ repos: Repos; close(): Promise<void> }> {
  const { database } = where
  if (!isPostgresUrl(database)) {
    const handle = openDatabase(database)
    return { repos: createRepos(handle.db), close: async () => handle.close() }
  }
  // PostgreSQL's and Redis's clients are loaded only for a postgres:// database: a command on a SQLite file starts in
  // about half the time without them.
  const { coordinatedServers, openPostgres } = await import('./postgres.js')
  const handle = await openPostgres(database, { max: 2, onError: (err) => warn(`${maskedUrl(database)}: ${err.message}`) })
  try {
    if (!where.redisUrl) {
      const servers = await coordinatedServers(handle.pool)
      if (servers > 0) {
        throw new ConfigError(`Database ${maskedUrl(database)} (SERVICE_DATABASE) is served by ${servers} process${servers === 1 ? '' : 'es'} coordinated through Redis: set SERVICE_REDIS_URL (and SERVICE_REDIS_PREFIX) as they have them, so that a change made here reaches them`)
      }
    }
    return await withBarrier(where, handle, warn)
  } catch (err) {
    await handle.close()
    throw err
  }
}

/**
 * The repositories behind the credential barrier: a change returns once every live server dropped its credential
 * cache. The barrier's bus is Redis's beside servers coordinated through it, and the database's own (LISTEN/NOTIFY,
 * db/postgres-bus.ts) beside a server that serves it alone.
 */
async function withBarrier(where: Where, handle: PostgresHandle, warn: (message: string) => void) {
  const [{ credentialBarrier }, { postgresStore }] = await Promise.all([import('../coordination/credential-barrier.js'), import('./postgres.js')])
  const link = where.redisUrl ? await redisLink(where, warn) : await databaseLink(where, handle, warn)
  const live = async () => (await repos.processes.live(Date.now())).map((p) => p.id)
  const barrier = credentialBarrier({
    bus: link.bus,
    processId: newId('cli'),
    leaseMs: where.leaseMs,
    liveIds: live,
    warn: (message, details) => warn(`${message}: ${JSON.stringify(details)}`),
  })
  const repos = reposOn(postgresStore(handle.db), barrier)
  try {
    await barrier.start({ serving: false })
  } catch (err) {
    await link.close()
    throw err
  }
  return {
    repos,
    close: async () => {
      barrier.stop()
      await link.close()
      await handle.close()
    },
  }
}

async function redisLink(where: Where, warn: (message: string) => void): Promise<{ bus: Bus; close(): Promise<void> }> {
  const { connectRedis } = await import('../coordination/redis.js')
  return connectRedis(where.redisUrl, where.redisPrefix, 'service-mcp:cli', (err) => warn(`Redis ${maskedUrl(where.redisUrl)}: ${err.message}`))
}

async function databaseLink(where: Where, handle: PostgresHandle, warn: (message: string) => void): Promise<{ bus: Bus; close(): Promise<void> }> {
  const [{ postgresBus }, { applicationName }] = await Promise.all([import('./postgres-bus.js'), import('./postgres.js')])
  const bus = await postgresBus({ url: where.database, pool: handle.pool, applicationName: applicationName('cli bus'), onError: (err) => warn(`${maskedUrl(where.database)}: ${err.message}`) })
  return { bus, close: () => bus.close() }
}

import type { FastifyInstance, FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import type { Bus } from '../coordination/bus.js'
import { credentialBarrier } from '../coordination/credential-barrier.js'
import type { PostgresHandle } from '../db/postgres/client.js'
import { isDatabaseFile, openDatabase, type DatabaseHandle } from '../db/sqlite/client.js'
import { lockDatabase, type DatabaseLock } from '../db/sqlite/lock.js'
import { createRepos, reposOn, type Repos } from '../db/repos/index.js'
import { isPostgresUrl, maskedUrl } from '../lib/database-url.js'
import { releaseOnFailedStart } from '../lib/failed-start.js'
import { PLUGIN } from './names.js'

declare module 'fastify' {
  interface FastifyInstance {
    repos: Repos
    /** The SQLite connection; null on PostgreSQL. */
    database: DatabaseHandle | null
  }
}

/**
 * Takes the database's lock (one server per file, db/sqlite/lock.ts), opens SQLite (migrations applied, owner-only files),
 * exposes the repositories, and closes the connection and releases the lock on shutdown. A handle passed in (tests,
 * embedding) is the caller's: neither locked nor closed here.
 */
const dbPlugin: FastifyPluginAsync<{ path: string; handle?: DatabaseHandle }> = async (fastify, opts) => {
  if (!opts.handle && isPostgresUrl(opts.path)) return usePostgres(fastify, opts.path)
  let handle = opts.handle
  if (!handle) {
    const warn = (message: string) => fastify.log.warn({ database: opts.path }, message)
    const lock: DatabaseLock | null = isDatabaseFile(opts.path) ? lockDatabase(opts.path, warn) : null
    try {
      handle = openDatabase(opts.path, { warn })
    } catch (err) {
      lock?.release()
      throw err
    }
    const own = handle
    let closed = false
    const close = () => {
      if (closed) return
      closed = true
      own.close()
      lock?.release()
    }
    releaseOnFailedStart(fastify.config, close)
    fastify.addHook('onClose', async () => close())
  }
  fastify.decorate('database', handle)
  fastify.decorate('repos', createRepos(handle.db))
}

/**
 * A PostgreSQL database (SERVICE_DATABASE is a postgres:// URL): a pool, migrated, locked, closed on shutdown. A process
 * without Redis serves it alone (an exclusive advisory lock, decision 5 of docs/multi-process.md); processes that
 * coordinate through Redis (plugins/coordination.ts) share it (a shared one).
 */
async function usePostgres(fastify: FastifyInstance, url: string): Promise<void> {
  // Loaded here, not at the top: a server on SQLite never loads PostgreSQL's client and dialect (about 0.2 s of CPU at
  // every start, and in every test file that builds a server).
  const { lockPostgres, openPostgres, postgresStore } = await import('../db/postgres/client.js')
  const handle = await openPostgres(url, { onError: (err) => fastify.log.warn({ err, database: maskedUrl(url) }, 'a pooled PostgreSQL connection failed') })
  let lock: Awaited<ReturnType<typeof lockPostgres>>
  try {
    const database = maskedUrl(url)
    lock = await lockPostgres(handle.pool, url, fastify.coordination.shared ? 'shared' : 'exclusive', {
      lost: (err) => fastify.log.error({ err, database }, 'the connection holding this server\'s database lock ended; taking the lock again'),
      retaken: () => fastify.log.warn({ database }, 'the database lock is held again'),
      refused: (err) => fastify.log.error({ err, database }, 'the database lock, lost, is now held by another server; still trying to take it again'),
    })
  } catch (err) {
    await handle.close()
    throw err
  }
  const close = async () => {
    await lock.release()
    await handle.close()
  }
  releaseOnFailedStart(fastify.config, close)
  fastify.addHook('onClose', close)
  fastify.decorate('database', null)
  // Credential changes reach every process before the write that made them returns (coordination/credential-barrier.ts):
  // through Redis when processes coordinate there; alone on the database, through PostgreSQL's LISTEN and NOTIFY, so
  // that a change made by the command line (a process of its own) reaches this one just the same.
  const bus = fastify.coordination.shared ? fastify.coordination.bus : await listeningBus(fastify, handle, url)
  const live = async () => (await repos.processes.live(Date.now())).map((p) => p.id)
  const barrier = credentialBarrier({ bus, processId: fastify.coordination.processId, leaseMs: fastify.config.leaseMs, liveIds: live, warn: (message, details) => fastify.log.warn(details, message) })
  const repos = reposOn(postgresStore(handle.db), barrier)
  await barrier.start({ serving: true })
  fastify.addHook('onClose', async () => barrier.stop())
  fastify.decorate('repos', repos)
}

/** The bus over the database itself (db/postgres/bus.ts), closed with the server (before the pool, registered earlier). */
async function listeningBus(fastify: FastifyInstance, handle: PostgresHandle, url: string): Promise<Bus> {
  const [{ postgresBus }, { applicationName }] = await Promise.all([import('../db/postgres/bus.js'), import('../db/postgres/client.js')])
  const database = maskedUrl(url)
  const bus = await postgresBus({
    url,
    pool: handle.pool,
    applicationName: applicationName('bus'),
    onError: (err) => fastify.log.warn({ err: err.message, database }, 'the connection listening for credential changes failed; reconnecting'),
  })
  bus.onLost(() => fastify.log.warn({ database }, 'no longer listening for credential changes: every request is verified against the database until listening again'))
  bus.onResubscribed(() => fastify.log.info({ database }, 'listening for credential changes again'))
  releaseOnFailedStart(fastify.config, () => bus.close())
  fastify.addHook('onClose', () => bus.close())
  return bus
}

export default fp(dbPlugin, { name: PLUGIN.db, fastify: '5.x', dependencies: [PLUGIN.http, PLUGIN.coordination] })

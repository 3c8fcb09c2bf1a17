import type { FastifyInstance, FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import type { Bus } from '../coordination/bus.js'
import { credentialBarrier } from '../coordination/credential-barrier.js'
import { openStorage } from '../db/open.js'
import type { Repos } from '../db/repos/index.js'
import { sqliteAddonHazard } from '../db/sqlite/node-hazard.js'
import { sqliteStorageOn } from '../db/sqlite/storage.js'
import type { SharedDatabase, Storage } from '../db/storage.js'
import type { DatabaseHandle } from '../db/types.js'
import { maskCredentials } from '../lib/mask-credentials.js'
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
 * Opens the database (db/open.ts: the dialect SERVICE_DATABASE names, migrated) holding its lock for the server's whole
 * life (one server per SQLite file; on PostgreSQL an advisory lock, exclusive for a server alone, decision 5 of
 * docs/multi-process.md, shared by processes that coordinate through Redis, plugins/coordination.ts), exposes the
 * repositories, and closes it and releases the lock on shutdown. A handle passed in (tests, embedding) is the
 * caller's: neither locked nor closed here.
 */
const dbPlugin: FastifyPluginAsync<{ path: string; handle?: DatabaseHandle }> = async (fastify, opts) => {
  const storage = opts.handle ? sqliteStorageOn(opts.handle) : await openOwn(fastify, opts.path)
  releaseOnFailedStart(fastify.config, () => storage.close())
  fastify.addHook('onClose', () => storage.close())
  fastify.decorate('database', storage.sqlite)
  const hazard = storage.sqlite ? sqliteAddonHazard() : undefined
  if (hazard) fastify.log.warn(hazard)
  fastify.decorate('repos', storage.shared ? await behindBarrier(fastify, storage, storage.shared, opts.path) : storage.repos())
  // Entries written by a version without the audit chain take their place in it before any new one is written.
  const chained = await fastify.repos.audit.chainUnchained()
  if (chained > 0) fastify.log.info({ entries: chained }, 'audit entries written before the audit chain existed were chained (docs/decisions/audit-chain.md)')
}

async function openOwn(fastify: FastifyInstance, path: string): Promise<Storage> {
  const database = maskCredentials(path)
  return openStorage(path, {
    warn: (message) => fastify.log.warn({ database }, message),
    onConnectionError: (err) => fastify.log.warn({ err, database }, 'a pooled PostgreSQL connection failed'),
    lock: {
      mode: fastify.coordination.shared ? 'shared' : 'exclusive',
      events: {
        lost: (err) => fastify.log.error({ err, database }, 'the connection holding this server\'s database lock ended; taking the lock again'),
        retaken: () => fastify.log.warn({ database }, 'the database lock is held again'),
        refused: (err) => fastify.log.error({ err, database }, 'the database lock, lost, is now held by another server; still trying to take it again'),
      },
    },
  })
}

/**
 * The repositories of a database other processes share (PostgreSQL): credential changes reach every process before
 * the write that made them returns (coordination/credential-barrier.ts), through Redis when processes coordinate
 * there; alone on the database, through PostgreSQL's LISTEN and NOTIFY, so that a change made by the command line (a
 * process of its own) reaches this one just the same.
 */
async function behindBarrier(fastify: FastifyInstance, storage: Storage, shared: SharedDatabase, url: string): Promise<Repos> {
  const bus = fastify.coordination.shared ? fastify.coordination.bus : await listeningBus(fastify, shared, url)
  const live = async () => (await repos.processes.live(Date.now())).map((p) => p.id)
  const barrier = credentialBarrier({ bus, processId: fastify.coordination.processId, leaseMs: fastify.config.leaseMs, liveIds: live, warn: (message, details) => fastify.log.warn(details, message) })
  const repos = storage.repos(barrier)
  await barrier.start({ serving: true })
  fastify.addHook('onClose', async () => barrier.stop())
  return repos
}

/** The bus over the database itself (db/postgres/bus.ts), closed with the server (before the pool, registered earlier). */
async function listeningBus(fastify: FastifyInstance, shared: SharedDatabase, url: string): Promise<Bus> {
  const database = maskCredentials(url)
  const bus = await shared.bus('bus', (err) => fastify.log.warn({ err: err.message, database }, 'the connection listening for credential changes failed; reconnecting'))
  bus.onLost(() => fastify.log.warn({ database }, 'no longer listening for credential changes: every request is verified against the database until listening again'))
  bus.onResubscribed(() => fastify.log.info({ database }, 'listening for credential changes again'))
  releaseOnFailedStart(fastify.config, () => bus.close())
  fastify.addHook('onClose', () => bus.close())
  return bus
}

export default fp(dbPlugin, { name: PLUGIN.db, fastify: '5.x', dependencies: [PLUGIN.http, PLUGIN.coordination] })

import type { Redis } from 'ioredis'
import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { localBus, type Bus } from '../coordination/bus.js'
import { ProcessInbox } from '../coordination/inbox.js'
import { newProcessId } from '../coordination/process-registry.js'
import { maskCredentials } from '../lib/mask-credentials.js'
import { releaseOnFailedStart } from '../lib/failed-start.js'
import { PLUGIN } from './names.js'

/**
 * What the processes serving one database share beyond it. With SERVICE_REDIS_URL several processes may serve a
 * PostgreSQL database (`shared`), and talk through Redis: its commands (`redis`, keys under SERVICE_REDIS_PREFIX) and
 * its publish/subscribe (`bus`). Without it one process serves the database (the lock of db/sqlite/lock.ts or the advisory
 * lock of db/postgres/client.ts says so), `redis` is null, and the bus delivers to this process alone: the features that
 * coordinate through it are written once.
 */
export interface Coordination {
  /** This process, in the `processes` table and in messages between processes. */
  readonly processId: string
  /** Several processes may serve the database (SERVICE_REDIS_URL is set). */
  readonly shared: boolean
  /** Redis's command connection; null without SERVICE_REDIS_URL. */
  readonly redis: Redis | null
  /**
   * Whether Redis answers within `timeoutMs` of the server's clock (coordination/redis.ts); null without
   * SERVICE_REDIS_URL. The readiness check asks it (plugins/health.ts).
   */
  readonly redisAnswers: ((timeoutMs: number) => Promise<boolean>) | null
  readonly bus: Bus
  /** Questions to another process, and this process's answers (coordination/inbox.ts). */
  readonly inbox: ProcessInbox
  /** A Redis key (or channel) of this deployment: SERVICE_REDIS_PREFIX + `name`. */
  key(name: string): string
}

declare module 'fastify' {
  interface FastifyInstance {
    coordination: Coordination
  }
}

const coordinationPlugin: FastifyPluginAsync = async (fastify) => {
  const { config } = fastify
  const processId = newProcessId()
  const prefix = config.redisPrefix
  if (!config.redisUrl) {
    const bus = localBus()
    const inbox = new ProcessInbox(bus, processId, fastify.log)
    await inbox.start()
    fastify.decorate('coordination', { processId, shared: false, redis: null, redisAnswers: null, bus, inbox, key: (name: string) => prefix + name })
    return
  }
  const where = maskCredentials(config.redisUrl)
  // Loaded only with SERVICE_REDIS_URL: a process alone never loads ioredis (about 0.25 s of CPU at every start).
  const { connectRedis } = await import('../coordination/redis.js')
  // ioredis reconnects on its own; what it reports meanwhile is logged.
  const link = await connectRedis(config.redisUrl, prefix, `service-mcp:${processId}`, (err, connection) => fastify.log.warn({ err: err.message, redis: where, connection }, 'Redis connection error'))
  const { redis, bus } = link
  bus.onLost(() => fastify.log.warn({ redis: where }, 'Redis subscription lost: reconnecting'))
  bus.onResubscribed(() => fastify.log.info({ redis: where }, 'Redis subscription back'))
  const inbox = new ProcessInbox(bus, processId, fastify.log)
  await inbox.start()
  const redisAnswers = (timeoutMs: number) => link.answers(timeoutMs, fastify.clock)
  fastify.decorate('coordination', { processId, shared: true, redis, redisAnswers, bus, inbox, key: (name: string) => prefix + name })
  const close = async () => {
    inbox.stop()
    await link.close()
  }
  releaseOnFailedStart(config, close)
  fastify.addHook('onClose', close)
}

export default fp(coordinationPlugin, { name: PLUGIN.coordination, fastify: '5.x', dependencies: [PLUGIN.http] })

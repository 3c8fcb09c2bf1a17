import { Redis } from 'ioredis'
import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { ConfigError } from '../config.js'
import { localBus, redisBus, type Bus } from '../coordination/bus.js'
import { newProcessId } from '../coordination/process-registry.js'
import { maskedUrl } from '../lib/database-url.js'
import { releaseOnFailedStart } from '../lib/failed-start.js'
import { PLUGIN } from './names.js'

/**
 * What the processes serving one database share beyond it. With SERVICE_REDIS_URL several processes may serve a
 * PostgreSQL database (`shared`), and talk through Redis: its commands (`redis`, keys under SERVICE_REDIS_PREFIX) and
 * its publish/subscribe (`bus`). Without it one process serves the database (the lock of db/lock.ts or the advisory
 * lock of db/postgres.ts says so), `redis` is null, and the bus delivers to this process alone: the features that
 * coordinate through it are written once.
 */
export interface Coordination {
  /** This process, in the `processes` table and in messages between processes. */
  readonly processId: string
  /** Several processes may serve the database (SERVICE_REDIS_URL is set). */
  readonly shared: boolean
  /** Redis's command connection; null without SERVICE_REDIS_URL. */
  readonly redis: Redis | null
  readonly bus: Bus
  /** A Redis key (or channel) of this deployment: SERVICE_REDIS_PREFIX + `name`. */
  key(name: string): string
}

declare module 'fastify' {
  interface FastifyInstance {
    coordination: Coordination
  }
}

/** How long a start waits for Redis before it gives up with a sentence naming SERVICE_REDIS_URL. */
const CONNECT_TIMEOUT_MS = 5_000

const coordinationPlugin: FastifyPluginAsync = async (fastify) => {
  const { config } = fastify
  const processId = newProcessId()
  const prefix = config.redisPrefix
  if (!config.redisUrl) {
    fastify.decorate('coordination', { processId, shared: false, redis: null, bus: localBus(), key: (name: string) => prefix + name })
    return
  }
  const where = maskedUrl(config.redisUrl)
  const options = {
    lazyConnect: true,
    connectTimeout: CONNECT_TIMEOUT_MS,
    // A command issued while Redis is away waits for it a little, then fails (the caller answers 503), rather than
    // queueing for ever.
    maxRetriesPerRequest: 2,
    connectionName: `service-mcp:${processId}`,
  }
  const redis = new Redis(config.redisUrl, options)
  const subscriber = new Redis(config.redisUrl, options)
  for (const [connection, role] of [[redis, 'commands'], [subscriber, 'subscriptions']] as const) {
    // An 'error' event nobody listens to would end the process; ioredis reconnects on its own.
    connection.on('error', (err: Error) => fastify.log.warn({ err: err.message, redis: where, connection: role }, 'Redis connection error'))
  }
  try {
    await Promise.all([redis.connect(), subscriber.connect()])
  } catch (err) {
    redis.disconnect()
    subscriber.disconnect()
    throw new ConfigError(`Redis ${where} (SERVICE_REDIS_URL) cannot be reached: ${(err as Error).message}`, { cause: err })
  }
  const bus = redisBus(redis, subscriber, prefix)
  bus.onLost(() => fastify.log.warn({ redis: where }, 'Redis subscription lost: reconnecting'))
  bus.onResubscribed(() => fastify.log.info({ redis: where }, 'Redis subscription back'))
  fastify.decorate('coordination', { processId, shared: true, redis, bus, key: (name: string) => prefix + name })
  const close = async () => {
    await bus.close()
    subscriber.disconnect()
    await redis.quit().catch(() => redis.disconnect())
  }
  releaseOnFailedStart(config, close)
  fastify.addHook('onClose', close)
}

export default fp(coordinationPlugin, { name: PLUGIN.coordination, fastify: '5.x', dependencies: [PLUGIN.http] })

import { Redis } from 'ioredis'
import { ConfigError } from '../config.js'
import type { Clock } from '../lib/clock.js'
import { maskCredentials } from '../lib/mask-credentials.js'
import { redisBus, type Bus } from './bus.js'

/** How long a start waits for Redis before it gives up with a sentence naming SERVICE_REDIS_URL. */
const CONNECT_TIMEOUT_MS = 5_000

export interface RedisLink {
  /** The command connection. */
  readonly redis: Redis
  /** Publish/subscribe on a connection of its own. */
  readonly bus: Bus
  /**
   * Whether Redis answers a PING on the command connection within `timeoutMs` of `clock` (the readiness check). Never
   * throws; a connection that is not up answers false at once, without queueing a PING for later.
   */
  answers(timeoutMs: number, clock: Clock): Promise<boolean>
  close(): Promise<void>
}

/**
 * Connects to SERVICE_REDIS_URL twice (commands, and subscriptions, which take a connection of their own) and builds
 * the bus on them; a Redis that cannot be reached is a ConfigError naming the setting. `onError` hears what ioredis
 * reports while it reconnects on its own.
 */
export async function connectRedis(url: string, prefix: string, name: string, onError: (err: Error, connection: string) => void): Promise<RedisLink> {
  const options = {
    lazyConnect: true,
    connectTimeout: CONNECT_TIMEOUT_MS,
    // A command issued while Redis is away waits for it a little, then fails, rather than queueing for ever.
    maxRetriesPerRequest: 2,
    connectionName: name,
  }
  const redis = new Redis(url, options)
  const subscriber = new Redis(url, options)
  // An 'error' event nobody listens to would end the process.
  redis.on('error', (err: Error) => onError(err, 'commands'))
  subscriber.on('error', (err: Error) => onError(err, 'subscriptions'))
  try {
    await Promise.all([redis.connect(), subscriber.connect()])
  } catch (err) {
    redis.disconnect()
    subscriber.disconnect()
    throw new ConfigError(`Redis ${maskCredentials(url)} (SERVICE_REDIS_URL) cannot be reached: ${(err as Error).message}`, { cause: err })
  }
  const bus = redisBus(redis, subscriber, prefix)
  let closed: Promise<void> | undefined
  return {
    redis,
    bus,
    answers: (timeoutMs, clock) => {
      if (redis.status !== 'ready') return Promise.resolve(false)
      return new Promise((resolve) => {
        const timer = clock.setTimeout(() => resolve(false), timeoutMs)
        const settle = (answered: boolean) => {
          clock.clearTimer(timer)
          resolve(answered)
        }
        redis.ping().then(() => settle(true), () => settle(false))
      })
    },
    close: () => (closed ??= (async () => {
      await bus.close()
      subscriber.disconnect()
      await redis.quit().then(() => {}, () => redis.disconnect())
    })()),
  }
}

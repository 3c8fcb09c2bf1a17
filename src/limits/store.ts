import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify'
import type { Redis } from 'ioredis'
import type { Config } from '../config.js'
import { systemClock, type Clock } from '../lib/clock.js'
import { RateLimiter, RedisRateLimiter, type RateDecision } from './fixed-windows.js'
import { MemoryHeldOpen, RedisHeldOpen, SharedHeldOpen, type HeldOpen } from './held-open.js'
import { signInThrottleSettings, type NamedWindow } from './named.js'
import { RedisOutage, SHARED_CHECK_TIMEOUT_MS } from './redis-answer.js'
import { SharedSignInThrottle, type SignInGatekeeper } from './shared-sign-in-throttle.js'
import { SignInThrottle } from './sign-in-throttle.js'

/**
 * The counter store of one process: every limit counts here (docs/decisions/limits.md). In memory when one process
 * serves everything; in Redis (under SERVICE_REDIS_PREFIX) when several processes share the deployment, each kind with
 * its in-memory twin for when Redis does not answer (`outage`: one warning for all of them).
 */
export interface LimitsStore {
  /** Fixed windows in this process (also what a shared check falls back to). */
  readonly local: RateLimiter
  /** Fixed windows in Redis; null when this process counts alone. */
  readonly shared: RedisRateLimiter | null
  /** A counter's name: under the deployment's Redis prefix + `rl:` when shared, as given otherwise. */
  name(key: string): string
  readonly outage: RedisOutage
  /** Things held open (listen streams), across processes when shared; keys are named by the store (`name`). */
  readonly held: HeldOpen
  /** Failed sign-ins (both sign-in forms). */
  readonly signIn: SignInGatekeeper
  /** An endpoint's window (an OAuth endpoint's): its decision for one more request of `key`. */
  count(window: NamedWindow, key: string): RateDecision | Promise<RateDecision>
  /** Stops the store's timers. */
  close(): void
}

export interface LimitsStoreOptions {
  config: Config
  log: FastifyBaseLogger
  /** The deployment's Redis and its key naming (coordination), or null. */
  redis: Redis | null
  key(name: string): string
  /** The lease of a held-open slot in Redis (tests shorten it). */
  leaseMs?: number
  /**
   * The server's clock: this process's windows, sign-in delays and their sweep (docs/decisions/clock.md). What lives
   * in Redis (its windows' expiry, held-open leases, the shared sign-in throttle) is compared between processes, so it
   * keeps the system clock every process shares.
   */
  clock?: Clock
}

export function openLimitsStore(options: LimitsStoreOptions): LimitsStore {
  const { config, redis } = options
  const clock = options.clock ?? systemClock
  const outage = new RedisOutage(options.log, undefined, clock)
  const local = new RateLimiter(clock)
  const sweep = clock.setInterval(() => local.sweep(), Math.max(1000, config.rateLimitWindowMs))
  sweep.unref()
  const heldHere = new MemoryHeldOpen()
  if (redis === null) {
    return {
      local,
      shared: null,
      name: (key) => key,
      outage,
      held: heldHere,
      signIn: new SignInThrottle(signInThrottleSettings(config), clock),
      count: (window, key) => local.count(window.prefix + key, window.limit, window.windowMs),
      close: () => clock.clearTimer(sweep),
    }
  }
  const timeoutMs = SHARED_CHECK_TIMEOUT_MS
  const shared = new RedisRateLimiter(redis, { timeoutMs })
  const heldInRedis = new RedisHeldOpen(redis, { timeoutMs, ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}) })
  heldInRedis.start(outage)
  const name = (key: string) => options.key(`rl:${key}`)
  return {
    local,
    shared,
    name,
    outage,
    held: named(new SharedHeldOpen(heldInRedis, heldHere, outage, 'open streams'), name),
    signIn: new SharedSignInThrottle(redis, signInThrottleSettings(config), {
      // Its keys keep the names they had before the store (`sin:`), so a rolling upgrade keeps the counts.
      key: (k) => options.key(k),
      timeoutMs,
      onUnavailable: (err) => outage.failed('sign-in throttle', err),
      onAnswered: () => outage.answered(),
    }),
    count(window, key) {
      // The endpoint windows keep their names of before the store (`orl:<endpoint>:`), not under `rl:`.
      const counter = options.key(window.prefix + key)
      return shared.count(counter, window.limit, window.windowMs).then((decision) => {
        outage.answered()
        return decision
      }, (err: unknown) => {
        outage.failed(window.limiter, err)
        return local.count(counter, window.limit, window.windowMs)
      })
    },
    close() {
      clock.clearTimer(sweep)
      heldInRedis.stop()
    },
  }
}

/** `held` with each key under the store's names. */
function named(held: HeldOpen, name: (key: string) => string): HeldOpen {
  return { count: (key) => held.count(name(key)), hold: (key, capacity) => held.hold(name(key), capacity) }
}

/**
 * An endpoint's limit as a route's onRequest hook: each answer carries X-RateLimit-Limit and X-RateLimit-Remaining; a
 * request past the window is refused (the window's refusal, answered by the route's error handler).
 */
export function windowHook(store: LimitsStore, window: NamedWindow, keyOf: (request: FastifyRequest) => string) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const decision = await store.count(window, keyOf(request))
    if (!decision.allowed) throw window.refusal(decision)
    reply.header('x-ratelimit-limit', String(decision.limit))
    reply.header('x-ratelimit-remaining', String(decision.remaining))
  }
}

import { randomUUID } from 'node:crypto'
import type { Redis } from 'ioredis'
import { RateStoreUnavailable, redisAnswer, type RedisOutage } from './redis-answer.js'

/**
 * Counters of things held open (subscriptions/listen streams): a holder takes a slot of a key while fewer than its
 * capacity hold one, and gives it back when it closes. Unlike a fixed window nothing expires on its own in one
 * process; across processes (Redis) a process can die holding slots, so there each slot is a lease the process that
 * holds it renews while it lives (docs/decisions/limits.md).
 */
export interface HeldOpen {
  /** How many hold a slot of `key` now. */
  count(key: string): number | Promise<number>
  /** A slot of `key` for a new holder when fewer than `capacity` hold one: how to give it back; null when full. */
  hold(key: string, capacity: number): Release | null | Promise<Release | null>
}

/** Gives a slot back (once; later calls do nothing). */
export type Release = () => void

/** In this process: a count per key, dropped at zero. */
export class MemoryHeldOpen implements HeldOpen {
  readonly #held = new Map<string, number>()

  count(key: string): number {
    return this.#held.get(key) ?? 0
  }

  hold(key: string, capacity: number): Release | null {
    const n = this.count(key)
    if (n >= capacity) return null
    this.#held.set(key, n + 1)
    let released = false
    return () => {
      if (released) return
      released = true
      const left = this.count(key) - 1
      if (left <= 0) this.#held.delete(key)
      else this.#held.set(key, left)
    }
  }

  get size(): number {
    return this.#held.size
  }
}

/**
 * A key's holders are a sorted set: member the holder, score the time its lease ends. Lapsed leases (a process that
 * died, or lost Redis long enough) are dropped before counting. KEYS[1] the key; ARGV[1] now (ms), ARGV[2] the lease
 * (ms), ARGV[3] the capacity, ARGV[4] the new holder. 1 when it holds a slot, 0 when the key is full.
 */
const HOLD_SCRIPT = `
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`

/**
 * Renews the leases of this process's holders: KEYS the keys, ARGV[1] the new end of the leases, ARGV[2] the lease,
 * ARGV[2 + i] the holder of KEYS[i]. XX: a holder dropped meanwhile (released, or its lease lapsed) is not brought back.
 */
const RENEW_SCRIPT = `
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, 'XX', ARGV[1], ARGV[2 + i])
  redis.call('PEXPIRE', key, ARGV[2])
end
return 0
`

const HOLD_COMMAND = 'serviceMcpHoldOpen'
const RENEW_COMMAND = 'serviceMcpRenewHeld'

type WithScripts = Redis & {
  [HOLD_COMMAND](numKeys: number, ...args: Array<string | number>): Promise<0 | 1>
  [RENEW_COMMAND](numKeys: number, ...args: Array<string | number>): Promise<0>
}

/** A lease lasts this long unless renewed; renewed every third of it, so one missed renewal loses nothing. */
export const HELD_LEASE_MS = 30_000

export interface RedisHeldOpenOptions {
  /** A check Redis has not answered after this long fails (RateStoreUnavailable). */
  timeoutMs: number
  leaseMs?: number
  /** The clock leases are measured with (tests inject one). */
  now?: () => number
}

/**
 * Held-open counters in Redis, shared by every process using the same keys. Each slot is a lease of `leaseMs`, renewed
 * by `renew()` (every third of a lease, from a timer the owner starts with `start()`) while the slot is held: a process
 * that dies stops renewing, and its slots free themselves within one lease. A renewal is one round trip for all of this
 * process's slots. Rejects with RateStoreUnavailable when Redis does not answer.
 */
export class RedisHeldOpen implements HeldOpen {
  readonly #redis: WithScripts
  readonly #timeoutMs: number
  readonly #leaseMs: number
  readonly #now: () => number
  /** This process's holders: holder → key. */
  readonly #mine = new Map<string, string>()
  readonly #tag = randomUUID()
  #seq = 0
  #timer: NodeJS.Timeout | undefined

  constructor(redis: Redis, options: RedisHeldOpenOptions) {
    this.#redis = redis as unknown as WithScripts
    if (typeof this.#redis[HOLD_COMMAND] !== 'function') redis.defineCommand(HOLD_COMMAND, { lua: HOLD_SCRIPT })
    if (typeof this.#redis[RENEW_COMMAND] !== 'function') redis.defineCommand(RENEW_COMMAND, { lua: RENEW_SCRIPT })
    this.#timeoutMs = options.timeoutMs
    this.#leaseMs = options.leaseMs ?? HELD_LEASE_MS
    this.#now = options.now ?? Date.now
  }

  #ask<T>(command: () => Promise<T>): Promise<T> {
    if (this.#redis.status !== 'ready') return Promise.reject(new RateStoreUnavailable(`Redis connection is ${this.#redis.status}`))
    return redisAnswer(command(), this.#timeoutMs)
  }

  count(key: string): Promise<number> {
    return this.#ask(() => this.#redis.zcount(key, `(${this.#now()}`, '+inf'))
  }

  async hold(key: string, capacity: number): Promise<Release | null> {
    const holder = `${this.#tag}:${++this.#seq}`
    const held = await this.#ask(() => this.#redis[HOLD_COMMAND](1, key, this.#now(), this.#leaseMs, capacity, holder))
    if (held === 0) return null
    this.#mine.set(holder, key)
    return () => {
      if (!this.#mine.delete(holder)) return
      // Not answered: the lease lapses on its own, since it is no longer renewed.
      this.#ask(() => this.#redis.zrem(key, holder)).catch(() => {})
    }
  }

  /** Renews the lease of every slot this process holds (one round trip; none when it holds none). */
  async renew(): Promise<void> {
    if (this.#mine.size === 0) return
    const keys = [...this.#mine.values()]
    await this.#ask(() => this.#redis[RENEW_COMMAND](keys.length, ...keys, this.#now() + this.#leaseMs, this.#leaseMs, ...this.#mine.keys()))
  }

  /** Renews every third of a lease until `stop()`; a renewal Redis does not answer is reported to `outage`. */
  start(outage: RedisOutage): void {
    this.#timer = setInterval(() => {
      this.renew().then(() => outage.answered(), (err: unknown) => outage.failed('held-open leases', err))
    }, Math.max(10, Math.floor(this.#leaseMs / 3)))
    this.#timer.unref()
  }

  stop(): void {
    clearInterval(this.#timer)
  }

  /** Slots this process holds in Redis. */
  get held(): number {
    return this.#mine.size
  }
}

/**
 * Held open in Redis, or in this process while Redis does not answer (the one behaviour of docs/decisions/limits.md):
 * the same capacity, counted among this process's own holders (those it took in this process), until Redis answers.
 * A slot taken in Redis is given back there; one taken here, here.
 */
export class SharedHeldOpen implements HeldOpen {
  readonly #shared: RedisHeldOpen
  readonly #local: MemoryHeldOpen
  readonly #outage: RedisOutage
  readonly #what: string

  constructor(shared: RedisHeldOpen, local: MemoryHeldOpen, outage: RedisOutage, what: string) {
    this.#shared = shared
    this.#local = local
    this.#outage = outage
    this.#what = what
  }

  async count(key: string): Promise<number> {
    try {
      const n = await this.#shared.count(key)
      this.#outage.answered()
      return n + this.#local.count(key)
    } catch (err) {
      this.#outage.failed(this.#what, err)
      return this.#local.count(key)
    }
  }

  async hold(key: string, capacity: number): Promise<Release | null> {
    try {
      // Slots taken here during an outage still count until they are given back.
      const local = this.#local.count(key)
      const release = await this.#shared.hold(key, capacity - local)
      this.#outage.answered()
      return release
    } catch (err) {
      this.#outage.failed(this.#what, err)
      return this.#local.hold(key, capacity)
    }
  }
}

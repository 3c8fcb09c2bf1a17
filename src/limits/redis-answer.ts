import { systemClock, type Clock } from '../lib/clock.js'
import type { FastifyBaseLogger } from 'fastify'

/** Redis could not be asked (connection down) or did not answer in time: the caller decides what to do without it. */
export class RateStoreUnavailable extends Error {
  override readonly name = 'RateStoreUnavailable'
}

/**
 * Redis's answer to a command, or RateStoreUnavailable when it fails or takes longer than `timeoutMs` (the command
 * may still run; a counter is then counted once more than it should, which errs on the safe side).
 */
export function redisAnswer<T>(answer: Promise<T>, timeoutMs: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new RateStoreUnavailable(`Redis did not answer within ${timeoutMs} ms`)), timeoutMs)
    answer.then((a) => {
      clearTimeout(timer)
      resolve(a)
    }, (err: unknown) => {
      clearTimeout(timer)
      reject(new RateStoreUnavailable(`Redis refused the command: ${(err as Error).message}`, { cause: err }))
    })
  })
}

/**
 * How long a shared check waits for Redis before this process decides alone (a round trip takes well under a
 * millisecond; this bounds what a stalled Redis adds to every request).
 */
export const SHARED_CHECK_TIMEOUT_MS = 1_000
/** While Redis fails, its warning is logged at most this often. */
export const SHARED_WARNING_EVERY_MS = 30_000

/**
 * The one behaviour of every limit when Redis does not answer (docs/decisions/limits.md): the limit is counted in this
 * process instead, with the same settings, and this reporter says so: a warning at most once per
 * SHARED_WARNING_EVERY_MS while Redis fails, and one line at info when it answers again. One reporter per process, shared
 * by every limit, so an outage is one warning rather than one per kind of limit.
 */
export class RedisOutage {
  readonly #log: Pick<FastifyBaseLogger, 'warn' | 'info'>
  readonly #everyMs: number
  #down = false
  #warnedAt = -Infinity

  readonly #clock: Clock

  /** @param clock spaces the warnings (docs/decisions/clock.md). */
  constructor(log: Pick<FastifyBaseLogger, 'warn' | 'info'>, everyMs = SHARED_WARNING_EVERY_MS, clock: Clock = systemClock) {
    this.#log = log
    this.#everyMs = everyMs
    this.#clock = clock
  }

  /** Redis did not answer a check of `what` (a limit's name); the caller counts in this process instead. */
  failed(what: string, err: unknown, now = this.#clock.now()): void {
    this.#down = true
    if (now - this.#warnedAt < this.#everyMs) return
    this.#warnedAt = now
    this.#log.warn({ err: (err as Error).message, limit: what }, 'limits: Redis did not answer; this process counts on its own until it does')
  }

  /** Redis answered a check: the end of an outage, if there was one, is logged once. */
  answered(): void {
    if (!this.#down) return
    this.#down = false
    this.#warnedAt = -Infinity
    this.#log.info('limits: shared through Redis again')
  }

  get down(): boolean {
    return this.#down
  }
}

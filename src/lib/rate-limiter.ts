/**
 * Fixed-window counters in memory (one process serves everything). A hit costs one Map lookup; expired windows are
 * dropped by `sweep()`, so memory follows the number of keys active in the current window.
 */
export interface RateDecision {
  allowed: boolean
  limit: number
  remaining: number
  /** Seconds until the window resets (for Retry-After), at least 1. */
  retryAfter: number
}

export class RateLimiter {
  readonly #windows = new Map<string, { count: number; resetAt: number }>()

  /** Counts `cost` requests (a batch counts each of its messages); refused when they do not all fit the window. */
  hit(key: string, limit: number, windowMs: number, now = Date.now(), cost = 1): RateDecision {
    let w = this.#windows.get(key)
    if (w === undefined || w.resetAt <= now) {
      w = { count: 0, resetAt: now + windowMs }
      this.#windows.set(key, w)
    }
    const retryAfter = Math.max(1, Math.ceil((w.resetAt - now) / 1000))
    if (w.count + cost > limit) return { allowed: false, limit, remaining: Math.max(0, limit - w.count), retryAfter }
    w.count += cost
    return { allowed: true, limit, remaining: limit - w.count, retryAfter }
  }

  sweep(now = Date.now()): void {
    for (const [key, w] of this.#windows) if (w.resetAt <= now) this.#windows.delete(key)
  }

  get size(): number {
    return this.#windows.size
  }
}

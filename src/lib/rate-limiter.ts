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

  /**
   * Counts `cost` requests (a batch counts each of its messages). Null when they all fit the window (nothing is
   * allocated on that path, taken by every request); otherwise the refusal, and nothing is counted.
   */
  take(key: string, limit: number, windowMs: number, now = Date.now(), cost = 1): RateDecision | null {
    let w = this.#windows.get(key)
    if (w === undefined || w.resetAt <= now) {
      w = { count: 0, resetAt: now + windowMs }
      this.#windows.set(key, w)
    }
    if (w.count + cost <= limit) {
      w.count += cost
      return null
    }
    const retryAfter = Math.max(1, Math.ceil((w.resetAt - now) / 1000))
    return { allowed: false, limit, remaining: Math.max(0, limit - w.count), retryAfter }
  }

  sweep(now = Date.now()): void {
    for (const [key, w] of this.#windows) if (w.resetAt <= now) this.#windows.delete(key)
  }

  get size(): number {
    return this.#windows.size
  }
}

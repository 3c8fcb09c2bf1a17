/** What the account page shows once after a change: a new key (the only time it is ever shown) and a notice. */
export interface ShownOnce {
  newKey?: { name: string; key: string }
  notice?: string
}

/**
 * POST-redirect-GET for the account page: a form post stores what its answer must show here, under the browser's
 * sign-in, and redirects (303) to /account; the next GET of that sign-in takes it, so a reload shows nothing again
 * and re-posts nothing. Kept in memory only, never in the database: a new key must not reach the disk in clear. An
 * entry nobody comes for (the redirect never followed) is dropped after `ttlMs`; entries are swept as others are put,
 * so there is no timer, and one sign-in holds at most one entry (a newer change replaces an unread one).
 */
export class ShownOnceStore {
  readonly #ttlMs: number
  readonly #entries = new Map<string, { value: ShownOnce; expiresAt: number }>()

  constructor(ttlMs: number) {
    this.#ttlMs = ttlMs
  }

  put(signInId: string, value: ShownOnce, now = Date.now()): void {
    this.#sweep(now)
    // Delete first so the entry moves to the end: the map stays in expiry order and the sweep can stop early.
    this.#entries.delete(signInId)
    this.#entries.set(signInId, { value, expiresAt: now + this.#ttlMs })
  }

  /** What is waiting for this sign-in, removed as it is read. */
  take(signInId: string, now = Date.now()): ShownOnce | undefined {
    const entry = this.#entries.get(signInId)
    if (!entry) return undefined
    this.#entries.delete(signInId)
    return entry.expiresAt > now ? entry.value : undefined
  }

  /** Forgets what waits for a sign-in that ends. */
  drop(signInId: string): void {
    this.#entries.delete(signInId)
  }

  get size(): number {
    return this.#entries.size
  }

  #sweep(now: number): void {
    for (const [id, entry] of this.#entries) {
      if (entry.expiresAt > now) break
      this.#entries.delete(id)
    }
  }
}

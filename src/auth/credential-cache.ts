import type { Principal } from './principal.js'

/**
 * Verified credentials, keyed by the SHA-256 of the bearer token (never the token itself), so a client that sends the
 * same key on every request costs one hash and one Map lookup instead of a database join.
 *
 * Correctness rests on `changed()`: the whole cache is dropped whenever a key, member or user may have changed (in this
 * process or, through SQLite's data_version, in another one such as the CLI). A revoked, disabled or re-roled credential
 * is therefore re-verified on its very next request; there is no time window. Entries also lapse at the credential's
 * own expiry, so an expired credential gets TOKEN_EXPIRED from the verifier as before.
 */
export class CredentialCache {
  readonly #entries = new Map<string, Principal>()
  readonly #changed: () => boolean
  readonly #max: number
  #generation = 0

  constructor(options: { changed: () => boolean; max?: number }) {
    this.#changed = options.changed
    this.#max = options.max ?? 10_000
  }

  get size(): number {
    return this.#entries.size
  }

  /**
   * Moves whenever the cache is dropped. Verifying reads the database asynchronously: a caller reads this before it
   * verifies and hands it to `set`, so a principal verified before a change it had not seen is never kept after it.
   */
  get generation(): number {
    return this.#generation
  }

  get(tokenHash: string, now = Date.now()): Principal | undefined {
    if (this.#changed()) {
      this.clear()
      return undefined
    }
    const principal = this.#entries.get(tokenHash)
    if (principal === undefined) return undefined
    if (principal.expiresAt !== null && principal.expiresAt <= now) {
      this.#entries.delete(tokenHash)
      return undefined
    }
    return principal
  }

  /** Keeps `principal` unless the cache was dropped since `generation` was read (then it may be stale). */
  set(tokenHash: string, principal: Principal, generation = this.#generation): void {
    if (generation !== this.#generation) return
    // Bounded: past the limit the oldest entry goes (Maps iterate in insertion order). A miss only costs a lookup.
    if (this.#entries.size >= this.#max && !this.#entries.has(tokenHash)) {
      const oldest = this.#entries.keys().next()
      if (!oldest.done) this.#entries.delete(oldest.value)
    }
    this.#entries.set(tokenHash, Object.freeze(principal))
  }

  clear(): void {
    this.#entries.clear()
    this.#generation++
  }
}

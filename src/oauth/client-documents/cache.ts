import type { Clock } from '../../lib/clock.js'

/**
 * The documents (and refusals) of recent resolves, in this process's memory: at most `maxEntries`, the least recently
 * used dropped first, each until its own expiry on the server's clock. A refusal is kept briefly so a bad URL sent
 * again and again is not fetched each time (docs/decisions/client-metadata-documents.md).
 */
export class ExpiringLru<V> {
  readonly #entries = new Map<string, { value: V; expiresAt: number }>()

  constructor(
    readonly maxEntries: number,
    readonly clock: Clock,
  ) {}

  get(key: string): V | undefined {
    const entry = this.#entries.get(key)
    if (entry === undefined) return undefined
    this.#entries.delete(key)
    if (entry.expiresAt <= this.clock.now()) return undefined
    // Re-inserted: a Map iterates in insertion order, so the first key is always the least recently used.
    this.#entries.set(key, entry)
    return entry.value
  }

  set(key: string, value: V, ttlMs: number): void {
    this.#entries.delete(key)
    if (ttlMs <= 0) return
    this.#entries.set(key, { value, expiresAt: this.clock.now() + ttlMs })
    while (this.#entries.size > this.maxEntries) {
      const oldest = this.#entries.keys().next().value as string
      this.#entries.delete(oldest)
    }
  }

  get size(): number {
    return this.#entries.size
  }
}

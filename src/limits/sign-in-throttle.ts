import { systemClock, type Clock } from '../lib/clock.js'

/**
 * Password guessing, slowed down. Failed sign-ins are counted per account (the normalized email, whether or not such a
 * user exists, so the throttle says nothing about which accounts exist) and per client address. The first
 * `freeAttempts` failures of an account (`addressFreeAttempts` of an address) cost nothing; after that every further
 * attempt must wait a delay that starts at `delayMs` and doubles with each failure, up to `maxDelayMs`. An attempt
 * made while either waits is refused before the password is looked at, so guessing faster gains nothing.
 *
 * An attempt counts as a failure from the moment it starts and is forgiven when it succeeds: concurrent attempts
 * each see the ones started before them, so a burst of parallel guesses cannot slip through while scrypt runs.
 *
 * In memory (one process serves everything) and bounded: a key is forgotten once `maxDelayMs` has passed after its
 * wait ended, and when `maxKeys` keys are tracked the one whose last failure is oldest goes first.
 */

export interface SignInThrottleSettings {
  freeAttempts: number
  addressFreeAttempts: number
  delayMs: number
  maxDelayMs: number
  /** Most keys of each kind kept (accounts, addresses). */
  maxKeys?: number
}

/** An attempt let through, already counted as a failure; `succeeded` forgives it. */
export interface SignInAttempt {
  account: string | null
  address: string
  /** Failures counted so far, this attempt included. */
  accountFailures: number
  addressFailures: number
}

export type SignInGate =
  | { allowed: true; attempt: SignInAttempt }
  | { allowed: false; by: 'account' | 'address'; retryAfterMs: number }

interface Failures {
  count: number
  lastAt: number
}

// About 50,000 × (key ≤ 320 characters + counters): tens of megabytes at worst, per kind.
const DEFAULT_MAX_KEYS = 50_000
// 2^40 × any delay is far past any cap; keeps the arithmetic finite.
const MAX_DOUBLINGS = 40

class FailureCounter {
  readonly #entries = new Map<string, Failures>()
  readonly #free: number
  readonly #s: Required<SignInThrottleSettings>

  constructor(free: number, settings: Required<SignInThrottleSettings>) {
    this.#free = free
    this.#s = settings
  }

  /** How long after its last failure a key must wait before the next attempt. */
  #wait(count: number): number {
    if (count < this.#free) return 0
    return Math.min(this.#s.maxDelayMs, this.#s.delayMs * 2 ** Math.min(count - this.#free, MAX_DOUBLINGS))
  }

  #stale(f: Failures, now: number): boolean {
    return now >= f.lastAt + this.#wait(f.count) + this.#s.maxDelayMs
  }

  #get(key: string, now: number): Failures | undefined {
    const f = this.#entries.get(key)
    if (f && this.#stale(f, now)) {
      this.#entries.delete(key)
      return undefined
    }
    return f
  }

  /** Milliseconds the key must still wait; 0 when it may try now. */
  waitLeft(key: string, now: number): number {
    const f = this.#get(key, now)
    return f ? Math.max(0, f.lastAt + this.#wait(f.count) - now) : 0
  }

  /** Counts one failure; returns the key's count. Re-inserted, so the Map's order is the order of last failures. */
  add(key: string, now: number): number {
    const count = (this.#get(key, now)?.count ?? 0) + 1
    this.#entries.delete(key)
    if (this.#entries.size >= this.#s.maxKeys) this.#makeRoom(now)
    this.#entries.set(key, { count, lastAt: now })
    return count
  }

  /** Takes back one failure (an attempt that turned out right). */
  forgiveOne(key: string): void {
    const f = this.#entries.get(key)
    if (!f) return
    if (f.count <= 1) this.#entries.delete(key)
    else f.count--
  }

  clear(key: string): void {
    this.#entries.delete(key)
  }

  sweep(now: number): void {
    for (const [key, f] of this.#entries) if (this.#stale(f, now)) this.#entries.delete(key)
  }

  #makeRoom(now: number): void {
    this.sweep(now)
    while (this.#entries.size >= this.#s.maxKeys) {
      const oldest = this.#entries.keys().next()
      if (oldest.done === true) return
      this.#entries.delete(oldest.value)
    }
  }

  get size(): number {
    return this.#entries.size
  }
}

export class SignInThrottle {
  readonly #accounts: FailureCounter
  readonly #addresses: FailureCounter

  /** @param clock decides how long a failure delays the next attempt (docs/decisions/clock.md). */
  constructor(
    settings: SignInThrottleSettings,
    private readonly clock: Clock = systemClock,
  ) {
    const s = { maxKeys: DEFAULT_MAX_KEYS, ...settings }
    this.#accounts = new FailureCounter(s.freeAttempts, s)
    this.#addresses = new FailureCounter(s.addressFreeAttempts, s)
  }

  /**
   * Lets an attempt through (counting it as a failure until `succeeded`) or refuses it with how long to wait. A null
   * account (no usable email) is limited by its address alone.
   */
  begin(account: string | null, address: string, now = this.clock.now()): SignInGate {
    const accountWait = account === null ? 0 : this.#accounts.waitLeft(account, now)
    const addressWait = this.#addresses.waitLeft(address, now)
    if (accountWait > 0 || addressWait > 0) {
      return { allowed: false, by: accountWait >= addressWait ? 'account' : 'address', retryAfterMs: Math.max(accountWait, addressWait) }
    }
    const accountFailures = account === null ? 0 : this.#accounts.add(account, now)
    const addressFailures = this.#addresses.add(address, now)
    return { allowed: true, attempt: { account, address, accountFailures, addressFailures } }
  }

  /** The right password: the account starts afresh; the address only gets this attempt back. */
  succeeded(attempt: SignInAttempt): void {
    if (attempt.account !== null) this.#accounts.clear(attempt.account)
    this.#addresses.forgiveOne(attempt.address)
  }

  /** Forgets keys whose failures no longer matter. */
  sweep(now = this.clock.now()): void {
    this.#accounts.sweep(now)
    this.#addresses.sweep(now)
  }

  get size(): { accounts: number; addresses: number } {
    return { accounts: this.#accounts.size, addresses: this.#addresses.size }
  }
}

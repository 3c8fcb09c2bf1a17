import * as schema from './sqlite/schema.js'
import type { Db, Tables } from './types.js'

// The tables the repositories query, by name: each dialect's schema module exports the same names and rows. Declared
// opaque in types.ts (like Db), so that the public declarations, which reach Store through Repos, never reach Drizzle's.
export type { Tables }
const tables: Tables = schema

export type Dialect = 'sqlite' | 'postgres'

/**
 * What a repository runs its queries on. Repositories are written once, asynchronously, in the part of Drizzle's query
 * builder both dialects share: they `await` a query (never better-sqlite3's synchronous `.get()`, `.all()` or `.run()`),
 * take their tables from `t`, and count what a write touched with `.returning()`. Where a dialect needs its own
 * statement (a pragma, a prepared fast path) the repository asks `dialect`. A repository takes the store whole and takes
 * it apart in its body: a destructuring parameter would name the tables in the public declarations, where `Tables` is
 * opaque (types.ts).
 */
export interface Store {
  readonly dialect: Dialect
  readonly db: Db
  readonly t: Tables
  /**
   * Runs `fn` in one transaction, on a store scoped to it: all of its writes land, or none. Inside a transaction it
   * runs `fn` as part of the enclosing one. `fn` awaits only this store's queries (no network, no timers): on SQLite
   * every other caller waits while it runs.
   */
  transaction<T>(fn: (tx: Store) => Promise<T>): Promise<T>
  /**
   * Inside a transaction, before its first read: waits until no other transaction holds `key`, then holds it until this
   * one ends. For a rule a transaction checks by reading rows and then keeps by writing (an organization keeps an
   * owner): under PostgreSQL's READ COMMITTED two transactions can both read the state before either writes, both pass,
   * and together break the rule; holding the same key, the second reads only once the first has committed. PostgreSQL:
   * a transaction-scoped advisory lock on the key's hash (a collision only makes two unrelated keys wait for each
   * other). SQLite: nothing to do, since every transaction holds the database's one write lock from BEGIN IMMEDIATE.
   */
  lockKey(key: string): Promise<void>
}

/** The store a server opens, which also makes its repositories safe to call from concurrent requests. */
export interface RootStore extends Store {
  /**
   * The repositories `build` makes, each of whose calls runs without another caller's statements in between where the
   * dialect needs that (SQLite), or as they are (PostgreSQL, whose pool gives a transaction its own connection). They
   * are built on the store their calls use inside that guard.
   */
  guarded<R extends Record<string, object>>(build: (store: Store) => R): R
}

/**
 * SQLite: one connection that every request shares. A transaction's body awaits between its statements, and any other
 * request's statement run in that gap would land inside the transaction (and be rolled back with it). So every
 * repository call and every transaction takes one lock: it is held for microseconds (better-sqlite3 answers
 * synchronously, so a call completes within a few microtasks) and free whenever nothing is in flight, which is the
 * usual case, where taking it costs one check.
 */
export function sqliteStore(db: Db): RootStore {
  const connection = db.$client
  const lock = new Lock()
  const inner: Store = {
    dialect: 'sqlite',
    db,
    t: tables,
    // BEGIN IMMEDIATE already serialises every transaction (and this process's lock every caller).
    async lockKey() {},
    async transaction(fn) {
      if (connection.inTransaction) return fn(inner)
      // IMMEDIATE takes the write lock at once, so another process's write waits (busy_timeout) here, not at COMMIT.
      connection.exec('BEGIN IMMEDIATE')
      try {
        const result = await fn(inner)
        connection.exec('COMMIT')
        return result
      } catch (err) {
        // A failed COMMIT or a statement error may already have ended the transaction.
        if (connection.inTransaction) connection.exec('ROLLBACK')
        throw err
      }
    },
  }
  return {
    ...inner,
    async transaction(fn) {
      const wait = lock.take()
      if (wait) await wait
      try {
        return await inner.transaction(fn)
      } finally {
        lock.release()
      }
    },
    guarded(build) {
      const repos = build(inner)
      const guarded: Record<string, object> = {}
      for (const [name, repo] of Object.entries(repos)) guarded[name] = guardMethods(repo, lock)
      return guarded as typeof repos
    },
  }
}

/** A copy of `repo` whose functions each run under `lock`. */
function guardMethods<R extends object>(repo: R, lock: Lock): R {
  const guarded: Record<string, unknown> = {}
  for (const [name, member] of Object.entries(repo)) {
    if (typeof member !== 'function') {
      guarded[name] = member
      continue
    }
    const method = member as (...args: unknown[]) => unknown
    guarded[name] = async (...args: unknown[]) => {
      const wait = lock.take()
      if (wait) await wait
      try {
        return await method.apply(repo, args)
      } finally {
        lock.release()
      }
    }
  }
  return guarded as R
}

/** A lock for one holder at a time, handed on in the order it was asked for. */
class Lock {
  #held = false
  readonly #waiting: Array<() => void> = []

  /** Resolves once the caller holds the lock; already resolved when it was free. */
  take(): Promise<void> | void {
    if (!this.#held) {
      this.#held = true
      return
    }
    return new Promise((resolve) => this.#waiting.push(resolve))
  }

  release(): void {
    const next = this.#waiting.shift()
    if (next) next()
    else this.#held = false
  }
}

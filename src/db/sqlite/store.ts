import type { RootStore, Store } from '../store.js'
import type { Db, QueryBuilder, Tables } from '../types.js'
import { sqliteFastPaths } from './fast-paths.js'
import * as schema from './schema.js'

const tables: Tables = schema

/**
 * SQLite's Drizzle database as the repositories' query builder (types.ts `QueryBuilder`): the very same object, whose
 * queries answer synchronously (better-sqlite3) where the builder's type has them answer a promise, which a caller
 * awaits alike. Only the type changes: the repositories may not reach better-sqlite3's synchronous calls or its
 * connection.
 */
function asQueryBuilder(db: Db): QueryBuilder {
  return db as unknown as QueryBuilder
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
  const builder = { db: asQueryBuilder(db), t: tables }
  const inner: Store = {
    ...builder,
    oneConnection: true,
    // Prepared once on the one connection; their transactions are this store's (called once it exists).
    fastPaths: sqliteFastPaths(builder, connection, (work) => inner.transaction(work)),
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

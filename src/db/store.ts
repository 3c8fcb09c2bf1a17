import type { QueryBuilder, Tables } from './types.js'
import type { FastPaths } from './fast-paths.js'

// The tables the repositories query, by name: each dialect's schema module exports the same names and rows. Declared
// opaque in types.ts (like QueryBuilder), so that the public declarations, which reach Store through Repos, never
// reach Drizzle's.
export type { Tables }
export type { FastPaths }

/**
 * What a repository runs its queries on, whichever the database: this names neither dialect, nor either driver. Each
 * dialect makes its own (sqlite/store.ts, postgres/store.ts). Repositories are written once, asynchronously, in the
 * part of Drizzle's query builder both dialects share: they `await` a query, take their tables from `t`, and count
 * what a write touched with `.returning()`. Where a dialect has a faster or safer statement of its own, the repository
 * asks `fastPaths` for it by name, and otherwise runs its portable query. A repository takes the store whole and
 * takes it apart in its body: a destructuring parameter would name the tables in the public declarations, where
 * `Tables` is opaque (types.ts).
 */
export interface Store {
  readonly db: QueryBuilder
  readonly t: Tables
  /** The dialect's own statements, each optional (fast-paths.ts). */
  readonly fastPaths: FastPaths
  /**
   * True where every caller in this process shares one connection under one lock (SQLite): nobody else reads between
   * a change made inside a transaction and its commit, so a change can be announced as it is made. False where
   * transactions have connections of their own (PostgreSQL): a change is announced once committed.
   */
  readonly oneConnection: boolean
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

import { sql } from 'drizzle-orm'
import type { NodePgDatabase, NodePgTransaction } from 'drizzle-orm/node-postgres'
import type { CredentialChanges } from '../repos/credential-changes.js'
import type { RootStore, Store } from '../store.js'
import type { QueryBuilder, Tables } from '../types.js'
import type { PostgresHandle } from './client.js'
import { postgresFastPaths } from './fast-paths.js'
import * as schema from './schema.js'

type PostgresDb = NodePgDatabase<typeof schema> | NodePgTransaction<typeof schema, never>

/**
 * PostgreSQL's database and tables as the repositories' query builder and tables (types.ts `QueryBuilder`, `Tables`):
 * Drizzle has no type common to its dialects, so the repositories' is spelled in SQLite's core builder (the reason:
 * connection-types.ts). These tables read and write the very same rows (schema-rows.ts proves it at compile time),
 * and the builder calls the repositories use are spelled alike in both dialects, which every repository test checks
 * on the suite's PostgreSQL pass. The only place PostgreSQL's types are handed over as the repositories'.
 */
function asQueryBuilder(db: PostgresDb): QueryBuilder {
  return db as unknown as QueryBuilder
}
const tables = schema as unknown as Tables

/**
 * The repositories' store on PostgreSQL. A transaction runs on its own pooled client, so nothing else needs guarding;
 * its store has the fast paths that do not need the pool (postgres/fast-paths.ts).
 */
export function postgresStore(handle: Pick<PostgresHandle, 'db' | 'pool'>): RootStore {
  const scoped = (on: PostgresDb, inTransaction: boolean): Store => {
    const store: Store = {
      db: asQueryBuilder(on),
      t: tables,
      fastPaths: postgresFastPaths(on, inTransaction ? undefined : handle.pool),
      oneConnection: false,
      transaction: inTransaction
        ? (fn) => fn(store)
        : (fn) => handle.db.transaction((tx) => fn(scoped(tx as PostgresDb, true))),
      async lockKey(key) {
        // Outside a transaction the lock would end with its own statement, and so hold nothing back.
        if (!inTransaction) throw new Error('lockKey is for a transaction: call it on the store repos.transaction gives')
        await on.execute(sql`select pg_advisory_xact_lock(hashtextextended(${key}, 0))`)
      },
    }
    return store
  }
  const root = scoped(handle.db, false)
  return { ...root, guarded: (build) => build(root) }
}

/**
 * Credential changes that nobody hears of: for repositories that serve no request and announce nothing (a test's own
 * connection to a database). Servers and the command line go through the credential barrier instead
 * (coordination/credential-barrier.ts; over Redis, or over the database itself, postgres/bus.ts).
 */
export function uncachedCredentials(): CredentialChanges {
  return {
    bump() {},
    takeChanged: () => true,
  }
}

/**
 * The Drizzle and better-sqlite3 types of the opaque connection types of types.ts (module augmentation). Kept apart so
 * that the public declarations never import drizzle-orm or better-sqlite3 (see types.ts); the server's own compilation
 * includes this file (tsconfig: src/**), so its code sees the full types. Types only: nothing to run.
 *
 * Drizzle has no type for a query builder common to its dialects, and the repositories are written once for both
 * (store.ts). So the builder they see, `QueryBuilder`, is described by SQLite's core builder in its asynchronous form:
 * every query is awaited (better-sqlite3's synchronous `.get()`, `.all()` and `.run()` do not type-check), and nothing
 * of either driver is reachable (no `$client`). Its tables are SQLite's declarations; PostgreSQL's tables read and
 * write the very same rows (schema-rows.ts proves it at compile time) and the builder calls the repositories use are
 * spelled alike in both dialects, which every repository test checks on both passes.
 */
import type Database from 'better-sqlite3'
import type { BetterSQLite3Database } from 'drizzle-orm/better-sqlite3'
import type { BaseSQLiteDatabase } from 'drizzle-orm/sqlite-core'
import type * as schema from './sqlite/schema.js'

type SchemaTables = typeof schema

declare module './types.js' {
  interface Db extends BetterSQLite3Database<typeof schema> {
    $client: Database.Database
  }
  interface QueryBuilder extends BaseSQLiteDatabase<'async', unknown, typeof schema> {}
  interface Tables extends SchemaTables {}
  interface SqliteConnection extends Database.Database {}
}

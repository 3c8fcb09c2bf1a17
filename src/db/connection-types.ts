/**
 * The Drizzle and better-sqlite3 types of the opaque connection types of types.ts (module augmentation). Kept apart so
 * that the public declarations never import drizzle-orm or better-sqlite3 (see types.ts); the server's own compilation
 * includes this file (tsconfig: src/**), so its code sees the full types. Types only: nothing to run.
 */
import type Database from 'better-sqlite3'
import type { BetterSQLite3Database } from 'drizzle-orm/better-sqlite3'
import type * as schema from './sqlite/schema.js'

type SchemaTables = typeof schema

declare module './types.js' {
  interface Db extends BetterSQLite3Database<typeof schema> {
    $client: Database.Database
  }
  interface Tables extends SchemaTables {}
  interface SqliteConnection extends Database.Database {}
}

import { mkdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import Database from 'better-sqlite3'
import { drizzle, type BetterSQLite3Database } from 'drizzle-orm/better-sqlite3'
import { migrate } from 'drizzle-orm/better-sqlite3/migrator'
import { packageRoot } from '../lib/package-root.js'
import * as schema from './schema.js'

export type Db = BetterSQLite3Database<typeof schema> & { $client: Database.Database }

export interface DatabaseHandle {
  db: Db
  /** The raw connection, for pragmas and closing only: queries go through the repositories. */
  sqlite: Database.Database
  close(): void
}

/**
 * Opens (creating when needed) the SQLite database, sets the pragmas every connection needs and, unless told
 * otherwise, applies the committed migrations in drizzle/.
 */
export function openDatabase(path: string, options: { migrate?: boolean } = {}): DatabaseHandle {
  if (path !== ':memory:' && !path.startsWith('file:')) mkdirSync(dirname(path), { recursive: true })
  const sqlite = new Database(path)
  sqlite.pragma('journal_mode = WAL')
  sqlite.pragma('synchronous = NORMAL')
  sqlite.pragma('foreign_keys = ON')
  sqlite.pragma('busy_timeout = 5000')
  sqlite.pragma('temp_store = MEMORY')
  const db = drizzle(sqlite, { schema })
  if (options.migrate !== false) migrate(db, { migrationsFolder: join(packageRoot(), 'drizzle') })
  return {
    db,
    sqlite,
    close() {
      if (sqlite.open) sqlite.close()
    },
  }
}

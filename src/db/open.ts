import { isPostgresUrl } from '../lib/database-url.js'
import { openSqliteStorage } from './sqlite/storage.js'
import type { OpenOptions, Storage } from './storage.js'

export type { OpenOptions, Storage }

/**
 * Opens the database SERVICE_DATABASE names, for the server (plugins/db.ts) and the command line (open-repos.ts)
 * alike: a postgres:// URL is PostgreSQL (src/db/postgres/), anything else a SQLite file, `:memory:` or `file:` URI
 * (src/db/sqlite/; a setting that looks like another URL is refused before any file is created, sqlite/client.ts).
 * Migrations are applied either way. A database that cannot be used is a ConfigError naming SERVICE_DATABASE.
 * Decided in docs/decisions/storage.md.
 */
export async function openStorage(database: string, options: OpenOptions = {}): Promise<Storage> {
  if (!isPostgresUrl(database)) return openSqliteStorage(database, options)
  // PostgreSQL's client is loaded only for a postgres:// database: a server or a command on a SQLite file starts in
  // about half the time without it (and every test file that builds a server on SQLite).
  const { openPostgresStorage } = await import('./postgres/storage.js')
  return openPostgresStorage(database, options)
}

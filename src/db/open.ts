import { databaseTarget } from '../config.js'
import { databaseFailure } from './sqlite/client.js'
import { openSqliteStorage } from './sqlite/storage.js'
import type { OpenOptions, Storage } from './storage.js'

export type { OpenOptions, Storage }

/**
 * Opens the database SERVICE_DATABASE names, for the server (plugins/db.ts) and the command line (open-repos.ts)
 * alike: a postgres:// URL is PostgreSQL (src/db/postgres/), `:memory:` or a file path SQLite (src/db/sqlite/); a setting
 * that names neither is refused before any file is created (lib/database-url.ts). Migrations are applied either way. A
 * database that cannot be used is a ConfigError naming SERVICE_DATABASE. Decided in docs/decisions/storage.md.
 */
export async function openStorage(database: string, options: OpenOptions = {}): Promise<Storage> {
  if (databaseTarget(database).kind !== 'postgres') return openSqliteStorage(database, options)
  // PostgreSQL's client is loaded only for a postgres:// database: a server or a command on a SQLite file starts in
  // about half the time without it (and every test file that builds a server on SQLite).
  const { openPostgresStorage } = await import('./postgres/storage.js')
  return openPostgresStorage(database, options)
}

/**
 * A storage failure met on the database SERVICE_DATABASE names (a full disk, a corrupt or read-only SQLite file) as the
 * one-line ConfigError that says so, naming the setting; undefined for anything else, and for PostgreSQL, whose
 * failures postgres/client.ts words itself. A setting that names no database has no storage failure.
 */
export function storageFailure(database: string, err: unknown): Error | undefined {
  let target: ReturnType<typeof databaseTarget>
  try {
    target = databaseTarget(database)
  } catch {
    return undefined
  }
  return target.kind === 'postgres' ? undefined : databaseFailure(target, err)
}

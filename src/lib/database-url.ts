import { resolve } from 'node:path'
import { maskCredentials } from './mask-credentials.js'

/**
 * What SERVICE_DATABASE names, decided in one place (docs/decisions/storage.md): a PostgreSQL database (a `postgres://`
 * or `postgresql://` URL), SQLite in memory (`:memory:`), or a SQLite file. Code that works on files (the database's
 * folder and files, its lock, backups, the default env.key beside it) takes a `SqliteFile`, which only this
 * classification makes: a URL can no longer reach `dirname` or `resolve` and come out as a path, as `postgres://…` once
 * did (an empty database named `postgres:/service_mcp@…` in the working tree; a start-up error that named the database
 * as a file path, password included).
 */

declare const SQLITE_FILE: unique symbol
/** A SERVICE_DATABASE that names a SQLite file on disk, as it was written (relative paths stay relative). */
export type SqliteFile = string & { readonly [SQLITE_FILE]: true }

/** SQLite's in-memory database: no file, no folder, no lock. */
export const MEMORY = ':memory:'

export type DatabaseTarget =
  | { readonly kind: 'postgres'; readonly url: string }
  | { readonly kind: 'memory' }
  | { readonly kind: 'file'; readonly file: SqliteFile }

/** A SQLite database: the in-memory one, or a file. */
export type SqliteTarget = Exclude<DatabaseTarget, { kind: 'postgres' }>

/** SERVICE_DATABASE names a PostgreSQL database (a `postgres://` or `postgresql://` URL) rather than SQLite. */
export function isPostgresUrl(database: string): boolean {
  return /^postgres(ql)?:\/\//i.test(database)
}

/**
 * What `database` names, or why it can be none of them (`unusable`, a sentence naming SERVICE_DATABASE, its password
 * masked): an empty setting, or one that looks like a URL (a scheme of two letters or more, then `:/`, or SQLite's
 * `file:` URIs, which this build of SQLite does not read as URIs and would take for a file named `file:…`) of another
 * kind, including PostgreSQL's with one slash. A colon further in a path (`data/a:b.db`) or after one letter (a
 * Windows drive) is a file name. config.ts's databaseTarget throws the sentence as a ConfigError.
 */
export function classifyDatabase(database: string): DatabaseTarget | { kind: 'unusable'; unusable: string } {
  if (isPostgresUrl(database)) return { kind: 'postgres', url: database }
  if (database === MEMORY) return { kind: 'memory' }
  if (database.trim() === '') return { kind: 'unusable', unusable: 'SERVICE_DATABASE is empty: give a SQLite file path (or :memory:), or a postgres:// URL' }
  if (/^file:/i.test(database)) {
    return { kind: 'unusable', unusable: `SERVICE_DATABASE ${JSON.stringify(maskCredentials(database))} is a file: URI, which this server's SQLite does not read as one (it would create a file named after it): give the file's path, or :memory:` }
  }
  if (/^[a-z][a-z0-9+.-]+:\//i.test(database)) {
    const hint = /^postgres(ql)?:/i.test(database) ? ' (a PostgreSQL URL starts with postgres:// — two slashes)' : ''
    return { kind: 'unusable', unusable: `SERVICE_DATABASE ${JSON.stringify(maskCredentials(database))} is a URL of a database this server cannot use${hint}: give a postgres:// URL, or a SQLite file path (or :memory:)` }
  }
  return { kind: 'file', file: database as SqliteFile }
}

/**
 * The database in a sentence, for messages: "database /srv/data/service.db (SERVICE_DATABASE)" (a file, absolute),
 * "database postgres://mcp:…@db.internal/mcp (SERVICE_DATABASE)" (never its password).
 */
export function describeDatabase(target: DatabaseTarget): string {
  if (target.kind === 'postgres') return `database ${maskCredentials(target.url)} (SERVICE_DATABASE)`
  if (target.kind === 'memory') return `database ${MEMORY} (SERVICE_DATABASE)`
  return `database ${resolve(target.file)} (SERVICE_DATABASE)`
}

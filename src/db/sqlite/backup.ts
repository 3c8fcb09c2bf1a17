import { randomBytes } from 'node:crypto'
import { chmodSync, closeSync, copyFileSync, existsSync, fsyncSync, linkSync, openSync, renameSync, rmSync, statSync } from 'node:fs'
import { basename, dirname, join, resolve } from 'node:path'
import Database from 'better-sqlite3'
import { readMigrationFiles } from 'drizzle-orm/migrator'
import { ConfigError } from '../../config.js'
import { packageRoot } from '../../lib/package-root.js'
import type { SqliteFile } from '../../lib/database-url.js'
import { DatabaseError, openDatabase, sqliteTarget } from './client.js'
import { checkEnvKey, EnvKeyMismatch, valuesPhrase, type KeySubject } from '../env-key.js'
import { lockDatabase } from './lock.js'
import { createRepos } from './repos.js'

/**
 * `service-mcp backup` and `service-mcp restore`.
 *
 * A backup is SQLite's online backup of the live database, taken through a connection of its own beside a running
 * server (the admin commands take no lock, db/sqlite/lock.ts): one consistent snapshot that includes everything committed
 * before it began, the write-ahead log included (a plain `cp` of the database file misses what is still in the WAL). It
 * is written to a temporary file beside the target, checked, made a standalone file (no -wal needed), synced and only
 * then renamed into place: a failed backup leaves nothing half-written. It is owner-only (600): it holds the signing
 * keys, password hashes and sealed env vars. The env-var key is not in it (db/env-key.ts).
 *
 * A restore holds the server's lock for its duration (no server may run on the database), checks that the file is a
 * database of this service that this version can run (its migrations a prefix of ours) and that the configured env key
 * opens what it sealed, all on a copy beside the database, before it touches the database; then it keeps the old
 * database as `<db>.before-restore-<time>` (with its -wal) and renames the copy into place.
 */

const OWNER_ONLY = 0o600
/** The backup copies every page in one step: one read transaction, so writers never make it start over. */
const ALL_PAGES = 0x7fffffff
const COMPANIONS = ['-wal', '-shm', '-journal'] as const

function migrationsFolder(): string {
  return join(packageRoot(), 'drizzle')
}

function fsyncFile(path: string): void {
  const fd = openSync(path, 'r+')
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

/** Makes a rename durable (the folder's entry); some file systems cannot sync a folder, which is then left as it is. */
function fsyncFolder(path: string): void {
  let fd: number | undefined
  try {
    fd = openSync(path, 'r')
    fsyncSync(fd)
  } catch {
    // EISDIR/EINVAL on file systems that do not support it.
  } finally {
    if (fd !== undefined) closeSync(fd)
  }
}

function removeWithCompanions(path: string): void {
  for (const suffix of ['', ...COMPANIONS]) rmSync(path + suffix, { force: true })
}

/** A file beside `target` that no other process picks: `.<name>.<pid>-<random>.tmp`. */
function tempBeside(target: string, what: string): string {
  return join(dirname(target), `.${basename(target)}.${what}-${process.pid}-${randomBytes(4).toString('hex')}.tmp`)
}

/**
 * Folds the write-ahead log into the file and leaves it in rollback-journal mode: one standalone file that needs no
 * -wal beside it (a server switches it back to WAL when it opens it).
 */
function standalone(sqlite: Database.Database): void {
  sqlite.pragma('wal_checkpoint(TRUNCATE)')
  sqlite.pragma('journal_mode = DELETE')
}

/** The SQLite file SERVICE_DATABASE names; a ConfigError saying `why` a file is needed for the in-memory database. */
function databaseFile(database: string, why: string): SqliteFile {
  const named = sqliteTarget(database)
  if (named.kind !== 'file') throw new ConfigError(`SERVICE_DATABASE is ${JSON.stringify(database)}: ${why}`)
  return named.file
}

export interface BackupResult {
  /** The backup, absolute. */
  file: string
  bytes: number
}

/**
 * Writes an online backup of the database at `database` to `file`; refuses to replace an existing file unless `force`.
 * Safe while a server runs on the database and writes to it.
 */
export async function backupDatabase(database: string, file: string, options: { force?: boolean } = {}): Promise<BackupResult> {
  const from = databaseFile(database, 'only a database file can be backed up')
  const source = resolve(from)
  const target = resolve(file)
  if (!existsSync(source)) throw new DatabaseError({ kind: 'file', file: from }, 'does not exist: there is nothing to back up')
  if (target === source || COMPANIONS.some((s) => target === source + s) || target === `${source}.lock`) {
    throw new ConfigError(`The backup file ${target} is the database itself (or one of its files): name another file`)
  }
  if (!existsSync(dirname(target))) throw new ConfigError(`Cannot write the backup ${target}: its folder ${dirname(target)} does not exist`)
  let existing: ReturnType<typeof statSync> | undefined
  try {
    existing = statSync(target)
  } catch {
    existing = undefined
  }
  if (existing?.isDirectory()) throw new ConfigError(`The backup file ${target} is a folder: name a file in it`)
  if (existing && !options.force) throw new ConfigError(`The backup file ${target} exists: name a new file, or add --force to replace it`)

  const temp = tempBeside(target, 'backup')
  let sqlite: Database.Database | undefined
  try {
    // Created owner-only before SQLite writes to it: a backup is never readable by others, not even for a moment.
    closeSync(openSync(temp, 'wx', OWNER_ONLY))
    chmodSync(temp, OWNER_ONLY)
    sqlite = new Database(source, { fileMustExist: true, timeout: 5000 })
    await sqlite.backup(temp, { progress: () => ALL_PAGES })
    sqlite.close()
    const copy = new Database(temp, { fileMustExist: true })
    try {
      const check = copy.pragma('quick_check', { simple: true })
      if (check !== 'ok') throw new ConfigError(`The backup of ${source} failed its integrity check (${String(check)}); nothing was written to ${target}`)
      standalone(copy)
    } finally {
      copy.close()
    }
    fsyncFile(temp)
    renameSync(temp, target)
    fsyncFolder(dirname(target))
  } catch (err) {
    if (sqlite?.open) sqlite.close()
    removeWithCompanions(temp)
    // A full disk or an I/O error here is the backup's, not the database's: say so, naming both files.
    if (err instanceof ConfigError || typeof (err as { code?: unknown } | null)?.code !== 'string') throw err
    throw new ConfigError(`The backup of ${source} to ${target} failed (${(err as Error).message}); nothing was written to ${target}`, { cause: err })
  }
  return { file: target, bytes: statSync(target).size }
}

export interface RestoreResult {
  /** The database now in place (the setting's file, absolute). */
  database: string
  bytes: number
  /** Where the database it replaced is kept; null when there was none. */
  kept: string | null
  /**
   * What the env key check found: how many sealed values the configured key opens (bound: the backup has a key), or,
   * restored with `ignoreEnvKey`, why the key does not open it.
   */
  envKey: Awaited<ReturnType<typeof checkEnvKey>> | { mismatch: string }
}

/** The restore's own words about a key that does not open the backup: restore it anyway only on purpose. */
function backupSubject(source: string): KeySubject {
  return {
    name: `the backup ${source}`,
    noun: 'backup',
    why: 'The env key here is not the one of the server that wrote it.',
    lost: (sealed) => `if that key is lost, add --force to restore it anyway, then run \`service-mcp env-key reset --force\`${sealed.values > 0 ? `, which deletes the ${valuesPhrase(sealed.values)} it sealed` : ' (it holds no env var value, so nothing is lost)'}; nothing was restored`,
  }
}

/** The migrations this version has applied to a database it created, by their drizzle identity (created_at). */
function ourMigrations(): number[] {
  return readMigrationFiles({ migrationsFolder: migrationsFolder() }).map((m) => m.folderMillis)
}

/**
 * Throws unless `sqlite` (the copy of `file`) is an intact database of this service that this version can run: SQLite's
 * quick check passes and its applied migrations are the first ones of ours (a newer version's database is refused).
 */
function checkRestorable(sqlite: Database.Database, file: string): void {
  let check: unknown
  try {
    check = sqlite.pragma('quick_check', { simple: true })
  } catch (err) {
    throw new ConfigError(`${file} is not a SQLite database, or it is corrupt (${(err as Error).message}); nothing was restored`)
  }
  if (check !== 'ok') throw new ConfigError(`${file} is corrupt (SQLite's quick check: ${String(check)}); nothing was restored`)
  const table = sqlite.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name = '__drizzle_migrations'`).get()
  if (!table) throw new ConfigError(`${file} is a SQLite database but not one of service-mcp (it has no migrations table); nothing was restored`)
  // Drizzle's own order: it applies what is newer than the latest created_at (its id column is not a rowid alias).
  const applied = (sqlite.prepare('SELECT created_at FROM __drizzle_migrations ORDER BY created_at').all() as Array<{ created_at: number | string }>).map((r) => Number(r.created_at))
  const ours = ourMigrations()
  if (applied.length > ours.length) {
    throw new ConfigError(`${file} was written by a newer version of service-mcp (${applied.length} migrations applied; this version knows ${ours.length}): upgrade service-mcp, then restore it; nothing was restored`)
  }
  const differs = applied.findIndex((when, i) => when !== ours[i])
  if (differs !== -1) {
    throw new ConfigError(`${file} has a migration history this version does not know (migration ${differs + 1} differs): it was written by another build of service-mcp; nothing was restored`)
  }
}

/**
 * Replaces the database of `config` with the backup `file`: refused while a server holds the database, and before
 * anything is touched when the file is not a restorable database of this service or the env key does not open it.
 */
export async function restoreDatabase(
  config: { database: string; envKey: string; envKeyFile: string },
  file: string,
  options: { ignoreEnvKey?: boolean; warn?: (message: string) => void } = {},
): Promise<RestoreResult> {
  const target = resolve(databaseFile(config.database, 'a backup can be restored only into a database file'))
  const source = resolve(file)
  let stat: ReturnType<typeof statSync>
  try {
    stat = statSync(source)
  } catch {
    throw new ConfigError(`The backup file ${source} does not exist`)
  }
  if (!stat.isFile()) throw new ConfigError(`The backup file ${source} is not a file`)
  if (source === target) throw new ConfigError(`${source} is the database itself (SERVICE_DATABASE): name the backup to restore`)
  if (existsSync(`${source}-wal`)) {
    // A copy of a live database, not a backup: what its -wal holds would be left behind.
    throw new ConfigError(`${source} has a ${basename(source)}-wal beside it: it is a database in use (or a copy of one), not a backup. Take a backup of it with \`service-mcp backup --database ${source} <file>\` and restore that`)
  }

  // Held until the new database is in place: no server starts on the database meanwhile, and none may run now.
  const lock = lockDatabase(config.database, options.warn)
  const temp = tempBeside(target, 'restore')
  let swapping = false
  try {
    copyFileSync(source, temp)
    chmodSync(temp, OWNER_ONLY)
    const raw = new Database(temp, { fileMustExist: true })
    try {
      checkRestorable(raw, source)
    } finally {
      raw.close()
    }
    // Migrated (an older backup) and checked against the env key, all on the copy.
    let handle: ReturnType<typeof openDatabase>
    try {
      handle = openDatabase(temp, { warn: options.warn ?? (() => {}) })
    } catch (err) {
      // Named after the copy: say what it is (a full disk while migrating an older backup, say).
      if (!(err instanceof DatabaseError)) throw err
      throw new ConfigError(`Restoring ${source} into ${target} failed while preparing its copy: ${err.message}; ${target} was not changed`, { cause: err })
    }
    let envKey: RestoreResult['envKey']
    try {
      try {
        envKey = await checkEnvKey(config, createRepos(handle.db), backupSubject(source))
      } catch (err) {
        if (!(err instanceof EnvKeyMismatch && options.ignoreEnvKey)) throw err
        envKey = { mismatch: err.message }
      }
      standalone(handle.sqlite)
    } finally {
      handle.close()
    }
    fsyncFile(temp)

    let kept: string | null = null
    swapping = true
    if (existsSync(target)) {
      kept = `${target}.before-restore-${new Date().toISOString().replace(/[:.]/g, '-')}`
      // The old database keeps its own inode (a hard link; a copy where links are not supported), and its write-ahead
      // log goes with it, before the new file arrives: a -wal left beside the new file would be replayed into it.
      try {
        linkSync(target, kept)
      } catch {
        copyFileSync(target, kept)
      }
      for (const suffix of ['-wal', '-journal'] as const) {
        if (existsSync(target + suffix)) renameSync(target + suffix, kept + suffix)
      }
      rmSync(`${target}-shm`, { force: true })
    }
    renameSync(temp, target)
    fsyncFolder(dirname(target))
    return { database: target, bytes: statSync(target).size, kept, envKey }
  } catch (err) {
    removeWithCompanions(temp)
    if (err instanceof ConfigError || typeof (err as { code?: unknown } | null)?.code !== 'string') throw err
    const state = swapping ? `check ${target} and the files beside it` : `${target} was not changed`
    throw new ConfigError(`Restoring ${source} into ${target} failed (${(err as Error).message}); ${state}`, { cause: err })
  } finally {
    lock.release()
  }
}

import { readFileSync } from 'node:fs'
import Database from 'better-sqlite3'
import { ConfigError } from '../../config.js'
import type { SqliteFile } from '../../lib/database-url.js'
import { DatabaseError, databaseFailure, ownerOnlyFile, prepareFolder, sqliteTarget } from './client.js'

/**
 * One server per database file. A server marks as interrupted, at start, whatever the database says is in progress
 * (deployments, confirmed calls), and keeps in memory which calls are its own: two servers on one file would take each
 * other's work for a crash's leftovers. So a server holds `<database>.lock` for as long as it runs, and a second one
 * refuses to start. The admin commands of the command line do not take it: they work beside a running server.
 *
 * The lock is the kernel's, not the file's existence: `<database>.lock` is a tiny SQLite database on which the server
 * holds a write transaction open (a POSIX record lock, through SQLite) for its whole life. The kernel releases it when
 * the process ends, however it ends, so a server killed with SIGKILL leaves nothing stale to clean up or guess about
 * (no pid that may have been reused), and two servers starting at once cannot both win. The lock database also records
 * who holds it (pid, start time, command), which the refusal names. The file stays after a clean stop (deleting a
 * lock file while another process opens it would let two processes lock two different files); it is owner-only.
 */
export interface DatabaseLock {
  /** The lock file. */
  readonly path: string
  /** Releases the lock (a clean stop). */
  release(): void
}

interface Holder {
  pid: number
  since: number
  command: string
}

export function lockPathOf(file: SqliteFile): string {
  return `${file}.lock`
}

/** The command line of this process, for the holder row (what `ps` would show, shortened). */
function ownCommand(): string {
  try {
    return readFileSync('/proc/self/cmdline', 'utf8').split('\0').filter(Boolean).join(' ').slice(0, 300)
  } catch {
    return [process.execPath, ...process.argv.slice(1)].join(' ').slice(0, 300)
  }
}

function isBusy(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code
  return typeof code === 'string' && (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED'))
}

function holderOf(lock: Database.Database): Holder | undefined {
  try {
    return lock.prepare('SELECT pid, since, command FROM holder').get() as Holder | undefined
  } catch {
    return undefined // being written at this very moment
  }
}

function inUse(file: SqliteFile, lockPath: string, holder: Holder | undefined): DatabaseError {
  const who = holder
    ? `another server (pid ${holder.pid}, started ${new Date(holder.since).toISOString()})`
    : 'another server'
  return new DatabaseError({ kind: 'file', file }, `is in use by ${who}: one server per database file (lock ${lockPath}). Stop that server first, or give this one its own SERVICE_DATABASE`)
}

/**
 * Takes the lock of the database file SERVICE_DATABASE names (`database`), or throws a DatabaseError saying that
 * another server uses it (or why the lock file cannot be used); a ConfigError for a setting that names no SQLite file.
 * `warn` hears about a lock file that others could read.
 */
export function lockDatabase(database: string, warn: (message: string) => void = () => {}): DatabaseLock {
  const target = sqliteTarget(database)
  if (target.kind !== 'file') throw new ConfigError('The in-memory database (SERVICE_DATABASE :memory:) has no file to lock')
  const { file } = target
  const lockPath = lockPathOf(file)
  let lock: Database.Database | undefined
  try {
    prepareFolder(file)
    ownerOnlyFile(lockPath, warn)
    // No waiting: a lock held by another server is held for good.
    lock = new Database(lockPath, { timeout: 0 })
    lock.exec('CREATE TABLE IF NOT EXISTS holder (pid INTEGER NOT NULL, since INTEGER NOT NULL, command TEXT NOT NULL)')
    // First who holds it is written down, then the lock is taken for good. Both steps need the write lock, and only
    // one process can hold it at a time: whoever fails either step is not alone.
    lock.exec('BEGIN IMMEDIATE')
    lock.exec('DELETE FROM holder')
    lock.prepare('INSERT INTO holder (pid, since, command) VALUES (?, ?, ?)').run(process.pid, Date.now(), ownCommand())
    lock.exec('COMMIT')
    lock.exec('BEGIN IMMEDIATE')
  } catch (err) {
    const held = lock?.open && isBusy(err) ? holderOf(lock) : undefined
    if (lock?.open) lock.close()
    if (isBusy(err)) throw inUse(file, lockPath, held)
    throw databaseFailure(target, err) ?? err
  }
  const connection = lock
  return {
    path: lockPath,
    release() {
      if (!connection.open) return
      try {
        connection.exec('ROLLBACK')
      } finally {
        connection.close()
      }
    },
  }
}

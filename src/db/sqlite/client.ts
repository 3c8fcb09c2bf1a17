import { accessSync, chmodSync, closeSync, constants, openSync, statfsSync, statSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import Database from 'better-sqlite3'
import { drizzle } from 'drizzle-orm/better-sqlite3'
import { migrate } from 'drizzle-orm/better-sqlite3/migrator'
import { ConfigError, databaseTarget } from '../../config.js'
import { describeDatabase, MEMORY, type SqliteFile, type SqliteTarget } from '../../lib/database-url.js'
import { makeFolders } from '../../lib/folders.js'
import { packageRoot } from '../../lib/package-root.js'
import * as schema from './schema.js'
import type { DatabaseHandle } from '../types.js'

// Declared without Drizzle and better-sqlite3 (types.ts), so that the public declarations do not reach theirs.
export type { Db, DatabaseHandle } from '../types.js'

/**
 * The database named by SERVICE_DATABASE cannot be used (a folder, a corrupt or read-only file, a full disk, another
 * server on it): a bad setting like any other, so the command line says so in one line and exits with code 2, and
 * createServer throws it. The message names the file and the setting.
 */
export class DatabaseError extends ConfigError {
  override name = 'DatabaseError'

  constructor(target: SqliteTarget, problem: string, options?: { cause?: unknown }) {
    super(`${describeTarget(target)} ${problem}`, options)
  }
}

function describeTarget(target: SqliteTarget): string {
  if (target.kind === 'memory') return `Database ${MEMORY} (SERVICE_DATABASE)`
  const absolute = resolve(target.file)
  return `Database ${target.file} (SERVICE_DATABASE${absolute === target.file ? '' : `, ${absolute}`})`
}

/**
 * The SQLite database `database` names (lib/database-url.ts): a ConfigError for a PostgreSQL URL, or a setting that
 * names no database, before anything is created for it. The entry points of this folder start here; what works on
 * files below them takes the SqliteFile it gives.
 */
export function sqliteTarget(database: string): SqliteTarget {
  const target = databaseTarget(database)
  if (target.kind === 'postgres') throw new ConfigError(`The ${describeDatabase(target)} is PostgreSQL's: SQLite's storage cannot open it`)
  return target
}

/** The files SQLite keeps beside a database in WAL mode (and a rollback journal, should one be left over). */
const COMPANION_SUFFIXES = ['-wal', '-shm', '-journal'] as const

const OWNER_ONLY_FILE = 0o600
const OWNER_ONLY_FOLDER = 0o700

/**
 * What a storage failure (SQLite or the file system) means for the operator, or undefined when `err` is not one (a
 * bug is reported as it is). SQLite's extended codes start with the primary one (SQLITE_IOERR_WRITE).
 */
function storageProblem(target: SqliteTarget, err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code
  if (typeof code !== 'string') return undefined
  const message = (err as Error).message
  const detail = `(${message.startsWith(code) ? message : `${code}: ${message}`})`
  // A folder that cannot be made (a path under /proc or /sys, a parent that is a file): lib/folders.ts says which.
  if ((err as NodeJS.ErrnoException).syscall === 'mkdir') return `cannot be created: its folder ${(err as NodeJS.ErrnoException).path} cannot be made ${detail}`
  if (code === 'SQLITE_FULL' || code === 'ENOSPC' || code === 'EDQUOT') return `cannot be written: the disk is full ${detail}`
  if (code.startsWith('SQLITE_READONLY') || code === 'EROFS') return `cannot be written: the file, its folder or its file system is read-only ${detail}`
  if (code === 'SQLITE_PERM' || code === 'SQLITE_AUTH' || code === 'EACCES' || code === 'EPERM') return `cannot be opened for writing: permission denied ${detail}`
  if (code === 'SQLITE_NOTADB' || code.startsWith('SQLITE_CORRUPT')) return `is not a SQLite database, or it is corrupt ${detail}`
  if (code.startsWith('SQLITE_CANTOPEN')) return `cannot be opened: ${target.kind === 'file' ? whyNotOpened(target.file) : 'out of memory?'} ${detail}`
  if (code === 'ENOENT' || code === 'ENOTDIR') return `cannot be opened: check that its folder exists and is writable ${detail}`
  if (code === 'EISDIR') return `is a folder, not a file ${detail}`
  if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) return `is locked by another process ${detail}`
  if (code.startsWith('SQLITE_IOERR') || code === 'EIO') {
    // SQLite reports a -shm file it cannot grow on a full disk as an I/O error.
    if (target.kind === 'file' && (freeBytes(target.file) ?? Infinity) < NEARLY_FULL_BYTES) return `cannot be written: the disk is full ${detail}`
    return `cannot be read or written: an I/O error (a failing device?) ${detail}`
  }
  return undefined
}

/** Below this much free space, a failure to open or migrate is put down to the disk being full. */
const NEARLY_FULL_BYTES = 1024 * 1024

/** Space left to this user on the file system holding the database; undefined when it cannot be known. */
function freeBytes(file: SqliteFile): number | undefined {
  try {
    const fs = statfsSync(dirname(resolve(file)))
    return fs.bavail * fs.bsize
  } catch {
    return undefined
  }
}

/** Why SQLite could not open a file (it says only "unable to open database file"): mostly its folder. */
function whyNotOpened(file: SqliteFile): string {
  const folder = dirname(resolve(file))
  try {
    accessSync(folder, constants.W_OK)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'EROFS') return 'its file system is read-only'
    if (code === 'ENOENT') return 'its folder does not exist'
    return 'its folder is not writable (SQLite keeps its -wal and -shm files beside it)'
  }
  return 'check that it and its folder are readable and writable'
}

/**
 * A storage failure met while opening or starting on the SQLite database `target`, as the DatabaseError that explains
 * it; undefined for anything else (and a DatabaseError is returned as it is).
 */
export function databaseFailure(target: SqliteTarget, err: unknown): DatabaseError | undefined {
  if (err instanceof DatabaseError) return err
  // Drizzle wraps SQLite's error (the migrator's as "Failed to run the query …"): the cause says what happened.
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const problem = storageProblem(target, e)
    if (problem !== undefined) return new DatabaseError(target, problem, { cause: err })
  }
  return undefined
}

/**
 * Creates `file` owner-only (mode 600) unless it exists; tightens an existing one that others may read or write, with
 * a warning. Never opens an existing file: that would drop the POSIX locks SQLite holds on it in this process.
 */
export function ownerOnlyFile(file: string, warn: (message: string) => void): void {
  try {
    closeSync(openSync(file, 'wx', OWNER_ONLY_FILE))
    chmodSync(file, OWNER_ONLY_FILE) // exactly 600, whatever the umask
    return
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
  }
  const stat = statSync(file)
  if (stat.isDirectory()) throw Object.assign(new Error(`${file} is a folder`), { code: 'EISDIR' })
  tighten(file, stat.mode, warn)
}

function tighten(file: string, mode: number, warn: (message: string) => void): void {
  if ((mode & 0o077) === 0) return
  const was = (mode & 0o777).toString(8)
  try {
    chmodSync(file, OWNER_ONLY_FILE)
    warn(`${file} could be read by other users of this machine (mode ${was}); its mode is now 600`)
  } catch (err) {
    warn(`${file} can be read by other users of this machine (mode ${was}) and could not be made owner-only: ${(err as Error).message}`)
  }
}

/**
 * The folder of a database file, created owner-only (700) when missing and `create` allows; throws when the file is
 * itself a folder (before anything, such as its lock file, is created beside it), or, unless `create`, does not exist
 * (a DatabaseError: a command that only reads creates no database, nor its folder). Every file this module and lock.ts
 * create is created after this check, for a SqliteFile only: a URL never gets here (lib/database-url.ts).
 */
export function prepareFolder(file: SqliteFile, create = true): void {
  if (create) makeFolders(dirname(file), OWNER_ONLY_FOLDER)
  let stat: ReturnType<typeof statSync> | undefined
  try {
    stat = statSync(file)
  } catch {
    // Not there yet.
  }
  if (stat?.isDirectory()) throw Object.assign(new Error(`${file} is a folder`), { code: 'EISDIR' })
  if (!stat && !create) throw new DatabaseError({ kind: 'file', file }, MISSING)
}

/** Why a command that works on an existing database refuses a file that is not there. */
const MISSING = 'does not exist, and this command creates no database: check SERVICE_DATABASE (or --database); `service-mcp migrate` creates a new one'

/**
 * The files of a database on disk, before SQLite opens it: its folder is created owner-only (700) when missing, the
 * file itself is created owner-only (600) so that SQLite creates its -wal and -shm files with that mode too (it copies
 * the database file's), and existing files that others could read (it holds the signing keys) are tightened.
 */
function prepareFiles(file: SqliteFile, warn: (message: string) => void, create: boolean): void {
  prepareFolder(file, create)
  if (create) ownerOnlyFile(file, warn)
  else tighten(file, statSync(file).mode, warn)
  for (const suffix of COMPANION_SUFFIXES) {
    let mode: number
    try {
      mode = statSync(file + suffix).mode
    } catch {
      continue
    }
    tighten(file + suffix, mode, warn)
  }
}

/**
 * Proves the database can be written now, rather than at the first request: rewrites the header's user_version with
 * its own value, which appends a page to the write-ahead log (a full disk or a read-only file fails here).
 */
function checkWritable(sqlite: Database.Database): void {
  const version = sqlite.pragma('user_version', { simple: true }) as number
  sqlite.pragma(`user_version = ${Number(version) | 0}`)
}

/**
 * Opens the SQLite database SERVICE_DATABASE names (`database`: a file, or `:memory:`), creating it when missing unless
 * `create` is false (then a file that does not exist is a DatabaseError, and nothing is created); sets the pragmas every
 * connection needs and, unless told otherwise, applies the committed migrations in drizzle/ and checks that the file can
 * be written. A file on disk is owner-only (see prepareFiles); `warn` hears about files that were not. Any storage
 * failure is a DatabaseError naming the file and SERVICE_DATABASE; a setting that names no SQLite database is a
 * ConfigError.
 */
export function openDatabase(database: string, options: { migrate?: boolean; checkWritable?: boolean; create?: boolean; warn?: (message: string) => void } = {}): DatabaseHandle {
  const target = sqliteTarget(database)
  const file = target.kind === 'file' ? target.file : null
  let sqlite: Database.Database | undefined
  try {
    if (file !== null) prepareFiles(file, options.warn ?? (() => {}), options.create !== false)
    sqlite = new Database(file ?? MEMORY, { fileMustExist: options.create === false && file !== null })
    sqlite.pragma('journal_mode = WAL')
    sqlite.pragma('synchronous = NORMAL')
    sqlite.pragma('foreign_keys = ON')
    sqlite.pragma('busy_timeout = 5000')
    sqlite.pragma('temp_store = MEMORY')
    const db = drizzle(sqlite, { schema })
    // The schema named, not inferred: inferring it had tsc relate the whole typed database to the migrator's
    // parameter, a sixth of the type-check's instantiations (`npm run build:tests`, every CI run).
    if (options.migrate !== false) migrate<typeof schema>(db, { migrationsFolder: join(packageRoot(), 'drizzle') })
    if (file !== null && options.checkWritable !== false) checkWritable(sqlite)
    const connection = sqlite
    return {
      db,
      sqlite: connection,
      close() {
        if (connection.open) connection.close()
      },
    }
  } catch (err) {
    if (sqlite?.open) sqlite.close()
    throw databaseFailure(target, err) ?? (file !== null ? diskFull(file, err) : undefined) ?? err
  }
}

/**
 * A failure whose own code says nothing (the migrator's ROLLBACK failing after SQLite had already rolled back a
 * statement that hit a full disk, which hides SQLITE_FULL) on a file system with almost no space left: the disk is
 * full. Undefined when there is space (or it cannot be known): the error is then reported as it is.
 */
function diskFull(file: SqliteFile, err: unknown): DatabaseError | undefined {
  const free = freeBytes(file)
  if (free === undefined || free >= NEARLY_FULL_BYTES) return undefined
  return new DatabaseError({ kind: 'file', file }, `cannot be written: the disk is full (${Math.floor(free / 1024)} KiB free; ${(err as Error).message})`, { cause: err })
}

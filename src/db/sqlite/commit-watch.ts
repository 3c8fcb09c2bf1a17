import { openSync, readSync, statSync } from 'node:fs'
import type Database from 'better-sqlite3'

/**
 * Whether any connection may have committed to a WAL database since the last look, for the price of one `pread` and
 * no lock: the wal-index header at the start of the `-shm` file (https://www.sqlite.org/walformat.html §2.1, "The
 * WAL-Index Header") holds `iChange`, which every commit increments, and `mxFrame` and the salts, which move with the
 * log. SQLite maps that file shared, so a read sees a commit as soon as the commit returns to its writer. A header
 * that reads the same as last time therefore proves that nothing was committed in between, by this connection or any
 * other process; a header that moved says only "maybe" (this connection's own commits move it too), and the caller
 * asks SQLite itself (`PRAGMA data_version`, which takes a read lock: two `fcntl` calls and a statement).
 *
 * The descriptor is never closed. POSIX drops every lock a process holds on a file when any descriptor of that file
 * is closed, and SQLite holds locks on `-shm` for as long as a connection is open (in this process, possibly through
 * another connection than the watched one). So there is one descriptor per `-shm` file per process, shared by its
 * watches, and it lives as long as the process. While the watched connection is open, SQLite never removes or
 * replaces its `-shm` file (only the last connection to close does), so the descriptor reads the live header.
 */
export interface CommitWatch {
  /** False only when nothing was committed since the previous call (or since the watch was made). */
  moved(): boolean
}

/** The wal-index header's first copy: the one a writer updates last. */
const HEADER_BYTES = 48

/** Descriptors of `-shm` files by device and inode; never closed (see above). */
const shmFiles = new Map<string, number>()

/**
 * A watch over `sqlite`'s commits, or null where none can be had (an in-memory database, a `file:` URI, a journal
 * mode other than WAL, no `-shm` file): the caller then asks SQLite every time.
 */
export function commitWatch(sqlite: Database.Database): CommitWatch | null {
  const name = sqlite.name
  if (sqlite.memory || name === '' || name.startsWith('file:')) return null
  if (String(sqlite.pragma('journal_mode', { simple: true })).toLowerCase() !== 'wal') return null
  // A read makes sure the connection has the wal-index open (and SQLite has created the file).
  sqlite.pragma('data_version', { simple: true })
  const fd = shmDescriptor(`${name}-shm`)
  if (fd === null) return null
  let seen = Buffer.alloc(HEADER_BYTES)
  let next = Buffer.alloc(HEADER_BYTES)
  if (readSync(fd, seen, 0, HEADER_BYTES, 0) !== HEADER_BYTES) return null
  return {
    moved() {
      let n: number
      try {
        n = readSync(fd, next, 0, HEADER_BYTES, 0)
      } catch {
        return true // cannot tell: ask SQLite
      }
      if (n === HEADER_BYTES && next.equals(seen)) return false
      ;[seen, next] = [next, seen]
      return true
    },
  }
}

function shmDescriptor(path: string): number | null {
  let key: string
  try {
    const stat = statSync(path)
    key = `${stat.dev}:${stat.ino}`
  } catch {
    return null
  }
  let fd = shmFiles.get(key)
  if (fd === undefined) {
    try {
      fd = openSync(path, 'r')
    } catch {
      return null
    }
    shmFiles.set(key, fd)
  }
  return fd
}

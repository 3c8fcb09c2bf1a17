import type { Bus } from '../coordination/bus.js'
import type { CredentialChanges } from './repos/credential-changes.js'
import type { Repos } from './repos/index.js'
import type { DatabaseHandle } from './types.js'

/**
 * An open database, whichever the dialect (open.ts opens it): its repositories, what only one dialect has, and how to
 * let go of it. Names neither dialect's driver.
 */
export interface Storage {
  /** The SQLite connection (the server's `database`); null on PostgreSQL. */
  readonly sqlite: DatabaseHandle | null
  /** What only PostgreSQL has (the database is shared by processes of their own); null on SQLite. */
  readonly shared: SharedDatabase | null
  /**
   * The repositories, telling `changes` of credential changes: the credential barrier of a server or of a command
   * that changes credentials on PostgreSQL (open-repos.ts). Without it, the dialect's own: on SQLite, changes made
   * here and commits of other connections (sqlite/credential-changes.ts); on PostgreSQL, none heard of (for
   * connections that serve no request, postgres/store.ts).
   */
  repos(changes?: CredentialChanges): Repos
  /** Releases the lock (when taken) and closes the connection or pool; once. */
  close(): Promise<void>
}

/** A PostgreSQL database, which processes of their own share. */
export interface SharedDatabase {
  /** How many servers hold its lock shared: processes coordinated through Redis (postgres/lock.ts). */
  coordinatedServers(): Promise<number>
  /** Its processes talking through it (LISTEN/NOTIFY, postgres/bus.ts); `name` names the connection. */
  bus(name: string, onError: (err: Error) => void): Promise<Bus>
}

/** How a process opens its database (open.ts). */
export interface OpenOptions {
  /** Hears of database files that others could read (SQLite). */
  warn?(message: string): void
  /** Hears of a pooled connection that failed, which the pool replaces (PostgreSQL). */
  onConnectionError?(err: Error): void
  /**
   * A server: holds the database's lock for its whole life (SQLite: `<file>.lock`, sqlite/lock.ts; PostgreSQL: an
   * advisory lock, exclusive for a server alone, shared by servers coordinated through Redis, postgres/client.ts).
   * The command line takes none: it works beside a running server.
   */
  lock?: { mode: 'exclusive' | 'shared'; events?: LockEvents }
  /** PostgreSQL: the pool's size (default 10). */
  poolSize?: number
  /**
   * False for what works only on an existing database (the command line's lists, for one): a SQLite file that does not
   * exist is then a DatabaseError naming SERVICE_DATABASE, and nothing (file, folder) is created. Default true.
   */
  create?: boolean
}

/** What happens to a server's PostgreSQL lock while it runs: each is told once per loss. */
export interface LockEvents {
  /** The connection holding the lock ended under the server (a database restart, a terminated backend, the network). */
  lost?(err: Error): void
  /** Taken again on a new connection after a loss. */
  retaken?(): void
  /** After a loss, another server holds the lock now; the server keeps trying, and says so once. */
  refused?(err: Error): void
}

import { hostname } from 'node:os'
import { join } from 'node:path'
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres'
import { migrate } from 'drizzle-orm/node-postgres/migrator'
import pg from 'pg'
import { ConfigError } from '../../config.js'
import { maskCredentials } from '../../lib/mask-credentials.js'
import { packageRoot } from '../../lib/package-root.js'
import type { LockEvents } from '../storage.js'
import * as schema from './schema.js'

export interface PostgresHandle {
  readonly db: NodePgDatabase<typeof schema>
  readonly pool: pg.Pool
  close(): Promise<void>
}

/**
 * Connects a pool to the database at `url` and, unless told otherwise, applies the committed migrations of
 * drizzle/postgres/. A database that cannot be reached or migrated is a ConfigError naming SERVICE_DATABASE (with the
 * password masked), like a SQLite file that cannot be opened.
 */
export async function openPostgres(url: string, options: { migrate?: boolean; max?: number; onError?: (err: Error) => void } = {}): Promise<PostgresHandle> {
  // Named in pg_stat_activity (and so in a refused second server's message, lockPostgres): host and pid.
  const pool = new pg.Pool({ connectionString: url, max: options.max ?? 10, application_name: applicationName() })
  // An idle client whose connection drops emits 'error' on the pool; unheard, it would end the process.
  pool.on('error', (err) => options.onError?.(err))
  const db = drizzle(pool, { schema })
  try {
    await pool.query('select 1')
    if (options.migrate !== false) await migrateAlone(pool, db)
  } catch (err) {
    await pool.end().catch(() => {})
    throw new ConfigError(`Database ${maskCredentials(url)} (SERVICE_DATABASE) cannot be used: ${(err as Error).message}`, { cause: err })
  }
  let closed: Promise<void> | undefined
  return { db, pool, close: () => (closed ??= pool.end()) }
}

/** The advisory lock held while migrating (two int4 keys: "serv", 2). */
const MIGRATION_KEYS = [0x73657276, 2] as const

/**
 * Applies the committed migrations, one process at a time: processes started together on a fresh database (several
 * replicas, or a server beside the CLI) would otherwise each create the same tables, and all but one fail. The lock is
 * held on a connection of its own and released however the migration ends.
 */
async function migrateAlone(pool: pg.Pool, db: NodePgDatabase<typeof schema>): Promise<void> {
  const client = await pool.connect()
  try {
    await client.query('select pg_advisory_lock($1, $2)', [...MIGRATION_KEYS])
    try {
      await migrate(db, { migrationsFolder: join(packageRoot(), 'drizzle', 'postgres') })
    } finally {
      await client.query('select pg_advisory_unlock($1, $2)', [...MIGRATION_KEYS])
    }
  } finally {
    client.release()
  }
}

/** The advisory lock a server holds on its PostgreSQL database (two int4 keys: "serv", 1). */
const LOCK_KEYS = [0x73657276, 1] as const

/**
 * An advisory lock belongs to one database, but pg_locks lists those of every database of the cluster: its lookups keep
 * to this one (other databases may be served by other services, or by other instances of this one).
 */
const THIS_DATABASE = '(select oid from pg_database where datname = current_database())'

/** How long a server that lost its lock waits between attempts to take it again. */
const RETAKE_MS = 2000

/**
 * Who may serve a PostgreSQL database. A server marks as interrupted, at start, work whose owner is dead, and a server
 * without Redis takes every other process for dead (it cannot know better): so such a server must be alone on its
 * database, as `<file>.lock` makes it on SQLite (lock.ts), while servers that coordinate through Redis may be many
 * (`shared`). Each holds an advisory lock for its whole life on a connection of its own: exclusive alone, shared by
 * the coordinated ones, and PostgreSQL grants one kind or the other, never both. It releases the lock when that
 * connection ends, however the process ends. A refused server is told who holds the lock (its application_name names
 * the host and pid) and why.
 *
 * That connection can also end while the server runs (the database restarts, an administrator terminates it). A pooled
 * client that is checked out has no listener for its 'error' event, and an unheard one would end the process: so the
 * holder listens, tells `events.lost`, and takes the lock again on a new connection every RETAKE_MS until it holds it
 * or is released (`events.retaken`, or `events.refused` when another server took it meanwhile).
 */
export async function lockPostgres(pool: pg.Pool, url: string, mode: 'exclusive' | 'shared', events: LockEvents = {}): Promise<{ release(): Promise<void> }> {
  const [take, unlock] = mode === 'exclusive' ? ['pg_try_advisory_lock', 'pg_advisory_unlock'] : ['pg_try_advisory_lock_shared', 'pg_advisory_unlock_shared']
  interface Held { client: pg.PoolClient; onError: (err: Error) => void }
  /** The connection holding the lock (null while it is lost), and whether the lock was released for good. */
  let held: Held | null = null
  let released = false
  let retry: NodeJS.Timeout | null = null
  let refusedSaid = false

  /** Gives a client back to the pool, dropped when its connection failed (`err`), without this holder's listener. */
  const giveBack = ({ client, onError }: Held, err?: Error) => {
    client.removeListener('error', onError)
    client.release(err)
  }

  /** A connection with the lock taken on it, or a ConfigError saying who holds it. */
  const takeOn = async (): Promise<Held> => {
    const client = await pool.connect()
    // Listening from the start: the connection may end while the lock is asked for, or any time after.
    let failed: Error | null = null
    const entry: Held = {
      client,
      onError: (err) => {
        failed ??= err
        if (held === entry) lose(entry, err)
      },
    }
    client.on('error', entry.onError)
    try {
      const { rows } = await client.query<{ locked: boolean }>(`select ${take}($1, $2) as locked`, [...LOCK_KEYS])
      if (!rows[0]?.locked) throw await refusal(client)
    } catch (err) {
      giveBack(entry, failed ?? (err instanceof ConfigError ? undefined : (err as Error)))
      throw err
    }
    if (failed) {
      giveBack(entry, failed)
      throw failed
    }
    return entry
  }

  const refusal = async (client: pg.PoolClient): Promise<ConfigError> => {
    const found = await client.query<{ application_name: string; client_addr: string | null; backend_start: Date }>(
      `select a.application_name, a.client_addr, a.backend_start from pg_locks l join pg_stat_activity a on a.pid = l.pid
       where l.locktype = 'advisory' and l.database = ${THIS_DATABASE} and l.classid = $1 and l.objid = $2 and l.granted`, [...LOCK_KEYS])
    const who = found.rows[0]
    const by = who ? ` (${who.application_name || 'a server'}${who.client_addr ? ` from ${who.client_addr}` : ''}, since ${who.backend_start.toISOString()})` : ''
    const why = mode === 'exclusive'
      ? 'a server without SERVICE_REDIS_URL serves its database alone; set the same SERVICE_REDIS_URL on every process to run several'
      : 'it serves the database alone, without SERVICE_REDIS_URL; stop it, or give it the same SERVICE_REDIS_URL as this one'
    return new ConfigError(`Database ${maskCredentials(url)} (SERVICE_DATABASE) is in use by another server${by}: ${why}`)
  }

  const unlockAndGiveBack = async (entry: Held) => {
    await entry.client.query(`select ${unlock}($1, $2)`, [...LOCK_KEYS]).then(() => giveBack(entry), (err: Error) => giveBack(entry, err))
  }

  const lose = (entry: Held, err: Error) => {
    held = null
    // Its connection is gone: the pool drops it instead of lending it again.
    giveBack(entry, err)
    if (released) return
    events.lost?.(err)
    schedule()
  }

  const schedule = () => {
    retry = setTimeout(() => void retake(), RETAKE_MS)
    // Waiting to take the lock again must not keep alive a process that is otherwise done.
    retry.unref()
  }

  const retake = async () => {
    retry = null
    if (released) return
    let entry: Held
    try {
      entry = await takeOn()
    } catch (err) {
      if (released) return
      if (err instanceof ConfigError && !refusedSaid) {
        refusedSaid = true
        events.refused?.(err)
      }
      schedule()
      return
    }
    if (released) return unlockAndGiveBack(entry)
    held = entry
    refusedSaid = false
    events.retaken?.()
  }

  held = await takeOn()
  let done: Promise<void> | undefined
  return {
    release: () => (done ??= (async () => {
      released = true
      if (retry) clearTimeout(retry)
      const entry = held
      held = null
      if (entry) await unlockAndGiveBack(entry)
    })()),
  }
}

/** How many servers hold the database's lock shared: processes coordinated through Redis (lockPostgres). */
export async function coordinatedServers(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    `select count(*)::int as n from pg_locks where locktype = 'advisory' and database = ${THIS_DATABASE} and classid = $1 and objid = $2 and mode = 'ShareLock' and granted`, [...LOCK_KEYS])
  return rows[0]?.n ?? 0
}

/** What this process is called in pg_stat_activity (and in a refused second server's message); `what` names a connection. */
export function applicationName(what = ''): string {
  const suffix = what === '' ? '' : ` ${what}`
  return `service-mcp ${hostname()} pid ${process.pid}`.replace(/[^A-Za-z0-9 ._-]/g, '').slice(0, 63 - suffix.length) + suffix
}

import { sql, type SQL } from 'drizzle-orm'
import type { SQLiteColumn, SQLiteTable } from 'drizzle-orm/sqlite-core'
import type { Store } from '../store.js'
import type { Activity } from '../types.js'

/**
 * Writes activity times ("last seen", "last used") that every process records behind, on PostgreSQL, deadlock-free
 * by construction: one statement that locks the rows it changes with `FOR UPDATE SKIP LOCKED`, so it never waits for
 * a row lock, and a transaction that never waits cannot be part of a deadlock (a cycle of transactions, each waiting
 * for a lock another holds). Rows another transaction holds at that instant (another process writing the same
 * session's time, a revocation ending it) are left out and returned, for the caller to write at its next flush.
 * A time never goes back: each row keeps the later of its time and the one written (`greatest`), whichever process
 * writes last. Several processes writing overlapping rows in different orders, each in one transaction, used to
 * deadlock (issue 24). `activity` holds each id once.
 */
export async function writeActivityPostgres(
  store: Store,
  table: SQLiteTable,
  idColumn: SQLiteColumn,
  timeColumn: SQLiteColumn,
  activity: Activity,
): Promise<string[]> {
  if (activity.length === 0) return []
  const ids = activity.map(([id]) => id)
  const times = activity.map(([, at]) => at)
  // The ids are passed as arrays (two parameters whatever their number), unnested into rows.
  const statement: SQL = sql`
    with wanted (id, at) as (select * from unnest(${sql.param(ids)}::text[], ${sql.param(times)}::bigint[])),
    locked as (select ${idColumn} as id from ${table} where ${idColumn} in (select id from wanted) for update skip locked)
    update ${table} set ${sql.identifier(timeColumn.name)} = greatest(coalesce(${timeColumn}, 0), wanted.at)
    from wanted, locked
    where ${idColumn} = wanted.id and locked.id = wanted.id
    returning ${idColumn} as id`
  const written = new Set(((await executeRows(store, statement)) as Array<{ id: string }>).map((row) => row.id))
  return ids.filter((id) => !written.has(id))
}

/** Rows of a raw statement on PostgreSQL (node-postgres answers `{ rows }`). */
async function executeRows(store: Store, statement: SQL): Promise<unknown[]> {
  const db = store.db as unknown as { execute(query: SQL): Promise<{ rows: unknown[] }> }
  return (await db.execute(statement)).rows
}

import { inArray, isNull, notInArray, or, sql, type SQL } from 'drizzle-orm'
import type { SQLiteColumn } from 'drizzle-orm/sqlite-core'

/**
 * Whose work in progress a recovery touches (process-registry.ts): at start, whatever no live process owns (`live`: the
 * ids alive now, this one included; rows without an owner predate the registry); later, exactly the work of processes
 * whose lease lapsed (`dead`).
 */
export type Abandoned = { live: readonly string[] } | { dead: readonly string[] }

/** The rows of `owner` a recovery of `abandoned` may touch. */
export function abandonedBy(owner: SQLiteColumn, abandoned: Abandoned): SQL {
  if ('dead' in abandoned) return inArray(owner, [...abandoned.dead])
  if (abandoned.live.length === 0) return sql`1 = 1`
  return or(isNull(owner), notInArray(owner, [...abandoned.live]))!
}

import { inArray, isNull, notInArray, or, sql, type Column, type SQL } from 'drizzle-orm'

import type { Abandoned } from '../types.js'

/** The rows of `owner` a recovery of `abandoned` may touch. */
export function abandonedBy(owner: Column, abandoned: Abandoned): SQL {
  if ('dead' in abandoned) return inArray(owner, [...abandoned.dead])
  if (abandoned.live.length === 0) return sql`1 = 1`
  return or(isNull(owner), notInArray(owner, [...abandoned.live]))!
}

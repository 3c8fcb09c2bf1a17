import { and, asc, eq, gt, sql, type Placeholder } from 'drizzle-orm'
import { newId } from '../../lib/crypto.js'
import type { Db } from '../client.js'
import { apps } from '../schema.js'

export type App = typeof apps.$inferSelect

/**
 * A bound `LIMIT ?` makes SQLite re-prepare the statement on every execution (the planner may use a bound LIMIT, so
 * binding one expires the statement): 7.6 µs instead of 2.1 µs per empty page. Wrapping it in CAST hides the value
 * from the planner. Drizzle renders an SQL object in limit() as is; its type only admits a Placeholder.
 */
function boundLimit(name: string): Placeholder {
  return sql`cast(${sql.placeholder(name)} as integer)` as unknown as Placeholder
}

export function appsRepo(db: Db) {
  // Keyset pagination on the time-sortable id, always scoped by organization. Prepared once (hot path).
  const firstPage = db.select().from(apps)
    .where(eq(apps.organizationId, sql.placeholder('org')))
    .orderBy(asc(apps.id)).limit(boundLimit('limit')).prepare()
  const nextPage = db.select().from(apps)
    .where(and(eq(apps.organizationId, sql.placeholder('org')), gt(apps.id, sql.placeholder('after'))))
    .orderBy(asc(apps.id)).limit(boundLimit('limit')).prepare()

  return {
    create(input: { organizationId: string; name: string; description?: string; createdBy?: string | null }): App {
      const now = Date.now()
      const row: App = {
        id: newId('app'),
        organizationId: input.organizationId,
        name: input.name,
        description: input.description ?? '',
        createdBy: input.createdBy ?? null,
        createdAt: now,
        updatedAt: now,
      }
      db.insert(apps).values(row).run()
      return row
    },
    /** Returns up to `limit` apps of the organization after `after` (exclusive), plus whether more follow. */
    page(organizationId: string, limit: number, after?: string): { items: App[]; more: boolean } {
      const rows = after === undefined
        ? firstPage.all({ org: organizationId, limit: limit + 1 })
        : nextPage.all({ org: organizationId, after, limit: limit + 1 })
      return { items: rows.slice(0, limit), more: rows.length > limit }
    },
    byId(organizationId: string, id: string): App | undefined {
      return db.select().from(apps).where(and(eq(apps.organizationId, organizationId), eq(apps.id, id))).get()
    },
  }
}

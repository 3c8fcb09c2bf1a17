import { and, desc, eq, lt, sql } from 'drizzle-orm'
import { newId } from '../../lib/crypto.js'
import type { Db } from '../client.js'
import { auditLog } from '../schema.js'

export type AuditEntry = typeof auditLog.$inferSelect
export type AuditOutcome = AuditEntry['outcome']

export function auditRepo(db: Db) {
  return {
    add(entry: Omit<AuditEntry, 'id' | 'at'> & { at?: number }): AuditEntry {
      const row: AuditEntry = { ...entry, id: newId('aud'), at: entry.at ?? Date.now() }
      db.insert(auditLog).values(row).run()
      return row
    },
    /** Newest first, keyset-paged on the time-sortable id, scoped by organization, optionally one action only. */
    page(organizationId: string, limit: number, before?: string, action?: string): { items: AuditEntry[]; more: boolean } {
      const where = and(
        eq(auditLog.organizationId, organizationId),
        before === undefined ? undefined : lt(auditLog.id, before),
        action === undefined ? undefined : eq(auditLog.action, action),
      )
      const rows = db.select().from(auditLog).where(where).orderBy(desc(auditLog.id)).limit(limit + 1).all()
      return { items: rows.slice(0, limit), more: rows.length > limit }
    },
    count(organizationId: string): number {
      return db.select({ n: sql<number>`count(*)` }).from(auditLog).where(eq(auditLog.organizationId, organizationId)).get()?.n ?? 0
    },
  }
}

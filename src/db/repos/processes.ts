import { and, eq, gt, lte, ne } from 'drizzle-orm'
import type { Store } from '../store.js'
import type { ProcessRow } from '../types.js'

export type { ProcessRow }

/** The registry of server processes serving this database and their leases (sqlite/schema.ts `processes`). */
export function processesRepo(store: Store) {
  const { db, t: { processes } } = store
  return {
    async register(row: ProcessRow): Promise<void> {
      await db.insert(processes).values(row)
    },
    /**
     * Extends the lease of `id` to `until`. False when its row is gone: another process found the lease lapsed and
     * recovered this one's work, so it must not go on as if it still owned any.
     */
    async renew(id: string, until: number): Promise<boolean> {
      return (await db.update(processes).set({ leaseUntil: until }).where(eq(processes.id, id)).returning({ id: processes.id })).length === 1
    },
    /** The processes whose lease lasts beyond `now`. */
    async live(now: number): Promise<ProcessRow[]> {
      return db.select().from(processes).where(gt(processes.leaseUntil, now))
    },
    async byId(id: string): Promise<ProcessRow | undefined> {
      return (await db.select().from(processes).where(eq(processes.id, id)))[0]
    },
    /** The processes whose lease had lapsed at `now` (dead: their work may be recovered), other than `except`. */
    async lapsed(now: number, except: string): Promise<ProcessRow[]> {
      return db.select().from(processes).where(and(lte(processes.leaseUntil, now), ne(processes.id, except)))
    },
    /** Removes a process's row: it stopped, or its work has been recovered. */
    async remove(id: string): Promise<void> {
      await db.delete(processes).where(eq(processes.id, id))
    },
    /** Every process but `except`: a process that holds the database alone (a lock) knows the others are gone. */
    async others(except: string): Promise<ProcessRow[]> {
      return db.select().from(processes).where(ne(processes.id, except))
    },
  }
}

import { and, eq, gt, lte } from 'drizzle-orm'
import type { Store } from '../store.js'

export function browserSessionsRepo(store: Store) {
  const { db, t: { browserSessions, users } } = store
  return {
    async create(input: { id: string; userId: string; expiresAt: number }): Promise<void> {
      await db.insert(browserSessions).values({ ...input, createdAt: Date.now() })
    },
    /** The signed-in user of a live browser session (an unexpired row of an enabled user). */
    async user(id: string, now: number): Promise<{ id: string; email: string; name: string } | undefined> {
      const [row] = await db.select({ id: users.id, email: users.email, name: users.name, disabledAt: users.disabledAt })
        .from(browserSessions).innerJoin(users, eq(users.id, browserSessions.userId))
        .where(and(eq(browserSessions.id, id), gt(browserSessions.expiresAt, now)))
      if (!row || row.disabledAt !== null) return undefined
      return { id: row.id, email: row.email, name: row.name }
    },
    async delete(id: string): Promise<void> {
      await db.delete(browserSessions).where(eq(browserSessions.id, id))
    },
    async purge(now: number): Promise<number> {
      return (await db.delete(browserSessions).where(lte(browserSessions.expiresAt, now)).returning({ id: browserSessions.id })).length
    },
  }
}

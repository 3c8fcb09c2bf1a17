import { and, eq, gt, lte } from 'drizzle-orm'
import type { Db } from '../client.js'
import { browserSessions, users } from '../schema.js'

export function browserSessionsRepo(db: Db) {
  return {
    create(input: { id: string; userId: string; expiresAt: number }): void {
      db.insert(browserSessions).values({ ...input, createdAt: Date.now() }).run()
    },
    /** The signed-in user of a live browser session (an unexpired row of an enabled user). */
    user(id: string, now: number): { id: string; email: string; name: string } | undefined {
      const row = db.select({ id: users.id, email: users.email, name: users.name, disabledAt: users.disabledAt })
        .from(browserSessions).innerJoin(users, eq(users.id, browserSessions.userId))
        .where(and(eq(browserSessions.id, id), gt(browserSessions.expiresAt, now))).get()
      if (!row || row.disabledAt !== null) return undefined
      return { id: row.id, email: row.email, name: row.name }
    },
    delete(id: string): void {
      db.delete(browserSessions).where(eq(browserSessions.id, id)).run()
    },
    purge(now: number): number {
      return db.delete(browserSessions).where(lte(browserSessions.expiresAt, now)).run().changes
    },
  }
}

import { and, eq, isNotNull, isNull, lt, or } from 'drizzle-orm'
import type { Store } from '../store.js'
import type { SessionRow, Activity } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { SessionRow }

export function sessionsRepo(store: Store) {
  const { db, fastPaths, t: { sessions } } = store

  return {
    insert(row: SessionRow): Promise<void> {
      if (fastPaths.insertSession) return fastPaths.insertSession(row)
      return db.insert(sessions).values(row).then(() => {})
    },
    /** Inserts new sessions in one transaction: a commit per batch rather than per session. */
    async insertMany(rows: Iterable<SessionRow>): Promise<void> {
      await store.transaction(async (tx) => {
        // SQLite's transaction runs on the one connection its statements were prepared on.
        const insert = tx.fastPaths.insertSession
        for (const row of rows) {
          if (insert) await insert(row)
          else await tx.db.insert(sessions).values(row)
        }
      })
    },
    byId(id: string): Promise<SessionRow | undefined> {
      if (fastPaths.sessionById) return fastPaths.sessionById(id)
      return db.select().from(sessions).where(eq(sessions.id, id)).then((rows) => rows[0])
    },
    /**
     * Writes the latest activity times of many sessions (write-behind from memory); returns the ids it could not write
     * now, to be written at the next flush. A session's time never goes back (another process may have written a later
     * one). SQLite: one transaction, under the database's one write lock. PostgreSQL: one statement that never waits
     * for a row lock, so processes touching the same sessions never deadlock (FastPaths.writeActivity); a session
     * another transaction holds at that instant is left for later.
     */
    async touchMany(entries: Activity): Promise<string[]> {
      if (fastPaths.touchSessions) return fastPaths.touchSessions(entries)
      if (fastPaths.writeActivity) return fastPaths.writeActivity('sessions', entries)
      await store.transaction(async (tx) => {
        for (const [id, at] of entries) {
          await tx.db.update(sessions).set({ lastSeenAt: at }).where(and(eq(sessions.id, id), lt(sessions.lastSeenAt, at)))
        }
      })
      return []
    },
    async markInitialized(id: string, at: number): Promise<void> {
      await db.update(sessions).set({ initializedAt: at }).where(eq(sessions.id, id))
    },
    async setLogLevel(id: string, level: string): Promise<void> {
      await db.update(sessions).set({ logLevel: level }).where(eq(sessions.id, id))
    },
    async end(id: string, at: number): Promise<void> {
      await db.update(sessions).set({ endedAt: at }).where(and(eq(sessions.id, id), isNull(sessions.endedAt)))
    },
    /** Ends every live session bound to a credential; returns their ids. */
    async endByCredential(credential: string, at: number): Promise<string[]> {
      const ended = await db.update(sessions).set({ endedAt: at })
        .where(and(eq(sessions.credential, credential), isNull(sessions.endedAt)))
        .returning({ id: sessions.id })
      return ended.map((r) => r.id)
    },
    /** Deletes ended sessions and those idle since before `idleBefore`. */
    async purge(idleBefore: number): Promise<number> {
      const purged = await db.delete(sessions).where(or(isNotNull(sessions.endedAt), lt(sessions.lastSeenAt, idleBefore))).returning({ id: sessions.id })
      return purged.length
    },
  }
}

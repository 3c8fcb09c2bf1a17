import { and, eq, isNotNull, isNull, lt, or, sql } from 'drizzle-orm'
import type { Store } from '../store.js'
import { writeActivityPostgres } from './activity.js'
import type { SessionRow, Activity } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { SessionRow }

export function sessionsRepo(store: Store) {
  const { db, dialect, t: { sessions } } = store
  const prepared = dialect === 'sqlite' ? sqliteStatements(db, sessions) : undefined

  return {
    async insert(row: SessionRow): Promise<void> {
      if (prepared) prepared.insert.run(row)
      else await db.insert(sessions).values(row)
    },
    /** Inserts new sessions in one transaction: a commit per batch rather than per session. */
    async insertMany(rows: Iterable<SessionRow>): Promise<void> {
      await store.transaction(async (tx) => {
        // SQLite's transaction runs on the one connection the statements were prepared on.
        for (const row of rows) {
          if (prepared) prepared.insert.run(row)
          else await tx.db.insert(sessions).values(row)
        }
      })
    },
    async byId(id: string): Promise<SessionRow | undefined> {
      if (prepared) return prepared.byId.get({ id })
      return (await db.select().from(sessions).where(eq(sessions.id, id)))[0]
    },
    /**
     * Writes the latest activity times of many sessions (write-behind from memory); returns the ids it could not write
     * now, to be written at the next flush. SQLite: one transaction, under the database's one write lock. PostgreSQL:
     * one statement that never waits for a row lock, so processes touching the same sessions never deadlock
     * (activity.ts); a session another transaction holds at that instant is left for later.
     */
    async touchMany(entries: Activity): Promise<string[]> {
      if (!prepared) return writeActivityPostgres(store, sessions, sessions.id, sessions.lastSeenAt, entries)
      await store.transaction(async () => {
        for (const [id, at] of entries) prepared.touch.run({ id, at })
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

/** SQLite's statements of the hot paths (initialize, the session lookup, the write-behind of activity), prepared once. */
function sqliteStatements(db: Store['db'], sessions: Store['t']['sessions']) {
  const byId = db.select().from(sessions).where(eq(sessions.id, sql.placeholder('id'))).prepare()
  // initialize is a hot path: the INSERT is built and prepared once.
  const insert = db.insert(sessions).values({
    id: sql.placeholder('id'),
    credential: sql.placeholder('credential'),
    membershipId: sql.placeholder('membershipId'),
    organizationId: sql.placeholder('organizationId'),
    protocolVersion: sql.placeholder('protocolVersion'),
    clientInfo: sql.placeholder('clientInfo'),
    clientCapabilities: sql.placeholder('clientCapabilities'),
    logLevel: sql.placeholder('logLevel'),
    initializedAt: sql.placeholder('initializedAt'),
    createdAt: sql.placeholder('createdAt'),
    lastSeenAt: sql.placeholder('lastSeenAt'),
    endedAt: sql.placeholder('endedAt'),
  }).prepare()
  // A time never goes back (another process may have written a later one).
  const touch = db.update(sessions).set({ lastSeenAt: sql`max(${sessions.lastSeenAt}, ${sql.placeholder('at')})` })
    .where(eq(sessions.id, sql.placeholder('id'))).prepare()
  return { byId, insert, touch }
}

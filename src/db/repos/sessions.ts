import { and, eq, isNotNull, isNull, lt, or, sql } from 'drizzle-orm'
import type { Db } from '../client.js'
import { sessions } from '../schema.js'
import type { SessionRow } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { SessionRow }

export function sessionsRepo(db: Db) {
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
  const touch = db.update(sessions).set({ lastSeenAt: sql`${sql.placeholder('at')}` })
    .where(eq(sessions.id, sql.placeholder('id'))).prepare()

  return {
    insert(row: SessionRow): void {
      insert.run(row)
    },
    /** Inserts new sessions in one transaction: a commit per batch rather than per session. */
    insertMany(rows: Iterable<SessionRow>): void {
      db.transaction(() => {
        for (const row of rows) insert.run(row)
      })
    },
    byId(id: string): SessionRow | undefined {
      return byId.get({ id })
    },
    /** Writes the latest activity times of many sessions in one transaction (write-behind from memory). */
    touchMany(entries: Iterable<[string, number]>): void {
      db.transaction(() => {
        for (const [id, at] of entries) touch.run({ id, at })
      })
    },
    markInitialized(id: string, at: number): void {
      db.update(sessions).set({ initializedAt: at }).where(eq(sessions.id, id)).run()
    },
    setLogLevel(id: string, level: string): void {
      db.update(sessions).set({ logLevel: level }).where(eq(sessions.id, id)).run()
    },
    end(id: string, at: number): void {
      db.update(sessions).set({ endedAt: at }).where(and(eq(sessions.id, id), isNull(sessions.endedAt))).run()
    },
    /** Ends every live session bound to a credential; returns their ids. */
    endByCredential(credential: string, at: number): string[] {
      return db.update(sessions).set({ endedAt: at })
        .where(and(eq(sessions.credential, credential), isNull(sessions.endedAt)))
        .returning({ id: sessions.id }).all().map((r) => r.id)
    },
    /** Deletes ended sessions and those idle since before `idleBefore`. */
    purge(idleBefore: number): number {
      return db.delete(sessions).where(or(isNotNull(sessions.endedAt), lt(sessions.lastSeenAt, idleBefore))).run().changes
    },
  }
}

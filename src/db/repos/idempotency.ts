import { and, eq, gt, inArray, lte, or, sql } from 'drizzle-orm'
import type { Db } from '../client.js'
import { idempotencyRecords } from '../schema.js'
import type { IdempotencyRecord } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { IdempotencyRecord }

/** What identifies one confirmed call (decisions.md §6). `requestId` is the JSON-RPC id JSON-encoded: 1 and "1" differ. */
export interface IdempotencyKey {
  sessionId: string
  membershipId: string
  organizationId: string
  requestId: string
}

const LIVE = ['pending', 'running'] as const
const ENDED = ['finished', 'interrupted'] as const

function byKey(key: IdempotencyKey) {
  return and(
    eq(idempotencyRecords.sessionId, key.sessionId),
    eq(idempotencyRecords.membershipId, key.membershipId),
    eq(idempotencyRecords.organizationId, key.organizationId),
    eq(idempotencyRecords.requestId, key.requestId),
  )
}

/**
 * Idempotency records of confirmation-gated tool calls. A record is pending or running while its call is, then
 * finished (with the tool result) or interrupted (the server stopped first). Only pending and running records change;
 * ended ones expire at `expiresAt` and are then as good as absent, purged or not.
 */
export function idempotencyRepo(db: Db) {
  return {
    /**
     * Records a new call as pending, atomically: one INSERT that does nothing when the key exists, unless the existing
     * record has ended and expired, which it replaces. `created` tells whether this call now owns the key; when it does
     * not, `record` is the one that does.
     */
    begin(key: IdempotencyKey, tool: string, now: number, expiresAt: number): { created: true } | { created: false; record: IdempotencyRecord } {
      const inserted = db.insert(idempotencyRecords)
        .values({ ...key, tool, status: 'pending', result: null, createdAt: now, updatedAt: now, expiresAt })
        .onConflictDoUpdate({
          target: [idempotencyRecords.sessionId, idempotencyRecords.membershipId, idempotencyRecords.organizationId, idempotencyRecords.requestId],
          set: { tool, status: 'pending', result: null, createdAt: now, updatedAt: now, expiresAt },
          setWhere: and(inArray(idempotencyRecords.status, [...ENDED]), lte(idempotencyRecords.expiresAt, now)),
        })
        .run()
      if (inserted.changes === 1) return { created: true }
      const record = db.select().from(idempotencyRecords).where(byKey(key)).get()
      if (!record) throw new Error('idempotency record vanished between INSERT and SELECT')
      return { created: false, record }
    },
    /** The record of `key`, unless it ended and expired before `now`. */
    get(key: IdempotencyKey, now: number): IdempotencyRecord | undefined {
      return db.select().from(idempotencyRecords)
        .where(and(byKey(key), or(inArray(idempotencyRecords.status, [...LIVE]), gt(idempotencyRecords.expiresAt, now)))).get()
    },
    /**
     * A new call takes over a pending record that no call holds any more (its call never started running, so nothing
     * ran; see CallIdempotency): the record is pending again, now for this call. False when it is not pending.
     */
    takeOver(key: IdempotencyKey, tool: string, now: number, expiresAt: number): boolean {
      return db.update(idempotencyRecords).set({ tool, status: 'pending', result: null, createdAt: now, updatedAt: now, expiresAt })
        .where(and(byKey(key), eq(idempotencyRecords.status, 'pending'))).run().changes === 1
    },
    /** pending → running. */
    markRunning(key: IdempotencyKey, at: number): boolean {
      return db.update(idempotencyRecords).set({ status: 'running', updatedAt: at })
        .where(and(byKey(key), eq(idempotencyRecords.status, 'pending'))).run().changes === 1
    },
    /** Stores the call's tool result; only a pending or running record can finish (an ended one is never rewritten). */
    finish(key: IdempotencyKey, result: Record<string, unknown>, at: number, expiresAt: number): boolean {
      return db.update(idempotencyRecords).set({ status: 'finished', result, updatedAt: at, expiresAt })
        .where(and(byKey(key), inArray(idempotencyRecords.status, [...LIVE]))).run().changes === 1
    },
    /** The server stops before the call is answered; `result` is what the call ended with, when it got that far. */
    interrupt(key: IdempotencyKey, result: Record<string, unknown> | null, at: number, expiresAt: number): boolean {
      return db.update(idempotencyRecords).set({ status: 'interrupted', result, updatedAt: at, expiresAt })
        .where(and(byKey(key), inArray(idempotencyRecords.status, [...LIVE]))).run().changes === 1
    },
    /** A call answered with a JSON-RPC error rather than a tool result leaves no record. */
    release(key: IdempotencyKey): boolean {
      return db.delete(idempotencyRecords).where(and(byKey(key), inArray(idempotencyRecords.status, [...LIVE]))).run().changes === 1
    },
    /**
     * At start: calls a previous process left pending or running can never be answered; returns how many. A pending
     * call never started running, so it gets the result `nothingRan(tool)` says; a running one keeps no result (it may
     * or may not have completed, which the reader says).
     */
    interruptUnfinished(at: number, expiresAt: number, nothingRan: (tool: string) => Record<string, unknown>): number {
      return db.transaction(() => {
        let changes = 0
        const pendingTools = db.selectDistinct({ tool: idempotencyRecords.tool }).from(idempotencyRecords).where(eq(idempotencyRecords.status, 'pending')).all()
        for (const { tool } of pendingTools) {
          changes += db.update(idempotencyRecords).set({ status: 'interrupted', result: nothingRan(tool), updatedAt: at, expiresAt })
            .where(and(eq(idempotencyRecords.status, 'pending'), eq(idempotencyRecords.tool, tool))).run().changes
        }
        changes += db.update(idempotencyRecords).set({ status: 'interrupted', updatedAt: at, expiresAt })
          .where(eq(idempotencyRecords.status, 'running')).run().changes
        return changes
      })
    },
    /** Deletes ended records that expired at or before `now`; pending and running ones stay whatever their age. */
    purge(now: number): number {
      return db.delete(idempotencyRecords)
        .where(and(lte(idempotencyRecords.expiresAt, now), inArray(idempotencyRecords.status, [...ENDED]))).run().changes
    },
    count(): number {
      return db.select({ n: sql<number>`count(*)` }).from(idempotencyRecords).get()?.n ?? 0
    },
  }
}

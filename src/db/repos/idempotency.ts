import { and, count, eq, gt, inArray, lte, or } from 'drizzle-orm'
import type { Store } from '../store.js'
import { abandonedBy } from './owners.js'
import type { Abandoned } from '../types.js'
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

function byKey(idempotencyRecords: Store['t']['idempotencyRecords'], key: IdempotencyKey) {
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
export function idempotencyRepo(store: Store) {
  const { db, t: { idempotencyRecords } } = store
  const touched = { sessionId: idempotencyRecords.sessionId }
  return {
    /**
     * Records a new call as pending, atomically: one INSERT that does nothing when the key exists, unless the existing
     * record has ended and expired, which it replaces. `created` tells whether this call now owns the key; when it does
     * not, `record` is the one that does.
     */
    async begin(key: IdempotencyKey, tool: string, now: number, expiresAt: number, owner: string | null = null): Promise<{ created: true } | { created: false; record: IdempotencyRecord }> {
      const inserted = await db.insert(idempotencyRecords)
        .values({ ...key, tool, status: 'pending', result: null, createdAt: now, updatedAt: now, expiresAt, owner })
        .onConflictDoUpdate({
          target: [idempotencyRecords.sessionId, idempotencyRecords.membershipId, idempotencyRecords.organizationId, idempotencyRecords.requestId],
          set: { tool, status: 'pending', result: null, createdAt: now, updatedAt: now, expiresAt, owner },
          setWhere: and(inArray(idempotencyRecords.status, [...ENDED]), lte(idempotencyRecords.expiresAt, now)),
        })
        .returning(touched)
      if (inserted.length === 1) return { created: true }
      const [record] = await db.select().from(idempotencyRecords).where(byKey(idempotencyRecords, key))
      if (!record) throw new Error('idempotency record vanished between INSERT and SELECT')
      return { created: false, record }
    },
    /** The record of `key`, unless it ended and expired before `now`. */
    async get(key: IdempotencyKey, now: number): Promise<IdempotencyRecord | undefined> {
      return (await db.select().from(idempotencyRecords)
        .where(and(byKey(idempotencyRecords, key), or(inArray(idempotencyRecords.status, [...LIVE]), gt(idempotencyRecords.expiresAt, now)))))[0]
    },
    /**
     * A new call takes over a pending record that no call holds any more (its call never started running, so nothing
     * ran; see CallIdempotency): the record is pending again, now for this call. False when it is not pending.
     */
    async takeOver(key: IdempotencyKey, tool: string, now: number, expiresAt: number, owner: string | null = null): Promise<boolean> {
      const taken = await db.update(idempotencyRecords).set({ tool, status: 'pending', result: null, createdAt: now, updatedAt: now, expiresAt, owner })
        .where(and(byKey(idempotencyRecords, key), eq(idempotencyRecords.status, 'pending'))).returning(touched)
      return taken.length === 1
    },
    /** pending → running. */
    async markRunning(key: IdempotencyKey, at: number): Promise<boolean> {
      const marked = await db.update(idempotencyRecords).set({ status: 'running', updatedAt: at })
        .where(and(byKey(idempotencyRecords, key), eq(idempotencyRecords.status, 'pending'))).returning(touched)
      return marked.length === 1
    },
    /** Stores the call's tool result; only a pending or running record can finish (an ended one is never rewritten). */
    async finish(key: IdempotencyKey, result: Record<string, unknown>, at: number, expiresAt: number): Promise<boolean> {
      const finished = await db.update(idempotencyRecords).set({ status: 'finished', result, updatedAt: at, expiresAt })
        .where(and(byKey(idempotencyRecords, key), inArray(idempotencyRecords.status, [...LIVE]))).returning(touched)
      return finished.length === 1
    },
    /** The server stops before the call is answered; `result` is what the call ended with, when it got that far. */
    async interrupt(key: IdempotencyKey, result: Record<string, unknown> | null, at: number, expiresAt: number): Promise<boolean> {
      const interrupted = await db.update(idempotencyRecords).set({ status: 'interrupted', result, updatedAt: at, expiresAt })
        .where(and(byKey(idempotencyRecords, key), inArray(idempotencyRecords.status, [...LIVE]))).returning(touched)
      return interrupted.length === 1
    },
    /** A call answered with a JSON-RPC error rather than a tool result leaves no record. */
    async release(key: IdempotencyKey): Promise<boolean> {
      const released = await db.delete(idempotencyRecords)
        .where(and(byKey(idempotencyRecords, key), inArray(idempotencyRecords.status, [...LIVE]))).returning(touched)
      return released.length === 1
    },
    /**
     * At start: calls a previous process left pending or running can never be answered; returns how many. A pending
     * call never started running, so it gets the result `nothingRan(tool)` says; a running one keeps no result (it may
     * or may not have completed, which the reader says).
     */
    async interruptUnfinished(at: number, expiresAt: number, nothingRan: (tool: string) => Record<string, unknown>, abandoned: Abandoned): Promise<number> {
      return store.transaction(async ({ db, t: { idempotencyRecords: records } }) => {
        let changes = 0
        const gone = abandonedBy(records.owner, abandoned)
        const pendingTools = await db.selectDistinct({ tool: records.tool }).from(records).where(and(eq(records.status, 'pending'), gone))
        for (const { tool } of pendingTools) {
          const interrupted = await db.update(records).set({ status: 'interrupted', result: nothingRan(tool), updatedAt: at, expiresAt })
            .where(and(eq(records.status, 'pending'), eq(records.tool, tool), gone)).returning({ sessionId: records.sessionId })
          changes += interrupted.length
        }
        const interrupted = await db.update(records).set({ status: 'interrupted', updatedAt: at, expiresAt })
          .where(and(eq(records.status, 'running'), gone)).returning({ sessionId: records.sessionId })
        return changes + interrupted.length
      })
    },
    /** Deletes ended records that expired at or before `now`; pending and running ones stay whatever their age. */
    async purge(now: number): Promise<number> {
      const purged = await db.delete(idempotencyRecords)
        .where(and(lte(idempotencyRecords.expiresAt, now), inArray(idempotencyRecords.status, [...ENDED]))).returning(touched)
      return purged.length
    },
    async count(): Promise<number> {
      return (await db.select({ n: count() }).from(idempotencyRecords))[0]?.n ?? 0
    },
  }
}

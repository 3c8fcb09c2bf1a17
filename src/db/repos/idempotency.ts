import { and, count, eq, gt, inArray, isNull, lte, or } from 'drizzle-orm'
import type { Store } from '../store.js'
import { abandonedBy } from './owners.js'
import type { Abandoned } from '../types.js'
import type { IdempotencyRecord } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { IdempotencyRecord }

/** What identifies one confirmed call (docs/decisions/idempotency.md). `requestId` is the JSON-RPC id JSON-encoded: 1 and "1" differ. */
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
 * The holder of a pending or running record: the process running its call (`owner`, whose lease decides whether the
 * call is still alive) and the one call within it (`claim`, a token made anew by each begin).
 */
export interface Holder {
  owner: string | null
  claim: string
}

/** Rows of `key` still held by the call that wrote `claim` (null: a record older than claims). */
function heldBy(idempotencyRecords: Store['t']['idempotencyRecords'], key: IdempotencyKey, claim: string | null) {
  return and(byKey(idempotencyRecords, key), claim === null ? isNull(idempotencyRecords.claim) : eq(idempotencyRecords.claim, claim))
}

/**
 * Idempotency records of confirmation-gated tool calls. A record is pending or running while its call is, then
 * finished (with the tool result) or interrupted (the server stopped first). Only pending and running records change;
 * ended ones expire at `expiresAt` and are then as good as absent, purged or not.
 *
 * Each change of a live record is one conditional statement that names the claim of the call it expects to find
 * (compare-and-set): of several processes racing on one record, exactly one changes it, and a call whose record was
 * taken over or recovered meanwhile changes nothing. So the claim's life, pending → running → finished, is a chain of
 * atomic transitions that only the holder can make, and pending → running, after which the operation runs, happens
 * once per claim. CallIdempotency (plugins/tools/idempotency.ts) is their one user.
 */
export function idempotencyRepo(store: Store) {
  const { db, t: { idempotencyRecords } } = store
  const touched = { sessionId: idempotencyRecords.sessionId }
  const live = () => inArray(idempotencyRecords.status, [...LIVE])
  return {
    /**
     * Records a new call as pending, held by `holder`, atomically: one INSERT that does nothing when the key exists,
     * unless the existing record has ended and expired, which it replaces. `created` tells whether `holder` now holds
     * the key; when it does not, `record` is the one that does (undefined when it vanished meanwhile: try again).
     */
    async begin(key: IdempotencyKey, tool: string, holder: Holder, now: number, expiresAt: number): Promise<{ created: true } | { created: false; record: IdempotencyRecord | undefined }> {
      const fresh = { tool, status: 'pending' as const, result: null, createdAt: now, updatedAt: now, expiresAt, owner: holder.owner, claim: holder.claim }
      const inserted = await db.insert(idempotencyRecords)
        .values({ ...key, ...fresh })
        .onConflictDoUpdate({
          target: [idempotencyRecords.sessionId, idempotencyRecords.membershipId, idempotencyRecords.organizationId, idempotencyRecords.requestId],
          set: fresh,
          setWhere: and(inArray(idempotencyRecords.status, [...ENDED]), lte(idempotencyRecords.expiresAt, now)),
        })
        .returning(touched)
      if (inserted.length === 1) return { created: true }
      const [record] = await db.select().from(idempotencyRecords).where(byKey(idempotencyRecords, key))
      return { created: false, record }
    },
    /** The record of `key`, unless it ended and expired before `now`. */
    async get(key: IdempotencyKey, now: number): Promise<IdempotencyRecord | undefined> {
      return (await db.select().from(idempotencyRecords)
        .where(and(byKey(idempotencyRecords, key), or(live(), gt(idempotencyRecords.expiresAt, now)))))[0]
    },
    /**
     * A new call takes over a pending record that no live call holds (its call never started running, so nothing ran;
     * see CallIdempotency), if it is still pending under the claim `seen`: pending again, now held by `holder`.
     */
    async takeOver(key: IdempotencyKey, seen: string | null, tool: string, holder: Holder, now: number, expiresAt: number): Promise<boolean> {
      const taken = await db.update(idempotencyRecords)
        .set({ tool, status: 'pending', result: null, createdAt: now, updatedAt: now, expiresAt, owner: holder.owner, claim: holder.claim })
        .where(and(heldBy(idempotencyRecords, key, seen), eq(idempotencyRecords.status, 'pending'))).returning(touched)
      return taken.length === 1
    },
    /** pending → running, by the call holding `claim`: after this, and only after it, the operation may run. */
    async markRunning(key: IdempotencyKey, claim: string, at: number): Promise<boolean> {
      const marked = await db.update(idempotencyRecords).set({ status: 'running', updatedAt: at })
        .where(and(heldBy(idempotencyRecords, key, claim), eq(idempotencyRecords.status, 'pending'))).returning(touched)
      return marked.length === 1
    },
    /** Stores the result of the call holding `claim`; an ended record, or one held by another call, is never rewritten. */
    async finish(key: IdempotencyKey, claim: string, result: Record<string, unknown>, at: number, expiresAt: number): Promise<boolean> {
      const finished = await db.update(idempotencyRecords).set({ status: 'finished', result, updatedAt: at, expiresAt })
        .where(and(heldBy(idempotencyRecords, key, claim), live())).returning(touched)
      return finished.length === 1
    },
    /**
     * The call holding `claim` will never be answered: the server stopped first (`result` is what the call ended with,
     * when it got that far), or its process is gone. Only while that call still holds the record.
     */
    async interrupt(key: IdempotencyKey, claim: string | null, result: Record<string, unknown> | null, at: number, expiresAt: number): Promise<boolean> {
      const interrupted = await db.update(idempotencyRecords).set({ status: 'interrupted', result, updatedAt: at, expiresAt })
        .where(and(heldBy(idempotencyRecords, key, claim), live())).returning(touched)
      return interrupted.length === 1
    },
    /** A call answered with a JSON-RPC error rather than a tool result leaves no record (only while it holds it). */
    async release(key: IdempotencyKey, claim: string): Promise<boolean> {
      const released = await db.delete(idempotencyRecords)
        .where(and(heldBy(idempotencyRecords, key, claim), live())).returning(touched)
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

import { and, asc, count, desc, eq, gte, inArray, isNotNull, isNull, lt, lte, max, min } from 'drizzle-orm'
import { entryHash, GENESIS } from '../../audit/chain.js'
import { newId } from '../../lib/crypto.js'
import type { Store } from '../store.js'
import type { AuditCheckpointRow, AuditEntry } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { AuditCheckpointRow, AuditEntry }

export type AuditOutcome = AuditEntry['outcome']

/** What a writer gives: the chain fields are the repository's to set. */
export type NewAuditEntry = Omit<AuditEntry, 'id' | 'at' | 'seq' | 'prevHash' | 'hash'> & { at?: number }

/**
 * Who changed a credential outside a tool call, for the audit log: a signed-in member on the account page (their
 * user, and the request that did it), or the operator with the CLI (no user: whoever can open the database).
 * Becomes the entry's `credential_kind` (`account_page`, `cli`).
 */
export type CredentialActor = { via: 'account_page'; userId: string; requestId: string } | { via: 'cli' }

/** The audit actions of credential changes, as `service_audit_list` filters them. */
export const CREDENTIAL_AUDIT_ACTIONS = {
  keyCreated: 'api_key.create',
  keyRevoked: 'api_key.revoke',
  grantRevoked: 'oauth_grant.revoke',
} as const

/**
 * One audit entry of a credential change, shaped like a tool's: the actor's user and membership (the membership the
 * change was made through, on the account page), the target, `succeeded`, and details that never hold a secret.
 */
export function credentialAuditEntry(
  by: CredentialActor,
  entry: { organizationId: string; membershipId: string | null; action: string; targetType: string; targetId: string; details: Record<string, unknown> },
): NewAuditEntry {
  const page = by.via === 'account_page'
  return {
    organizationId: entry.organizationId,
    userId: page ? by.userId : null,
    membershipId: page ? entry.membershipId : null,
    credentialKind: by.via,
    credentialId: null,
    clientId: null,
    action: entry.action,
    targetType: entry.targetType,
    targetId: entry.targetId,
    outcome: 'succeeded',
    details: page ? { request_id: by.requestId, ...entry.details } : entry.details,
  }
}

export function auditRepo(store: Store) {
  const { db, t: { auditLog, auditCheckpoints } } = store

  /**
   * The end of an organization's chain, read inside the transaction that holds its lock: the last entry's seq and
   * hash, or, when every entry was purged, the place the start checkpoint names; the genesis for a new chain.
   */
  async function headOf(tx: Store, organizationId: string): Promise<{ seq: number; hash: string }> {
    const { auditLog: log, auditCheckpoints: points } = tx.t
    const last = (await tx.db.select({ seq: log.seq, hash: log.hash }).from(log)
      .where(and(eq(log.organizationId, organizationId), isNotNull(log.seq))).orderBy(desc(log.seq)).limit(1))[0]
    if (last?.seq != null && last.hash !== null) return { seq: last.seq, hash: last.hash }
    const start = (await tx.db.select({ seq: points.seq, hash: points.hash }).from(points)
      .where(and(eq(points.organizationId, organizationId), eq(points.kind, 'start'))).orderBy(desc(points.seq)).limit(1))[0]
    return start ? { seq: start.seq - 1, hash: start.hash } : { seq: 0, hash: GENESIS }
  }

  /** Appends entries to their organization's chain, holding its lock (docs/decisions/audit-chain.md, "Appending"). */
  async function append(tx: Store, organizationId: string, entries: Array<Omit<AuditEntry, 'seq' | 'prevHash' | 'hash'>>): Promise<AuditEntry[]> {
    await tx.lockKey(`audit_chain:${organizationId}`)
    let head = await headOf(tx, organizationId)
    const rows: AuditEntry[] = []
    for (const entry of entries) {
      const linked = { ...entry, seq: head.seq + 1, prevHash: head.hash }
      const row: AuditEntry = { ...linked, hash: entryHash(linked) }
      rows.push(row)
      head = { seq: row.seq!, hash: row.hash! }
    }
    return rows
  }

  return {
    /**
     * Writes an entry at the end of its organization's chain. Inside a caller's transaction it joins it (and holds
     * the organization's chain until that one ends); otherwise in a transaction of its own.
     */
    async add(entry: NewAuditEntry): Promise<AuditEntry> {
      return store.transaction(async (tx) => {
        const [row] = await append(tx, entry.organizationId, [{ ...entry, id: newId('aud'), at: entry.at ?? Date.now() }])
        await tx.db.insert(tx.t.auditLog).values(row!)
        return row!
      })
    },
    /**
     * Chains the entries written before the chain existed (no seq), in id order, after each organization's head:
     * at start, before requests are served. Returns how many were chained.
     */
    async chainUnchained(batch = 500): Promise<number> {
      let chained = 0
      for (;;) {
        const loose = await db.select().from(auditLog).where(isNull(auditLog.seq)).orderBy(asc(auditLog.organizationId), asc(auditLog.id)).limit(batch)
        if (loose.length === 0) return chained
        // Node 20 has no Map.groupBy.
        const byOrganization = new Map<string, AuditEntry[]>()
        for (const e of loose) byOrganization.set(e.organizationId, [...(byOrganization.get(e.organizationId) ?? []), e])
        for (const [organizationId, entries] of byOrganization) {
          await store.transaction(async (tx) => {
            for (const row of await append(tx, organizationId, entries)) {
              await tx.db.update(tx.t.auditLog).set({ seq: row.seq, prevHash: row.prevHash, hash: row.hash })
                .where(and(eq(tx.t.auditLog.id, row.id), isNull(tx.t.auditLog.seq)))
            }
          })
          chained += entries.length
        }
      }
    },
    /** One organization's chain from `fromSeq` on, `limit` entries in seq order (verify and export page through it). */
    async chain(organizationId: string, fromSeq: number, limit: number): Promise<AuditEntry[]> {
      return db.select().from(auditLog)
        .where(and(eq(auditLog.organizationId, organizationId), gte(auditLog.seq, fromSeq))).orderBy(asc(auditLog.seq)).limit(limit)
    },
    /** Entries of an organization outside the chain (written around the server: verify reports them). */
    async unchained(organizationId: string, limit: number): Promise<AuditEntry[]> {
      return db.select().from(auditLog).where(and(eq(auditLog.organizationId, organizationId), isNull(auditLog.seq))).orderBy(asc(auditLog.id)).limit(limit)
    },
    /** The last entry's seq and hash (or the chain's start when all were purged; seq 0 for an empty chain). */
    async head(organizationId: string): Promise<{ seq: number; hash: string }> {
      return store.transaction((tx) => headOf(tx, organizationId))
    },
    /**
     * The heads of the chains (of `organizationId` only, when given) that have entries after their newest signed
     * head: what the next checkpoints sign.
     */
    async unsignedHeads(organizationId?: string): Promise<Array<{ organizationId: string; seq: number; hash: string }>> {
      const scope = organizationId === undefined ? undefined : eq(auditLog.organizationId, organizationId)
      const last = await db.select({ organizationId: auditLog.organizationId, seq: max(auditLog.seq) }).from(auditLog)
        .where(and(isNotNull(auditLog.seq), scope)).groupBy(auditLog.organizationId)
      const signed = new Map((await db.select({ organizationId: auditCheckpoints.organizationId, seq: max(auditCheckpoints.seq) }).from(auditCheckpoints)
        .where(and(eq(auditCheckpoints.kind, 'head'), organizationId === undefined ? undefined : eq(auditCheckpoints.organizationId, organizationId)))
        .groupBy(auditCheckpoints.organizationId)).map((r) => [r.organizationId, Number(r.seq)]))
      const heads: Array<{ organizationId: string; seq: number; hash: string }> = []
      for (const { organizationId: org, seq } of last) {
        if (seq === null || Number(seq) <= (signed.get(org) ?? 0)) continue
        const row = (await db.select({ hash: auditLog.hash }).from(auditLog).where(and(eq(auditLog.organizationId, org), eq(auditLog.seq, Number(seq)))))[0]
        if (row?.hash) heads.push({ organizationId: org, seq: Number(seq), hash: row.hash })
      }
      return heads
    },
    /** Stores a signed checkpoint; one already there for the same place (another process signed it) is kept. */
    async addCheckpoint(c: AuditCheckpointRow): Promise<void> {
      await db.insert(auditCheckpoints).values(c).onConflictDoNothing()
    },
    async checkpoints(organizationId: string): Promise<AuditCheckpointRow[]> {
      return db.select().from(auditCheckpoints).where(eq(auditCheckpoints.organizationId, organizationId)).orderBy(asc(auditCheckpoints.seq))
    },
    /** Newest first, keyset-paged on the time-sortable id, scoped by organization, optionally one action only. */
    async page(organizationId: string, limit: number, before?: string, action?: string): Promise<{ items: AuditEntry[]; more: boolean }> {
      const where = and(
        eq(auditLog.organizationId, organizationId),
        before === undefined ? undefined : lt(auditLog.id, before),
        action === undefined ? undefined : eq(auditLog.action, action),
      )
      const rows = await db.select().from(auditLog).where(where).orderBy(desc(auditLog.id)).limit(limit + 1)
      return { items: rows.slice(0, limit), more: rows.length > limit }
    },
    /**
     * Retention (src/retention/audit.ts): the organizations whose chain's oldest entry was written before `before`.
     * One indexed read per organization (its first seq), not a scan of the log.
     */
    async organizationsWithEntriesBefore(before: number): Promise<string[]> {
      const due: string[] = []
      for (const { id } of await db.select({ id: store.t.organizations.id }).from(store.t.organizations)) {
        const [oldest] = await db.select({ at: auditLog.at }).from(auditLog)
          .where(and(eq(auditLog.organizationId, id), isNotNull(auditLog.seq))).orderBy(asc(auditLog.seq)).limit(1)
        if (oldest && oldest.at < before) due.push(id)
      }
      return due
    },
    /**
     * Where an organization's kept chain starts once the entries written before `before` go: the first entry (up to
     * the head read first) written at or after `before`, its seq and prev_hash; when every entry goes, the place after
     * the head and the head's hash. Entries appended meanwhile come after the head read, so they are never before it.
     * `oldest` is the first seq still stored (null: none).
     */
    async retentionStart(organizationId: string, before: number): Promise<{ seq: number; hash: string; oldest: number | null }> {
      const head = await store.transaction((tx) => headOf(tx, organizationId))
      const [kept] = await db.select({ seq: auditLog.seq, prevHash: auditLog.prevHash }).from(auditLog)
        .where(and(eq(auditLog.organizationId, organizationId), isNotNull(auditLog.seq), lte(auditLog.seq, head.seq), gte(auditLog.at, before)))
        .orderBy(asc(auditLog.seq)).limit(1)
      const [first] = await db.select({ seq: min(auditLog.seq) }).from(auditLog).where(eq(auditLog.organizationId, organizationId))
      const oldest = first?.seq == null ? null : Number(first.seq)
      if (kept?.seq != null && kept.prevHash !== null) return { seq: kept.seq, hash: kept.prevHash, oldest }
      return { seq: head.seq + 1, hash: head.hash, oldest }
    },
    /** Deletes up to `limit` of an organization's oldest entries before `seq` (retention, after its start checkpoint). */
    async deleteBefore(organizationId: string, seq: number, limit: number): Promise<number> {
      const ids = (await db.select({ id: auditLog.id }).from(auditLog)
        .where(and(eq(auditLog.organizationId, organizationId), lt(auditLog.seq, seq))).orderBy(asc(auditLog.seq)).limit(limit)).map((r) => r.id)
      if (ids.length === 0) return 0
      await db.delete(auditLog).where(inArray(auditLog.id, ids))
      return ids.length
    },
    async count(organizationId: string): Promise<number> {
      return (await db.select({ n: count() }).from(auditLog).where(eq(auditLog.organizationId, organizationId)))[0]?.n ?? 0
    },
  }
}

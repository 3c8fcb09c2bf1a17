import { and, desc, eq, gte, isNull } from 'drizzle-orm'
import { newId, randomSecret, sha256Hex } from '../../lib/crypto.js'
import { isoTime } from '../../lib/iso-time.js'
import type { Store } from '../store.js'
import { auditRepo, CREDENTIAL_AUDIT_ACTIONS, credentialAuditEntry, type CredentialActor } from './audit.js'
import type { CredentialChanges } from './credential-changes.js'
import { apiKeyCandidatesQuery } from './queries.js'
import type { ApiKey, ApiKeyCandidate, Activity } from '../types.js'

// The row types live in db/types.ts, free of Drizzle types (the public declarations reach them).
export type { ApiKey, ApiKeyCandidate }

export const API_KEY_PREFIX = 'service_mcp_'

export type ApiKeySummary = Omit<ApiKey, 'hash' | 'lookup'>


export function generateApiKey(): string {
  return API_KEY_PREFIX + randomSecret(32)
}

export function apiKeyLookup(hash: string): string {
  return hash.slice(0, 16)
}

/** The columns of an ApiKeySummary (all but the hash and its lookup prefix). */
function summaryOf(apiKeys: Store['t']['apiKeys']) {
  return {
    id: apiKeys.id,
    membershipId: apiKeys.membershipId,
    name: apiKeys.name,
    displayPrefix: apiKeys.displayPrefix,
    scopes: apiKeys.scopes,
    createdAt: apiKeys.createdAt,
    lastUsedAt: apiKeys.lastUsedAt,
    expiresAt: apiKeys.expiresAt,
    revokedAt: apiKeys.revokedAt,
  }
}

/** The organization of a membership, on `store` (the repository's, or a transaction's). */
async function organizationOf({ db, t: { memberships } }: Store, membershipId: string): Promise<string | undefined> {
  return (await db.select({ id: memberships.organizationId }).from(memberships).where(eq(memberships.id, membershipId)))[0]?.id
}

export interface NewApiKey {
  membershipId: string
  name: string
  scopes: string[]
  expiresAt?: number | null
  /** Lets the operator register an exact key (SERVICE_BOOTSTRAP_API_KEY). */
  plainKey?: string
  /**
   * Who creates it, written to the audit log in the same transaction: the account page and the CLI pass it; the
   * first start's key has none.
   */
  by?: CredentialActor | undefined
}

/**
 * API keys. A change made with `by` (the account page, the CLI) is audited in the transaction that makes it, so the log
 * and the keys cannot disagree; the entry names the key by id and display prefix, never the key.
 */
export function apiKeysRepo(store: Store, changes: CredentialChanges) {
  const { db, fastPaths, t: { apiKeys, memberships, organizations, users } } = store
  const summary = summaryOf(apiKeys)

  /** Inserts the key on `on` (the repository's store, or the transaction of a rotation), audited in one transaction. */
  async function insertKey(on: Store, input: NewApiKey, auditDetails: Record<string, unknown> = {}): Promise<{ key: string; record: ApiKeySummary }> {
    const key = input.plainKey ?? generateApiKey()
    const hash = sha256Hex(key)
    const record: ApiKey = {
      id: newId('key'),
      membershipId: input.membershipId,
      name: input.name,
      displayPrefix: key.slice(0, API_KEY_PREFIX.length + 4),
      lookup: apiKeyLookup(hash),
      hash,
      scopes: input.scopes.join(' '),
      createdAt: Date.now(),
      lastUsedAt: null,
      expiresAt: input.expiresAt ?? null,
      revokedAt: null,
    }
    await on.transaction(async (tx) => {
      await tx.db.insert(tx.t.apiKeys).values(record)
      const organizationId = input.by ? await organizationOf(tx, record.membershipId) : undefined
      if (input.by && organizationId !== undefined) {
        await auditRepo(tx).add(credentialAuditEntry(input.by, {
          organizationId,
          membershipId: record.membershipId,
          action: CREDENTIAL_AUDIT_ACTIONS.keyCreated,
          targetType: 'api_key',
          targetId: record.id,
          details: {
            name: record.name,
            key_prefix: record.displayPrefix,
            scopes: record.scopes,
            membership_id: record.membershipId,
            expires_at: record.expiresAt === null ? null : isoTime(record.expiresAt),
            ...auditDetails,
          },
        }))
      }
    })
    const { hash: _h, lookup: _l, ...rest } = record
    return { key, record: rest }
  }

  /** Marks a key revoked (auditing it when `by` is given); false when it does not exist or was already revoked. */
  async function revokeKey(on: Store, id: string, by: CredentialActor | undefined, auditDetails: Record<string, unknown> = {}): Promise<boolean> {
    return on.transaction(async (tx) => {
      const { apiKeys: keys } = tx.t
      const [row] = await tx.db.update(keys).set({ revokedAt: Date.now() }).where(and(eq(keys.id, id), isNull(keys.revokedAt)))
        .returning({ membershipId: keys.membershipId, name: keys.name, displayPrefix: keys.displayPrefix })
      if (!row) return false
      const organizationId = by ? await organizationOf(tx, row.membershipId) : undefined
      if (by && organizationId !== undefined) {
        await auditRepo(tx).add(credentialAuditEntry(by, {
          organizationId,
          membershipId: row.membershipId,
          action: CREDENTIAL_AUDIT_ACTIONS.keyRevoked,
          targetType: 'api_key',
          targetId: id,
          details: { name: row.name, key_prefix: row.displayPrefix, membership_id: row.membershipId, ...auditDetails },
        }))
      }
      return true
    })
  }

  return {
    /** Stores a key for a membership. Only the hash is kept; the plain key is returned to be shown once. */
    async create(input: NewApiKey): Promise<{ key: string; record: ApiKeySummary }> {
      return insertKey(store, input)
    },
    candidatesByLookup(lookup: string): Promise<ApiKeyCandidate[]> {
      if (fastPaths.apiKeyCandidates) return fastPaths.apiKeyCandidates(lookup)
      return apiKeyCandidatesQuery(store, lookup).then((rows) => rows)
    },
    async byId(id: string): Promise<ApiKeySummary | undefined> {
      return (await db.select(summary).from(apiKeys).where(eq(apiKeys.id, id)))[0]
    },
    async listForMembership(membershipId: string): Promise<ApiKeySummary[]> {
      return db.select(summary).from(apiKeys).where(eq(apiKeys.membershipId, membershipId)).orderBy(desc(apiKeys.createdAt))
    },
    async listAll(): Promise<Array<ApiKeySummary & { email: string; organizationSlug: string }>> {
      return db.select({ ...summary, email: users.email, organizationSlug: organizations.slug })
        .from(apiKeys)
        .innerJoin(memberships, eq(memberships.id, apiKeys.membershipId))
        .innerJoin(users, eq(users.id, memberships.userId))
        .innerJoin(organizations, eq(organizations.id, memberships.organizationId))
        .orderBy(desc(apiKeys.createdAt))
    },
    /** Ids of keys revoked at or after `since` (also by another process, such as the CLI). */
    async revokedSince(since: number): Promise<string[]> {
      return (await db.select({ id: apiKeys.id }).from(apiKeys).where(gte(apiKeys.revokedAt, since))).map((r) => r.id)
    },
    /**
     * Records when keys were last used (write-behind from memory); returns the ids it could not write now, for the next
     * flush. On PostgreSQL one statement that never waits for a row lock (FastPaths.writeActivity): processes never
     * deadlock here.
     */
    async touchMany(entries: Activity): Promise<string[]> {
      if (fastPaths.writeActivity) return fastPaths.writeActivity('apiKeys', entries)
      for (const [id, at] of entries) await db.update(apiKeys).set({ lastUsedAt: at }).where(eq(apiKeys.id, id))
      return []
    },
    /** Marks a key revoked (audited when `by` is given); returns false when it does not exist or was already revoked. */
    async revoke(id: string, by?: CredentialActor): Promise<boolean> {
      const revoked = await revokeKey(store, id, by)
      await changes.bump()
      return revoked
    },
    /**
     * Replaces a live key by a new one with the same membership, name, scopes and expiry, in one transaction; the two
     * audit entries (create, revoke) name each other. Undefined when the key does not exist or was already revoked.
     */
    async rotate(id: string, by?: CredentialActor): Promise<{ key: string; record: ApiKeySummary; previous: ApiKeySummary } | undefined> {
      const rotated = await store.transaction(async (tx) => {
        const keys = tx.t.apiKeys
        const [previous] = await tx.db.select(summaryOf(keys)).from(keys).where(eq(keys.id, id))
        if (!previous || previous.revokedAt !== null) return undefined
        const next = await insertKey(tx, { membershipId: previous.membershipId, name: previous.name, scopes: previous.scopes.split(' '), expiresAt: previous.expiresAt, by }, { rotated_from: previous.id })
        if (!(await revokeKey(tx, previous.id, by, { replaced_by: next.record.id }))) throw new Error(`API key ${previous.id} was revoked during its rotation`)
        return { ...next, previous }
      })
      if (rotated) await changes.bump()
      return rotated
    },
  }
}

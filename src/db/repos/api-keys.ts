import { and, desc, eq, gte, isNull, sql } from 'drizzle-orm'
import { newId, randomSecret, sha256Hex } from '../../lib/crypto.js'
import { isoTime } from '../../lib/iso-time.js'
import type { Db } from '../client.js'
import { auditRepo, CREDENTIAL_AUDIT_ACTIONS, credentialAuditEntry, type CredentialActor } from './audit.js'
import type { CredentialChanges } from './credential-changes.js'
import { apiKeys, memberships, organizations, users } from '../schema.js'
import type { ApiKey, Role } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { ApiKey }

export const API_KEY_PREFIX = 'service_mcp_'

export type ApiKeySummary = Omit<ApiKey, 'hash' | 'lookup'>

/** What the verifier needs to authenticate a request: the key row joined with its live membership. */
export interface ApiKeyCandidate {
  id: string
  hash: string
  scopes: string
  expiresAt: number | null
  revokedAt: number | null
  membershipId: string
  role: Role
  userId: string
  userDisabledAt: number | null
  organizationId: string
}

export function generateApiKey(): string {
  return API_KEY_PREFIX + randomSecret(32)
}

export function apiKeyLookup(hash: string): string {
  return hash.slice(0, 16)
}

const summary = {
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
export function apiKeysRepo(db: Db, changes: CredentialChanges) {
  const audit = auditRepo(db)
  const organizationOf = (membershipId: string): string | undefined =>
    db.select({ id: memberships.organizationId }).from(memberships).where(eq(memberships.id, membershipId)).get()?.id

  function insertKey(input: NewApiKey, auditDetails: Record<string, unknown> = {}): { key: string; record: ApiKeySummary } {
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
    db.transaction(() => {
      db.insert(apiKeys).values(record).run()
      const organizationId = input.by ? organizationOf(record.membershipId) : undefined
      if (input.by && organizationId !== undefined) {
        audit.add(credentialAuditEntry(input.by, {
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
  function revokeKey(id: string, by: CredentialActor | undefined, auditDetails: Record<string, unknown> = {}): boolean {
    return db.transaction(() => {
      const [row] = db.update(apiKeys).set({ revokedAt: Date.now() }).where(and(eq(apiKeys.id, id), isNull(apiKeys.revokedAt)))
        .returning({ membershipId: apiKeys.membershipId, name: apiKeys.name, displayPrefix: apiKeys.displayPrefix }).all()
      if (!row) return false
      const organizationId = by ? organizationOf(row.membershipId) : undefined
      if (by && organizationId !== undefined) {
        audit.add(credentialAuditEntry(by, {
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

  // Hot path (every request with an API key): prepared once.
  const candidates = db
    .select({
      id: apiKeys.id,
      hash: apiKeys.hash,
      scopes: apiKeys.scopes,
      expiresAt: apiKeys.expiresAt,
      revokedAt: apiKeys.revokedAt,
      membershipId: memberships.id,
      role: memberships.role,
      userId: users.id,
      userDisabledAt: users.disabledAt,
      organizationId: organizations.id,
    })
    .from(apiKeys)
    .innerJoin(memberships, eq(memberships.id, apiKeys.membershipId))
    .innerJoin(users, eq(users.id, memberships.userId))
    .innerJoin(organizations, eq(organizations.id, memberships.organizationId))
    .where(eq(apiKeys.lookup, sql.placeholder('lookup')))
    .prepare()

  return {
    /** Stores a key for a membership. Only the hash is kept; the plain key is returned to be shown once. */
    create(input: NewApiKey): { key: string; record: ApiKeySummary } {
      return insertKey(input)
    },
    candidatesByLookup(lookup: string): ApiKeyCandidate[] {
      return candidates.all({ lookup })
    },
    byId(id: string): ApiKeySummary | undefined {
      return db.select(summary).from(apiKeys).where(eq(apiKeys.id, id)).get()
    },
    listForMembership(membershipId: string): ApiKeySummary[] {
      return db.select(summary).from(apiKeys).where(eq(apiKeys.membershipId, membershipId)).orderBy(desc(apiKeys.createdAt)).all()
    },
    listAll(): Array<ApiKeySummary & { email: string; organizationSlug: string }> {
      return db.select({ ...summary, email: users.email, organizationSlug: organizations.slug })
        .from(apiKeys)
        .innerJoin(memberships, eq(memberships.id, apiKeys.membershipId))
        .innerJoin(users, eq(users.id, memberships.userId))
        .innerJoin(organizations, eq(organizations.id, memberships.organizationId))
        .orderBy(desc(apiKeys.createdAt)).all()
    },
    /** Ids of keys revoked at or after `since` (also by another process, such as the CLI). */
    revokedSince(since: number): string[] {
      return db.select({ id: apiKeys.id }).from(apiKeys).where(gte(apiKeys.revokedAt, since)).all().map((r) => r.id)
    },
    /** Records when keys were last used (write-behind from memory). */
    touchMany(entries: ReadonlyArray<[string, number]>): void {
      for (const [id, at] of entries) db.update(apiKeys).set({ lastUsedAt: at }).where(eq(apiKeys.id, id)).run()
    },
    /** Marks a key revoked (audited when `by` is given); returns false when it does not exist or was already revoked. */
    revoke(id: string, by?: CredentialActor): boolean {
      const revoked = revokeKey(id, by)
      changes.bump()
      return revoked
    },
    /**
     * Replaces a live key by a new one with the same membership, name, scopes and expiry, in one transaction; the two
     * audit entries (create, revoke) name each other. Undefined when the key does not exist or was already revoked.
     */
    rotate(id: string, by?: CredentialActor): { key: string; record: ApiKeySummary; previous: ApiKeySummary } | undefined {
      const rotated = db.transaction(() => {
        const previous = db.select(summary).from(apiKeys).where(eq(apiKeys.id, id)).get()
        if (!previous || previous.revokedAt !== null) return undefined
        const next = insertKey({ membershipId: previous.membershipId, name: previous.name, scopes: previous.scopes.split(' '), expiresAt: previous.expiresAt, by }, { rotated_from: previous.id })
        if (!revokeKey(previous.id, by, { replaced_by: next.record.id })) throw new Error(`API key ${previous.id} was revoked during its rotation`)
        return { ...next, previous }
      })
      if (rotated) changes.bump()
      return rotated
    },
  }
}

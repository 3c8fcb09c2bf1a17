import { and, desc, eq, gte, isNull, sql } from 'drizzle-orm'
import { newId, randomSecret, sha256Hex } from '../../lib/crypto.js'
import type { Db } from '../client.js'
import type { CredentialChanges } from './credential-changes.js'
import { apiKeys, memberships, organizations, users, type Role } from '../schema.js'

export const API_KEY_PREFIX = 'service_mcp_'

export type ApiKey = typeof apiKeys.$inferSelect
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

export function apiKeysRepo(db: Db, changes: CredentialChanges) {
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
    /**
     * Stores a key for a membership. Only the hash is kept; the plain key is returned to be shown once.
     * `plainKey` lets the operator register an exact key (SERVICE_BOOTSTRAP_API_KEY).
     */
    create(input: { membershipId: string; name: string; scopes: string[]; expiresAt?: number | null; plainKey?: string }): { key: string; record: ApiKeySummary } {
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
      db.insert(apiKeys).values(record).run()
      const { hash: _h, lookup: _l, ...rest } = record
      return { key, record: rest }
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
    /** Marks a key revoked; returns false when it does not exist or was already revoked. */
    revoke(id: string): boolean {
      const revoked = db.update(apiKeys).set({ revokedAt: Date.now() }).where(and(eq(apiKeys.id, id), isNull(apiKeys.revokedAt))).run().changes > 0
      changes.bump()
      return revoked
    },
  }
}

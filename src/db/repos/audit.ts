import { and, count, desc, eq, lt } from 'drizzle-orm'
import { newId } from '../../lib/crypto.js'
import type { Store } from '../store.js'
import type { AuditEntry } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { AuditEntry }

export type AuditOutcome = AuditEntry['outcome']

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
): Omit<AuditEntry, 'id' | 'at'> {
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
  const { db, t: { auditLog } } = store
  return {
    async add(entry: Omit<AuditEntry, 'id' | 'at'> & { at?: number }): Promise<AuditEntry> {
      const row: AuditEntry = { ...entry, id: newId('aud'), at: entry.at ?? Date.now() }
      await db.insert(auditLog).values(row)
      return row
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
    async count(organizationId: string): Promise<number> {
      return (await db.select({ n: count() }).from(auditLog).where(eq(auditLog.organizationId, organizationId)))[0]?.n ?? 0
    },
  }
}

import { and, asc, count, eq, ne } from 'drizzle-orm'
import { fail } from '../../errors/service-error.js'
import { newId } from '../../lib/crypto.js'
import type { Store } from '../store.js'
import type { CredentialChanges } from './credential-changes.js'
import type { Membership, Role } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { Membership }

export interface MembershipView {
  id: string
  role: Role
  userId: string
  email: string
  userName: string
  organizationId: string
  organizationSlug: string
  organizationName: string
  createdAt: number
}

export function membershipsRepo(store: Store, changes: CredentialChanges) {
  const { db, t: { memberships, organizations, users } } = store
  const view = {
    id: memberships.id,
    role: memberships.role,
    userId: users.id,
    email: users.email,
    userName: users.name,
    organizationId: organizations.id,
    organizationSlug: organizations.slug,
    organizationName: organizations.name,
    createdAt: memberships.createdAt,
  }

  const joined = () =>
    db.select(view).from(memberships)
      .innerJoin(users, eq(users.id, memberships.userId))
      .innerJoin(organizations, eq(organizations.id, memberships.organizationId))
  const membershipOf = async (on: Store['db'], userId: string, organizationId: string): Promise<Membership | undefined> =>
    (await on.select().from(memberships).where(and(eq(memberships.userId, userId), eq(memberships.organizationId, organizationId))))[0]

  /**
   * The rule every path honours: an organization always keeps an owner (nobody could manage it otherwise). Why
   * making `next` the role of this user (null: removing them) would break it, or null when it would not. Asks `on`
   * (the transaction's connection inside one).
   */
  const lastOwnerConflict = async (on: Store['db'], userId: string, organizationId: string, next: Role | null): Promise<string | null> => {
    const current = await membershipOf(on, userId, organizationId)
    if (current?.role !== 'owner' || next === 'owner') return null
    const others = (await on.select({ n: count() }).from(memberships)
      .where(and(eq(memberships.organizationId, organizationId), eq(memberships.role, 'owner'), ne(memberships.id, current.id))))[0]?.n ?? 0
    if (others > 0) return null
    return 'the organization would have no owner left; make another member owner first'
  }

  // Both writes below check the rule and write in one transaction, which first takes the organization's key
  // (store.lockKey): two writers (requests, processes, the CLI) demoting its two last owners at once cannot both see the
  // other owner. SQLite serialises them anyway (BEGIN IMMEDIATE takes the write lock at once); PostgreSQL's READ
  // COMMITTED would let both transactions count the owners before either demoted one. A key rather than a row lock
  // (SELECT … FOR UPDATE of the organization's row, which neither dialect's shared query builder can spell) holds back
  // only writers of that organization's memberships, and nothing that reads or updates the organization itself.
  const lockOrganization = (tx: Store, organizationId: string) => tx.lockKey(`memberships:${organizationId}`)
  return {
    /**
     * The rule every path honours: an organization always keeps an owner (nobody could manage it otherwise). Why
     * making `next` the role of this user (null: removing them) would break it, or null when it would not.
     */
    async lastOwnerConflict(userId: string, organizationId: string, next: Role | null): Promise<string | null> {
      return lastOwnerConflict(db, userId, organizationId, next)
    },
    /**
     * Creates the membership, or changes the role when the user is already a member. Refuses (CONFLICT) to demote the
     * organization's last owner; the check and the write are one transaction.
     */
    async upsert(input: { userId: string; organizationId: string; role: Role }): Promise<Membership> {
      const result = await store.transaction(async (tx) => {
        await lockOrganization(tx, input.organizationId)
        const conflict = await lastOwnerConflict(tx.db, input.userId, input.organizationId, input.role)
        if (conflict) throw fail('CONFLICT', { message: `Refused: ${conflict}` })
        const existing = await membershipOf(tx.db, input.userId, input.organizationId)
        if (existing) {
          await tx.db.update(memberships).set({ role: input.role }).where(eq(memberships.id, existing.id))
          return { membership: { ...existing, role: input.role }, changed: true }
        }
        const row: Membership = { id: newId('mem'), ...input, createdAt: Date.now() }
        await tx.db.insert(memberships).values(row)
        return { membership: row, changed: false }
      })
      // Announced once committed: processes that drop their cache before the commit would read the old role again.
      if (result.changed) await changes.bump()
      return result.membership
    },
    /** Removes the membership (false when there was none). Refuses (CONFLICT) to remove the last owner. */
    async remove(userId: string, organizationId: string): Promise<boolean> {
      const removed = await store.transaction(async (tx) => {
        await lockOrganization(tx, organizationId)
        const conflict = await lastOwnerConflict(tx.db, userId, organizationId, null)
        if (conflict) throw fail('CONFLICT', { message: `Refused: ${conflict}` })
        const removed = await tx.db.delete(memberships)
          .where(and(eq(memberships.userId, userId), eq(memberships.organizationId, organizationId)))
          .returning({ id: memberships.id })
        return removed.length > 0
      })
      await changes.bump()
      return removed
    },
    async byId(id: string): Promise<MembershipView | undefined> {
      return (await joined().where(eq(memberships.id, id)))[0]
    },
    async find(userId: string, organizationId: string): Promise<MembershipView | undefined> {
      return (await joined().where(and(eq(memberships.userId, userId), eq(memberships.organizationId, organizationId))))[0]
    },
    async forUser(userId: string): Promise<MembershipView[]> {
      return joined().where(eq(memberships.userId, userId)).orderBy(asc(organizations.slug))
    },
    async forOrganization(organizationId: string): Promise<MembershipView[]> {
      return joined().where(eq(memberships.organizationId, organizationId)).orderBy(asc(users.email))
    },
  }
}

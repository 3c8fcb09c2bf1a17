import { and, asc, count, eq, ne } from 'drizzle-orm'
import { fail } from '../../errors/service-error.js'
import { newId } from '../../lib/crypto.js'
import type { Db } from '../client.js'
import type { CredentialChanges } from './credential-changes.js'
import { memberships, organizations, users } from '../schema.js'
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

// The write lock from the start: two processes (server, CLI) demoting two owners at once cannot both see another one.
const WRITE_NOW = { behavior: 'immediate' } as const

export function membershipsRepo(db: Db, changes: CredentialChanges) {
  const joined = () =>
    db.select(view).from(memberships)
      .innerJoin(users, eq(users.id, memberships.userId))
      .innerJoin(organizations, eq(organizations.id, memberships.organizationId))
  const membershipOf = (userId: string, organizationId: string): Membership | undefined =>
    db.select().from(memberships).where(and(eq(memberships.userId, userId), eq(memberships.organizationId, organizationId))).get()

  /**
   * The rule every path honours: an organization always keeps an owner (nobody could manage it otherwise). Why
   * making `next` the role of this user (null: removing them) would break it, or null when it would not.
   */
  const lastOwnerConflict = (userId: string, organizationId: string, next: Role | null): string | null => {
    const current = membershipOf(userId, organizationId)
    if (current?.role !== 'owner' || next === 'owner') return null
    const others = db.select({ n: count() }).from(memberships)
      .where(and(eq(memberships.organizationId, organizationId), eq(memberships.role, 'owner'), ne(memberships.id, current.id))).get()?.n ?? 0
    if (others > 0) return null
    return 'the organization would have no owner left; make another member owner first'
  }

  return {
    lastOwnerConflict,
    /**
     * Creates the membership, or changes the role when the user is already a member. Refuses (CONFLICT) to demote the
     * organization's last owner; the check and the write are one transaction.
     */
    upsert(input: { userId: string; organizationId: string; role: Role }): Membership {
      return db.transaction(() => {
        const conflict = lastOwnerConflict(input.userId, input.organizationId, input.role)
        if (conflict) throw fail('CONFLICT', { message: `Refused: ${conflict}` })
        const existing = membershipOf(input.userId, input.organizationId)
        if (existing) {
          db.update(memberships).set({ role: input.role }).where(eq(memberships.id, existing.id)).run()
          changes.bump()
          return { ...existing, role: input.role }
        }
        const row: Membership = { id: newId('mem'), ...input, createdAt: Date.now() }
        db.insert(memberships).values(row).run()
        return row
      }, WRITE_NOW)
    },
    /** Removes the membership (false when there was none). Refuses (CONFLICT) to remove the last owner. */
    remove(userId: string, organizationId: string): boolean {
      return db.transaction(() => {
        const conflict = lastOwnerConflict(userId, organizationId, null)
        if (conflict) throw fail('CONFLICT', { message: `Refused: ${conflict}` })
        const res = db.delete(memberships)
          .where(and(eq(memberships.userId, userId), eq(memberships.organizationId, organizationId))).run()
        changes.bump()
        return res.changes > 0
      }, WRITE_NOW)
    },
    byId(id: string): MembershipView | undefined {
      return joined().where(eq(memberships.id, id)).get()
    },
    find(userId: string, organizationId: string): MembershipView | undefined {
      return joined().where(and(eq(memberships.userId, userId), eq(memberships.organizationId, organizationId))).get()
    },
    forUser(userId: string): MembershipView[] {
      return joined().where(eq(memberships.userId, userId)).orderBy(asc(organizations.slug)).all()
    },
    forOrganization(organizationId: string): MembershipView[] {
      return joined().where(eq(memberships.organizationId, organizationId)).orderBy(asc(users.email)).all()
    },
  }
}

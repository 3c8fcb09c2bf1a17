import { and, asc, eq } from 'drizzle-orm'
import { newId } from '../../lib/crypto.js'
import type { Db } from '../client.js'
import type { CredentialChanges } from './credential-changes.js'
import { memberships, organizations, users, type Role } from '../schema.js'

export type Membership = typeof memberships.$inferSelect

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

export function membershipsRepo(db: Db, changes: CredentialChanges) {
  const joined = () =>
    db.select(view).from(memberships)
      .innerJoin(users, eq(users.id, memberships.userId))
      .innerJoin(organizations, eq(organizations.id, memberships.organizationId))
  return {
    /** Creates the membership, or changes the role when the user is already a member. */
    upsert(input: { userId: string; organizationId: string; role: Role }): Membership {
      const existing = db.select().from(memberships)
        .where(and(eq(memberships.userId, input.userId), eq(memberships.organizationId, input.organizationId))).get()
      if (existing) {
        db.update(memberships).set({ role: input.role }).where(eq(memberships.id, existing.id)).run()
        changes.bump()
        return { ...existing, role: input.role }
      }
      const row: Membership = { id: newId('mem'), ...input, createdAt: Date.now() }
      db.insert(memberships).values(row).run()
      return row
    },
    remove(userId: string, organizationId: string): boolean {
      const res = db.delete(memberships)
        .where(and(eq(memberships.userId, userId), eq(memberships.organizationId, organizationId))).run()
      changes.bump()
      return res.changes > 0
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

import { asc, count, eq } from 'drizzle-orm'
import { newId } from '../../lib/crypto.js'
import type { Store } from '../store.js'
import { uniqueOrConflict } from './conflict.js'
import type { CredentialChanges } from './credential-changes.js'
import type { User } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { User }

export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase()
}

export function usersRepo(store: Store, changes: CredentialChanges) {
  const { db, t: { users } } = store
  return {
    async create(input: { email: string; name?: string; passwordHash: string | null }): Promise<User> {
      const email = normalizeEmail(input.email)
      const row: User = {
        id: newId('usr'),
        email,
        name: input.name ?? email.split('@')[0] ?? email,
        passwordHash: input.passwordHash,
        createdAt: Date.now(),
        disabledAt: null,
      }
      await uniqueOrConflict(() => db.insert(users).values(row).execute(), `A user with the email ${email} already exists`)
      return row
    },
    async byEmail(email: string): Promise<User | undefined> {
      return (await db.select().from(users).where(eq(users.email, normalizeEmail(email))))[0]
    },
    async byId(id: string): Promise<User | undefined> {
      return (await db.select().from(users).where(eq(users.id, id)))[0]
    },
    async list(): Promise<User[]> {
      return db.select().from(users).orderBy(asc(users.email))
    },
    async setPasswordHash(id: string, passwordHash: string): Promise<void> {
      await db.update(users).set({ passwordHash }).where(eq(users.id, id))
    },
    async setDisabled(id: string, disabled: boolean): Promise<void> {
      await db.update(users).set({ disabledAt: disabled ? Date.now() : null }).where(eq(users.id, id))
      await changes.bump()
    },
    async count(): Promise<number> {
      return (await db.select({ n: count() }).from(users))[0]?.n ?? 0
    },
  }
}

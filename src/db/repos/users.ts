import { asc, count, eq } from 'drizzle-orm'
import { newId } from '../../lib/crypto.js'
import type { Db } from '../client.js'
import { uniqueOrConflict } from './conflict.js'
import type { CredentialChanges } from './credential-changes.js'
import { users } from '../schema.js'
import type { User } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { User }

export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase()
}

export function usersRepo(db: Db, changes: CredentialChanges) {
  return {
    create(input: { email: string; name?: string; passwordHash: string | null }): User {
      const email = normalizeEmail(input.email)
      const row: User = {
        id: newId('usr'),
        email,
        name: input.name ?? email.split('@')[0] ?? email,
        passwordHash: input.passwordHash,
        createdAt: Date.now(),
        disabledAt: null,
      }
      uniqueOrConflict(() => db.insert(users).values(row).run(), `A user with the email ${email} already exists`)
      return row
    },
    byEmail(email: string): User | undefined {
      return db.select().from(users).where(eq(users.email, normalizeEmail(email))).get()
    },
    byId(id: string): User | undefined {
      return db.select().from(users).where(eq(users.id, id)).get()
    },
    list(): User[] {
      return db.select().from(users).orderBy(asc(users.email)).all()
    },
    setPasswordHash(id: string, passwordHash: string): void {
      db.update(users).set({ passwordHash }).where(eq(users.id, id)).run()
    },
    setDisabled(id: string, disabled: boolean): void {
      db.update(users).set({ disabledAt: disabled ? Date.now() : null }).where(eq(users.id, id)).run()
      changes.bump()
    },
    count(): number {
      return db.select({ n: count() }).from(users).get()?.n ?? 0
    },
  }
}

import { and, eq } from 'drizzle-orm'
import type { Store } from '../store.js'
import type { UserIdentity } from '../types.js'

export type { UserIdentity }

/** A person's account at an upstream provider, (provider, subject), tied to one of our users for good. */
export function userIdentitiesRepo(store: Store) {
  const { db, t: { userIdentities } } = store
  return {
    async find(provider: string, subject: string): Promise<UserIdentity | undefined> {
      return (await db.select().from(userIdentities).where(and(eq(userIdentities.provider, provider), eq(userIdentities.subject, subject))))[0]
    },
    async create(row: UserIdentity): Promise<void> {
      await db.insert(userIdentities).values(row)
    },
    /** Records a sign-in and the verified email the provider gave this time. */
    async signedIn(provider: string, subject: string, email: string, at: number): Promise<void> {
      await db.update(userIdentities).set({ email, lastSignInAt: at })
        .where(and(eq(userIdentities.provider, provider), eq(userIdentities.subject, subject)))
    },
    async forUser(userId: string): Promise<UserIdentity[]> {
      return db.select().from(userIdentities).where(eq(userIdentities.userId, userId))
    },
  }
}

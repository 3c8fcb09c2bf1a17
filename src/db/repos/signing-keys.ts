import { desc, eq, isNull } from 'drizzle-orm'
import type { Store } from '../store.js'
import type { SigningKey } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { SigningKey }

export function signingKeysRepo(store: Store) {
  const { db, t: { signingKeys } } = store
  return {
    async all(): Promise<SigningKey[]> {
      return db.select().from(signingKeys).orderBy(desc(signingKeys.createdAt))
    },
    /** The signing key: the newest one not retired. */
    async current(): Promise<SigningKey | undefined> {
      return (await db.select().from(signingKeys).where(isNull(signingKeys.retiredAt)).orderBy(desc(signingKeys.createdAt)).limit(1))[0]
    },
    async byKid(kid: string): Promise<SigningKey | undefined> {
      return (await db.select().from(signingKeys).where(eq(signingKeys.kid, kid)))[0]
    },
    /** Adds a key and retires every other one, in one transaction: exactly one key signs afterwards. */
    async rotate(key: Omit<SigningKey, 'retiredAt'>): Promise<void> {
      await store.transaction(async (tx) => {
        await tx.db.update(signingKeys).set({ retiredAt: key.createdAt }).where(isNull(signingKeys.retiredAt))
        await tx.db.insert(signingKeys).values({ ...key, retiredAt: null })
      })
    },
    async delete(kid: string): Promise<void> {
      await db.delete(signingKeys).where(eq(signingKeys.kid, kid))
    },
  }
}

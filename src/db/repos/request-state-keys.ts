import { and, desc, eq, isNotNull, isNull, lt } from 'drizzle-orm'
import type { Store } from '../store.js'
import type { RequestStateKey } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { RequestStateKey }

/** The keys that seal requestState; the newest unretired one seals, any stored one opens. */
export function requestStateKeysRepo(store: Store) {
  const { db, t: { requestStateKeys } } = store
  return {
    async all(): Promise<RequestStateKey[]> {
      return db.select().from(requestStateKeys).orderBy(desc(requestStateKeys.createdAt))
    },
    async current(): Promise<RequestStateKey | undefined> {
      return (await db.select().from(requestStateKeys).where(isNull(requestStateKeys.retiredAt)).orderBy(desc(requestStateKeys.createdAt)).limit(1))[0]
    },
    async byKid(kid: string): Promise<RequestStateKey | undefined> {
      return (await db.select().from(requestStateKeys).where(eq(requestStateKeys.kid, kid)))[0]
    },
    /** Adds a key and retires every other one, in one transaction: exactly one key seals afterwards. */
    async rotate(key: Omit<RequestStateKey, 'retiredAt'>): Promise<void> {
      await store.transaction(async (tx) => {
        await tx.db.update(requestStateKeys).set({ retiredAt: key.createdAt }).where(isNull(requestStateKeys.retiredAt))
        await tx.db.insert(requestStateKeys).values({ ...key, retiredAt: null })
      })
    },
    /** Deletes keys retired before `before` (nothing they sealed can still be valid); returns how many. */
    async pruneRetiredBefore(before: number): Promise<number> {
      const pruned = await db.delete(requestStateKeys).where(and(isNotNull(requestStateKeys.retiredAt), lt(requestStateKeys.retiredAt, before)))
        .returning({ kid: requestStateKeys.kid })
      return pruned.length
    },
  }
}

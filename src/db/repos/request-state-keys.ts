import { and, desc, eq, isNotNull, isNull, lt } from 'drizzle-orm'
import type { Db } from '../client.js'
import { requestStateKeys } from '../schema.js'
import type { RequestStateKey } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { RequestStateKey }

/** The keys that seal requestState; the newest unretired one seals, any stored one opens. */
export function requestStateKeysRepo(db: Db) {
  return {
    all(): RequestStateKey[] {
      return db.select().from(requestStateKeys).orderBy(desc(requestStateKeys.createdAt)).all()
    },
    current(): RequestStateKey | undefined {
      return db.select().from(requestStateKeys).where(isNull(requestStateKeys.retiredAt)).orderBy(desc(requestStateKeys.createdAt)).limit(1).get()
    },
    byKid(kid: string): RequestStateKey | undefined {
      return db.select().from(requestStateKeys).where(eq(requestStateKeys.kid, kid)).get()
    },
    /** Adds a key and retires every other one, in one transaction: exactly one key seals afterwards. */
    rotate(key: Omit<RequestStateKey, 'retiredAt'>): void {
      db.transaction((tx) => {
        tx.update(requestStateKeys).set({ retiredAt: key.createdAt }).where(isNull(requestStateKeys.retiredAt)).run()
        tx.insert(requestStateKeys).values({ ...key, retiredAt: null }).run()
      })
    },
    /** Deletes keys retired before `before` (nothing they sealed can still be valid); returns how many. */
    pruneRetiredBefore(before: number): number {
      return db.delete(requestStateKeys).where(and(isNotNull(requestStateKeys.retiredAt), lt(requestStateKeys.retiredAt, before))).run().changes
    },
  }
}

import { desc, eq, isNull } from 'drizzle-orm'
import type { Db } from '../client.js'
import { signingKeys } from '../schema.js'
import type { SigningKey } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { SigningKey }

export function signingKeysRepo(db: Db) {
  return {
    all(): SigningKey[] {
      return db.select().from(signingKeys).orderBy(desc(signingKeys.createdAt)).all()
    },
    /** The signing key: the newest one not retired. */
    current(): SigningKey | undefined {
      return db.select().from(signingKeys).where(isNull(signingKeys.retiredAt)).orderBy(desc(signingKeys.createdAt)).limit(1).get()
    },
    byKid(kid: string): SigningKey | undefined {
      return db.select().from(signingKeys).where(eq(signingKeys.kid, kid)).get()
    },
    /** Adds a key and retires every other one, in one transaction: exactly one key signs afterwards. */
    rotate(key: Omit<SigningKey, 'retiredAt'>): void {
      db.transaction((tx) => {
        tx.update(signingKeys).set({ retiredAt: key.createdAt }).where(isNull(signingKeys.retiredAt)).run()
        tx.insert(signingKeys).values({ ...key, retiredAt: null }).run()
      })
    },
    delete(kid: string): void {
      db.delete(signingKeys).where(eq(signingKeys.kid, kid)).run()
    },
  }
}

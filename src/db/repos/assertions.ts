import { lte } from 'drizzle-orm'
import type { Store } from '../store.js'

/**
 * What the exchange of an identity assertion (ID-JAG) at the token endpoint reads and writes
 * (docs/decisions/enterprise-managed-authorization.md): the assertions already used.
 */
export function assertionsRepo(store: Store) {
  const { db, t: { usedAssertions } } = store
  return {
    /**
     * Remembers that `issuer` + `jti` has been used, until `expiresAt`. True only for the first caller: the primary
     * key refuses the second insert, in whichever process or transaction it runs (PostgreSQL makes a concurrent one
     * wait for the first to commit, then do nothing), so a replay is refused without a read before the write.
     */
    async remember(row: { issuer: string; jti: string; expiresAt: number }): Promise<boolean> {
      const inserted = await db.insert(usedAssertions).values(row).onConflictDoNothing().returning({ jti: usedAssertions.jti })
      return inserted.length === 1
    },
    /** Forgets assertions that have expired: a replay of one is refused by its `exp` already. */
    async purge(now: number): Promise<number> {
      return (await db.delete(usedAssertions).where(lte(usedAssertions.expiresAt, now)).returning({ jti: usedAssertions.jti })).length
    },
  }
}

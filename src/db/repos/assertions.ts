import { and, eq, lte } from 'drizzle-orm'
import type { Store } from '../store.js'

/**
 * What the exchange of an identity assertion (ID-JAG) at the token endpoint reads and writes
 * (docs/decisions/enterprise-managed-authorization.md): the assertions already used, and the link from an identity
 * provider's subject to a user.
 */
export function assertionsRepo(store: Store) {
  const { db, t: { usedAssertions, userIdentities } } = store
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
    /** The user an identity provider's subject is linked to (made at a single sign-on through that provider). */
    async linkedUser(provider: string, subject: string): Promise<string | undefined> {
      const rows = await db.select({ userId: userIdentities.userId }).from(userIdentities)
        .where(and(eq(userIdentities.provider, provider), eq(userIdentities.subject, subject)))
      return rows[0]?.userId
    },
  }
}

import { and, count, eq, gt, isNull, lte, min } from 'drizzle-orm'
import type { Store } from '../store.js'
import type { AuthorizationCode, AuthorizationRequest } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { AuthorizationRequest, AuthorizationCode }

/** The two short-lived steps of the code flow: the pending request (until consent) and the code (until exchange). */
export function authorizationsRepo(store: Store) {
  const { db, t: { authorizationCodes, authorizationRequests } } = store
  return {
    async createRequest(row: Omit<AuthorizationRequest, 'consumedAt'>): Promise<void> {
      await db.insert(authorizationRequests).values({ ...row, consumedAt: null })
    },
    async request(id: string): Promise<AuthorizationRequest | undefined> {
      return (await db.select().from(authorizationRequests).where(eq(authorizationRequests.id, id)))[0]
    },
    /**
     * Requests started from one client address (its SHA-256) that are neither answered nor expired, and when the first
     * of them expires. Served by the (client_address, expires_at) index.
     */
    async pendingFrom(clientAddress: string, now: number): Promise<{ count: number; oldestExpiresAt: number | null }> {
      const [row] = await db.select({ count: count(), oldestExpiresAt: min(authorizationRequests.expiresAt) }).from(authorizationRequests)
        .where(and(eq(authorizationRequests.clientAddress, clientAddress), gt(authorizationRequests.expiresAt, now), isNull(authorizationRequests.consumedAt)))
      return { count: row?.count ?? 0, oldestExpiresAt: row?.oldestExpiresAt ?? null }
    },
    /** Single use: true only for the one caller that consumed it. */
    async consumeRequest(id: string, at: number): Promise<boolean> {
      const consumed = await db.update(authorizationRequests).set({ consumedAt: at })
        .where(and(eq(authorizationRequests.id, id), isNull(authorizationRequests.consumedAt))).returning({ id: authorizationRequests.id })
      return consumed.length === 1
    },
    async createCode(row: Omit<AuthorizationCode, 'consumedAt' | 'grantId'>): Promise<void> {
      await db.insert(authorizationCodes).values({ ...row, consumedAt: null, grantId: null })
    },
    /** Found whatever its state, so an expired or replayed code can be told apart from an unknown one. */
    async code(hash: string): Promise<AuthorizationCode | undefined> {
      return (await db.select().from(authorizationCodes).where(eq(authorizationCodes.hash, hash)))[0]
    },
    /** Atomic compare-and-set: true only for the first exchange. */
    async consumeCode(hash: string, at: number): Promise<boolean> {
      const consumed = await db.update(authorizationCodes).set({ consumedAt: at })
        .where(and(eq(authorizationCodes.hash, hash), isNull(authorizationCodes.consumedAt))).returning({ hash: authorizationCodes.hash })
      return consumed.length === 1
    },
    async setCodeGrant(hash: string, grantId: string): Promise<void> {
      await db.update(authorizationCodes).set({ grantId }).where(eq(authorizationCodes.hash, hash))
    },
    /** Drops expired requests and codes. A used code is kept until it expires, so a replay is still recognised. */
    async purge(now: number): Promise<number> {
      const requests = await db.delete(authorizationRequests).where(lte(authorizationRequests.expiresAt, now)).returning({ id: authorizationRequests.id })
      const codes = await db.delete(authorizationCodes).where(lte(authorizationCodes.expiresAt, now)).returning({ hash: authorizationCodes.hash })
      return requests.length + codes.length
    },
  }
}

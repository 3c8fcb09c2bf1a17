import { and, count, eq, gt, isNull, lte, min } from 'drizzle-orm'
import type { Db } from '../client.js'
import { authorizationCodes, authorizationRequests } from '../schema.js'
import type { AuthorizationCode, AuthorizationRequest } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { AuthorizationRequest, AuthorizationCode }

/** The two short-lived steps of the code flow: the pending request (until consent) and the code (until exchange). */
export function authorizationsRepo(db: Db) {
  return {
    createRequest(row: Omit<AuthorizationRequest, 'consumedAt'>): void {
      db.insert(authorizationRequests).values({ ...row, consumedAt: null }).run()
    },
    request(id: string): AuthorizationRequest | undefined {
      return db.select().from(authorizationRequests).where(eq(authorizationRequests.id, id)).get()
    },
    /**
     * Requests started from one client address (its SHA-256) that are neither answered nor expired, and when the first
     * of them expires. Served by the (client_address, expires_at) index.
     */
    pendingFrom(clientAddress: string, now: number): { count: number; oldestExpiresAt: number | null } {
      const row = db.select({ count: count(), oldestExpiresAt: min(authorizationRequests.expiresAt) }).from(authorizationRequests)
        .where(and(eq(authorizationRequests.clientAddress, clientAddress), gt(authorizationRequests.expiresAt, now), isNull(authorizationRequests.consumedAt)))
        .get()
      return { count: row?.count ?? 0, oldestExpiresAt: row?.oldestExpiresAt ?? null }
    },
    /** Single use: true only for the one caller that consumed it. */
    consumeRequest(id: string, at: number): boolean {
      return db.update(authorizationRequests).set({ consumedAt: at })
        .where(and(eq(authorizationRequests.id, id), isNull(authorizationRequests.consumedAt))).run().changes === 1
    },
    createCode(row: Omit<AuthorizationCode, 'consumedAt' | 'grantId'>): void {
      db.insert(authorizationCodes).values({ ...row, consumedAt: null, grantId: null }).run()
    },
    /** Found whatever its state, so an expired or replayed code can be told apart from an unknown one. */
    code(hash: string): AuthorizationCode | undefined {
      return db.select().from(authorizationCodes).where(eq(authorizationCodes.hash, hash)).get()
    },
    /** Atomic compare-and-set: true only for the first exchange. */
    consumeCode(hash: string, at: number): boolean {
      return db.update(authorizationCodes).set({ consumedAt: at })
        .where(and(eq(authorizationCodes.hash, hash), isNull(authorizationCodes.consumedAt))).run().changes === 1
    },
    setCodeGrant(hash: string, grantId: string): void {
      db.update(authorizationCodes).set({ grantId }).where(eq(authorizationCodes.hash, hash)).run()
    },
    /** Drops expired requests and codes. A used code is kept until it expires, so a replay is still recognised. */
    purge(now: number): number {
      const requests = db.delete(authorizationRequests).where(lte(authorizationRequests.expiresAt, now)).run().changes
      const codes = db.delete(authorizationCodes).where(lte(authorizationCodes.expiresAt, now)).run().changes
      return requests + codes
    },
  }
}

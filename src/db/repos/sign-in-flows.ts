import { eq, lte } from 'drizzle-orm'
import type { Store } from '../store.js'
import type { SignInFlow } from '../types.js'

export type { SignInFlow }

/**
 * Sign-ins started at an upstream OpenID Connect provider, between our redirect and its callback: in the database, so
 * the callback may land on any process (docs/decisions/single-sign-on.md).
 */
export function signInFlowsRepo(store: Store) {
  const { db, t: { signInFlows } } = store
  return {
    async create(row: SignInFlow): Promise<void> {
      await db.insert(signInFlows).values(row)
    },
    /** Single use: the row is deleted as it is read, so only one caller ever gets it, whatever it then decides. */
    async consume(id: string): Promise<SignInFlow | undefined> {
      return (await db.delete(signInFlows).where(eq(signInFlows.id, id)).returning())[0]
    },
    async purge(now: number): Promise<number> {
      return (await db.delete(signInFlows).where(lte(signInFlows.expiresAt, now)).returning({ id: signInFlows.id })).length
    },
  }
}

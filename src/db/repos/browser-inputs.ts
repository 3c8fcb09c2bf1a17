import { and, eq, gt, lte } from 'drizzle-orm'
import type { Store } from '../store.js'
import type { BrowserInput } from '../types.js'

export type { BrowserInput }

/**
 * Values asked for on our own page (service_env_set_in_browser, docs/decisions/url-elicitation.md). Every change of
 * status is a compare-and-set on the row's current status, so that two pages, or two retries, on any process, never
 * both win: a value is saved once, and written by one call once.
 */
export function browserInputsRepo(store: Store) {
  const { db, t: { browserInputs } } = store
  return {
    /** Inserts the row, or keeps the one already there under its id (a retry of the same operation); returns the row. */
    async open(row: Omit<BrowserInput, 'status' | 'ciphertext'>): Promise<BrowserInput> {
      await db.insert(browserInputs).values({ ...row, status: 'pending', ciphertext: null }).onConflictDoNothing()
      const kept = (await db.select().from(browserInputs).where(eq(browserInputs.id, row.id)))[0]
      if (!kept) throw new Error(`browser input ${row.id} vanished as it was opened`)
      return kept
    },
    async byId(id: string): Promise<BrowserInput | undefined> {
      return (await db.select().from(browserInputs).where(eq(browserInputs.id, id)))[0]
    },
    /** The page's answer: a pending, unexpired row becomes `submitted` (with its sealed value) or `declined`. */
    async answer(id: string, now: number, answer: { ciphertext: string } | 'declined'): Promise<boolean> {
      const set = answer === 'declined' ? { status: 'declined' as const } : { status: 'submitted' as const, ciphertext: answer.ciphertext }
      const changed = await db.update(browserInputs).set(set)
        .where(and(eq(browserInputs.id, id), eq(browserInputs.status, 'pending'), gt(browserInputs.expiresAt, now))).returning({ id: browserInputs.id })
      return changed.length === 1
    },
    /** The call that asked: marks a pending row declined (the person declined in the client). */
    async decline(id: string): Promise<void> {
      await db.update(browserInputs).set({ status: 'declined' }).where(and(eq(browserInputs.id, id), eq(browserInputs.status, 'pending')))
    },
    /**
     * Takes a submitted value, once: the row becomes `used` and loses its value. Undefined when it is not submitted (or
     * another call took it first: the status is compared as it is set). Run it in the transaction that writes the value.
     */
    async consume(id: string): Promise<string | undefined> {
      const row = (await db.select({ ciphertext: browserInputs.ciphertext }).from(browserInputs)
        .where(and(eq(browserInputs.id, id), eq(browserInputs.status, 'submitted'))))[0]
      if (!row?.ciphertext) return undefined
      const taken = await db.update(browserInputs).set({ status: 'used', ciphertext: null })
        .where(and(eq(browserInputs.id, id), eq(browserInputs.status, 'submitted'))).returning({ id: browserInputs.id })
      return taken.length === 1 ? row.ciphertext : undefined
    },
    async purge(now: number): Promise<number> {
      return (await db.delete(browserInputs).where(lte(browserInputs.expiresAt, now)).returning({ id: browserInputs.id })).length
    },
  }
}

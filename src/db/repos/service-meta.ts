import { eq } from 'drizzle-orm'
import type { Store } from '../store.js'

/** Named facts about the database itself (sqlite/schema.ts `service_meta`). */
export function serviceMetaRepo(store: Store) {
  const { db, t: { serviceMeta } } = store
  return {
    async get(name: string): Promise<string | undefined> {
      return (await db.select({ value: serviceMeta.value }).from(serviceMeta).where(eq(serviceMeta.name, name)))[0]?.value
    },
    async set(name: string, value: string): Promise<void> {
      const updatedAt = Date.now()
      await db.insert(serviceMeta).values({ name, value, updatedAt }).onConflictDoUpdate({ target: serviceMeta.name, set: { value, updatedAt } })
    },
  }
}

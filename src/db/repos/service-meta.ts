import { eq } from 'drizzle-orm'
import type { Db } from '../client.js'
import { serviceMeta } from '../schema.js'

/** Named facts about the database itself (schema.ts `service_meta`). */
export function serviceMetaRepo(db: Db) {
  return {
    get(name: string): string | undefined {
      return db.select({ value: serviceMeta.value }).from(serviceMeta).where(eq(serviceMeta.name, name)).get()?.value
    },
    set(name: string, value: string): void {
      const updatedAt = Date.now()
      db.insert(serviceMeta).values({ name, value, updatedAt }).onConflictDoUpdate({ target: serviceMeta.name, set: { value, updatedAt } }).run()
    },
  }
}

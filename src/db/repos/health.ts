import { sql } from 'drizzle-orm'
import type { Store } from '../store.js'

/** What the readiness check asks of the database (GET /readyz). */
export function healthRepo(store: Store) {
  const { db, fastPaths, t } = store
  return {
    /** Throws when the database does not answer: a round trip that reads a table, or the dialect's own check. */
    ping(): Promise<void> {
      if (fastPaths.ping) return fastPaths.ping()
      return db.select({ one: sql`1` }).from(t.serviceMeta).limit(1).then(() => {})
    },
  }
}

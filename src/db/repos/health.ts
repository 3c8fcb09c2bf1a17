import { sql } from 'drizzle-orm'
import type { Store } from '../store.js'

/** What the readiness check asks of the database (GET /readyz). */
export function healthRepo(store: Store) {
  const { db, dialect, t } = store
  if (dialect === 'sqlite') {
    // Reads the schema (a page of the file, or of the WAL), not just a constant: a connection that is closed, or a file
    // SQLite can no longer read, fails here. Prepared once: a check costs one tiny statement.
    const schemaRead = db.$client.prepare('SELECT count(*) FROM sqlite_schema').pluck()
    return {
      /** Throws when the database does not answer. */
      async ping(): Promise<void> {
        schemaRead.get()
      },
    }
  }
  return {
    /** Throws when the database does not answer: a round trip that reads a table. */
    async ping(): Promise<void> {
      await db.select({ one: sql`1` }).from(t.serviceMeta).limit(1)
    },
  }
}

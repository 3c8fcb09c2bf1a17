import type { Db } from '../client.js'

/** What the readiness check asks of the database (GET /readyz). */
export function healthRepo(db: Db) {
  // Reads the schema (a page of the file, or of the WAL), not just a constant: a connection that is closed, or a file
  // SQLite can no longer read, fails here. Prepared once: a check costs one tiny statement.
  const schemaRead = db.$client.prepare('SELECT count(*) FROM sqlite_schema').pluck()
  return {
    /** Throws when the database does not answer. */
    ping(): void {
      schemaRead.get()
    },
  }
}

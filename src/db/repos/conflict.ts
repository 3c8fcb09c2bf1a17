import { fail } from '../../errors/service-error.js'

/**
 * A write that a UNIQUE index may refuse (a name, slug or email taken): the refusal is the catalog's CONFLICT with
 * `message`, so that no caller ever looks at a driver's error codes (each storage backend names them its own way).
 */
export async function uniqueOrConflict<T>(write: () => Promise<T>, message: string): Promise<T> {
  try {
    return await write()
  } catch (err) {
    if (isUniqueViolation(err)) throw fail('CONFLICT', { message, cause: err })
    throw err
  }
}

/** SQLite's UNIQUE constraint code, or PostgreSQL's unique_violation, on the error or its cause (Drizzle may wrap it). */
function isUniqueViolation(err: unknown): boolean {
  for (let e = err, depth = 0; e && depth < 3; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code
    if (code === 'SQLITE_CONSTRAINT_UNIQUE' || code === '23505') return true
  }
  return false
}

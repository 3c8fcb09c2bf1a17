import { fail } from '../../errors/service-error.js'

/**
 * A write that a UNIQUE index may refuse (a name, slug or email taken): the refusal is the catalog's CONFLICT with
 * `message`, so that no caller ever looks at a driver's error codes (each storage backend names them its own way).
 */
export function uniqueOrConflict<T>(write: () => T, message: string): T {
  try {
    return write()
  } catch (err) {
    if (isUniqueViolation(err)) throw fail('CONFLICT', { message, cause: err })
    throw err
  }
}

/** SQLite's code for a UNIQUE constraint, on the error or its cause (Drizzle may wrap it). */
function isUniqueViolation(err: unknown): boolean {
  for (let e = err, depth = 0; e && depth < 3; e = (e as { cause?: unknown }).cause, depth++) {
    if ((e as { code?: unknown }).code === 'SQLITE_CONSTRAINT_UNIQUE') return true
  }
  return false
}

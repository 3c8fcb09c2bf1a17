/** SERVICE_DATABASE names a PostgreSQL database (a `postgres://` or `postgresql://` URL) rather than a SQLite file. */
export function isPostgresUrl(database: string): boolean {
  return /^postgres(ql)?:\/\//i.test(database)
}

/**
 * Why SERVICE_DATABASE can be neither a PostgreSQL URL nor a SQLite file, or undefined when it is one of them: it looks
 * like a URL (a scheme of two letters or more, then `:/`) of another database, or PostgreSQL's with one slash. Taken
 * as a file name, such a setting would create files and folders named after it where the process runs (an empty
 * `postgres:/…` database was once committed that way). A `file:` URI is SQLite's, and a colon further in a path
 * (`data/a:b.db`) or after one letter (a Windows drive) is a file name. Decided in docs/decisions/storage.md.
 */
export function unusableDatabaseUrl(database: string): string | undefined {
  if (isPostgresUrl(database) || /^file:/i.test(database) || !/^[a-z][a-z0-9+.-]+:\//i.test(database)) return undefined
  const hint = /^postgres(ql)?:/i.test(database) ? ' (a PostgreSQL URL starts with postgres:// — two slashes)' : ''
  return `SERVICE_DATABASE ${JSON.stringify(maskedUrl(database))} is a URL of a database this server cannot use${hint}: give a postgres:// URL, or a SQLite file path (or :memory:)`
}

/** A database URL with its password hidden, for messages and logs (also one missing a slash, `postgres:/u:p@host`). */
export function maskedUrl(url: string): string {
  return url.replace(/:(\/\/?)([^/@:]*)(:[^/@]*)?@/, (_m, slashes: string, user: string, password?: string) => `:${slashes}${user}${password ? ':…' : ''}@`)
}

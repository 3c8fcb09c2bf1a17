/** SERVICE_DATABASE names a PostgreSQL database (a `postgres://` or `postgresql://` URL) rather than a SQLite file. */
export function isPostgresUrl(database: string): boolean {
  return /^postgres(ql)?:\/\//i.test(database)
}

/** A database URL with its password hidden, for messages and logs. */
export function maskedUrl(url: string): string {
  return url.replace(/\/\/([^/@:]*)(:[^/@]*)?@/, (_m, user: string, password?: string) => `//${user}${password ? ':…' : ''}@`)
}

import { isPostgresUrl, maskedUrl } from '../lib/database-url.js'
import { openDatabase } from './client.js'
import { openPostgres, postgresStore, uncachedCredentials } from './postgres.js'
import { createRepos, reposOn, type Repos } from './repos/index.js'

/**
 * The repositories on the database SERVICE_DATABASE names, for the command line: a SQLite file or a postgres:// URL,
 * migrated as the server would. `close` lets go of the connection (or pool).
 */
export async function openRepos(database: string, warn: (message: string) => void = () => {}): Promise<{ repos: Repos; close(): Promise<void> }> {
  if (isPostgresUrl(database)) {
    const handle = await openPostgres(database, { max: 2, onError: (err) => warn(`${maskedUrl(database)}: ${err.message}`) })
    return { repos: reposOn(postgresStore(handle.db), uncachedCredentials()), close: () => handle.close() }
  }
  const handle = openDatabase(database)
  return { repos: createRepos(handle.db), close: async () => handle.close() }
}

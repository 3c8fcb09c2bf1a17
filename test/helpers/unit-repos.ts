import { openDatabase } from '../../src/db/sqlite/client.js'
import { openRepos } from '../../src/db/open-repos.js'
import { createRepos } from '../../src/db/sqlite/repos.js'
import { type Repos } from '../../src/db/repos/index.js'
import { postgresDatabase } from './backends.js'
import { onPostgres } from './server.js'

interface Teardown {
  teardown(fn: () => unknown): void
}

/**
 * Repositories for a unit test, closed at teardown: on an in-memory SQLite database, or, in the suite's PostgreSQL pass
 * (SERVICE_TEST_DATABASE=postgres), on a fresh migrated PostgreSQL database, as the command line opens them.
 */
export async function unitRepos(t: Teardown): Promise<Repos> {
  if (!onPostgres()) {
    const handle = openDatabase(':memory:')
    t.teardown(() => handle.close())
    return createRepos(handle.db)
  }
  // Every repository method may run, those that change credentials included.
  const opened = await openRepos({ database: await postgresDatabase(t, { migrated: true }), redisUrl: '', redisPrefix: '', leaseMs: 15_000 }, undefined, { changesCredentials: true })
  t.teardown(() => opened.close())
  return opened.repos
}

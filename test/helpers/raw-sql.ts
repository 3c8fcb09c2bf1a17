import { openDatabase } from '../../src/db/sqlite/client.js'
import { isPostgresUrl } from '../../src/lib/database-url.js'
import { postgresClient } from './backends.js'

interface Teardown {
  teardown(fn: () => unknown): void
}

/**
 * Raw SQL on a server's database, as someone with database access would run it (an intruder editing the audit log, a
 * test looking under the repositories): `?` placeholders on either dialect; rows for a query, [] for a statement.
 */
export async function rawSql(t: Teardown, dbPath: string): Promise<(query: string, params?: unknown[]) => Promise<Array<Record<string, unknown>>>> {
  if (isPostgresUrl(dbPath)) {
    const client = await postgresClient(t, dbPath)
    return async (query, params = []) => {
      let i = 0
      return (await client.query(query.replace(/\?/g, () => `$${++i}`), params)).rows
    }
  }
  const handle = openDatabase(dbPath)
  t.teardown(() => handle.close())
  return async (query, params = []) => {
    const statement = handle.sqlite.prepare(query)
    return statement.reader ? (statement.all(...params) as Array<Record<string, unknown>>) : (statement.run(...params), [])
  }
}

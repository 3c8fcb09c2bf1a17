import Database from 'better-sqlite3'
import type pg from 'pg'
import { openRepos } from '../../src/db/open-repos.js'
import { openDatabase } from '../../src/db/sqlite/client.js'
import { createRepos } from '../../src/db/sqlite/repos.js'
import { type Repos } from '../../src/db/repos/index.js'
import { isPostgresUrl } from '../../src/lib/database-url.js'
import { pgClient } from '../setup/backends.js'

/**
 * A test server's database, read from outside the server, whichever backend it runs on (SERVICE_TEST_DATABASE): rows
 * through plain SQL, the repositories of another connection (as another process would have them), or everything the
 * tables hold. Tests about SQLite itself (its file, its WAL, its lock) open the file and stay on SQLite instead.
 */

interface Teardown {
  teardown(fn: () => unknown): void
}

export interface Rows {
  /** The rows `sql` selects; `?` placeholders on both backends. On PostgreSQL bigint columns read as numbers. */
  all<R = Record<string, unknown>>(sql: string, ...params: unknown[]): Promise<R[]>
  get<R = Record<string, unknown>>(sql: string, ...params: unknown[]): Promise<R | undefined>
  readonly dialect: 'sqlite' | 'postgres'
}

/** int8 (count(*), the millisecond times) as numbers, as SQLite and the server's store read them. */
const INT8 = 20
function numbers(types: typeof pg.types) {
  return {
    getTypeParser: ((oid: number, format?: 'text' | 'binary') => (oid === INT8 ? Number : types.getTypeParser(oid, format as 'text'))) as typeof types.getTypeParser,
  }
}

/** A read-only SQLite connection or a PostgreSQL client on the server's database, closed at teardown. */
export async function databaseRows(t: Teardown, server: { dbPath: string }): Promise<Rows> {
  if (isPostgresUrl(server.dbPath)) {
    const pg = await pgClient()
    const client = new pg.Client({ connectionString: server.dbPath, types: numbers(pg.types) })
    await client.connect()
    t.teardown(() => client.end())
    const all = async <R>(sql: string, ...params: unknown[]): Promise<R[]> => {
      let n = 0
      return (await client.query(sql.replace(/\?/g, () => `$${++n}`), params)).rows as R[]
    }
    return { dialect: 'postgres', all, get: async (sql, ...params) => (await all(sql, ...params))[0] as never }
  }
  const db = new Database(server.dbPath, { readonly: true, fileMustExist: true })
  t.teardown(() => db.close())
  const all = async <R>(sql: string, ...params: unknown[]): Promise<R[]> => db.prepare(sql).all(...params) as R[]
  return { dialect: 'sqlite', all, get: async (sql, ...params) => (await all(sql, ...params))[0] as never }
}

/**
 * The repositories on a connection of their own to the server's database, as another process (the CLI) has them:
 * nothing of the server's caches or locks is shared. Closed at teardown.
 */
export async function otherRepos(t: Teardown, server: { dbPath: string }): Promise<Repos> {
  if (isPostgresUrl(server.dbPath)) {
    // As the command line opens them for a command that changes credentials: behind the credential barrier, over the
    // database beside a server alone on it.
    const opened = await openRepos({ database: server.dbPath, redisUrl: '', redisPrefix: '', leaseMs: 15_000 }, undefined, { changesCredentials: true })
    t.teardown(() => opened.close())
    return opened.repos
  }
  const handle = openDatabase(server.dbPath, { migrate: false })
  t.teardown(() => handle.close())
  return createRepos(handle.db)
}

/**
 * Everything the tables of a PostgreSQL database hold, as text (every row of every table, as JSON): what a search for a
 * secret stored in the clear must look through. (On SQLite, tests read the file's bytes instead.)
 */
export async function postgresTableText(t: Teardown, url: string): Promise<string> {
  const pg = await pgClient()
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  t.teardown(() => client.end())
  const tables = await client.query<{ schema: string; name: string }>(
    "select table_schema as schema, table_name as name from information_schema.tables where table_type = 'BASE TABLE' and table_schema not in ('pg_catalog', 'information_schema') order by 1, 2")
  const parts: string[] = []
  for (const { schema, name } of tables.rows) {
    const quoted = `"${schema.replace(/"/g, '""')}"."${name.replace(/"/g, '""')}"`
    const rows = await client.query<{ row: string }>(`select row_to_json(x)::text as row from ${quoted} x`)
    for (const { row } of rows.rows) parts.push(`${schema}.${name} ${row}`)
  }
  return parts.join('\n')
}

import { and, asc, eq, getTableColumns, gt, Placeholder, sql, type SQL } from 'drizzle-orm'
import type { NodePgDatabase } from 'drizzle-orm/node-postgres'
import type pg from 'pg'
import type { ActivityTable, FastPaths } from '../fast-paths.js'
import { appColumns, appRow } from '../repos/queries.js'
import type { Activity, App } from '../types.js'
import type * as schema from './schema.js'
import * as tables from './schema.js'

/** PostgreSQL's Drizzle database: the pool's, or a transaction's (both run `execute` on their own connection). */
type PostgresDb = Pick<NodePgDatabase<typeof schema>, 'execute' | 'select'>

/**
 * PostgreSQL's fast paths (FastPaths): activity written behind without ever waiting for a row lock, and, on the pool
 * (`pool` given; not inside a transaction, where pages are never read and the portable query serves them if they
 * are), the apps page as a named statement.
 */
export function postgresFastPaths(db: PostgresDb, pool?: pg.Pool): FastPaths {
  return {
    writeActivity: (table, entries) => writeActivity(db, table, entries),
    ...(pool ? { appsPage: appsPages(db, pool) } : {}),
  }
}

/** The tables FastPaths.writeActivity writes to, with their id and time columns. */
const ACTIVITY = {
  sessions: { table: tables.sessions, id: tables.sessions.id, time: tables.sessions.lastSeenAt },
  apiKeys: { table: tables.apiKeys, id: tables.apiKeys.id, time: tables.apiKeys.lastUsedAt },
  oauthGrants: { table: tables.oauthGrants, id: tables.oauthGrants.id, time: tables.oauthGrants.lastUsedAt },
} as const

/**
 * Writes activity times ("last seen", "last used") that every process records behind, on PostgreSQL, deadlock-free
 * by construction: one statement that locks the rows it changes with `FOR UPDATE SKIP LOCKED`, so it never waits for
 * a row lock, and a transaction that never waits cannot be part of a deadlock (a cycle of transactions, each waiting
 * for a lock another holds). Rows another transaction holds at that instant (another process writing the same
 * session's time, a revocation ending it) are left out and returned, for the caller to write at its next flush.
 * A time never goes back: each row keeps the later of its time and the one written (`greatest`), whichever process
 * writes last. Several processes writing overlapping rows in different orders, each in one transaction, used to
 * deadlock (issue 24). `activity` holds each id once.
 */
async function writeActivity(db: PostgresDb, target: ActivityTable, activity: Activity): Promise<string[]> {
  if (activity.length === 0) return []
  const { table, id: idColumn, time: timeColumn } = ACTIVITY[target]
  const ids = activity.map(([id]) => id)
  const times = activity.map(([, at]) => at)
  // The ids are passed as arrays (two parameters whatever their number), unnested into rows.
  const statement: SQL = sql`
    with wanted (id, at) as (select * from unnest(${sql.param(ids)}::text[], ${sql.param(times)}::bigint[])),
    locked as (select ${idColumn} as id from ${table} where ${idColumn} in (select id from wanted) for update skip locked)
    update ${table} set ${sql.identifier(timeColumn.name)} = greatest(coalesce(${timeColumn}, 0), wanted.at)
    from wanted, locked
    where ${idColumn} = wanted.id and locked.id = wanted.id
    returning ${idColumn} as id`
  const written = new Set((await db.execute<{ id: string }>(statement)).rows.map((row) => row.id))
  return ids.filter((id) => !written.has(id))
}

/** What the PostgreSQL fast path needs of node-postgres (the types only: a SQLite server never loads `pg`). */
type PgQuery = typeof import('pg').Query
type PgPool = import('pg').Pool
type TextRow = Array<string | null>

/**
 * The apps page on the pool, off Drizzle's per-query path: building a select's SQL text was 13 % of a server's
 * CPU per service_apps_list call, and mapping its rows more. The text is built once by Drizzle (so it stays the same
 * query), then sent as a named statement: each pooled connection has PostgreSQL parse and plan it once, and later
 * calls send only its parameters. Rows come as the server's text values, decoded here (repos/queries.ts appRow).
 */
function appsPages(db: PostgresDb, pool: pg.Pool): NonNullable<FastPaths['appsPage']> {
  const apps = tables.apps
  const columns = appColumns(apps)
  const decode = textDecoders(apps, columns)
  const firstPage = namedStatement('service_mcp_apps_page_first', db.select().from(apps)
    .where(eq(apps.organizationId, sql.placeholder('org')))
    .orderBy(asc(apps.id)).limit(sql.placeholder('limit')).toSQL())
  const nextPage = namedStatement('service_mcp_apps_page_next', db.select().from(apps)
    .where(and(eq(apps.organizationId, sql.placeholder('org')), gt(apps.id, sql.placeholder('after'))))
    .orderBy(asc(apps.id)).limit(sql.placeholder('limit')).toSQL())
  // node-postgres is loaded already (the store runs on it); its Query class is taken once.
  const loading = import('pg').then((m) => textRowsQuery(m.default.Query))
  let TextRowsQuery: Awaited<typeof loading> | undefined
  return async (organizationId: string, limit: number, after?: string): Promise<{ items: App[]; more: boolean }> => {
    TextRowsQuery ??= await loading
    const [statement, values] = after === undefined
      ? [firstPage, firstPage.values({ org: organizationId, limit: limit + 1 })]
      : [nextPage, nextPage.values({ org: organizationId, after, limit: limit + 1 })]
    const rows = await run(pool, new TextRowsQuery(statement.name, statement.text, values))
    const items: App[] = []
    for (let i = 0; i < rows.length && i < limit; i++) items.push(appRow(columns, decode(rows[i]!)))
    return { items, more: rows.length > limit }
  }
}

/**
 * How each column of `apps` is read from the text PostgreSQL sends: as it is (text), or as a number (the times, int8
 * Unix milliseconds, as Drizzle's `bigint({ mode: 'number' })` reads them). A column of any other type stops the
 * start here, rather than being read wrong: give it its decoding (the unit test holds these rows to Drizzle's).
 */
function textDecoders(apps: typeof tables.apps, order: ReadonlyArray<keyof App>): (row: TextRow) => unknown[] {
  const columns = getTableColumns(apps) as Record<string, { getSQLType(): string }>
  const numeric = order.map((key) => {
    const type = columns[key]!.getSQLType()
    if (type !== 'text' && type !== 'bigint') throw new Error(`apps.${key}: no decoding of PostgreSQL ${type} in the page's fast path`)
    return type === 'bigint'
  })
  return (row) => {
    const values: unknown[] = row
    for (let i = 0; i < numeric.length; i++) if (numeric[i] && row[i] !== null) values[i] = Number(row[i])
    return values
  }
}

/**
 * node-postgres's Query does the protocol (a named statement parsed once per connection, then bound and executed);
 * this one keeps each row as the text values the server sent, instead of building node-postgres's generic result: a
 * copy of the query's config, a parser per column asked of the types and an empty row built on every execution were
 * together 7 % of a server's CPU per service_apps_list call. It overrides the handlers node-postgres calls on the query
 * it runs (the submittable protocol, which pg-cursor implements too); an error still ends it through Query's own.
 */
function textRowsQuery(Query: PgQuery) {
  return class TextRowsQuery extends Query {
    // Not `rows`: Query reads that as how many rows to fetch per execution.
    readonly received: TextRow[] = []

    constructor(name: string, text: string, values: unknown[]) {
      // Its text alone: node-postgres copies a config object (property descriptors and all), not a string.
      super(text)
      const query = this as unknown as { name: string; values: unknown[] }
      query.name = name
      query.values = values
    }

    handleRowDescription(): void {}

    handleDataRow(message: { fields: TextRow }): void {
      this.received.push(message.fields)
    }

    handleCommandComplete(): void {}

    handleReadyForQuery(): void {
      ;(this as unknown as { callback?: (err: Error | null, rows: TextRow[]) => void }).callback?.(null, this.received)
    }
  }
}

/** Runs `query` on a pooled connection: its rows, or the error PostgreSQL or the pool answered. */
function run(pool: PgPool, query: import('pg').Query): Promise<TextRow[]> {
  const submit = pool.query as unknown as (q: import('pg').Query, done: (err: Error | undefined, rows: TextRow[]) => void) => void
  return new Promise((resolve, reject) => submit.call(pool, query, (err, rows) => (err ? reject(err) : resolve(rows))))
}

/**
 * A statement built by Drizzle (`toSQL()` of a query whose values are all placeholders): its name, text, and the
 * values of its placeholders in order.
 */
function namedStatement(name: string, built: { sql: string; params: unknown[] }) {
  const names = built.params.map((p) => {
    if (!(p instanceof Placeholder)) throw new Error(`${name}: every value of a named statement must be a placeholder`)
    return p.name
  })
  return { name, text: built.sql, values: (values: Record<string, unknown>) => names.map((n) => values[n]) }
}

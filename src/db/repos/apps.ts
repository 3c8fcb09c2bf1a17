import { and, asc, count, eq, getTableColumns, gt, Placeholder, sql } from 'drizzle-orm'
import { newId } from '../../lib/crypto.js'
import { apps as appsTable } from '../sqlite/schema.js'
import type { Store } from '../store.js'
import { uniqueOrConflict } from './conflict.js'
import type { App } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { App }

/**
 * A bound `LIMIT ?` makes SQLite re-prepare the statement on every execution (the planner may use a bound LIMIT, so
 * binding one expires the statement): 7.6 µs instead of 2.1 µs per empty page. Wrapping it in CAST hides the value
 * from the planner. Drizzle renders an SQL object in limit() as is; its type only admits a Placeholder.
 */
function boundLimit(name: string): Placeholder {
  return sql`cast(${sql.placeholder(name)} as integer)` as unknown as Placeholder
}

/**
 * Pages are read as arrays and made into rows here, in the order of the table's columns (what `select()` selects):
 * Drizzle maps every value of every row through generic checks, which was 40 % of a 20-app page. The columns are
 * plain text and integers, stored as they are read; a unit test compares these rows with Drizzle's own.
 */
const APP_COLUMNS = Object.keys(getTableColumns(appsTable)) as Array<keyof App>

function appRow(values: unknown[]): App {
  const row: Record<string, unknown> = {}
  for (let i = 0; i < APP_COLUMNS.length; i++) row[APP_COLUMNS[i]!] = values[i]
  return row as App
}

const nameTaken = (name: string) => `An app named ${name} already exists in your organization`

/** Apps, always addressed through their organization: an id from another organization finds nothing. */
export function appsRepo(store: Store) {
  const { db, dialect, t: { apps, deployments } } = store
  const page = dialect === 'sqlite' ? sqlitePages(db, apps) : postgresPages(db, apps)

  /** A page through Drizzle's query builder: inside a PostgreSQL transaction, where the pool's fast path does not reach. */
  async function drizzlePage(organizationId: string, limit: number, after?: string): Promise<{ items: App[]; more: boolean }> {
    const rows = await db.select().from(apps)
      .where(after === undefined ? eq(apps.organizationId, organizationId) : and(eq(apps.organizationId, organizationId), gt(apps.id, after)))
      .orderBy(asc(apps.id)).limit(limit + 1)
    return { items: rows.slice(0, limit), more: rows.length > limit }
  }

  return {
    /** Creates an app; CONFLICT when the name is taken in the organization. */
    async create(input: { organizationId: string; name: string; description?: string; pipeline?: string; createdBy?: string | null }): Promise<App> {
      const now = Date.now()
      const row: App = {
        id: newId('app'),
        organizationId: input.organizationId,
        name: input.name,
        description: input.description ?? '',
        pipeline: input.pipeline ?? 'default',
        createdBy: input.createdBy ?? null,
        createdAt: now,
        updatedAt: now,
      }
      await uniqueOrConflict(() => db.insert(apps).values(row).execute(), nameTaken(row.name))
      return row
    },
    /** Returns up to `limit` apps of the organization after `after` (exclusive), plus whether more follow. */
    page(organizationId: string, limit: number, after?: string): Promise<{ items: App[]; more: boolean }> {
      if (page) return page(organizationId, limit, after)
      return drizzlePage(organizationId, limit, after)
    },
    async byId(organizationId: string, id: string): Promise<App | undefined> {
      return (await db.select().from(apps).where(and(eq(apps.organizationId, organizationId), eq(apps.id, id))))[0]
    },
    /** Applies the given changes; undefined when the app is not in the organization; CONFLICT when the name is taken. */
    async update(organizationId: string, id: string, changes: { name?: string; description?: string; pipeline?: string }): Promise<App | undefined> {
      const set: Partial<App> = { updatedAt: Date.now() }
      if (changes.name !== undefined) set.name = changes.name
      if (changes.description !== undefined) set.description = changes.description
      if (changes.pipeline !== undefined) set.pipeline = changes.pipeline
      const rows = await uniqueOrConflict(() => db.update(apps).set(set).where(and(eq(apps.organizationId, organizationId), eq(apps.id, id))).returning().execute(), nameTaken(changes.name ?? ''))
      return rows[0]
    },
    /** Deletes the app with its env vars and deployments (cascade); false when it is not in the organization. */
    async delete(organizationId: string, id: string): Promise<boolean> {
      const deleted = await db.delete(apps).where(and(eq(apps.organizationId, organizationId), eq(apps.id, id))).returning({ id: apps.id })
      return deleted.length === 1
    },
    async deploymentCount(organizationId: string, id: string): Promise<number> {
      const [row] = await db.select({ n: count() }).from(deployments)
        .where(and(eq(deployments.organizationId, organizationId), eq(deployments.appId, id)))
      return row?.n ?? 0
    },
  }
}

/**
 * SQLite's pages: keyset pagination on the time-sortable id, scoped by organization, prepared once (the hot path of
 * service_apps_list) and read as arrays (appRow).
 */
function sqlitePages(db: Store['db'], apps: Store['t']['apps']) {
  const firstPage = db.select().from(apps)
    .where(eq(apps.organizationId, sql.placeholder('org')))
    .orderBy(asc(apps.id)).limit(boundLimit('limit')).prepare()
  const nextPage = db.select().from(apps)
    .where(and(eq(apps.organizationId, sql.placeholder('org')), gt(apps.id, sql.placeholder('after'))))
    .orderBy(asc(apps.id)).limit(boundLimit('limit')).prepare()
  return async (organizationId: string, limit: number, after?: string): Promise<{ items: App[]; more: boolean }> => {
    const rows = after === undefined
      ? firstPage.values({ org: organizationId, limit: limit + 1 })
      : nextPage.values({ org: organizationId, after, limit: limit + 1 })
    return pageOf(rows as unknown[][], limit)
  }
}

function pageOf(rows: unknown[][], limit: number): { items: App[]; more: boolean } {
  const items: App[] = []
  for (let i = 0; i < rows.length && i < limit; i++) items.push(appRow(rows[i]!))
  return { items, more: rows.length > limit }
}

/** What the PostgreSQL fast path needs of node-postgres (the types only: a SQLite server never loads `pg`). */
type PgQuery = typeof import('pg').Query
type PgPool = import('pg').Pool
type TextRow = Array<string | null>

/**
 * PostgreSQL's pages, on the pool, off Drizzle's per-query path: building a select's SQL text was 13 % of a server's
 * CPU per service_apps_list call, and mapping its rows more. The text is built once by Drizzle (so it stays the same
 * query), then sent as a named statement: each pooled connection has PostgreSQL parse and plan it once, and later
 * calls send only its parameters. Rows come as the server's text values, decoded here (appRow). Undefined inside a
 * transaction (the store's `db` is then the transaction, not the pool): pages are never read there, and Drizzle's path
 * serves them if they are.
 */
function postgresPages(db: Store['db'], apps: Store['t']['apps']) {
  const pool = (db as unknown as { $client?: PgPool }).$client
  if (pool === undefined || typeof pool.query !== 'function') return undefined
  const decode = textDecoders(apps)
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
    for (let i = 0; i < rows.length && i < limit; i++) items.push(appRow(decode(rows[i]!)))
    return { items, more: rows.length > limit }
  }
}

/**
 * How each column of `apps` is read from the text PostgreSQL sends: as it is (text), or as a number (the times, int8
 * Unix milliseconds, as Drizzle's `bigint({ mode: 'number' })` reads them). A column of any other type stops the
 * start here, rather than being read wrong: give it its decoding (the unit test holds these rows to Drizzle's).
 */
function textDecoders(apps: Store['t']['apps']): (row: TextRow) => unknown[] {
  const columns = getTableColumns(apps) as Record<string, { getSQLType(): string }>
  const numeric = APP_COLUMNS.map((key) => {
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

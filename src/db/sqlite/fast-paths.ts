import { eq, sql, type Placeholder } from 'drizzle-orm'
import type { FastPaths } from '../fast-paths.js'
import { accessTokenStateQuery, apiKeyCandidatesQuery, appColumns, appRow, appsPageQuery } from '../repos/queries.js'
import type { Store } from '../store.js'
import type { App, SqliteConnection } from '../types.js'

/**
 * SQLite's fast paths (FastPaths): the statements of the hot paths, prepared once on the one connection instead of
 * being built by Drizzle at every call (the session lookup and initialize, API-key and access-token lookups, the apps
 * page, the write-behind of session activity, a deployment's output lines, the readiness ping). better-sqlite3 answers
 * each at once. `inTransaction` runs work in one transaction of the store they were prepared for.
 */
export function sqliteFastPaths(on: Pick<Store, 'db' | 't'>, connection: SqliteConnection, inTransaction: (work: () => Promise<void>) => Promise<void>): FastPaths {
  const { db, t: { deploymentLogs, deployments, sessions } } = on
  const sessionById = db.select().from(sessions).where(eq(sessions.id, sql.placeholder('id'))).prepare()
  const insertSession = db.insert(sessions).values({
    id: sql.placeholder('id'),
    credential: sql.placeholder('credential'),
    membershipId: sql.placeholder('membershipId'),
    organizationId: sql.placeholder('organizationId'),
    protocolVersion: sql.placeholder('protocolVersion'),
    clientInfo: sql.placeholder('clientInfo'),
    clientCapabilities: sql.placeholder('clientCapabilities'),
    logLevel: sql.placeholder('logLevel'),
    initializedAt: sql.placeholder('initializedAt'),
    createdAt: sql.placeholder('createdAt'),
    lastSeenAt: sql.placeholder('lastSeenAt'),
    endedAt: sql.placeholder('endedAt'),
  }).prepare()
  // A time never goes back (another process may have written a later one).
  const touchSession = db.update(sessions).set({ lastSeenAt: sql`max(${sessions.lastSeenAt}, ${sql.placeholder('at')})` })
    .where(eq(sessions.id, sql.placeholder('id'))).prepare()
  const candidates = apiKeyCandidatesQuery(on, sql.placeholder('lookup')).prepare()
  const tokenState = accessTokenStateQuery(on, sql.placeholder('jti')).prepare()
  const appendLine = db.insert(deploymentLogs).values({
    deploymentId: sql.placeholder('deploymentId'),
    seq: sql.placeholder('seq'),
    stream: sql.placeholder('stream'),
    line: sql.placeholder('line'),
    at: sql.placeholder('at'),
  }).prepare()
  const addOutputBytes = db.update(deployments).set({ outputBytes: sql`${deployments.outputBytes} + ${sql.placeholder('bytes')}` })
    .where(eq(deployments.id, sql.placeholder('id'))).prepare()
  // Reads the schema (a page of the file, or of the WAL), not just a constant: a connection that is closed, or a file
  // SQLite can no longer read, fails here.
  const schemaRead = connection.prepare('SELECT count(*) FROM sqlite_schema').pluck()

  return {
    async ping() {
      schemaRead.get()
    },
    async sessionById(id) {
      return sessionById.get({ id })
    },
    async insertSession(row) {
      await insertSession.run(row)
    },
    async touchSessions(entries) {
      await inTransaction(async () => {
        for (const [id, at] of entries) await touchSession.run({ id, at })
      })
      return []
    },
    appsPage: appsPages(on),
    async apiKeyCandidates(lookup) {
      return candidates.all({ lookup })
    },
    async accessTokenState(jti) {
      return tokenState.get({ jti })
    },
    async appendDeploymentLines(lines, bytes) {
      await inTransaction(async () => {
        for (const line of lines) await appendLine.run(line)
        for (const [id, n] of bytes) await addOutputBytes.run({ id, bytes: n })
      })
    },
  }
}

/**
 * A bound `LIMIT ?` makes SQLite re-prepare the statement on every execution (the planner may use a bound LIMIT, so
 * binding one expires the statement): 7.6 µs instead of 2.1 µs per empty page. Wrapping it in CAST hides the value
 * from the planner. Drizzle renders an SQL object in limit() as is; its type only admits a Placeholder.
 */
function boundLimit(name: string): Placeholder {
  return sql`cast(${sql.placeholder(name)} as integer)` as unknown as Placeholder
}

/** The apps page (the hot path of service_apps_list), prepared once and read as arrays (repos/queries.ts appRow). */
function appsPages(on: Pick<Store, 'db' | 't'>): NonNullable<FastPaths['appsPage']> {
  const columns = appColumns(on.t.apps)
  const firstPage = appsPageQuery(on, sql.placeholder('org'), boundLimit('limit')).prepare()
  const nextPage = appsPageQuery(on, sql.placeholder('org'), boundLimit('limit'), sql.placeholder('after')).prepare()
  return async (organizationId, limit, after) => {
    const rows = (after === undefined
      ? await firstPage.values({ org: organizationId, limit: limit + 1 })
      : await nextPage.values({ org: organizationId, after, limit: limit + 1 })) as unknown[][]
    const items: App[] = []
    for (let i = 0; i < rows.length && i < limit; i++) items.push(appRow(columns, rows[i]!))
    return { items, more: rows.length > limit }
  }
}

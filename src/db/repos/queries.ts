import { and, asc, eq, getTableColumns, gt, type Placeholder, type Table } from 'drizzle-orm'
import type { Store } from '../store.js'
import type { App } from '../types.js'

/*
 * Queries of the hot paths that the repositories run as they are and the dialects prepare once (their fast paths,
 * sqlite/fast-paths.ts and postgres/fast-paths.ts), so that both run the very same query. Apart from the repositories,
 * whose declarations the public ones reach: these name Drizzle's types.
 */

/**
 * The columns of `apps` in the order `select()` selects them: the dialects' page fast paths read rows as arrays and
 * make them into rows with appRow (Drizzle maps every value of every row through generic checks, which was 40 % of a
 * 20-app page). A unit test compares these rows with Drizzle's own.
 */
export function appColumns(apps: Table): Array<keyof App> {
  return Object.keys(getTableColumns(apps)) as Array<keyof App>
}

/** A row of `apps` from its values in the order of `columns` (appColumns). */
export function appRow(columns: ReadonlyArray<keyof App>, values: unknown[]): App {
  const row: Record<string, unknown> = {}
  for (let i = 0; i < columns.length; i++) row[columns[i]!] = values[i]
  return row as App
}

/**
 * A page of an organization's apps: keyset pagination on the time-sortable id, `limit` rows (the caller asks one more
 * than it shows, to know whether more follow). The values may be placeholders: the dialects prepare it once
 * (fast-paths.ts).
 */
export function appsPageQuery(store: Pick<Store, 'db' | 't'>, organizationId: string | Placeholder, limit: number | Placeholder, after?: string | Placeholder) {
  const { db, t: { apps } } = store
  return db.select().from(apps)
    .where(after === undefined ? eq(apps.organizationId, organizationId) : and(eq(apps.organizationId, organizationId), gt(apps.id, after)))
    .orderBy(asc(apps.id)).limit(limit)
}

/**
 * The keys whose lookup prefix is `lookup`, each joined with its live membership: what the verifier needs to
 * authenticate a request (every request with an API key). `lookup` may be a placeholder: SQLite prepares it once
 * (sqlite/fast-paths.ts).
 */
export function apiKeyCandidatesQuery(store: Pick<Store, 'db' | 't'>, lookup: string | Placeholder) {
  const { db, t: { apiKeys, memberships, organizations, users } } = store
  return db
    .select({
      id: apiKeys.id,
      hash: apiKeys.hash,
      scopes: apiKeys.scopes,
      expiresAt: apiKeys.expiresAt,
      revokedAt: apiKeys.revokedAt,
      membershipId: memberships.id,
      role: memberships.role,
      userId: users.id,
      userDisabledAt: users.disabledAt,
      organizationId: organizations.id,
    })
    .from(apiKeys)
    .innerJoin(memberships, eq(memberships.id, apiKeys.membershipId))
    .innerJoin(users, eq(users.id, memberships.userId))
    .innerJoin(organizations, eq(organizations.id, memberships.organizationId))
    .where(eq(apiKeys.lookup, lookup))
}

/**
 * What /mcp needs to know about an access token once its signature checked out (the cache-miss path of every
 * OAuth-authenticated request). `jti` may be a placeholder: SQLite prepares it once (sqlite/fast-paths.ts).
 */
export function accessTokenStateQuery(store: Pick<Store, 'db' | 't'>, jti: string | Placeholder) {
  const { db, t: { accessTokens, memberships, oauthGrants, users } } = store
  return db.select({
    jti: accessTokens.jti,
    revokedAt: accessTokens.revokedAt,
    grantRevokedAt: oauthGrants.revokedAt,
    grantId: oauthGrants.id,
    clientId: oauthGrants.clientId,
    membershipId: oauthGrants.membershipId,
    userId: oauthGrants.userId,
    organizationId: oauthGrants.organizationId,
    role: memberships.role,
    userDisabledAt: users.disabledAt,
  }).from(accessTokens)
    .innerJoin(oauthGrants, eq(oauthGrants.id, accessTokens.grantId))
    .innerJoin(users, eq(users.id, oauthGrants.userId))
    .leftJoin(memberships, and(eq(memberships.id, oauthGrants.membershipId), eq(memberships.userId, oauthGrants.userId)))
    .where(eq(accessTokens.jti, jti))
}

import type { AccessTokenState, Activity, ApiKeyCandidate, App, DeploymentLogLine, SessionRow } from './types.js'

/**
 * Statements a dialect runs its own way where the portable query of the repository would be slower (a hot path) or
 * unsafe (a deadlock between processes): each is named, typed and optional. A repository asks its store's
 * `fastPaths` for one by name and runs its portable query where the dialect has none, so each must answer exactly
 * what that query does (the repository tests run on both dialects). Implemented in sqlite/fast-paths.ts and
 * postgres/fast-paths.ts; nothing here names a dialect or a driver (docs/decisions/storage.md).
 */
export interface FastPaths {
  /** The readiness check's ping (GET /readyz): throws when the database does not answer. */
  ping?(): Promise<void>
  /** sessions.byId. */
  sessionById?(id: string): Promise<SessionRow | undefined>
  /** sessions.insert (and each row of insertMany, inside its transaction). */
  insertSession?(row: SessionRow): Promise<void>
  /** sessions.touchMany: each session's time only moves forward; returns the ids left for the next flush. */
  touchSessions?(entries: Activity): Promise<string[]>
  /** apps.page: up to `limit` apps of the organization after `after`, and whether more follow. */
  appsPage?(organizationId: string, limit: number, after?: string): Promise<{ items: App[]; more: boolean }>
  /** apiKeys.candidatesByLookup (every request with an API key). */
  apiKeyCandidates?(lookup: string): Promise<ApiKeyCandidate[]>
  /** oauthGrants.accessTokenState (every OAuth-authenticated request whose token is not cached). */
  accessTokenState?(jti: string): Promise<AccessTokenState | undefined>
  /** deployments.appendLines: every line, in order, and each run's added `bytes` to its output_bytes, in one transaction. */
  appendDeploymentLines?(lines: readonly DeploymentLogLine[], bytes: ReadonlyMap<string, number>): Promise<void>
  /**
   * Writes activity times written behind from memory ("last seen", "last used") to `table`'s rows by id, never moving
   * one back, without waiting for a row lock another process holds: returns the ids it could not write now, for the
   * next flush. Where processes share the database, one statement per flush that never waits cannot deadlock with
   * theirs (postgres/fast-paths.ts).
   */
  writeActivity?(table: ActivityTable, entries: Activity): Promise<string[]>
}

/** The tables whose activity times are written behind (FastPaths.writeActivity). */
export type ActivityTable = 'sessions' | 'apiKeys' | 'oauthGrants'

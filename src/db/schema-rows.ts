/**
 * The rows of types.ts are declared by hand (the public declarations must not reach Drizzle's, see types.ts); this
 * file makes the compiler hold them to the schema: each must be exactly what Drizzle infers from its table, so a column
 * added, removed or retyped in schema.ts without the same change in types.ts fails `npm run typecheck` here. Types
 * only: nothing imports this module.
 */
import type * as schema from './sqlite/schema.js'
import type * as postgres from './postgres/schema.js'
import type * as rows from './types.js'

/** true when A and B have the same keys and each is assignable to the other. */
type Exactly<A, B> = [A] extends [B] ? ([B] extends [A] ? ([keyof A] extends [keyof B] ? ([keyof B] extends [keyof A] ? true : false) : false) : false) : false

type Checks = {
  organizations: Exactly<rows.Organization, typeof schema.organizations.$inferSelect>
  users: Exactly<rows.User, typeof schema.users.$inferSelect>
  memberships: Exactly<rows.Membership, typeof schema.memberships.$inferSelect>
  apiKeys: Exactly<rows.ApiKey, typeof schema.apiKeys.$inferSelect>
  sessions: Exactly<rows.SessionRow, typeof schema.sessions.$inferSelect>
  apps: Exactly<rows.App, typeof schema.apps.$inferSelect>
  oauthClients: Exactly<rows.OAuthClient, typeof schema.oauthClients.$inferSelect>
  signingKeys: Exactly<rows.SigningKey, typeof schema.signingKeys.$inferSelect>
  requestStateKeys: Exactly<rows.RequestStateKey, typeof schema.requestStateKeys.$inferSelect>
  authorizationRequests: Exactly<rows.AuthorizationRequest, typeof schema.authorizationRequests.$inferSelect>
  oauthGrants: Exactly<rows.OAuthGrant, typeof schema.oauthGrants.$inferSelect>
  authorizationCodes: Exactly<rows.AuthorizationCode, typeof schema.authorizationCodes.$inferSelect>
  refreshTokens: Exactly<rows.RefreshToken, typeof schema.refreshTokens.$inferSelect>
  envVars: Exactly<rows.EnvVar, typeof schema.envVars.$inferSelect>
  deployments: Exactly<rows.Deployment, typeof schema.deployments.$inferSelect>
  deploymentLogs: Exactly<rows.DeploymentLogLine, typeof schema.deploymentLogs.$inferSelect>
  auditLog: Exactly<rows.AuditEntry, typeof schema.auditLog.$inferSelect>
  auditCheckpoints: Exactly<rows.AuditCheckpointRow, typeof schema.auditCheckpoints.$inferSelect>
  organizationQuotas: Exactly<rows.OrganizationQuota, typeof schema.organizationQuotas.$inferSelect>
  idempotencyRecords: Exactly<rows.IdempotencyRecord, typeof schema.idempotencyRecords.$inferSelect>
  tasks: Exactly<rows.TaskRow, typeof schema.tasks.$inferSelect>
  processes: Exactly<rows.ProcessRow, typeof schema.processes.$inferSelect>
  signInFlows: Exactly<rows.SignInFlow, typeof schema.signInFlows.$inferSelect>
  browserInputs: Exactly<rows.BrowserInput, typeof schema.browserInputs.$inferSelect>
  userIdentities: Exactly<rows.UserIdentity, typeof schema.userIdentities.$inferSelect>
  usedAssertions: Exactly<rows.UsedAssertion, typeof schema.usedAssertions.$inferSelect>
}

/** Fails to compile, naming the table, when a row differs from it (its entry's type is then `false`). */
export const ROWS_MATCH_SCHEMA: Checks = {
  organizations: true,
  users: true,
  memberships: true,
  apiKeys: true,
  sessions: true,
  apps: true,
  oauthClients: true,
  signingKeys: true,
  requestStateKeys: true,
  authorizationRequests: true,
  oauthGrants: true,
  authorizationCodes: true,
  refreshTokens: true,
  envVars: true,
  deployments: true,
  deploymentLogs: true,
  auditLog: true,
  auditCheckpoints: true,
  organizationQuotas: true,
  idempotencyRecords: true,
  tasks: true,
  processes: true,
  signInFlows: true,
  browserInputs: true,
  userIdentities: true,
  usedAssertions: true,
}

/**
 * The repositories are written once, against the SQLite tables, and run on PostgreSQL with the tables of
 * postgres/schema.ts in their place (postgres/store.ts). That holds only while every table of one schema has its namesake in
 * the other, reading and writing the very same rows: this fails to compile, naming the table, when they differ.
 */
type Tables<S> = { [K in keyof S as S[K] extends { $inferSelect: object } ? K : never]: S[K] }
type SqliteTables = Tables<typeof schema>
type PostgresTables = Tables<typeof postgres>
type SameTables = {
  [K in keyof SqliteTables | keyof PostgresTables]: K extends keyof SqliteTables
    ? K extends keyof PostgresTables
      ? SqliteTables[K] extends { $inferSelect: infer S; $inferInsert: infer I }
        ? PostgresTables[K] extends { $inferSelect: infer PS; $inferInsert: infer PI }
          ? Exactly<S, PS> extends true ? Exactly<I, PI> : false
          : false
        : false
      : false
    : false
}

/** The tables whose rows differ between the dialects (or that one lacks); none. */
type Mismatched = { [K in keyof SameTables]: SameTables[K] extends true ? never : K }[keyof SameTables]

/** Fails to compile when a table differs, naming it: `true` is not assignable to `"deployments"`. */
export const POSTGRES_ROWS_MATCH_SQLITE: [Mismatched] extends [never] ? true : Mismatched = true

/**
 * What the rest of the server sees of the database, and embedders through the public types (`ToolContext.repos`,
 * `Principal.role`, the `database` option), declared without Drizzle and better-sqlite3.
 *
 * Why: Drizzle's own declaration files do not type-check on their own (they import optional peer packages such as
 * `gel` and `mysql2`, and fail further checks without them). Any public type that reached them would make an
 * embedder's `tsc` fail unless it skips checking libraries (`skipLibCheck`). So rows are plain interfaces here, and
 * schema-rows.ts checks at compile time that each is exactly what Drizzle infers from its table; the connection types
 * are opaque here and get their Drizzle and better-sqlite3 members from connection-types.ts (module augmentation),
 * which only the server's own compilation includes. Nothing here may import drizzle-orm or better-sqlite3.
 */

// Roles are plain vocabulary (lib/roles.ts), checked by authorization; rows name them.
import type { Role } from '../lib/roles.js'
export type { Role }

export const DEPLOYMENT_STATUSES = ['queued', 'running', 'succeeded', 'failed', 'cancelled', 'interrupted'] as const
export type DeploymentStatus = (typeof DEPLOYMENT_STATUSES)[number]

export const IDEMPOTENCY_STATUSES = ['pending', 'running', 'finished', 'interrupted'] as const
export type IdempotencyStatus = (typeof IDEMPOTENCY_STATUSES)[number]

export const TASK_STATUSES = ['working', 'input_required', 'completed', 'failed', 'cancelled'] as const
export type TaskStatus = (typeof TASK_STATUSES)[number]
/** A value asked for on a browser page (browser_inputs): waiting, saved there, refused there, or written by its call. */
export const BROWSER_INPUT_STATUSES = ['pending', 'submitted', 'declined', 'used'] as const
export type BrowserInputStatus = (typeof BROWSER_INPUT_STATUSES)[number]

/** Where an OAuth client's record comes from: registration (RFC 7591) or its Client ID Metadata Document. */
export const CLIENT_SOURCES = ['registration', 'metadata_document'] as const

/**
 * `head`: a signed head of an organization's audit chain; `start`: where the kept chain starts after a purge, its
 * `hash` being the prev_hash of the first kept entry (docs/decisions/audit-chain.md).
 */
/**
 * The per-organization quotas (issue 29; their settings and checks: src/limits/quotas.ts): apps, env vars of one app,
 * deployments queued or running at once, and megabytes of deployment output stored.
 */
export const QUOTA_NAMES = ['apps', 'env_vars_per_app', 'concurrent_deployments', 'deployment_output_mb'] as const

export type OrganizationQuota = {
  organizationId: string
  name: (typeof QUOTA_NAMES)[number]
  value: number
  updatedAt: number
}

export const AUDIT_CHECKPOINT_KINDS = ['head', 'start'] as const

export const AUDIT_OUTCOMES = ['succeeded', 'failed', 'denied', 'confirmed', 'declined', 'timed_out', 'cancelled'] as const

/** SQLite's Drizzle database, on its one better-sqlite3 connection (its members: connection-types.ts). */
export interface Db {}

/**
 * The query builder the repositories write to, whichever the database: the part of Drizzle's builder both dialects
 * share, awaited (its members: connection-types.ts). Each dialect's store hands its own Drizzle database over as this.
 */
export interface QueryBuilder {}

/** The tables the repositories query, by name (its members, the schema's tables: connection-types.ts). */
export interface Tables {}

/** The raw better-sqlite3 connection, for pragmas and closing (its members: connection-types.ts). */
export interface SqliteConnection {}

export interface DatabaseHandle {
  db: Db
  /** The raw connection, for pragmas and closing only: queries go through the repositories. */
  sqlite: SqliteConnection
  close(): void
}

// Rows, one per table the repositories return, as object types (which, unlike interfaces, pass as Record<string, unknown>),
// in the column order of schema.ts. Times are Unix milliseconds.

export type Organization = {
  id: string
  slug: string
  name: string
  createdAt: number
}

export type User = {
  id: string
  email: string
  name: string
  passwordHash: string | null
  createdAt: number
  disabledAt: number | null
}

export type Membership = {
  id: string
  userId: string
  organizationId: string
  role: Role
  createdAt: number
}

export type ApiKey = {
  id: string
  membershipId: string
  name: string
  displayPrefix: string
  lookup: string
  hash: string
  scopes: string
  createdAt: number
  lastUsedAt: number | null
  expiresAt: number | null
  revokedAt: number | null
}

export type SessionRow = {
  id: string
  credential: string
  membershipId: string
  organizationId: string
  protocolVersion: string
  clientInfo: { name: string; version: string }
  clientCapabilities: Record<string, unknown>
  logLevel: string
  initializedAt: number | null
  createdAt: number
  lastSeenAt: number
  endedAt: number | null
}

export type App = {
  id: string
  organizationId: string
  name: string
  description: string
  pipeline: string
  createdBy: string | null
  createdAt: number
  updatedAt: number
}

export type OAuthClient = {
  id: string
  name: string
  redirectUris: string[]
  grantTypes: string[]
  scope: string
  source: (typeof CLIENT_SOURCES)[number]
  createdAt: number
  lastUsedAt: number | null
}

export type SigningKey = {
  kid: string
  alg: string
  publicJwk: Record<string, string>
  privateKey: string
  createdAt: number
  retiredAt: number | null
}

export type RequestStateKey = {
  kid: string
  secret: string
  createdAt: number
  retiredAt: number | null
}

export type AuthorizationRequest = {
  id: string
  browserBinding: string
  clientId: string
  redirectUri: string
  scope: string
  state: string
  codeChallenge: string
  resource: string
  clientAddress: string | null
  createdAt: number
  expiresAt: number
  consumedAt: number | null
}

export type OAuthGrant = {
  id: string
  clientId: string
  userId: string
  membershipId: string
  organizationId: string
  scope: string
  resource: string
  createdAt: number
  lastUsedAt: number | null
  expiresAt: number
  revokedAt: number | null
  revokedReason: string | null
}

export type AuthorizationCode = {
  hash: string
  clientId: string
  redirectUri: string
  userId: string
  membershipId: string
  organizationId: string
  scope: string
  resource: string
  codeChallenge: string
  createdAt: number
  expiresAt: number
  consumedAt: number | null
  grantId: string | null
}

export type RefreshToken = {
  hash: string
  grantId: string
  createdAt: number
  expiresAt: number
  usedAt: number | null
}

export type EnvVar = {
  id: string
  appId: string
  organizationId: string
  name: string
  ciphertext: string
  createdAt: number
  updatedAt: number
  updatedBy: string | null
}

export type Deployment = {
  id: string
  appId: string
  organizationId: string
  kind: 'deploy' | 'rollback'
  rollbackOf: string | null
  pipeline: string
  status: DeploymentStatus
  createdBy: string | null
  createdAt: number
  startedAt: number | null
  finishedAt: number | null
  exitCode: number | null
  outcome: string | null
  pgid: number | null
  /** The server process running it while queued or running. */
  owner: string | null
  /** Bytes of output stored for it: what the organization's stored-output quota counts. */
  outputBytes: number
  /** When retention deleted its output; null while it is kept. */
  outputPurgedAt: number | null
}

export type DeploymentLogLine = {
  deploymentId: string
  seq: number
  stream: 'stdout' | 'stderr' | 'system'
  line: string
  at: number
}

export type AuditEntry = {
  id: string
  organizationId: string
  userId: string | null
  membershipId: string | null
  credentialKind: string
  credentialId: string | null
  clientId: string | null
  action: string
  targetType: string | null
  targetId: string | null
  outcome: (typeof AUDIT_OUTCOMES)[number]
  details: Record<string, unknown> | null
  at: number
  /** Its place in the organization's audit chain; null only for an entry written before the chain existed. */
  seq: number | null
  prevHash: string | null
  hash: string | null
}

export type AuditCheckpointRow = {
  organizationId: string
  kind: (typeof AUDIT_CHECKPOINT_KINDS)[number]
  seq: number
  hash: string
  at: number
  kid: string
  jws: string
}

export type IdempotencyRecord = {
  sessionId: string
  membershipId: string
  organizationId: string
  requestId: string
  tool: string
  status: IdempotencyStatus
  result: Record<string, unknown> | null
  createdAt: number
  updatedAt: number
  expiresAt: number
  /** The server process running the call while pending or running. */
  owner: string | null
  /** The call holding the record while pending or running (its begin's token); null on records older than claims. */
  claim: string | null
}

export type TaskRow = {
  id: string
  membershipId: string
  organizationId: string
  tool: string
  status: TaskStatus
  statusMessage: string | null
  result: Record<string, unknown> | null
  error: Record<string, unknown> | null
  cancelRequestedAt: number | null
  createdAt: number
  updatedAt: number
  expiresAt: number
  /** The server process running the task while it is working. */
  owner: string | null
  /** While `input_required`: the requests still unanswered, by key. */
  inputRequests: Record<string, unknown> | null
  /** Answers given with tasks/update, not yet taken by the work. */
  inputResponses: Record<string, unknown> | null
}

/** A server process serving the database, alive while its lease lasts (sqlite/schema.ts `processes`). */
export type ProcessRow = {
  id: string
  host: string
  pid: number
  startedAt: number
  leaseUntil: number
}

/**
 * Whose work in progress a recovery touches (coordination/process-registry.ts): at start, whatever no live process owns
 * (`live`: the ids alive now, this one included; rows without an owner predate the registry); later, exactly the work
 * of processes whose lease lapsed (`dead`). Here, free of Drizzle's types, since repository signatures use it.
 */
export type Abandoned = { live: readonly string[] } | { dead: readonly string[] }

/** What the verifier needs to authenticate a request: the key row joined with its live membership. */
export type ApiKeyCandidate = {
  id: string
  hash: string
  scopes: string
  expiresAt: number | null
  revokedAt: number | null
  membershipId: string
  role: Role
  userId: string
  userDisabledAt: number | null
  organizationId: string
}

/** What /mcp needs to know about an access token once its signature checked out. */
export type AccessTokenState = {
  jti: string
  revokedAt: number | null
  grantRevokedAt: number | null
  grantId: string
  clientId: string
  membershipId: string
  userId: string
  organizationId: string
  role: Role | null
  userDisabledAt: number | null
}

/** Activity times written behind from memory (a session's last request, a key's last use): (row id, time in ms). */
export type Activity = ReadonlyArray<readonly [string, number]>

export type SignInFlow = {
  id: string
  provider: string
  browserBinding: string
  nonce: string
  codeVerifier: string
  returnTo: string
  createdAt: number
  expiresAt: number
}

/**
 * An env var value a tool call asked the person to type on our own page (service_env_set_in_browser): the value never
 * passes through the client. `ciphertext` is sealed for the var's app and name, null until the page saves it.
 */
export type BrowserInput = {
  id: string
  membershipId: string
  organizationId: string
  userId: string
  appId: string
  name: string
  status: BrowserInputStatus
  ciphertext: string | null
  createdAt: number
  expiresAt: number
}

export type UserIdentity = {
  provider: string
  subject: string
  userId: string
  email: string
  createdAt: number
  lastSignInAt: number | null
}

export type UsedAssertion = {
  issuer: string
  jti: string
  expiresAt: number
}

import { sql } from 'drizzle-orm'
import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from 'drizzle-orm/sqlite-core'
import { ROLES } from '../../lib/roles.js'
import { AUDIT_CHECKPOINT_KINDS, AUDIT_OUTCOMES, BROWSER_INPUT_STATUSES, CLIENT_SOURCES, DEPLOYMENT_STATUSES, IDEMPOTENCY_STATUSES, QUOTA_NAMES, TASK_STATUSES } from '../types.js'

/**
 * The database schema. drizzle/ is generated from this file by `npm run db:generate` and never edited by hand;
 * `npm run check:generated` fails when the two drift. Times are Unix milliseconds.
 */

const createdAt = () => integer('created_at').notNull()

// The values of enum columns live in types.ts, which the public declarations may import (this file they may not).
export { AUDIT_OUTCOMES, CLIENT_SOURCES, DEPLOYMENT_STATUSES, IDEMPOTENCY_STATUSES, TASK_STATUSES } from '../types.js'
export type { DeploymentStatus, IdempotencyStatus, TaskStatus } from '../types.js'

export const organizations = sqliteTable('organizations', {
  id: text('id').primaryKey(),
  slug: text('slug').notNull(),
  name: text('name').notNull(),
  createdAt: createdAt(),
}, (t) => [uniqueIndex('organizations_slug_idx').on(t.slug)])

export const users = sqliteTable('users', {
  id: text('id').primaryKey(),
  email: text('email').notNull(),
  name: text('name').notNull(),
  passwordHash: text('password_hash'),
  createdAt: createdAt(),
  disabledAt: integer('disabled_at'),
}, (t) => [uniqueIndex('users_email_idx').on(t.email)])

export const memberships = sqliteTable('memberships', {
  id: text('id').primaryKey(),
  userId: text('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
  organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
  role: text('role', { enum: ROLES }).notNull(),
  createdAt: createdAt(),
}, (t) => [
  uniqueIndex('memberships_user_org_idx').on(t.userId, t.organizationId),
  index('memberships_org_idx').on(t.organizationId),
])

export const apiKeys = sqliteTable('api_keys', {
  id: text('id').primaryKey(),
  membershipId: text('membership_id').notNull().references(() => memberships.id, { onDelete: 'cascade' }),
  name: text('name').notNull(),
  /** First characters of the key, shown in listings so a person can tell keys apart. */
  displayPrefix: text('display_prefix').notNull(),
  /** First 16 hex characters of the SHA-256: an index to find candidates; the full hash is compared in constant time. */
  lookup: text('lookup').notNull(),
  hash: text('hash').notNull(),
  scopes: text('scopes').notNull(),
  createdAt: createdAt(),
  lastUsedAt: integer('last_used_at'),
  expiresAt: integer('expires_at'),
  revokedAt: integer('revoked_at'),
}, (t) => [index('api_keys_lookup_idx').on(t.lookup), index('api_keys_membership_idx').on(t.membershipId)])

export const sessions = sqliteTable('sessions', {
  id: text('id').primaryKey(),
  /** What authenticated the initialize: `key:<api key id>` or `jwt:<jti>`. A session is only usable with it. */
  credential: text('credential').notNull(),
  membershipId: text('membership_id').notNull().references(() => memberships.id, { onDelete: 'cascade' }),
  organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
  protocolVersion: text('protocol_version').notNull(),
  clientInfo: text('client_info', { mode: 'json' }).$type<{ name: string; version: string }>().notNull(),
  clientCapabilities: text('client_capabilities', { mode: 'json' }).$type<Record<string, unknown>>().notNull(),
  logLevel: text('log_level').notNull().default(sql`'info'`),
  initializedAt: integer('initialized_at'),
  createdAt: createdAt(),
  lastSeenAt: integer('last_seen_at').notNull(),
  /** Set when the session is closed (DELETE) or ended (credential revoked); the row is purged later. */
  endedAt: integer('ended_at'),
}, (t) => [
  index('sessions_credential_idx').on(t.credential),
  index('sessions_last_seen_idx').on(t.lastSeenAt),
])

export const apps = sqliteTable('apps', {
  id: text('id').primaryKey(),
  organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
  name: text('name').notNull(),
  description: text('description').notNull().default(''),
  /** Name of the operator-configured pipeline that deploys it (config file `pipelines`). */
  pipeline: text('pipeline').notNull().default('default'),
  createdBy: text('created_by').references(() => users.id, { onDelete: 'set null' }),
  createdAt: createdAt(),
  updatedAt: integer('updated_at').notNull(),
}, (t) => [
  uniqueIndex('apps_org_name_idx').on(t.organizationId, t.name),
  // Keyset pages walk (organization, id) without sorting the organization's apps.
  index('apps_org_id_idx').on(t.organizationId, t.id),
])

/**
 * OAuth clients, public only, so there is no secret to keep. `registration`: registered dynamically (RFC 7591), id
 * `mcp_…`. `metadata_document`: the id is the https URL of the client's Client ID Metadata Document, and the row holds
 * what the last fetch of that document said (grants and codes need a row to refer to); the document stays the truth.
 */
export const oauthClients = sqliteTable('oauth_clients', {
  id: text('id').primaryKey(),
  name: text('name').notNull(),
  redirectUris: text('redirect_uris', { mode: 'json' }).$type<string[]>().notNull(),
  grantTypes: text('grant_types', { mode: 'json' }).$type<string[]>().notNull(),
  scope: text('scope').notNull(),
  source: text('source', { enum: CLIENT_SOURCES }).notNull().default('registration'),
  createdAt: createdAt(),
  lastUsedAt: integer('last_used_at'),
})

/**
 * Access-token signing keys (ES256). The newest unretired key signs; a retired key stays published in the JWKS until
 * the tokens it signed have expired. The private key is kept as PKCS#8 PEM: the server must be able to sign.
 */
export const signingKeys = sqliteTable('signing_keys', {
  kid: text('kid').primaryKey(),
  alg: text('alg').notNull(),
  publicJwk: text('public_jwk', { mode: 'json' }).$type<Record<string, string>>().notNull(),
  privateKey: text('private_key').notNull(),
  createdAt: createdAt(),
  retiredAt: integer('retired_at'),
})

/**
 * Keys that seal the `requestState` of 2026-07-28 confirmations (AES-256-GCM). The newest unretired key seals; every
 * stored key still opens what it sealed, so a rotation (`service-mcp state-keys rotate`) never breaks a confirmation
 * already handed out. Kept like the signing keys: the server itself must seal and open.
 */
export const requestStateKeys = sqliteTable('request_state_keys', {
  kid: text('kid').primaryKey(),
  /** 32 random bytes, base64url. */
  secret: text('secret').notNull(),
  createdAt: createdAt(),
  retiredAt: integer('retired_at'),
})

/** Browser sign-ins for the authorization and account pages. The id is the SHA-256 of the cookie value. */
export const browserSessions = sqliteTable('browser_sessions', {
  id: text('id').primaryKey(),
  userId: text('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
  createdAt: createdAt(),
  expiresAt: integer('expires_at').notNull(),
}, (t) => [index('browser_sessions_expires_idx').on(t.expiresAt)])

/**
 * An authorization request between /oauth/authorize and the consent decision, kept server-side so that nothing the
 * browser sends back can change it. Single use. The id is the SHA-256 of the id in the page URL; `browserBinding` is
 * the SHA-256 of a cookie set when the request started, so another browser cannot finish it.
 */
export const authorizationRequests = sqliteTable('oauth_authorization_requests', {
  id: text('id').primaryKey(),
  browserBinding: text('browser_binding').notNull(),
  clientId: text('client_id').notNull().references(() => oauthClients.id, { onDelete: 'cascade' }),
  redirectUri: text('redirect_uri').notNull(),
  scope: text('scope').notNull(),
  state: text('state').notNull(),
  codeChallenge: text('code_challenge').notNull(),
  resource: text('resource').notNull(),
  /** SHA-256 of the client address that started it: pending requests per address are bounded. */
  clientAddress: text('client_address'),
  createdAt: createdAt(),
  expiresAt: integer('expires_at').notNull(),
  consumedAt: integer('consumed_at'),
}, (t) => [
  index('oauth_authorization_requests_expires_idx').on(t.expiresAt),
  index('oauth_authorization_requests_address_idx').on(t.clientAddress, t.expiresAt),
])

/**
 * One authorization grant: what a member approved for a client. Its refresh tokens form one rotation family; revoking
 * the grant revokes every token issued under it.
 */
export const oauthGrants = sqliteTable('oauth_grants', {
  id: text('id').primaryKey(),
  clientId: text('client_id').notNull().references(() => oauthClients.id, { onDelete: 'cascade' }),
  userId: text('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
  membershipId: text('membership_id').notNull().references(() => memberships.id, { onDelete: 'cascade' }),
  organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
  scope: text('scope').notNull(),
  resource: text('resource').notNull(),
  createdAt: createdAt(),
  lastUsedAt: integer('last_used_at'),
  /** Absolute end of the family, however often it is refreshed. */
  expiresAt: integer('expires_at').notNull(),
  revokedAt: integer('revoked_at'),
  revokedReason: text('revoked_reason'),
}, (t) => [index('oauth_grants_user_idx').on(t.userId), index('oauth_grants_membership_idx').on(t.membershipId)])

/** Authorization codes, stored as SHA-256 only. Kept after use so a replay is recognised and revokes its grant. */
export const authorizationCodes = sqliteTable('oauth_codes', {
  hash: text('hash').primaryKey(),
  clientId: text('client_id').notNull().references(() => oauthClients.id, { onDelete: 'cascade' }),
  redirectUri: text('redirect_uri').notNull(),
  userId: text('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
  membershipId: text('membership_id').notNull().references(() => memberships.id, { onDelete: 'cascade' }),
  organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
  scope: text('scope').notNull(),
  resource: text('resource').notNull(),
  codeChallenge: text('code_challenge').notNull(),
  createdAt: createdAt(),
  expiresAt: integer('expires_at').notNull(),
  consumedAt: integer('consumed_at'),
  /** The grant the code was exchanged for: what a replay revokes. */
  grantId: text('grant_id').references(() => oauthGrants.id, { onDelete: 'set null' }),
}, (t) => [index('oauth_codes_expires_idx').on(t.expiresAt)])

/** Refresh tokens (`mcp_rt_…`), SHA-256 only. A used token is kept, marked, so presenting it again is detected. */
export const refreshTokens = sqliteTable('oauth_refresh_tokens', {
  hash: text('hash').primaryKey(),
  grantId: text('grant_id').notNull().references(() => oauthGrants.id, { onDelete: 'cascade' }),
  createdAt: createdAt(),
  /** Idle expiry: 30 days after issue, each rotation issues a token with a fresh one. */
  expiresAt: integer('expires_at').notNull(),
  usedAt: integer('used_at'),
}, (t) => [index('oauth_refresh_tokens_grant_idx').on(t.grantId)])

/** Issued access tokens by `jti`: what revocation marks and what /mcp checks after the signature. */
export const accessTokens = sqliteTable('oauth_access_tokens', {
  jti: text('jti').primaryKey(),
  grantId: text('grant_id').notNull().references(() => oauthGrants.id, { onDelete: 'cascade' }),
  createdAt: createdAt(),
  expiresAt: integer('expires_at').notNull(),
  revokedAt: integer('revoked_at'),
}, (t) => [index('oauth_access_tokens_grant_idx').on(t.grantId), index('oauth_access_tokens_expires_idx').on(t.expiresAt)])

/** Environment variables of an app. Values are AES-256-GCM ciphertext bound to (app, name); never returned. */
export const envVars = sqliteTable('env_vars', {
  id: text('id').primaryKey(),
  appId: text('app_id').notNull().references(() => apps.id, { onDelete: 'cascade' }),
  organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
  name: text('name').notNull(),
  ciphertext: text('ciphertext').notNull(),
  createdAt: createdAt(),
  updatedAt: integer('updated_at').notNull(),
  updatedBy: text('updated_by').references(() => users.id, { onDelete: 'set null' }),
}, (t) => [uniqueIndex('env_vars_app_name_idx').on(t.appId, t.name)])

/** One run of an app's pipeline: a deployment, or a rollback to an earlier deployment. */
export const deployments = sqliteTable('deployments', {
  id: text('id').primaryKey(),
  appId: text('app_id').notNull().references(() => apps.id, { onDelete: 'cascade' }),
  organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
  kind: text('kind', { enum: ['deploy', 'rollback'] }).notNull(),
  /** For a rollback: the deployment it returns to. */
  rollbackOf: text('rollback_of'),
  pipeline: text('pipeline').notNull(),
  status: text('status', { enum: DEPLOYMENT_STATUSES }).notNull(),
  createdBy: text('created_by').references(() => users.id, { onDelete: 'set null' }),
  createdAt: createdAt(),
  startedAt: integer('started_at'),
  finishedAt: integer('finished_at'),
  exitCode: integer('exit_code'),
  /** Why it ended, in a sentence (exit code, signal, cancelled by whom, interrupted by a restart). */
  outcome: text('outcome'),
  /** Process group of the run while it lives: what a restart stops if a crash left it running. */
  pgid: integer('pgid'),
  /** The server process running it (`processes.id`) while queued or running: only a dead owner's runs are recovered. */
  owner: text('owner'),
  /** Bytes of output stored for it (its lines' text): what the organization's stored-output quota counts. */
  outputBytes: integer('output_bytes').notNull().default(0),
  /** When retention deleted its output (SERVICE_DEPLOYMENT_OUTPUT_KEEP_*); null while it is kept. */
  outputPurgedAt: integer('output_purged_at'),
}, (t) => [
  index('deployments_app_idx').on(t.appId, t.id),
  index('deployments_org_idx').on(t.organizationId, t.id),
  index('deployments_status_idx').on(t.status),
])

/** Every output line of a run, in order. */
export const deploymentLogs = sqliteTable('deployment_logs', {
  deploymentId: text('deployment_id').notNull().references(() => deployments.id, { onDelete: 'cascade' }),
  seq: integer('seq').notNull(),
  stream: text('stream', { enum: ['stdout', 'stderr', 'system'] }).notNull(),
  line: text('line').notNull(),
  at: integer('at').notNull(),
}, (t) => [primaryKey({ columns: [t.deploymentId, t.seq] })])

/** Who did what in an organization: every write, confirmation and denial. */
export const auditLog = sqliteTable('audit_log', {
  id: text('id').primaryKey(),
  organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
  userId: text('user_id'),
  membershipId: text('membership_id'),
  /** `api_key` or `oauth`, and the credential or client id, so an entry names what acted. */
  credentialKind: text('credential_kind').notNull(),
  credentialId: text('credential_id'),
  clientId: text('client_id'),
  action: text('action').notNull(),
  targetType: text('target_type'),
  targetId: text('target_id'),
  outcome: text('outcome', { enum: AUDIT_OUTCOMES }).notNull(),
  details: text('details', { mode: 'json' }).$type<Record<string, unknown>>(),
  at: integer('at').notNull(),
  /** Its place in the organization's chain (docs/decisions/audit-chain.md): 1, 2, … with no gap. */
  seq: integer('seq'),
  /** The hash of the entry before it (or of the chain's start), and its own: SHA-256 hex. */
  prevHash: text('prev_hash'),
  hash: text('hash'),
}, (t) => [
  index('audit_log_org_idx').on(t.organizationId, t.id),
  index('audit_log_org_action_idx').on(t.organizationId, t.action, t.id),
  uniqueIndex('audit_log_org_seq_idx').on(t.organizationId, t.seq),
])

/**
 * An organization's own value of a quota (QUOTA_NAMES), set with `service-mcp quotas set`: it replaces the server's
 * setting for that organization (0 = unlimited).
 */
export const organizationQuotas = sqliteTable('organization_quotas', {
  organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
  name: text('name', { enum: QUOTA_NAMES }).notNull(),
  value: integer('value').notNull(),
  updatedAt: integer('updated_at').notNull(),
}, (t) => [primaryKey({ columns: [t.organizationId, t.name] })])

/** Signed heads of the organizations' audit chains, and where each chain starts after a purge (`kind`). */
export const auditCheckpoints = sqliteTable('audit_checkpoints', {
  organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
  kind: text('kind', { enum: AUDIT_CHECKPOINT_KINDS }).notNull(),
  seq: integer('seq').notNull(),
  hash: text('hash').notNull(),
  at: integer('at').notNull(),
  kid: text('kid').notNull(),
  jws: text('jws').notNull(),
}, (t) => [primaryKey({ columns: [t.organizationId, t.kind, t.seq] })])

/**
 * One call of a confirmation-gated tool, identified by (session, membership, organization, JSON-RPC id)
 * (docs/decisions/idempotency.md). `pending` and `running` calls make a second call with the same id a 409; a `finished` one is answered again from
 * `result` (the tool result exactly as first returned, whatever the outcome); `interrupted` means the server stopped
 * before the call was answered. No foreign keys: a record outlives nothing it names by more than its 24 hours.
 */
export const idempotencyRecords = sqliteTable('idempotency_records', {
  /** The session; `-` for a stateless (2026-07-28) call, whose request_id is then `op:<operation id>`. */
  sessionId: text('session_id').notNull(),
  membershipId: text('membership_id').notNull(),
  organizationId: text('organization_id').notNull(),
  /** The JSON-RPC id JSON-encoded, so that 1 and "1" stay different ids. */
  requestId: text('request_id').notNull(),
  tool: text('tool').notNull(),
  status: text('status', { enum: IDEMPOTENCY_STATUSES }).notNull(),
  result: text('result', { mode: 'json' }).$type<Record<string, unknown>>(),
  createdAt: createdAt(),
  updatedAt: integer('updated_at').notNull(),
  /** When a finished or interrupted record may be purged: 24 h after the call ended. */
  expiresAt: integer('expires_at').notNull(),
  /** The server process running the call (`processes.id`) while pending or running. */
  owner: text('owner'),
  /**
   * The one call holding the record while pending or running: a token made by the begin that wrote or took over the
   * record. Every later transition of that call names it, so a call whose record was taken over changes nothing.
   */
  claim: text('claim'),
}, (t) => [
  primaryKey({ columns: [t.sessionId, t.membershipId, t.organizationId, t.requestId] }),
  index('idempotency_records_expires_idx').on(t.expiresAt),
])

/**
 * Tasks of the `io.modelcontextprotocol/tasks` extension (2026-07-28): a tools/call answered with a task handle runs
 * on, and its outcome is read with tasks/get. Stored before the handle is returned (a tasks/get right after works),
 * owned by the member who started it, and kept until `expiresAt`. A task still `working` when its process stopped is
 * completed at the next start with a result saying it was interrupted, as deployments are.
 */
export const tasks = sqliteTable('tasks', {
  /** 128 random bits: the id is all a caller needs to name it, so it must not be guessable. */
  id: text('id').primaryKey(),
  membershipId: text('membership_id').notNull(),
  organizationId: text('organization_id').notNull(),
  tool: text('tool').notNull(),
  status: text('status', { enum: TASK_STATUSES }).notNull(),
  statusMessage: text('status_message'),
  /** The tool result, once completed (tool failures included: `isError: true`). */
  result: text('result', { mode: 'json' }).$type<Record<string, unknown>>(),
  /** The JSON-RPC error, once failed. */
  error: text('error', { mode: 'json' }).$type<Record<string, unknown>>(),
  cancelRequestedAt: integer('cancel_requested_at'),
  createdAt: createdAt(),
  updatedAt: integer('updated_at').notNull(),
  expiresAt: integer('expires_at').notNull(),
  /** The server process running the task (`processes.id`) while it is working. */
  owner: text('owner'),
  /** While `input_required`: the requests still unanswered, by key (docs/decisions/tasks.md). */
  inputRequests: text('input_requests', { mode: 'json' }).$type<Record<string, unknown>>(),
  /** Answers given with tasks/update and not yet taken by the work, by key. */
  inputResponses: text('input_responses', { mode: 'json' }).$type<Record<string, unknown>>(),
}, (t) => [index('tasks_expires_idx').on(t.expiresAt), index('tasks_status_idx').on(t.status)])

/**
 * Facts about the database itself, one row per name. `env_key_check` holds a constant sealed with the env-var key
 * (src/db/env-key.ts): a server started with another key (a database restored or moved without its env.key) is
 * refused at start, rather than failing at the first deployment that needs an env var.
 */
export const serviceMeta = sqliteTable('service_meta', {
  name: text('name').primaryKey(),
  value: text('value').notNull(),
  updatedAt: integer('updated_at').notNull(),
})

/**
 * The server processes serving this database, each holding a lease it renews (SERVICE_LEASE_MS). Work in progress
 * (deployments, confirmed calls, tasks) names the process running it in `owner`; a process whose lease has lapsed is
 * dead, and only its work is recovered as interrupted, so several processes can share one database
 * (src/coordination/process-registry.ts). A process removes its row when it stops.
 */
export const processes = sqliteTable('processes', {
  id: text('id').primaryKey(),
  /** Where it runs: its work's process groups can be stopped only from the same host. */
  host: text('host').notNull(),
  pid: integer('pid').notNull(),
  startedAt: integer('started_at').notNull(),
  /** Alive until then (Unix ms, its own clock); renewed a few times per lease. */
  leaseUntil: integer('lease_until').notNull(),
})

/**
 * A sign-in through an upstream OpenID Connect provider, between the redirect to the provider and its callback. Kept
 * in the database so that the callback may reach any process. The id is the SHA-256 of the `state` sent to the
 * provider; `browserBinding` is the SHA-256 of the browser cookie, so another browser cannot finish it. Single use.
 */
export const signInFlows = sqliteTable('sign_in_flows', {
  id: text('id').primaryKey(),
  /** The provider's name in the configuration. */
  provider: text('provider').notNull(),
  browserBinding: text('browser_binding').notNull(),
  /** The ID token must carry it back. */
  nonce: text('nonce').notNull(),
  /** PKCE verifier for the provider's token endpoint: minutes-lived, useless without the provider's code. */
  codeVerifier: text('code_verifier').notNull(),
  /** Our own path to return to after sign-in (an authorization request's page, or /account). */
  returnTo: text('return_to').notNull(),
  createdAt: createdAt(),
  expiresAt: integer('expires_at').notNull(),
}, (t) => [index('sign_in_flows_expires_idx').on(t.expiresAt)])

/**
 * An env var value asked for on our own page (service_env_set_in_browser, docs/decisions/url-elicitation.md): the
 * page saves it sealed here, and the call that asked writes it. The id is in the page's URL; it is derived from the
 * call's operation, so every retry of a 2026-07-28 call names the same row.
 */
export const browserInputs = sqliteTable('browser_inputs', {
  id: text('id').primaryKey(),
  membershipId: text('membership_id').notNull().references(() => memberships.id, { onDelete: 'cascade' }),
  organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
  /** Only this user may open the page (the specification's phishing rule). */
  userId: text('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
  appId: text('app_id').notNull().references(() => apps.id, { onDelete: 'cascade' }),
  name: text('name').notNull(),
  status: text('status', { enum: BROWSER_INPUT_STATUSES }).notNull(),
  ciphertext: text('ciphertext'),
  createdAt: createdAt(),
  expiresAt: integer('expires_at').notNull(),
}, (t) => [index('browser_inputs_expires_idx').on(t.expiresAt)])

/**
 * A user's account at an upstream OpenID Connect provider: (provider, `sub`) names the person for good, whatever their
 * email becomes. Made at the first sign-in, by verified email or just in time.
 */
export const userIdentities = sqliteTable('user_identities', {
  provider: text('provider').notNull(),
  subject: text('subject').notNull(),
  userId: text('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
  /** The verified email the provider last gave. */
  email: text('email').notNull(),
  createdAt: createdAt(),
  lastSignInAt: integer('last_sign_in_at'),
}, (t) => [primaryKey({ columns: [t.provider, t.subject] }), index('user_identities_user_idx').on(t.userId)])

/**
 * Identity assertions (ID-JAG) already exchanged at the token endpoint, remembered until they expire: the primary key
 * makes a replay fail on insert, whichever process sees it.
 */
export const usedAssertions = sqliteTable('used_assertions', {
  issuer: text('issuer').notNull(),
  jti: text('jti').notNull(),
  expiresAt: integer('expires_at').notNull(),
}, (t) => [primaryKey({ columns: [t.issuer, t.jti] }), index('used_assertions_expires_idx').on(t.expiresAt)])

import { sql } from 'drizzle-orm'
import { bigint, index, integer, json, pgTable, primaryKey, text, uniqueIndex } from 'drizzle-orm/pg-core'
import { ROLES } from '../../lib/roles.js'
import { AUDIT_CHECKPOINT_KINDS, AUDIT_OUTCOMES, BROWSER_INPUT_STATUSES, CLIENT_SOURCES, DEPLOYMENT_STATUSES, IDEMPOTENCY_STATUSES, QUOTA_NAMES, TASK_STATUSES } from '../types.js'

/**
 * The PostgreSQL schema: the same tables, columns, indexes and rows as the SQLite one (../sqlite/schema.ts), which the
 * repositories are written against (../store.ts); ../schema-rows.ts holds both to the row types of ../types.ts, and
 * check-generated.ts holds both to the same keys, indexes and unique constraints. drizzle/postgres/
 * is generated from this file by `npm run db:generate` and never edited by hand; `npm run check:generated` fails when
 * the two drift. Times are Unix milliseconds in `bigint` columns; JSON columns are `json` (kept as written, key order
 * included: an idempotent call's result is answered again exactly as first returned). What each table and column
 * means is documented once, in ../sqlite/schema.ts.
 */

/** Unix milliseconds need 64 bits; read as JavaScript numbers, as SQLite gives them (exact up to 2^53). */
const millis = (name: string) => bigint(name, { mode: 'number' })
const createdAt = () => millis('created_at').notNull()

export const organizations = pgTable('organizations', {
  id: text('id').primaryKey(),
  slug: text('slug').notNull(),
  name: text('name').notNull(),
  createdAt: createdAt(),
}, (t) => [uniqueIndex('organizations_slug_idx').on(t.slug)])

export const users = pgTable('users', {
  id: text('id').primaryKey(),
  email: text('email').notNull(),
  name: text('name').notNull(),
  passwordHash: text('password_hash'),
  createdAt: createdAt(),
  disabledAt: millis('disabled_at'),
}, (t) => [uniqueIndex('users_email_idx').on(t.email)])

export const memberships = pgTable('memberships', {
  id: text('id').primaryKey(),
  userId: text('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
  organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
  role: text('role', { enum: ROLES }).notNull(),
  createdAt: createdAt(),
}, (t) => [
  uniqueIndex('memberships_user_org_idx').on(t.userId, t.organizationId),
  index('memberships_org_idx').on(t.organizationId),
])

export const apiKeys = pgTable('api_keys', {
  id: text('id').primaryKey(),
  membershipId: text('membership_id').notNull().references(() => memberships.id, { onDelete: 'cascade' }),
  name: text('name').notNull(),
  displayPrefix: text('display_prefix').notNull(),
  lookup: text('lookup').notNull(),
  hash: text('hash').notNull(),
  scopes: text('scopes').notNull(),
  createdAt: createdAt(),
  lastUsedAt: millis('last_used_at'),
  expiresAt: millis('expires_at'),
  revokedAt: millis('revoked_at'),
}, (t) => [index('api_keys_lookup_idx').on(t.lookup), index('api_keys_membership_idx').on(t.membershipId)])

export const sessions = pgTable('sessions', {
  id: text('id').primaryKey(),
  credential: text('credential').notNull(),
  membershipId: text('membership_id').notNull().references(() => memberships.id, { onDelete: 'cascade' }),
  organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
  protocolVersion: text('protocol_version').notNull(),
  clientInfo: json('client_info').$type<{ name: string; version: string }>().notNull(),
  clientCapabilities: json('client_capabilities').$type<Record<string, unknown>>().notNull(),
  logLevel: text('log_level').notNull().default(sql`'info'`),
  initializedAt: millis('initialized_at'),
  createdAt: createdAt(),
  lastSeenAt: millis('last_seen_at').notNull(),
  endedAt: millis('ended_at'),
}, (t) => [
  index('sessions_credential_idx').on(t.credential),
  index('sessions_last_seen_idx').on(t.lastSeenAt),
])

export const apps = pgTable('apps', {
  id: text('id').primaryKey(),
  organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
  name: text('name').notNull(),
  description: text('description').notNull().default(''),
  pipeline: text('pipeline').notNull().default('default'),
  createdBy: text('created_by').references(() => users.id, { onDelete: 'set null' }),
  createdAt: createdAt(),
  updatedAt: millis('updated_at').notNull(),
}, (t) => [
  uniqueIndex('apps_org_name_idx').on(t.organizationId, t.name),
  index('apps_org_id_idx').on(t.organizationId, t.id),
])
export const oauthClients = pgTable('oauth_clients', {
  id: text('id').primaryKey(),
  name: text('name').notNull(),
  redirectUris: json('redirect_uris').$type<string[]>().notNull(),
  grantTypes: json('grant_types').$type<string[]>().notNull(),
  scope: text('scope').notNull(),
  source: text('source', { enum: CLIENT_SOURCES }).notNull().default('registration'),
  createdAt: createdAt(),
  lastUsedAt: millis('last_used_at'),
})
export const signingKeys = pgTable('signing_keys', {
  kid: text('kid').primaryKey(),
  alg: text('alg').notNull(),
  publicJwk: json('public_jwk').$type<Record<string, string>>().notNull(),
  privateKey: text('private_key').notNull(),
  createdAt: createdAt(),
  retiredAt: millis('retired_at'),
})
export const requestStateKeys = pgTable('request_state_keys', {
  kid: text('kid').primaryKey(),
  secret: text('secret').notNull(),
  createdAt: createdAt(),
  retiredAt: millis('retired_at'),
})
export const browserSessions = pgTable('browser_sessions', {
  id: text('id').primaryKey(),
  userId: text('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
  createdAt: createdAt(),
  expiresAt: millis('expires_at').notNull(),
}, (t) => [index('browser_sessions_expires_idx').on(t.expiresAt)])
export const authorizationRequests = pgTable('oauth_authorization_requests', {
  id: text('id').primaryKey(),
  browserBinding: text('browser_binding').notNull(),
  clientId: text('client_id').notNull().references(() => oauthClients.id, { onDelete: 'cascade' }),
  redirectUri: text('redirect_uri').notNull(),
  scope: text('scope').notNull(),
  state: text('state').notNull(),
  codeChallenge: text('code_challenge').notNull(),
  resource: text('resource').notNull(),
  clientAddress: text('client_address'),
  createdAt: createdAt(),
  expiresAt: millis('expires_at').notNull(),
  consumedAt: millis('consumed_at'),
}, (t) => [
  index('oauth_authorization_requests_expires_idx').on(t.expiresAt),
  index('oauth_authorization_requests_address_idx').on(t.clientAddress, t.expiresAt),
])
export const oauthGrants = pgTable('oauth_grants', {
  id: text('id').primaryKey(),
  clientId: text('client_id').notNull().references(() => oauthClients.id, { onDelete: 'cascade' }),
  userId: text('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
  membershipId: text('membership_id').notNull().references(() => memberships.id, { onDelete: 'cascade' }),
  organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
  scope: text('scope').notNull(),
  resource: text('resource').notNull(),
  createdAt: createdAt(),
  lastUsedAt: millis('last_used_at'),
  expiresAt: millis('expires_at').notNull(),
  revokedAt: millis('revoked_at'),
  revokedReason: text('revoked_reason'),
}, (t) => [index('oauth_grants_user_idx').on(t.userId), index('oauth_grants_membership_idx').on(t.membershipId)])
export const authorizationCodes = pgTable('oauth_codes', {
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
  expiresAt: millis('expires_at').notNull(),
  consumedAt: millis('consumed_at'),
  grantId: text('grant_id').references(() => oauthGrants.id, { onDelete: 'set null' }),
}, (t) => [index('oauth_codes_expires_idx').on(t.expiresAt)])
export const refreshTokens = pgTable('oauth_refresh_tokens', {
  hash: text('hash').primaryKey(),
  grantId: text('grant_id').notNull().references(() => oauthGrants.id, { onDelete: 'cascade' }),
  createdAt: createdAt(),
  expiresAt: millis('expires_at').notNull(),
  usedAt: millis('used_at'),
}, (t) => [index('oauth_refresh_tokens_grant_idx').on(t.grantId)])
export const accessTokens = pgTable('oauth_access_tokens', {
  jti: text('jti').primaryKey(),
  grantId: text('grant_id').notNull().references(() => oauthGrants.id, { onDelete: 'cascade' }),
  createdAt: createdAt(),
  expiresAt: millis('expires_at').notNull(),
  revokedAt: millis('revoked_at'),
}, (t) => [index('oauth_access_tokens_grant_idx').on(t.grantId), index('oauth_access_tokens_expires_idx').on(t.expiresAt)])
export const envVars = pgTable('env_vars', {
  id: text('id').primaryKey(),
  appId: text('app_id').notNull().references(() => apps.id, { onDelete: 'cascade' }),
  organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
  name: text('name').notNull(),
  ciphertext: text('ciphertext').notNull(),
  createdAt: createdAt(),
  updatedAt: millis('updated_at').notNull(),
  updatedBy: text('updated_by').references(() => users.id, { onDelete: 'set null' }),
}, (t) => [uniqueIndex('env_vars_app_name_idx').on(t.appId, t.name)])
export const deployments = pgTable('deployments', {
  id: text('id').primaryKey(),
  appId: text('app_id').notNull().references(() => apps.id, { onDelete: 'cascade' }),
  organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
  kind: text('kind', { enum: ['deploy', 'rollback'] }).notNull(),
  rollbackOf: text('rollback_of'),
  pipeline: text('pipeline').notNull(),
  status: text('status', { enum: DEPLOYMENT_STATUSES }).notNull(),
  createdBy: text('created_by').references(() => users.id, { onDelete: 'set null' }),
  createdAt: createdAt(),
  startedAt: millis('started_at'),
  finishedAt: millis('finished_at'),
  exitCode: integer('exit_code'),
  outcome: text('outcome'),
  pgid: integer('pgid'),
  owner: text('owner'),
  outputBytes: bigint('output_bytes', { mode: 'number' }).notNull().default(0),
  outputPurgedAt: millis('output_purged_at'),
}, (t) => [
  index('deployments_app_idx').on(t.appId, t.id),
  index('deployments_org_idx').on(t.organizationId, t.id),
  index('deployments_status_idx').on(t.status),
])
export const deploymentLogs = pgTable('deployment_logs', {
  deploymentId: text('deployment_id').notNull().references(() => deployments.id, { onDelete: 'cascade' }),
  seq: integer('seq').notNull(),
  stream: text('stream', { enum: ['stdout', 'stderr', 'system'] }).notNull(),
  line: text('line').notNull(),
  at: millis('at').notNull(),
}, (t) => [primaryKey({ columns: [t.deploymentId, t.seq] })])
export const auditLog = pgTable('audit_log', {
  id: text('id').primaryKey(),
  organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
  userId: text('user_id'),
  membershipId: text('membership_id'),
  credentialKind: text('credential_kind').notNull(),
  credentialId: text('credential_id'),
  clientId: text('client_id'),
  action: text('action').notNull(),
  targetType: text('target_type'),
  targetId: text('target_id'),
  outcome: text('outcome', { enum: AUDIT_OUTCOMES }).notNull(),
  details: json('details').$type<Record<string, unknown>>(),
  at: millis('at').notNull(),
  seq: bigint('seq', { mode: 'number' }),
  prevHash: text('prev_hash'),
  hash: text('hash'),
}, (t) => [
  index('audit_log_org_idx').on(t.organizationId, t.id),
  index('audit_log_org_action_idx').on(t.organizationId, t.action, t.id),
  uniqueIndex('audit_log_org_seq_idx').on(t.organizationId, t.seq),
])
export const organizationQuotas = pgTable('organization_quotas', {
  organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
  name: text('name', { enum: QUOTA_NAMES }).notNull(),
  value: bigint('value', { mode: 'number' }).notNull(),
  updatedAt: millis('updated_at').notNull(),
}, (t) => [primaryKey({ columns: [t.organizationId, t.name] })])
export const auditCheckpoints = pgTable('audit_checkpoints', {
  organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
  kind: text('kind', { enum: AUDIT_CHECKPOINT_KINDS }).notNull(),
  seq: bigint('seq', { mode: 'number' }).notNull(),
  hash: text('hash').notNull(),
  at: millis('at').notNull(),
  kid: text('kid').notNull(),
  jws: text('jws').notNull(),
}, (t) => [primaryKey({ columns: [t.organizationId, t.kind, t.seq] })])
export const idempotencyRecords = pgTable('idempotency_records', {
  sessionId: text('session_id').notNull(),
  membershipId: text('membership_id').notNull(),
  organizationId: text('organization_id').notNull(),
  requestId: text('request_id').notNull(),
  tool: text('tool').notNull(),
  status: text('status', { enum: IDEMPOTENCY_STATUSES }).notNull(),
  result: json('result').$type<Record<string, unknown>>(),
  createdAt: createdAt(),
  updatedAt: millis('updated_at').notNull(),
  expiresAt: millis('expires_at').notNull(),
  owner: text('owner'),
  claim: text('claim'),
}, (t) => [
  primaryKey({ columns: [t.sessionId, t.membershipId, t.organizationId, t.requestId] }),
  index('idempotency_records_expires_idx').on(t.expiresAt),
])
export const tasks = pgTable('tasks', {
  id: text('id').primaryKey(),
  membershipId: text('membership_id').notNull(),
  organizationId: text('organization_id').notNull(),
  tool: text('tool').notNull(),
  status: text('status', { enum: TASK_STATUSES }).notNull(),
  statusMessage: text('status_message'),
  result: json('result').$type<Record<string, unknown>>(),
  error: json('error').$type<Record<string, unknown>>(),
  cancelRequestedAt: millis('cancel_requested_at'),
  createdAt: createdAt(),
  updatedAt: millis('updated_at').notNull(),
  expiresAt: millis('expires_at').notNull(),
  owner: text('owner'),
  inputRequests: json('input_requests').$type<Record<string, unknown>>(),
  inputResponses: json('input_responses').$type<Record<string, unknown>>(),
}, (t) => [index('tasks_expires_idx').on(t.expiresAt), index('tasks_status_idx').on(t.status)])
export const serviceMeta = pgTable('service_meta', {
  name: text('name').primaryKey(),
  value: text('value').notNull(),
  updatedAt: millis('updated_at').notNull(),
})

export const processes = pgTable('processes', {
  id: text('id').primaryKey(),
  host: text('host').notNull(),
  pid: integer('pid').notNull(),
  startedAt: millis('started_at').notNull(),
  leaseUntil: millis('lease_until').notNull(),
})

export const signInFlows = pgTable('sign_in_flows', {
  id: text('id').primaryKey(),
  provider: text('provider').notNull(),
  browserBinding: text('browser_binding').notNull(),
  nonce: text('nonce').notNull(),
  codeVerifier: text('code_verifier').notNull(),
  returnTo: text('return_to').notNull(),
  createdAt: createdAt(),
  expiresAt: millis('expires_at').notNull(),
}, (t) => [index('sign_in_flows_expires_idx').on(t.expiresAt)])

export const browserInputs = pgTable('browser_inputs', {
  id: text('id').primaryKey(),
  membershipId: text('membership_id').notNull().references(() => memberships.id, { onDelete: 'cascade' }),
  organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
  userId: text('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
  appId: text('app_id').notNull().references(() => apps.id, { onDelete: 'cascade' }),
  name: text('name').notNull(),
  status: text('status', { enum: BROWSER_INPUT_STATUSES }).notNull(),
  ciphertext: text('ciphertext'),
  createdAt: createdAt(),
  expiresAt: millis('expires_at').notNull(),
}, (t) => [index('browser_inputs_expires_idx').on(t.expiresAt)])

export const userIdentities = pgTable('user_identities', {
  provider: text('provider').notNull(),
  subject: text('subject').notNull(),
  userId: text('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
  email: text('email').notNull(),
  createdAt: createdAt(),
  lastSignInAt: millis('last_sign_in_at'),
}, (t) => [primaryKey({ columns: [t.provider, t.subject] }), index('user_identities_user_idx').on(t.userId)])

export const usedAssertions = pgTable('used_assertions', {
  issuer: text('issuer').notNull(),
  jti: text('jti').notNull(),
  expiresAt: millis('expires_at').notNull(),
}, (t) => [primaryKey({ columns: [t.issuer, t.jti] }), index('used_assertions_expires_idx').on(t.expiresAt)])

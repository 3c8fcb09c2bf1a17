import { sql } from 'drizzle-orm'
import { index, integer, sqliteTable, text, uniqueIndex } from 'drizzle-orm/sqlite-core'

/**
 * The database schema. drizzle/ is generated from this file by `npm run db:generate` and never edited by hand;
 * `npm run check:generated` fails when the two drift. Times are Unix milliseconds.
 */

const createdAt = () => integer('created_at').notNull()

export const ROLES = ['viewer', 'developer', 'admin', 'owner'] as const
export type Role = (typeof ROLES)[number]

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
  createdBy: text('created_by').references(() => users.id, { onDelete: 'set null' }),
  createdAt: createdAt(),
  updatedAt: integer('updated_at').notNull(),
}, (t) => [
  uniqueIndex('apps_org_name_idx').on(t.organizationId, t.name),
  // Keyset pages walk (organization, id) without sorting the organization's apps.
  index('apps_org_id_idx').on(t.organizationId, t.id),
])

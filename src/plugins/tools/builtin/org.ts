import type { AuditEntry } from '../../../db/repos/audit.js'
import type { MembershipView } from '../../../db/repos/memberships.js'
import type { Role } from '../../../lib/roles.js'
import { fail } from '../../../errors/service-error.js'
import { isoTime } from '../../../lib/iso-time.js'
import { decodeCursor, encodeCursor } from '../../../rpc/cursor.js'
import { defineTool, type ToolDefinition } from '../define.js'

export interface MemberView {
  membership_id: string
  user_id: string
  email: string
  name: string
  role: Role
  joined_at: string
}

export function memberView(m: MembershipView): MemberView {
  return { membership_id: m.id, user_id: m.userId, email: m.email, name: m.userName, role: m.role, joined_at: isoTime(m.createdAt) }
}

/** Code-unit order on the email (unique per user), the user id breaking ties should two ever compare equal. */
function byEmail(a: MembershipView, b: MembershipView): number {
  if (a.email !== b.email) return a.email < b.email ? -1 : 1
  return a.userId < b.userId ? -1 : a.userId > b.userId ? 1 : 0
}

/** Both tools read the organization and need the admin role (docs/decisions/tool-catalog.md). */
const ADMIN_READ = {
  scope: 'mcp:read',
  role: 'admin',
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  rateLimitPerMinute: 60,
} as const

export const membersList = defineTool<{ limit?: number; cursor?: string }, { members: MemberView[]; next_cursor: string | null }>({
  name: 'service_members_list',
  title: 'List members',
  description: 'Lists the members of your organization (user, email, role, when they joined), by email. Pass next_cursor back as cursor to get the next page. Needs the admin role.',
  inputSchema: 'tools/service_members_list.input',
  outputSchema: 'tools/service_members_list.output',
  ...ADMIN_READ,
  async handler(args, { principal, repos }) {
    const limit = args.limit ?? 20
    // An organization has few members: one query, sorted and paged in memory.
    const all = (await repos.memberships.forOrganization(principal.organizationId)).sort(byEmail)
    let start = 0
    if (args.cursor !== undefined) {
      // Keyset on the email of the last member listed, found through their user id: a member removed (or added) between
      // two pages shifts nothing. The cursor is only a starting point; the list is still the caller's organization.
      const userId = decodeCursor('members', args.cursor)
      const after = userId === undefined ? undefined : await repos.users.byId(userId)
      if (after === undefined) throw fail('INVALID_ARGUMENTS', { message: 'cursor is not a cursor returned by service_members_list' })
      const index = all.findIndex((m) => m.email > after.email || (m.email === after.email && m.userId > after.id))
      start = index === -1 ? all.length : index
    }
    const items = all.slice(start, start + limit)
    const last = items.at(-1)
    return {
      members: items.map(memberView),
      next_cursor: start + limit < all.length && last ? encodeCursor('members', last.userId) : null,
    }
  },
})

export interface AuditEntryView {
  id: string
  at: string
  actor: { user_id: string | null; membership_id: string | null; credential_kind: string; credential_id: string | null; client_id: string | null }
  action: string
  target_type: string | null
  target_id: string | null
  outcome: AuditEntry['outcome']
  details: Record<string, unknown> | null
}

export function auditEntryView(e: AuditEntry): AuditEntryView {
  return {
    id: e.id,
    at: isoTime(e.at),
    actor: { user_id: e.userId, membership_id: e.membershipId, credential_kind: e.credentialKind, credential_id: e.credentialId, client_id: e.clientId },
    action: e.action,
    target_type: e.targetType,
    target_id: e.targetId,
    outcome: e.outcome,
    details: e.details ?? null,
  }
}

export const auditList = defineTool<{ limit?: number; cursor?: string; action?: string }, { entries: AuditEntryView[]; next_cursor: string | null }>({
  name: 'service_audit_list',
  title: 'Audit log',
  description: 'Lists the audit log of your organization, newest first: every write and confirmation, who did it (user, membership, credential, OAuth client), when, on what, and the outcome. `action` keeps only entries with exactly that action (a tool name, or `<tool>.confirmation`). Pass next_cursor back as cursor to get the next page. Needs the admin role.',
  inputSchema: 'tools/service_audit_list.input',
  outputSchema: 'tools/service_audit_list.output',
  ...ADMIN_READ,
  async handler(args, { principal, repos }) {
    const limit = args.limit ?? 20
    let before: string | undefined
    if (args.cursor !== undefined) {
      before = decodeCursor('audit', args.cursor)
      if (before === undefined) throw fail('INVALID_ARGUMENTS', { message: 'cursor is not a cursor returned by service_audit_list' })
    }
    const { items, more } = await repos.audit.page(principal.organizationId, limit, before, args.action)
    const last = items.at(-1)
    return {
      entries: items.map(auditEntryView),
      next_cursor: more && last ? encodeCursor('audit', last.id) : null,
    }
  },
})

/** The organization tools: members and the audit log (admin and above). */
export const orgTools: ToolDefinition<any, any>[] = [membersList, auditList]

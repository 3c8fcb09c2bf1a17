import type { AuditEntry } from '../../../db/repos/audit.js'
import type { Repos } from '../../../db/repos/index.js'
import { fail } from '../../../errors/service-error.js'
import { isoTime } from '../../../lib/iso-time.js'
import { text } from '../../../mcp/content.js'
import { appsOf, completeAppId } from '../../resources/builtin/apps.js'
import { COMPLETED_DEPLOYMENTS } from '../../resources/builtin/deployment-log.js'
import { definePrompt } from '../define.js'

/** Audit entries shown at most (newest first). */
export const ACTIVITY_AUDIT_ENTRIES = 50
/** Deployments shown at most (newest first). */
export const ACTIVITY_DEPLOYMENTS = 20
/** With an app: the audit entries looked through for the ones about it (newest first). */
export const ACTIVITY_AUDIT_SCANNED = 1000

/** One audit entry as a line: `<ISO time> <who> (<credential>) <action> <target>: <outcome> <details>`. */
function auditLine(e: AuditEntry, who: (userId: string | null) => string): string {
  const credential = e.credentialKind === 'oauth' && e.clientId ? `oauth client ${e.clientId}` : e.credentialKind
  const target = e.targetType ? ` ${e.targetType} ${e.targetId ?? ''}`.trimEnd() : ''
  // Without the call's arguments: the target and the details already say what changed, and 50 lines of arguments
  // would cost the model more than they tell (the audit export has them).
  const { arguments: _arguments, ...shown } = e.details ?? {}
  const details = Object.keys(shown).length > 0 ? ` ${JSON.stringify(shown)}` : ''
  return `${isoTime(e.at)} ${who(e.userId)} (${credential}) ${e.action}${target}: ${e.outcome}${details}`
}

/** Names the users of `entries` by email, looked up once each, in order; a user since deleted keeps its id. */
async function userNames(repos: Repos, entries: readonly AuditEntry[]): Promise<(userId: string | null) => string> {
  const known = new Map<string, string>()
  for (const { userId } of entries) {
    if (userId !== null && !known.has(userId)) known.set(userId, (await repos.users.byId(userId))?.email ?? `user ${userId}`)
  }
  return (userId) => (userId === null ? 'unknown user' : known.get(userId) ?? `user ${userId}`)
}

/**
 * The latest audit entries of the organization, or those about one app: itself, its env vars, its deployments, and the
 * confirmations that name it.
 */
async function auditEntries(repos: Repos, organizationId: string, appId: string | undefined): Promise<{ entries: AuditEntry[]; scanned: number }> {
  if (appId === undefined) return { entries: (await repos.audit.page(organizationId, ACTIVITY_AUDIT_ENTRIES)).items, scanned: 0 }
  const deployments = new Set((await repos.deployments.list(organizationId, { appId, limit: COMPLETED_DEPLOYMENTS, offset: 0 })).items.map((d) => d.id))
  const about = (e: AuditEntry) =>
    (e.targetType === 'app' && e.targetId === appId) ||
    (e.targetType === 'env_var' && e.targetId !== null && e.targetId.startsWith(`${appId}/`)) ||
    (e.targetType === 'deployment' && e.targetId !== null && deployments.has(e.targetId)) ||
    e.details?.app_id === appId ||
    // Confirmations name the app in their message: "Deploy app web (app_…) with pipeline default?"
    (typeof e.details?.message === 'string' && e.details.message.includes(`(${appId})`))
  const entries: AuditEntry[] = []
  let scanned = 0
  let before: string | undefined
  while (entries.length < ACTIVITY_AUDIT_ENTRIES && scanned < ACTIVITY_AUDIT_SCANNED) {
    const page = await repos.audit.page(organizationId, 200, before)
    scanned += page.items.length
    for (const e of page.items) if (entries.length < ACTIVITY_AUDIT_ENTRIES && about(e)) entries.push(e)
    if (!page.more || page.items.length === 0) break
    before = page.items.at(-1)!.id
  }
  return { entries, scanned }
}

/**
 * `summarize_recent_activity`: asks the model to summarize what happened lately in the caller's organization, or in one
 * app of it: who changed what, deployments and their outcomes, refusals and failures, and what needs attention.
 * Messages: the request, then the latest ACTIVITY_AUDIT_ENTRIES audit entries and the latest ACTIVITY_DEPLOYMENTS
 * deployments as text lines, newest first. Needs the admin role, like the audit log itself
 * (docs/decisions/tool-catalog.md).
 */
export const summarizeRecentActivity = definePrompt<{ app_id?: string }>({
  name: 'summarize_recent_activity',
  title: 'Summarize recent activity',
  description: `Asks for a summary of what happened lately in your organization, or in one app: who changed what, deployments and their outcomes, denials and failures, and what needs attention. Embeds the latest ${ACTIVITY_AUDIT_ENTRIES} audit log entries and ${ACTIVITY_DEPLOYMENTS} deployments. Needs the admin role, like the audit log.`,
  arguments: [{ name: 'app_id', title: 'App', description: 'Only what concerns this app of your organization (optional)', required: false }],
  scope: 'mcp:read',
  role: 'admin',
  async get(args, ctx) {
    const { repos, principal } = ctx
    const organizationId = principal.organizationId
    const appId = args.app_id === undefined || args.app_id === '' ? undefined : args.app_id
    const app = appId === undefined ? undefined : await repos.apps.byId(organizationId, appId)
    if (appId !== undefined && !app) {
      throw fail('INVALID_PARAMS', { message: 'No app with this id in your organization', details: { argument: 'app_id' } })
    }
    const organization = await repos.organizations.byId(organizationId)
    const orgName = organization ? `${organization.name} (${organization.slug})` : organizationId
    const scope = app ? `app ${app.name} (${app.id}) of organization ${orgName}` : `organization ${orgName}`
    const { entries, scanned } = await auditEntries(repos, organizationId, appId)
    const names = new Map((await appsOf(repos, organizationId)).map((a) => [a.id, a.name]))
    const deployments = (await repos.deployments.list(organizationId, { ...(appId !== undefined ? { appId } : {}), limit: ACTIVITY_DEPLOYMENTS, offset: 0 })).items
    const who = await userNames(repos, entries)

    const auditHead = app
      ? `Audit log entries about ${app.name}, newest first (${entries.length}, from the latest ${scanned} entries of the organization):`
      : `Audit log, newest first (the latest ${entries.length}):`
    const deploymentLines = deployments.map((d) => `${isoTime(d.createdAt)} ${d.id} ${d.kind} of ${names.get(d.appId) ?? d.appId}: ${d.outcome ?? d.status}`)
    return {
      description: `Recent activity of ${scope}`,
      messages: [
        {
          role: 'user',
          content: text(`Summarize the recent activity of ${scope} for an operator, from the audit log and the deployments below. Group it by what happened: changes to apps and environment variables (who, when), deployments and rollbacks with their outcomes, and confirmations declined, denials and failures. Then list what needs attention (failed or interrupted deployments, repeated denials, anything unusual), most urgent first. Use only what is below; say so when it is empty.`),
        },
        { role: 'user', content: text([auditHead, ...(entries.length > 0 ? entries.map((e) => auditLine(e, who)) : ['(none)'])].join('\n')) },
        { role: 'user', content: text([`Deployments, newest first (the latest ${deployments.length}):`, ...(deploymentLines.length > 0 ? deploymentLines : ['(none)'])].join('\n')) },
      ],
    }
  },
  complete: { app_id: completeAppId },
})

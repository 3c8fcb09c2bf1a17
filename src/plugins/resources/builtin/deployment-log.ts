import type { Deployment } from '../../../db/repos/deployments.js'
import type { Repos } from '../../../db/repos/index.js'
import { isoTime } from '../../../lib/iso-time.js'
import { outputDeleted } from '../../../retention/deleted-output.js'
import type { RequestContext } from '../../../rpc/handler-context.js'
import { defineResource, type ResourceEntry } from '../define.js'
import { appsOf } from './apps.js'
import { DEPLOYMENT_LOG_TEMPLATE, deploymentLogUri } from './uris.js'

/** Deployments resources/list shows: the most recent ones of the organization (as service_deployments_list's default page). */
export const LISTED_DEPLOYMENTS = 20
/** Deployments completion looks through: the most recent ones of the organization (an older id still reads). */
export const COMPLETED_DEPLOYMENTS = 1000
/** Lines a read returns at most: the last ones (service_deployments_logs pages through all of them). */
export const LOG_MAX_LINES = 10_000

/**
 * A deployment's stored output as text: one line per stored line, in order, `<ISO time> [<stream>] <text>` (stream
 * stdout, stderr, or system for what the server adds: the start and the outcome), each ending with a newline. Only
 * the last `maxLines` lines; when earlier ones are left out, a first line says how many and where to find them.
 */
export async function renderLog(repos: Repos, deploymentId: string, maxLines = LOG_MAX_LINES): Promise<string> {
  const lines = await repos.deployments.lastLines(deploymentId, maxLines)
  const earlier = lines[0]?.seq ?? 0 // seq counts from 0 without gaps: the first line kept says how many came before
  const head = earlier > 0 ? `[${earlier} earlier ${earlier === 1 ? 'line' : 'lines'} not shown: service_deployments_logs returns every line]\n` : ''
  return head + lines.map((l) => `${isoTime(l.at)} [${l.stream}] ${l.line}\n`).join('')
}

/** A deployment in one phrase: `deploy dep_… of web`. */
export function deploymentPhrase(d: Deployment, appName: string): string {
  return `${d.kind} ${d.id} of ${appName}`
}

/**
 * Completes a deployment id of the caller's organization, among its COMPLETED_DEPLOYMENTS most recent deployments:
 * first the deployments of the apps whose name starts with what was typed, ignoring case (typing `web` offers the
 * recent deployments of app `web`), then those whose id starts with it, each group newest first. A complete id of an
 * older deployment is offered too. `first`: deployments to put before the others (keeping that order inside each part).
 */
export function deploymentIdCompleter(first?: (d: Deployment) => boolean) {
  return async (value: string, ctx: RequestContext): Promise<string[]> => {
    const organizationId = ctx.principal.organizationId
    const typed = value.toLowerCase()
    const names = new Map((await appsOf(ctx.repos, organizationId)).map((a) => [a.id, a.name.toLowerCase()]))
    const recent = (await ctx.repos.deployments.list(organizationId, { limit: COMPLETED_DEPLOYMENTS, offset: 0 })).items
    const byApp = recent.filter((d) => (names.get(d.appId) ?? '').startsWith(typed))
    const named = new Set(byApp)
    const byId = recent.filter((d) => !named.has(d) && d.id.startsWith(typed))
    if (byApp.length === 0 && byId.length === 0 && typed !== '') {
      const older = await ctx.repos.deployments.byId(organizationId, typed)
      if (older) byId.push(older)
    }
    const found = [...byApp, ...byId]
    const ordered = first ? [...found.filter(first), ...found.filter((d) => !first(d))] : found
    return ordered.map((d) => d.id)
  }
}

/** The deployment a log URI names, in the caller's organization only: an absent and a foreign id alike give undefined. */
function deploymentOf(variables: Readonly<Record<string, string>>, ctx: RequestContext): Promise<Deployment | undefined> {
  return ctx.repos.deployments.byId(ctx.principal.organizationId, variables.deployment_id!)
}

/** How resources/list shows a deployment's log. */
function entryOf(d: Deployment, appName: string): ResourceEntry {
  return {
    uri: deploymentLogUri(d.id),
    name: `${appName} ${d.kind} ${d.id}`,
    title: `Log of ${deploymentPhrase(d, appName)}`,
    description: `Output of the ${d.kind} of ${appName} created ${isoTime(d.createdAt)}: ${d.outcome ?? d.status}`,
    mimeType: 'text/plain',
  }
}

/**
 * `service://deployments/{deployment_id}/log`: a deployment's stored output as text/plain (see renderLog), for the
 * caller's organization only; it grows while the deployment runs, and subscribers hear
 * `notifications/resources/updated` as it does (builtin/notifications.ts). resources/list shows the logs of the
 * organization's LISTED_DEPLOYMENTS most recent deployments, newest first; older ones are read by URI. An absent id and
 * an id of another organization are the same "not found".
 */
export const deploymentLogResource = defineResource({
  name: 'deployment_log',
  uriTemplate: DEPLOYMENT_LOG_TEMPLATE,
  title: 'Deployment log',
  description: `The output of a deployment of your organization as plain text, one line per output line in order: "<ISO time> [<stream>] <text>", stream stdout, stderr, or system (the start and the outcome, added by the server). At most the last ${LOG_MAX_LINES} lines (a first line says how many came before; service_deployments_logs returns every line). It grows while the deployment runs: subscribe to hear when. resources/list shows the ${LISTED_DEPLOYMENTS} most recent deployments. When retention deleted the output, the text is one line saying when.`,
  mimeType: 'text/plain',
  scope: 'mcp:read',
  role: 'viewer',
  async list(ctx) {
    const organizationId = ctx.principal.organizationId
    const names = new Map((await appsOf(ctx.repos, organizationId)).map((a) => [a.id, a.name]))
    return (await ctx.repos.deployments.list(organizationId, { limit: LISTED_DEPLOYMENTS, offset: 0 })).items
      .map((d) => entryOf(d, names.get(d.appId) ?? d.appId))
  },
  async read(variables, uri, ctx) {
    const d = await deploymentOf(variables, ctx)
    if (!d) return null
    const deleted = outputDeleted(d)
    if (deleted) return { uri, mimeType: 'text/plain', text: `[${deleted.message}]\n` }
    return { uri, mimeType: 'text/plain', text: await renderLog(ctx.repos, d.id) }
  },
  async exists(variables, ctx) {
    return (await deploymentOf(variables, ctx)) !== undefined
  },
  complete: { deployment_id: deploymentIdCompleter() },
})

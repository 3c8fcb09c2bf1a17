import type { Principal } from '../../../auth/principal.js'
import type { Config } from '../../../config.js'
import type { App } from '../../../db/repos/apps.js'
import type { Repos } from '../../../db/repos/index.js'
import { fail, ServiceError } from '../../../errors/service-error.js'
import { isoTime } from '../../../lib/iso-time.js'
import { holdQuota } from '../../../limits/quotas.js'
import { defineTool } from '../define.js'
import { appUri } from '../../resources/builtin/uris.js'
import { appView } from './apps-list.js'

type AppOutput = { app: ReturnType<typeof appView> }

/**
 * The app `appId` of the caller's organization. Absent and "in another organization" are one answer, with one text,
 * so an id from elsewhere reveals nothing.
 */
export async function requireApp(repos: Pick<Repos, 'apps'>, principal: Principal, appId: string): Promise<App> {
  const app = await repos.apps.byId(principal.organizationId, appId)
  if (!app) throw appNotFound()
  return app
}

export function appNotFound() {
  return new ServiceError('RESOURCE_NOT_FOUND', { message: 'No app with this id in your organization' })
}

/** Pipelines are configured by the operator; a tool only picks one of them by name. */
function requirePipeline(config: Readonly<Config>, name: string): string {
  if (Object.hasOwn(config.pipelines, name)) return name
  const known = Object.keys(config.pipelines).sort()
  throw fail('INVALID_ARGUMENTS', {
    message: `Unknown pipeline ${JSON.stringify(name)}: the configured pipelines are ${known.length ? known.join(', ') : '(none)'}`,
  })
}

/** An app with the names of its env vars (values never leave the server): service_apps_get, and the app resource. */
export async function appDetails(repos: Repos, app: App) {
  const env = (await repos.envVars.list(app.organizationId, app.id))
    .map((v) => ({ name: v.name, created_at: isoTime(v.createdAt), updated_at: isoTime(v.updatedAt) }))
  return { app: appView(app), env }
}

export const appsGet = defineTool<{ app_id: string }>({
  name: 'service_apps_get',
  title: 'Get an app',
  description: 'Shows one app of your organization with the names of its environment variables. Values are never returned: they stay on the server, encrypted.',
  inputSchema: 'tools/service_apps_get.input',
  outputSchema: 'tools/service_apps_get.output',
  scope: 'mcp:read',
  role: 'viewer',
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  rateLimitPerMinute: 60,
  async handler(args, { principal, repos }) {
    return appDetails(repos, await requireApp(repos, principal, args.app_id))
  },
})

export const appsCreate = defineTool<{ name: string; description?: string; pipeline?: string }, AppOutput>({
  name: 'service_apps_create',
  title: 'Create an app',
  description: 'Creates an app in your organization. The name must be unique in the organization; refused (QUOTA_EXCEEDED) when the organization has as many apps as its quota allows. pipeline names one of the deployment pipelines the operator configured (default: "default").',
  inputSchema: 'tools/service_apps_create.input',
  outputSchema: 'tools/service_apps_create.output',
  scope: 'mcp:write',
  role: 'developer',
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  rateLimitPerMinute: 10,
  auditTarget: (_args, output) => ({ targetType: 'app', targetId: output.app.id, details: { name: output.app.name } }),
  async handler(args, { principal, repos, config, resources }) {
    const pipeline = requirePipeline(config, args.pipeline ?? 'default')
    // The quota is checked and the app inserted in one transaction holding the quota: two creates at the last slot
    // cannot both pass. A name taken in the organization is the repository's CONFLICT.
    const app = await repos.transaction(async (tx) => {
      await holdQuota(tx, config, principal.organizationId, 'apps')
      return tx.apps.create({
        organizationId: principal.organizationId,
        name: args.name,
        description: args.description ?? '',
        pipeline,
        createdBy: principal.userId,
      })
    })
    resources.listChanged()
    return { app: appView(app) }
  },
})

export const appsUpdate = defineTool<{ app_id: string; name?: string; description?: string; pipeline?: string }, AppOutput>({
  name: 'service_apps_update',
  title: 'Update an app',
  description: 'Changes the name, description or pipeline of an app of your organization; pass at least one of them. The name must stay unique in the organization.',
  inputSchema: 'tools/service_apps_update.input',
  outputSchema: 'tools/service_apps_update.output',
  scope: 'mcp:write',
  role: 'developer',
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  rateLimitPerMinute: 10,
  auditSubject: (args) => ({ targetType: 'app', targetId: args.app_id }),
  auditTarget: (args, output) => ({
    targetType: 'app',
    targetId: output.app.id,
    details: { changed: ['name', 'description', 'pipeline'].filter((k) => k in args) },
  }),
  async handler(args, { principal, repos, config, resources }) {
    if (args.name === undefined && args.description === undefined && args.pipeline === undefined) {
      throw fail('INVALID_ARGUMENTS', { message: 'Pass at least one of name, description, pipeline to change' })
    }
    await requireApp(repos, principal, args.app_id)
    if (args.pipeline !== undefined) requirePipeline(config, args.pipeline)
    const app: App | undefined = await repos.apps.update(principal.organizationId, args.app_id, {
      ...(args.name !== undefined ? { name: args.name } : {}),
      ...(args.description !== undefined ? { description: args.description } : {}),
      ...(args.pipeline !== undefined ? { pipeline: args.pipeline } : {}),
    })
    if (!app) throw appNotFound() // deleted in the meantime
    resources.updated(appUri(app.id))
    resources.listChanged() // its name, title and description in resources/list
    return { app: appView(app) }
  },
})

export const appsDelete = defineTool<{ app_id: string }, { deleted: true; app_id: string; name: string; deployments_deleted: number }>({
  name: 'service_apps_delete',
  title: 'Delete an app',
  description: 'Deletes an app of your organization with its environment variables and all its deployments and their logs, after the user confirms. Refused while a deployment of the app is queued or running.',
  inputSchema: 'tools/service_apps_delete.input',
  outputSchema: 'tools/service_apps_delete.output',
  scope: 'mcp:write',
  role: 'admin',
  confirm: true,
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  rateLimitPerMinute: 10,
  auditSubject: (args) => ({ targetType: 'app', targetId: args.app_id }),
  auditTarget: (_args, output) => ({
    targetType: 'app',
    targetId: output.app_id,
    details: { name: output.name, deployments_deleted: output.deployments_deleted },
  }),
  async handler(args, ctx) {
    const { principal, repos } = ctx
    const app = await requireApp(repos, principal, args.app_id)
    await refuseWhileDeploying(repos, principal, app)
    const n = await repos.apps.deploymentCount(principal.organizationId, app.id)
    await ctx.confirm(`Delete app ${app.name} (${app.id}) and its ${n} ${n === 1 ? 'deployment' : 'deployments'}?`)
    // The answer may take minutes: look again. Everything from here on is one transaction, so no deployment can start
    // between the check, the count and the delete.
    const { current, deleted } = await repos.transaction(async (tx) => {
      const current = await requireApp(tx, principal, app.id)
      await refuseWhileDeploying(tx, principal, current)
      const deleted = await tx.apps.deploymentCount(principal.organizationId, current.id)
      if (!(await tx.apps.delete(principal.organizationId, current.id))) throw appNotFound()
      return { current, deleted }
    })
    // Its resource is gone (a subscriber reading it again learns so), and so are its deployments' logs.
    ctx.resources.updated(appUri(current.id))
    ctx.resources.listChanged()
    return { deleted: true, app_id: current.id, name: current.name, deployments_deleted: deleted }
  },
})

async function refuseWhileDeploying(repos: Pick<Repos, 'deployments'>, principal: Principal, app: App): Promise<void> {
  const active = await repos.deployments.active(principal.organizationId, app.id)
  if (active) {
    throw fail('CONFLICT', {
      message: `App ${app.name} has a deployment ${active.status} (${active.id}); cancel it or wait for it to finish, then delete the app`,
    })
  }
}

/** The app tools, in tools/list order. */
export const appTools = [appsGet, appsCreate, appsUpdate, appsDelete]

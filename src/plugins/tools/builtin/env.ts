import { envVarAad } from '../../../db/repos/env-vars.js'
import { ServiceError } from '../../../errors/service-error.js'
import { defineTool } from '../define.js'
import { appUri } from '../../resources/builtin/uris.js'
import { requireApp } from './apps.js'
import { envVarAudit } from './env-var-audit.js'
import { envSetInBrowser } from './env-in-browser.js'
import { setWithinQuota } from './env-write.js'

export const envSet = defineTool<{ app_id: string; name: string; value: string }, { app_id: string; name: string; created: boolean }>({
  name: 'service_env_set',
  title: 'Set an environment variable',
  description: 'Sets an environment variable of an app of your organization, creating it or replacing its value; a new name is refused (QUOTA_EXCEEDED) when the app has as many env vars as the quota allows. The value is stored encrypted and passed only to the app\'s deployment pipeline; no tool ever returns it.',
  inputSchema: 'tools/service_env_set.input',
  outputSchema: 'tools/service_env_set.output',
  scope: 'mcp:write',
  role: 'developer',
  // Replacing a value loses the old one for good.
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  rateLimitPerMinute: 10,
  ...envVarAudit,
  async handler(args, { principal, repos, secrets, resources, config }) {
    const app = await requireApp(repos, principal, args.app_id)
    const ciphertext = secrets.seal(args.value, envVarAad(app.id, args.name))
    const { created } = await repos.transaction((tx) => setWithinQuota(tx, config, { organizationId: principal.organizationId, appId: app.id, name: args.name, ciphertext, userId: principal.userId }))
    resources.updated(appUri(app.id)) // the app resource lists its env var names
    return { app_id: app.id, name: args.name, created }
  },
})

export const envUnset = defineTool<{ app_id: string; name: string }, { app_id: string; name: string; removed: true }>({
  name: 'service_env_unset',
  title: 'Remove an environment variable',
  description: 'Removes an environment variable from an app of your organization, after the user confirms. Later deployments run without it.',
  inputSchema: 'tools/service_env_unset.input',
  outputSchema: 'tools/service_env_unset.output',
  scope: 'mcp:write',
  role: 'developer',
  confirm: true,
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  rateLimitPerMinute: 10,
  auditSubject: (args) => ({ targetType: 'env_var', targetId: `${args.app_id}/${args.name}` }),
  auditTarget: (_args, output) => ({ targetType: 'env_var', targetId: `${output.app_id}/${output.name}` }),
  async handler(args, ctx) {
    const { principal, repos } = ctx
    const app = await requireApp(repos, principal, args.app_id)
    const missing = () => new ServiceError('RESOURCE_NOT_FOUND', { message: `App ${app.name} has no env var ${args.name}` })
    if (!(await repos.envVars.exists(principal.organizationId, app.id, args.name))) throw missing()
    await ctx.confirm(`Remove env var ${args.name} from app ${app.name} (${app.id})?`)
    // Removed (or the app deleted) while the user was asked: nothing left to remove.
    if (!(await repos.envVars.unset(principal.organizationId, app.id, args.name))) throw missing()
    ctx.resources.updated(appUri(app.id))
    return { app_id: app.id, name: args.name, removed: true }
  },
})

/** The env var tools, in tools/list order. */
export const envTools = [envSet, envSetInBrowser, envUnset]

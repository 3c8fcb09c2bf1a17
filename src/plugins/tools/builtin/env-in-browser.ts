import { BrowserInputs } from '../../browser-inputs.js'
import { envVarAad } from '../../../db/repos/env-vars.js'
import { fail } from '../../../errors/service-error.js'
import { checkQuota } from '../../../limits/quotas.js'
import { defineTool } from '../define.js'
import { appUri } from '../../resources/builtin/uris.js'
import { requireApp } from './apps.js'
import { envVarAudit } from './env-var-audit.js'
import { setWithinQuota } from './env-write.js'

/**
 * service_env_set_in_browser: the value is typed on our own page, so it never passes through the client or the model
 * (URL-mode elicitation; docs/decisions/url-elicitation.md). The call makes a pending row named by its operation,
 * sends the person to the row's page, waits until the page answers (any process; the `browser-input` event), then
 * writes the value the page sealed, taking it from the row in the same transaction so that it is written once.
 */
export const envSetInBrowser = defineTool<{ app_id: string; name: string }, { app_id: string; name: string; created: boolean }>({
  name: 'service_env_set_in_browser',
  title: 'Set an environment variable in the browser',
  description: 'Sets an environment variable of an app of your organization from a value the user types on a page of this server in their browser: the value never passes through the client or the model. Needs a client that supports URL-mode elicitation. Returns once the value is saved.',
  inputSchema: 'tools/service_env_set_in_browser.input',
  outputSchema: 'tools/service_env_set_in_browser.output',
  scope: 'mcp:write',
  role: 'developer',
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  rateLimitPerMinute: 10,
  ...envVarAudit,
  async handler(args, ctx) {
    const { principal, repos, browserInputs } = ctx
    const app = await requireApp(repos, principal, args.app_id)
    // Refused before the person is sent to type a value that could not be saved; checked again, held, when it is.
    if (!(await repos.envVars.exists(principal.organizationId, app.id, args.name))) {
      await checkQuota(repos, ctx.config, principal.organizationId, 'env_vars_per_app', app.id)
    }
    // Made before the question, which points to it; a retry of the same operation finds it again (same id).
    const id = BrowserInputs.idFor(ctx.operationId, app.id, args.name)
    const input = await browserInputs.open(id, principal, app, args.name)
    if (input.status === 'used') throw fail('CONFLICT', { message: `The value of ${args.name} entered for this call was already saved` })
    const answer = await ctx.elicitUrl({ message: `Enter the value of ${args.name} for app ${app.name} in your browser`, url: browserInputs.url(id), elicitationId: id })
    if (answer.action !== 'accept') {
      await repos.browserInputs.decline(id)
      throw fail('ELICITATION_DENIED', { message: 'The user did not open the page; nothing was changed' })
    }
    const answered = await browserInputs.wait(id, ctx.signal)
    if (answered.status === 'declined') throw fail('ELICITATION_DENIED', { message: 'The user declined on the page; nothing was changed' })
    const written = await repos.transaction(async (tx) => {
      const ciphertext = await tx.browserInputs.consume(id)
      if (ciphertext === undefined) return undefined
      return setWithinQuota(tx, ctx.config, { organizationId: principal.organizationId, appId: app.id, name: args.name, ciphertext, userId: principal.userId })
    })
    if (!written) throw fail('CONFLICT', { message: `The value of ${args.name} entered for this call was already saved` })
    ctx.resources.updated(appUri(app.id))
    ctx.completeElicitation(id)
    return { app_id: app.id, name: args.name, created: written.created }
  },
})

import type { Deployment } from '../../../db/repos/deployments.js'
import { fail } from '../../../errors/service-error.js'
import { isoTime } from '../../../lib/iso-time.js'
import { embeddedResource, text } from '../../../mcp/content.js'
import { deploymentIdCompleter, deploymentPhrase, renderLog } from '../../resources/builtin/deployment-log.js'
import { appUri, deploymentLogUri } from '../../resources/builtin/uris.js'
import { appDetails } from '../../tools/builtin/apps.js'
import { definePrompt } from '../define.js'

/** Log lines embedded at most: the last ones, which show how a run ended (the log resource has up to 10 000). */
export const REVIEW_LOG_LINES = 200

const UNSUCCESSFUL = new Set<Deployment['status']>(['failed', 'interrupted', 'cancelled'])

/** What to ask, by how the deployment stands: a failure is reviewed; anything else is rendered too, saying so. */
function request(d: Deployment, phrase: string): string {
  const cause = 'Explain why, quoting the log lines that show the cause, and say what to change to fix it: the app\'s code or configuration, its environment variables (only their names are shown), or the pipeline. If the log does not show the cause, say what to look at next.'
  switch (d.status) {
    case 'failed':
      return `The ${phrase} failed. ${cause}`
    case 'interrupted':
      return `The ${phrase} was interrupted: the server stopped while it ran. Say how far it got, whether anything in the log points to a problem of its own, and whether it is safe to deploy again.`
    case 'cancelled':
      return `The ${phrase} did not fail: it was cancelled. Say what it was doing when it was stopped, and whether anything in the log points to a problem before the cancellation.`
    case 'succeeded':
      return `The ${phrase} did not fail: it succeeded. Review its log for warnings or anything that could make a later deployment fail.`
    default:
      return `The ${phrase} has not ended: it is ${d.status}. Its log so far is attached; say whether anything in it already points to a failure.`
  }
}

function facts(d: Deployment, appName: string): string {
  const when = (ms: number | null) => (ms === null ? 'not yet' : isoTime(ms))
  return [
    `Deployment: ${d.id}`,
    `App: ${appName} (${d.appId})`,
    `Kind: ${d.kind}${d.rollbackOf ? ` (back to deployment ${d.rollbackOf})` : ''}`,
    `Pipeline: ${d.pipeline}`,
    `Status: ${d.status}`,
    `Outcome: ${d.outcome ?? 'none yet'}`,
    `Exit code: ${d.exitCode ?? 'none'}`,
    `Created: ${isoTime(d.createdAt)}; started: ${when(d.startedAt)}; finished: ${when(d.finishedAt)}`,
  ].join('\n')
}

/**
 * `review_failed_deployment`: asks the model why a deployment failed and how to fix it. Messages: the request with the
 * deployment's facts (app, kind, pipeline, status, outcome, exit code, times) as text, then the app (the app resource,
 * JSON with its env var names) and the deployment's log (the log resource's text, its last REVIEW_LOG_LINES lines)
 * embedded as resources. A deployment that did not fail is rendered too, asking what fits its status. An absent id and
 * an id of another organization are the same invalid-params error.
 */
export const reviewFailedDeployment = definePrompt<{ deployment_id: string }>({
  name: 'review_failed_deployment',
  title: 'Review a failed deployment',
  description: `Asks why a deployment of your organization failed and how to fix it, with its status, outcome and exit code, its app (JSON with the names of its environment variables) and its log (the last ${REVIEW_LOG_LINES} lines) embedded. A deployment that did not fail is rendered too, saying its status.`,
  arguments: [{
    name: 'deployment_id',
    title: 'Deployment',
    description: 'Id of a deployment of your organization (dep_…); completion offers failed, interrupted and cancelled ones first',
    required: true,
  }],
  scope: 'mcp:read',
  role: 'viewer',
  async get(args, ctx) {
    const { repos, principal } = ctx
    const d = await repos.deployments.byId(principal.organizationId, args.deployment_id)
    const app = d && await repos.apps.byId(principal.organizationId, d.appId)
    if (!d || !app) {
      throw fail('INVALID_PARAMS', { message: 'No deployment with this id in your organization', details: { argument: 'deployment_id' } })
    }
    const phrase = deploymentPhrase(d, app.name)
    const details = await appDetails(repos, app)
    const log = await renderLog(repos, d.id, REVIEW_LOG_LINES)
    return {
      description: `Review of the ${phrase} (${d.status})`,
      messages: [
        { role: 'user', content: text(`${request(d, phrase)}\n\n${facts(d, app.name)}\n\nThe app and the deployment's log follow.`) },
        { role: 'user', content: embeddedResource({ uri: appUri(app.id), mimeType: 'application/json', text: JSON.stringify(details) }) },
        { role: 'user', content: embeddedResource({ uri: deploymentLogUri(d.id), mimeType: 'text/plain', text: log }) },
      ],
    }
  },
  complete: { deployment_id: deploymentIdCompleter((d) => UNSUCCESSFUL.has(d.status)) },
})

import type { App } from '../../../db/repos/apps.js'
import type { Deployment, DeploymentLogLine } from '../../../db/repos/deployments.js'
import { fail, ServiceError } from '../../../errors/service-error.js'
import { isoTime } from '../../../lib/iso-time.js'
import { checkDeploymentQuotas } from '../../../limits/quotas.js'
import { outputDeleted } from '../../../retention/deleted-output.js'
import { CancelledByClient, TaskCancelled } from '../../../rpc/call-abort.js'
import { decodeCursor, encodeCursor } from '../../../rpc/cursor.js'
import { defineTool, type ToolContext, type ToolDefinition } from '../define.js'
import { requireApp } from './apps.js'
import { pipelineAsker } from './pipeline-questions.js'

/**
 * Deployments: list, read, follow and cancel the runs of an app's pipeline, start a deploy or a rollback.
 *
 * create and rollback are long-running: after the user confirms, every output line of the run goes to the client as a
 * `notifications/message` (logger `deployment`, level info, data {deployment_id, seq, stream, line}) and, when the call
 * carries a progressToken, as `notifications/progress` (progress = seq + 1, message = the line). The result is the
 * final deployment when it succeeded; a run that failed or was cancelled elsewhere is a tool failure (OPERATION_FAILED
 * / OPERATION_CANCELLED, docs/decisions/tool-failures.md) whose message names the deployment, so a client cannot
 * mistake it for success and can read the output with service_deployments_logs. notifications/cancelled for the call
 * stops the run (SIGTERM, then SIGKILL after the grace period) and no result is sent. A client that goes away, or whose
 * session ends, does not stop it (docs/decisions/long-running.md): the run finishes and its output stays readable.
 */

export function deploymentView(d: Deployment) {
  return {
    id: d.id,
    app_id: d.appId,
    kind: d.kind,
    rollback_of: d.rollbackOf,
    pipeline: d.pipeline,
    status: d.status,
    created_at: isoTime(d.createdAt),
    started_at: d.startedAt === null ? null : isoTime(d.startedAt),
    finished_at: d.finishedAt === null ? null : isoTime(d.finishedAt),
    exit_code: d.exitCode,
    outcome: d.outcome,
  }
}

export function logLineView(l: DeploymentLogLine) {
  return { seq: l.seq, stream: l.stream, line: l.line, at: isoTime(l.at) }
}

type DeploymentView = ReturnType<typeof deploymentView>
type LogLineView = ReturnType<typeof logLineView>

const LAST_LINES = 20
const LOGS_CURSOR = 'deployment_logs'

function deploymentNotFound() {
  return new ServiceError('RESOURCE_NOT_FOUND', { message: 'No deployment with this id in your organization' })
}

async function requireDeployment(ctx: ToolContext, deploymentId: string): Promise<Deployment> {
  const d = await ctx.repos.deployments.byId(ctx.principal.organizationId, deploymentId)
  if (!d) throw deploymentNotFound()
  return d
}

function isActive(d: Deployment): boolean {
  return d.status === 'queued' || d.status === 'running'
}

/** Checks made before the user is asked, so nobody confirms something that cannot start. */
async function refuseToStart(ctx: ToolContext, app: App): Promise<void> {
  if (!Object.hasOwn(ctx.config.pipelines, app.pipeline)) {
    throw fail('OPERATION_FAILED', { message: `The pipeline "${app.pipeline}" of app ${app.name} is not configured on this server; ask the operator, or pick another with service_apps_update` })
  }
  const active = await ctx.repos.deployments.active(ctx.principal.organizationId, app.id)
  if (active) {
    throw fail('CONFLICT', {
      message: `App ${app.name} already has a deployment ${active.status} (${active.id}); wait for it to finish or cancel it with service_deployments_cancel`,
    })
  }
  // The runner checks both again, holding the quota, in the transaction that queues the run.
  await checkDeploymentQuotas(ctx.repos, ctx.config, ctx.principal.organizationId)
}

/**
 * The call's signal also fires when its session ends (DELETE, expiry, revoked credential, server shutdown); only a
 * notifications/cancelled for this very call may cancel a run, and its abort reason says so.
 */
function cancelledByClient(signal: AbortSignal): boolean {
  return signal.reason instanceof CancelledByClient
}

/** What stopped the call: notifications/cancelled in a session, tasks/cancel for a task. */
function cancelledWith(signal: AbortSignal): string {
  return signal.reason instanceof TaskCancelled ? 'tasks/cancel' : 'notifications/cancelled'
}

/** Starts a run and streams its lines to the caller until it ends; see the module comment for what is sent. */
async function runAndStream(
  ctx: ToolContext,
  app: App,
  input: { kind: 'deploy' | 'rollback'; rollbackOf?: string },
): Promise<{ deployment: DeploymentView }> {
  const toolName = input.kind === 'deploy' ? deploymentsCreate.name : deploymentsRollback.name
  const { principal, pipelines } = ctx
  const signal = ctx.signal
  if (signal.aborted) throw fail('OPERATION_CANCELLED', { message: 'The call was cancelled before the deployment started; nothing ran' })
  let forwarding = true
  const handle = await pipelines.start(
    { organizationId: principal.organizationId, appId: app.id, kind: input.kind, ...(input.rollbackOf ? { rollbackOf: input.rollbackOf } : {}), createdBy: principal.userId },
    {
      onLine(line) {
        if (!forwarding) return
        ctx.log('info', { deployment_id: line.deploymentId, seq: line.seq, stream: line.stream, line: line.line }, 'deployment')
        ctx.progress(line.seq + 1, undefined, line.line)
      },
      onQuestion: pipelineAsker(ctx, toolName, app),
    },
  )
  const id = handle.deployment.id
  let onAbort: (() => void) | undefined
  const cancelled = new Promise<null>((resolve) => {
    onAbort = () => {
      if (!cancelledByClient(signal)) return
      forwarding = false // the request is over for the client: nothing more may reference it
      pipelines.cancel(principal.organizationId, id, 'cancelled by the client')
      resolve(null)
    }
    signal.addEventListener('abort', onAbort, { once: true })
    // Cancelled while the run was being started: the listener came too late to hear it.
    if (signal.aborted) onAbort()
  })
  let final: Deployment | null
  try {
    final = await Promise.race([handle.done, cancelled])
  } finally {
    forwarding = false
    signal.removeEventListener('abort', onAbort!)
  }
  if (final === null) {
    // The dispatcher sends nothing for a cancelled call; the runner stops the child (SIGTERM, then SIGKILL).
    await ctx.audit({ targetType: 'deployment', targetId: id, outcome: 'cancelled', details: { app_id: app.id, kind: input.kind, by: cancelledWith(signal) } })
    throw fail('OPERATION_CANCELLED', { message: `Deployment ${id} was cancelled` })
  }
  const why = (final.outcome ?? final.status).replace(/^[a-z]+: /, '')
  switch (final.status) {
    case 'succeeded':
      return { deployment: deploymentView(final) }
    case 'cancelled':
      await ctx.audit({ targetType: 'deployment', targetId: id, outcome: 'cancelled', details: { app_id: app.id, kind: input.kind } })
      throw fail('OPERATION_CANCELLED', { message: `Deployment ${id} of app ${app.name} was cancelled: ${why}`, details: { deployment_id: id } })
    case 'interrupted':
      // Only this server's shutdown interrupts a run it is streaming: the client is told how to find the outcome.
      throw fail('OPERATION_FAILED', {
        message: `Deployment ${id} of app ${app.name} was interrupted: ${why} (a server shutdown, not a failure of the pipeline). ` +
          `It is recorded as interrupted: once the server is back, service_deployments_get with deployment_id ${id} shows it and service_deployments_logs its output. ` +
          `${input.kind === 'rollback' ? 'Roll back' : 'Deploy'} again if it is still needed`,
        details: { deployment_id: id, status: final.status },
      })
    default:
      throw fail('OPERATION_FAILED', {
        message: `Deployment ${id} of app ${app.name} failed: ${why}. Its output: service_deployments_logs with deployment_id ${id}`,
        details: { deployment_id: id },
      })
  }
}

export const deploymentsList = defineTool<{ app_id?: string; limit?: number; offset?: number }, { deployments: DeploymentView[]; total: number; next_offset: number | null }>({
  name: 'service_deployments_list',
  title: 'List deployments',
  description: 'Lists the deployments and rollbacks of your organization, newest first, optionally of one app (app_id). Page with limit (1-100, default 20) and offset; next_offset is the offset of the next page, null after the last one.',
  inputSchema: 'tools/service_deployments_list.input',
  outputSchema: 'tools/service_deployments_list.output',
  scope: 'mcp:read',
  role: 'viewer',
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  rateLimitPerMinute: 60,
  async handler(args, ctx) {
    const limit = args.limit ?? 20
    const offset = args.offset ?? 0
    if (args.app_id !== undefined) await requireApp(ctx.repos, ctx.principal, args.app_id)
    const page = await ctx.repos.deployments.list(ctx.principal.organizationId, { ...(args.app_id !== undefined ? { appId: args.app_id } : {}), limit, offset })
    const end = offset + page.items.length
    return { deployments: page.items.map(deploymentView), total: page.total, next_offset: page.items.length > 0 && end < page.total ? end : null }
  },
})

type OutputDeleted = { output_deleted?: { at: string; message: string } }

export const deploymentsGet = defineTool<{ deployment_id: string }, { deployment: DeploymentView; last_lines: LogLineView[] } & OutputDeleted>({
  name: 'service_deployments_get',
  title: 'Get a deployment',
  description: `Shows one deployment: status (queued, running, succeeded, failed, cancelled, interrupted), timings, exit code, outcome and its last ${LAST_LINES} output lines. service_deployments_logs returns all of them. When retention deleted its output, output_deleted says when and no line is returned.`,
  inputSchema: 'tools/service_deployments_get.input',
  outputSchema: 'tools/service_deployments_get.output',
  scope: 'mcp:read',
  role: 'viewer',
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  rateLimitPerMinute: 60,
  async handler(args, ctx) {
    const d = await requireDeployment(ctx, args.deployment_id)
    const deleted = outputDeleted(d)
    if (deleted) return { deployment: deploymentView(d), last_lines: [], output_deleted: deleted }
    return { deployment: deploymentView(d), last_lines: (await ctx.repos.deployments.lastLines(d.id, LAST_LINES)).map(logLineView) }
  },
})

export const deploymentsLogs = defineTool<{ deployment_id: string; limit?: number; cursor?: string }, { lines: LogLineView[]; next_cursor: string | null } & OutputDeleted>({
  name: 'service_deployments_logs',
  title: 'Read deployment output',
  description: 'Returns the output lines of a deployment in order (stream stdout, stderr, or system for what the server adds), limit (1-500, default 100) at a time. Pass next_cursor back as cursor for the next lines. next_cursor is null once the deployment has ended and every line was returned; while it runs, next_cursor is always given, so polling with it picks up new lines. A run whose stored output passed the server\'s cap per run ends with a system line saying where it was cut. When retention deleted the output, no line is returned and output_deleted says when.',
  inputSchema: 'tools/service_deployments_logs.input',
  outputSchema: 'tools/service_deployments_logs.output',
  scope: 'mcp:read',
  role: 'viewer',
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  rateLimitPerMinute: 60,
  async handler(args, ctx) {
    const limit = args.limit ?? 100
    let after = -1
    if (args.cursor !== undefined) {
      const position = decodeCursor(LOGS_CURSOR, args.cursor)
      const m = position === undefined ? null : /^(dep_[0-9a-z]+)\.(-1|\d{1,9})$/.exec(position)
      if (!m || m[1] !== args.deployment_id) {
        throw fail('INVALID_ARGUMENTS', { message: 'cursor is not a cursor returned by service_deployments_logs for this deployment' })
      }
      after = Number(m[2])
    }
    // The status is read before the lines: a run seen finished here has all of its lines stored.
    const d = await requireDeployment(ctx, args.deployment_id)
    const deleted = outputDeleted(d)
    if (deleted) return { lines: [], next_cursor: null, output_deleted: deleted }
    const page = await ctx.repos.deployments.lines(d.id, limit, after)
    const last = page.items.at(-1)?.seq ?? after
    return {
      lines: page.items.map(logLineView),
      next_cursor: page.more || isActive(d) ? encodeCursor(LOGS_CURSOR, `${d.id}.${last}`) : null,
    }
  },
})

export const deploymentsCreate = defineTool<{ app_id: string }, { deployment: DeploymentView }>({
  name: 'service_deployments_create',
  title: 'Deploy an app',
  description: 'Deploys an app of your organization by running its pipeline, after the user confirms. Long-running: each output line is sent as a notifications/message (logger "deployment") and, when the call has a progressToken, as notifications/progress. Returns the deployment when it succeeded; a failed run is a tool error (OPERATION_FAILED) naming the deployment, whose output service_deployments_logs returns; so is a run interrupted by a server shutdown (status interrupted, which service_deployments_get shows once the server is back). Refused (CONFLICT) while another deployment of the app is queued or running, and (QUOTA_EXCEEDED) while the organization has as many deployments queued or running as its quota allows or stores as much deployment output as it allows. Cancelling the call (notifications/cancelled) stops the run; disconnecting does not. The pipeline may ask the user a yes/no question while it runs (a form on the stream of the call, or an input request of the task); a stateless call that is not a task cannot be asked, and the pipeline is told no.',
  inputSchema: 'tools/service_deployments_create.input',
  outputSchema: 'tools/service_deployments_create.output',
  scope: 'mcp:write',
  role: 'developer',
  confirm: true,
  longRunning: true,
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  rateLimitPerMinute: 10,
  auditSubject: (args) => ({ targetType: 'app', targetId: args.app_id }),
  auditTarget: (_args, output) => ({
    targetType: 'deployment',
    targetId: output.deployment.id,
    details: { app_id: output.deployment.app_id, kind: output.deployment.kind, status: output.deployment.status },
  }),
  async handler(args, ctx) {
    const app = await requireApp(ctx.repos, ctx.principal, args.app_id)
    await refuseToStart(ctx, app)
    await ctx.confirm(`Deploy app ${app.name} (${app.id}) with pipeline ${app.pipeline}?`)
    // The answer may have taken minutes: the runner checks the app and the active run again when it starts.
    return runAndStream(ctx, await requireApp(ctx.repos, ctx.principal, app.id), { kind: 'deploy' })
  },
})

export const deploymentsCancel = defineTool<{ deployment_id: string }, { deployment_id: string; status: 'cancelling' }>({
  name: 'service_deployments_cancel',
  title: 'Cancel a deployment',
  description: 'Stops a queued or running deployment of your organization (SIGTERM, then SIGKILL after the grace period) and returns at once with status "cancelling"; the deployment ends as cancelled (service_deployments_get shows it). CONFLICT when it has already ended.',
  inputSchema: 'tools/service_deployments_cancel.input',
  outputSchema: 'tools/service_deployments_cancel.output',
  scope: 'mcp:write',
  role: 'developer',
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  rateLimitPerMinute: 10,
  auditSubject: (args) => ({ targetType: 'deployment', targetId: args.deployment_id }),
  auditTarget: (_args, output) => ({ targetType: 'deployment', targetId: output.deployment_id }),
  async handler(args, ctx) {
    const { principal } = ctx
    const d = await requireDeployment(ctx, args.deployment_id)
    const ended = (status: string) => new ServiceError('CONFLICT', { message: `Deployment ${d.id} is ${status}: only a queued or running deployment can be cancelled` })
    if (!isActive(d)) throw ended(d.status)
    if (!(await ctx.pipelines.cancelAnywhere(principal.organizationId, d, `cancelled by user ${principal.userId} with service_deployments_cancel`))) {
      // It ended between the read and the cancel (a row left active by another process is marked at start).
      const now = await ctx.repos.deployments.byId(principal.organizationId, d.id)
      throw ended(now && !isActive(now) ? now.status : 'not running in this server')
    }
    return { deployment_id: d.id, status: 'cancelling' as const }
  },
})

export const deploymentsRollback = defineTool<{ app_id: string; to_deployment_id?: string }, { deployment: DeploymentView }>({
  name: 'service_deployments_rollback',
  title: 'Roll back an app',
  description: 'Puts an earlier deployment of an app back, after the user confirms, by running the app\'s pipeline as a rollback (kind "rollback", rollback_of = the target). to_deployment_id names a succeeded deploy of the app; without it, the target is the latest succeeded deploy before the one the app runs now (CONFLICT when there is none). Streams like service_deployments_create; a failed rollback is OPERATION_FAILED. Refused (CONFLICT) while a deployment of the app is queued or running, and (QUOTA_EXCEEDED) as service_deployments_create is. Its pipeline may ask the user a yes/no question, as with service_deployments_create.',
  inputSchema: 'tools/service_deployments_rollback.input',
  outputSchema: 'tools/service_deployments_rollback.output',
  scope: 'mcp:write',
  role: 'admin',
  confirm: true,
  longRunning: true,
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
  rateLimitPerMinute: 10,
  auditSubject: (args) => ({ targetType: 'app', targetId: args.app_id }),
  auditTarget: (_args, output) => ({
    targetType: 'deployment',
    targetId: output.deployment.id,
    details: { app_id: output.deployment.app_id, kind: output.deployment.kind, rollback_of: output.deployment.rollback_of, status: output.deployment.status },
  }),
  async handler(args, ctx) {
    const { principal, repos } = ctx
    const app = await requireApp(ctx.repos, ctx.principal, args.app_id)
    let target: Deployment
    if (args.to_deployment_id !== undefined) {
      target = await requireDeployment(ctx, args.to_deployment_id)
      if (target.appId !== app.id) {
        throw fail('INVALID_ARGUMENTS', { message: `Deployment ${target.id} belongs to another app; pass a deployment of app ${app.name} (service_deployments_list with app_id)` })
      }
      if (target.kind !== 'deploy' || target.status !== 'succeeded') {
        throw fail('CONFLICT', { message: `Deployment ${target.id} is a ${target.status} ${target.kind}: an app can only be rolled back to a succeeded deploy` })
      }
    } else {
      const { current, target: previous } = await repos.deployments.rollbackTarget(principal.organizationId, app.id)
      if (!previous) {
        throw fail('CONFLICT', {
          message: current
            ? `Nothing to roll back to: app ${app.name} runs ${current.id} and no deploy before it succeeded`
            : `Nothing to roll back to: app ${app.name} has no succeeded deploy`,
        })
      }
      target = previous
    }
    await refuseToStart(ctx, app)
    await ctx.confirm(`Roll back app ${app.name} (${app.id}) to deployment ${target.id} of ${isoTime(target.createdAt)}?`)
    return runAndStream(ctx, await requireApp(ctx.repos, ctx.principal, app.id), { kind: 'rollback', rollbackOf: target.id })
  },
})

/** The deployment tools, in tools/list order. */
export const deploymentTools: ToolDefinition<any, any>[] = [
  deploymentsList,
  deploymentsGet,
  deploymentsLogs,
  deploymentsCreate,
  deploymentsCancel,
  deploymentsRollback,
]

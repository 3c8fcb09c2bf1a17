import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { roleAllows } from '../../lib/roles.js'
import { toToolResult } from '../../errors/render.js'
import { fail, isServiceError, ServiceError } from '../../errors/service-error.js'
import { PipelineRunner } from '../../deployments/runner.js'
import { BrowserInputs } from '../browser-inputs.js'
import { writeAudit } from '../../lib/audit.js'
import { auditArguments } from './audit-arguments.js'
import { loadEnvKey } from '../../db/env-key.js'
import { SecretBox } from '../../lib/secret-box.js'
import { contentBlockProblem, forRevision } from '../../mcp/content.js'
import { CallAbort, TaskCancelled } from '../../rpc/call-abort.js'
import { rememberJson, textContent, type TextMemo } from '../../lib/message-json.js'
import type { CallContext, PrecheckContext } from '../../rpc/dispatcher.js'
import { HandlerContext, handlerDeps, type AskOptions } from '../../rpc/handler-context.js'
import type { InputRequests, InputResponses } from '../../mcp/input-requests.js'
import { declaresExtension } from '../../rpc/exchange.js'
import { atLeast, type RequestId } from '../../rpc/types.js'
import { describeDetails, validationDetails, validatorFor } from '../../validation/index.js'
import { AnswerRefused, InputRequired } from '../elicitation/index.js'
import { TASKS_EXTENSION } from '../tasks/index.js'
import { PLUGIN } from '../names.js'
import { builtinTools } from './builtin/index.js'
import { listMethod } from '../../rpc/list-method.js'
import { ToolResult, type ToolContext, type ToolDefinition } from './define.js'
import { CallIdempotency } from './idempotency.js'
import { rateLimitOf, ToolRegistry, type RegisteredTool } from './registry.js'
import type { DeclaredLimit } from '../../limits/fixed-windows.js'

declare module 'fastify' {
  interface FastifyInstance {
    tools: ToolRegistry
    pipelines: PipelineRunner
    /** Seals env var values at rest (the env-var key): the tools' and the env-input page's. */
    secrets: SecretBox
  }
}

export interface ToolsPluginOptions {
  /** The catalog to serve; defaults to the built-in tools. */
  tools?: ToolDefinition<any, any>[]
}

interface CallParams {
  name: string
  arguments?: Record<string, unknown>
  _meta?: { progressToken?: RequestId }
  /** 2026-07-28 retries of an input_required result (MRTR). */
  inputResponses?: Record<string, unknown>
  requestState?: string
}

/**
 * Failures of a write that are not the write failing: recorded by confirm() or by the tool itself, or a request the
 * client must change (a capability it did not declare: -32021, which the revision makes a JSON-RPC error).
 */
/** How long a cancellation asked of the process running a deployment waits for its answer. */
const CANCEL_ROUTE_TIMEOUT_MS = 5_000

const NOT_WRITE_FAILURES = new Set(['ELICITATION_DENIED', 'ELICITATION_TIMEOUT', 'CAPABILITY_REQUIRED', 'OPERATION_CANCELLED', 'MISSING_CLIENT_CAPABILITY'])

/** tools/list and tools/call over the registry. Tool failures are tool results, rendered by the error catalog. */
const toolsPlugin: FastifyPluginAsync<ToolsPluginOptions> = async (fastify, opts) => {
  const { rpc, repos, config } = fastify
  const secrets = new SecretBox(await loadEnvKey(config, repos))
  const { processes } = fastify
  const pipelines = new PipelineRunner({ repos, config, secrets, log: fastify.log, owner: processes.id })
  // What no live process owns was left by one that is gone (a previous run of this server, or a crashed neighbour).
  const interrupted = await pipelines.recover({ live: await processes.liveIds() }, { stopLeftovers: processes.exclusive })
  if (interrupted > 0) fastify.log.warn({ deployments: interrupted }, 'deployments left running by a previous process are marked interrupted')
  processes.onDead(async (dead) => {
    const n = await pipelines.recover({ dead }, { stopLeftovers: false })
    if (n > 0) fastify.log.warn({ deployments: n, processes: dead }, 'deployments of processes whose lease lapsed are marked interrupted')
  })
  // service_deployments_cancel on another process than the one running the deployment: asked of its owner.
  const { inbox } = fastify.coordination
  inbox.handle<{ organizationId: string; deploymentId: string; reason: string }, boolean>('deployment.cancel', (p) => pipelines.cancel(p.organizationId, p.deploymentId, p.reason))
  if (fastify.coordination.shared) {
    pipelines.cancelElsewhere = async (owner, organizationId, deploymentId, reason) =>
      (await inbox.ask<boolean>(owner, 'deployment.cancel', { organizationId, deploymentId, reason }, CANCEL_ROUTE_TIMEOUT_MS)) === true
  }
  fastify.decorate('pipelines', pipelines)
  fastify.decorate('secrets', secrets)
  const browserInputs = new BrowserInputs({ repos, events: fastify.events, clock: fastify.clock, config })
  // On stop, runs in flight are interrupted first, so that the calls waiting on them answer before sessions end.
  fastify.shutdown.onDrain(() => pipelines.stopAll())
  const registry = new ToolRegistry()
  for (const def of opts.tools ?? builtinTools) registry.add(def)
  fastify.decorate('tools', registry)
  // A tool added or removed at run time (embedding) is announced: on sessions' GET streams and on listen streams.
  registry.onChange(() => fastify.events.emit({ type: 'list.changed', list: 'tools', organizationId: null }))
  // Modern clients also hear when the tools visible to them change with a role (subscriptions plugin).
  rpc.capabilities.declare(['legacy', 'modern'], 'tools', { listChanged: true })

  rpc.registerRequest(listMethod(config, {
    method: 'tools/list',
    field: 'tools',
    items: (ctx) => registry.visibleTo(ctx.principal),
    describe: (tool, version) => tool.descriptors[version],
  }))

  /** Each tool's limit as tools/call declares it, made once: the tool's per-minute limit times the configured factor. */
  const toolLimits = new WeakMap<RegisteredTool, DeclaredLimit>()
  const toolLimit = (tool: RegisteredTool): DeclaredLimit => {
    let limit = toolLimits.get(tool)
    if (limit === undefined) {
      const name = tool.def.name
      limit = Object.freeze({ id: `t:${name}`, limit: rateLimitOf(tool.def) * config.rateLimitToolFactor, scope: `tool ${name}`, limiter: 'tool' as const })
      toolLimits.set(tool, limit)
    }
    return limit
  }

  // Confirmation-gated calls run at most once per (session, member, organization, request id) in a session, and per
  // operation (sealed in the requestState) on a stateless request (docs/decisions/idempotency.md).
  const idempotency = await CallIdempotency.attach(fastify, (exchange) => fastify.elicitation.operationOf(exchange))
  rpc.registerRequest<CallParams>({
    method: 'tools/call',
    eras: ['legacy', 'modern'],
    params: validatorFor('mcp/tools-call.params'),
    mirroredName: 'name',
    // A tool may mirror arguments into Mcp-Param-* headers (x-mcp-header): the modern front-end checks them.
    paramHeaders: (params) => registry.get(params.name)?.paramHeaders ?? [],
    describe: (params) => (typeof params.name === 'string' ? `tools/call ${params.name}` : 'tools/call'),
    // The tool's own limit, per member: counted by the front-end with the request's other windows, before the precheck.
    // A call its scope or role does not allow counts against no tool's limit (the precheck or the call refuses it).
    limits(params, principal) {
      const tool = registry.get(params.name)
      return tool && principal.scopes.includes(tool.def.scope) && roleAllows(principal.role, tool.def.role) ? toolLimit(tool) : null
    },
    precheck(params, ctx) {
      const { principal } = ctx
      const tool = registry.get(params.name)
      if (tool && !principal.scopes.includes(tool.def.scope)) {
        const wanted = [...new Set([...principal.scopes, tool.def.scope])].join(' ')
        throw fail('INSUFFICIENT_SCOPE', {
          message: `Tool ${tool.def.name} needs the ${tool.def.scope} scope`,
          details: { required_scope: tool.def.scope, scope: wanted },
        })
      }
      if (!tool) return // answered -32602 by the handler
      return openChecked(params, ctx, tool)
    },
    prefersStream(params) {
      const tool = registry.get(params.name)
      return params._meta?.progressToken !== undefined || tool?.def.longRunning === true || tool?.def.confirm === true
    },
    // A deployment runs for minutes: a stop interrupts it (and answers its call) rather than wait for it. With the tasks
    // extension the call only starts the task and answers at once.
    longLived(params, ctx) {
      return registry.get(params.name)?.def.longRunning === true && !declaresExtension(ctx.exchange.clientCapabilities, TASKS_EXTENSION)
    },
    handle: async (params, ctx) => {
      const result = await guarded(params, ctx)
      // A replayed confirmation of a task answers the same task, as it is now.
      return result.resultType === 'task' ? fastify.tasks.refreshHandle(ctx.principal, result) : result
    },
  })

  /** The precheck past the scope and the limit: the confirmation round, and the at-most-once check of a confirmed call. */
  function openChecked(params: CallParams, ctx: PrecheckContext, tool: RegisteredTool): void | Promise<void> {
    // A stateless retry's requestState is checked before anything runs (-32602 when it is not this call's).
    const opening = fastify.elicitation.openRound(ctx, toolTarget(tool.def.name), params.arguments ?? {}, params.requestState, params.inputResponses)
    // Only a confirmed call reads the database here; any other is checked without a promise when its state's key is known.
    if (tool.def.confirm !== true) return opening
    return checkConfirmed(opening, ctx, tool.def.name)
  }

  /** The id (or operation) of a confirmed call still pending or running: 409, before the dispatcher's in-flight check. */
  async function checkConfirmed(opening: void | Promise<void>, ctx: PrecheckContext, toolName: string): Promise<void> {
    await opening
    await idempotency.check(ctx, toolName)
  }

  /** tools/call itself, behind the at-most-once guard of confirmed calls. */
  const guarded = idempotency.guard<CallParams>((params) => registry.get(params.name)?.def, async (params, ctx) => {
    const tool = registry.get(params.name)
    if (!tool) throw fail('INVALID_PARAMS', { message: `Unknown tool: ${params.name}`, details: { name: params.name } })
    const args = params.arguments ?? {}
    // A client that declared the tasks extension in this request gets long-running work as a task.
    if (tool.def.longRunning === true && declaresExtension(ctx.exchange.clientCapabilities, TASKS_EXTENSION)) return runAsTask(tool, args, ctx)
    return callTool(tool, args, new ToolCall(ctx, tool.def.name, args, { progressToken: params._meta?.progressToken }), ctx)
  })

  /**
   * One call of a tool, from the role check to the tool result: failures become tool results (the error catalog's
   * tool shape), except the protocol failures and the input_required round of a stateless confirmation.
   */
  async function callTool(tool: RegisteredTool, args: Record<string, unknown>, toolCtx: ToolCall, ctx: CallContext): Promise<Record<string, unknown>> {
    const version = ctx.exchange.protocolVersion
    try {
      if (!roleAllows(ctx.principal.role, tool.def.role)) {
        await audit(ctx, tool.def.name, { outcome: 'denied', details: { reason: 'role', role: ctx.principal.role, required: tool.def.role, arguments: auditArguments(args, tool.secretPaths) } })
        throw fail('PERMISSION_DENIED', { message: `Your role (${ctx.principal.role}) cannot call ${tool.def.name}; it needs ${tool.def.role} or above` })
      }
      if (tool.validateInput(args) !== true) {
        const details = validationDetails(tool.validateInput.errors)
        throw fail('INVALID_ARGUMENTS', { message: `Invalid arguments for ${tool.def.name}: ${describeDetails(details)}`, details })
      }
      let output
      try {
        output = await tool.def.handler(args, toolCtx)
      } catch (err) {
        if (tool.def.scope === 'mcp:write' && !(err instanceof InputRequired)) {
          const code = isServiceError(err) ? err.code : 'INTERNAL_ERROR'
          // Declines and timeouts were recorded by confirm(); anything else that stopped a write is a failure.
          if (!NOT_WRITE_FAILURES.has(code)) {
            const subject = tool.def.auditSubject?.(args)
            await toolCtx.audit({ outcome: 'failed', ...subject, details: { ...subject?.details, error: code, arguments: auditArguments(args, tool.secretPaths) } })
          }
        }
        throw err
      }
      const rendered = renderResult(tool, output, ctx)
      if (tool.def.scope === 'mcp:write') {
        const structured = output instanceof ToolResult ? output.structuredContent : output
        const target = structured === undefined ? undefined : tool.def.auditTarget?.(args, structured)
        await toolCtx.audit({
          outcome: output instanceof ToolResult && output.isError ? 'failed' : 'succeeded',
          ...(target ?? {}),
          details: { ...target?.details, arguments: auditArguments(args, tool.secretPaths) },
        })
      }
      return rendered
    } catch (err) {
      // A stateless confirmation round: the call ends with the input_required result (nothing has changed).
      if (err instanceof InputRequired) return err.result
      // A malformed answer to a confirmation, or a capability the request lacks: the request is wrong, not the tool.
      if (err instanceof AnswerRefused) throw err.error
      if (isServiceError(err) && err.code === 'MISSING_CLIENT_CAPABILITY') throw err
      // Before 2025-11-25, invalid arguments are a protocol error (-32602); from then on a tool result.
      if (isServiceError(err) && err.code === 'INVALID_ARGUMENTS' && !atLeast(version, '2025-11-25')) throw err
      // In a task, a crash is a protocol error: the task ends `failed` with it (docs/decisions/tasks.md).
      if (!isServiceError(err) && toolCtx.inTask) throw err
      if (!isServiceError(err)) ctx.log.error({ err, tool: tool.def.name }, 'tool failed')
      return toToolResult(err)
    }
  }

  /** Each tool's previous answer text (rpc/message-json.ts); it goes with the tool when the tool is removed. */
  const textMemos = new WeakMap<RegisteredTool, TextMemo>()
  const textMemo = (tool: RegisteredTool): TextMemo => {
    let memo = textMemos.get(tool)
    if (memo === undefined) textMemos.set(tool, (memo = {}))
    return memo
  }

  /**
   * A tool's return as the call's result for the request's revision: an output object as JSON text (and as
   * `structuredContent` when the tool has an outputSchema), or a ToolResult's content blocks (and structured output).
   * What the tool returned is checked first: output that breaks its outputSchema, or a block that is not a content
   * block, is the server's failure (INTERNAL_ERROR, logged), never sent.
   */
  function renderResult(tool: RegisteredTool, output: unknown, ctx: CallContext): Record<string, unknown> {
    const version = ctx.exchange.protocolVersion
    const broken = (what: string, details: unknown) => {
      ctx.log.error({ tool: tool.def.name, details }, what)
      return new ServiceError('INTERNAL_ERROR')
    }
    const structured = output instanceof ToolResult ? output.structuredContent : output
    if (tool.validateOutput && tool.validateOutput(structured) !== true) {
      throw broken('tool output does not match its outputSchema', validationDetails(tool.validateOutput.errors))
    }
    if (!(output instanceof ToolResult)) {
      const text = JSON.stringify(output)
      const result: Record<string, unknown> = { content: textContent(text, textMemo(tool)), isError: false }
      if (atLeast(version, '2025-06-18') && tool.validateOutput) {
        result.structuredContent = output
        // Sent as the text already made, not serialized again (rpc/message-json.ts).
        if (typeof output === 'object' && output !== null) rememberJson(output, text)
      }
      return result
    }
    const content = output.content.map((block, i) => {
      const problem = contentBlockProblem(block)
      if (problem !== null) throw broken('tool returned something that is not a content block', { index: i, problem })
      return forRevision(block, version)
    })
    const result: Record<string, unknown> = { content, isError: output.isError }
    if (structured !== undefined && atLeast(version, '2025-06-18')) result.structuredContent = structured
    return result
  }

  /**
   * A long-running call as a task (tasks extension). Confirmations are settled first, synchronously, as the extension
   * recommends: the call answers input_required (or a refusal) like any call until the tool is confirmed; from then on
   * its work belongs to a task, the call answers with the task handle, and only tasks/cancel stops the work (a closed
   * connection no longer does). A tool that asks for no confirmation becomes a task at once. Tasks get no progress or
   * log notifications.
   */
  async function runAsTask(tool: RegisteredTool, args: Record<string, unknown>, ctx: CallContext): Promise<Record<string, unknown>> {
    const work = new CallAbort()
    let started = false
    let begin!: () => void
    const gate = new Promise<null>((resolve) => (begin = () => {
      started = true
      resolve(null)
    }))
    // Until the task exists, the request's own cancellation (its client closing the connection) stops the call.
    const onRequestAbort = () => {
      if (!started) work.abort(ctx.signal.reason)
    }
    ctx.signal.addEventListener('abort', onRequestAbort, { once: true })
    // The work may ask once it is a task: its questions wait for the task to be stored.
    let stored!: (taskId: string) => void
    let notStored!: (err: unknown) => void
    const taskId = new Promise<string>((resolve, reject) => ((stored = resolve), (notStored = reject)))
    taskId.catch(() => {}) // the work may never ask
    const asksFirst = tool.def.asksBeforeTask === true
    const toolCtx = new ToolCall(ctx, tool.def.name, args, {
      work,
      quiet: true,
      onConfirmed: () => begin(),
      task: { id: taskId, started: () => started, onAnswered: asksFirst ? () => begin() : undefined },
    })
    if (tool.def.confirm !== true && !asksFirst) begin()
    const running = callTool(tool, args, toolCtx, ctx)
    try {
      const early = await Promise.race([gate, running])
      if (!started && early !== null) return early // ended before starting: a question, a refusal or a failure
    } finally {
      ctx.signal.removeEventListener('abort', onRequestAbort)
    }
    try {
      const handle = await fastify.tasks.adopt(ctx.principal, tool.def.name, running, work)
      stored(handle.taskId as string)
      return handle
    } catch (err) {
      work.abort(new TaskCancelled('the task could not be stored'))
      notStored(err)
      throw err
    }
  }

  /** Audit entries of a stateless confirmed call name its operation too, linking the write to its confirmation. */
  function audit(ctx: CallContext, toolName: string, entry: Parameters<ToolContext['audit']>[0]): Promise<void> {
    const operation = fastify.elicitation.operationOf(ctx.exchange)
    return writeAudit(repos, ctx, toolName, operation === null ? entry : { ...entry, details: { ...entry.details, operation_id: operation } })
  }

  const deps = handlerDeps(fastify)
  /** The context one tool call gets: a handler's (HandlerContext) and a tool's own parts. */
  class ToolCall extends HandlerContext implements ToolContext {
    readonly secrets = secrets
    readonly pipelines = pipelines
    readonly browserInputs = browserInputs
    #lastProgress = -Infinity
    readonly #toolName: string
    readonly #args: Record<string, unknown>
    readonly #progressToken: RequestId | undefined
    readonly #work: CallAbort | undefined
    readonly #quiet: boolean
    readonly #onConfirmed: (() => void) | undefined
    readonly #task: TaskLink | undefined

    /** True when the call runs as a task (its failures are recorded on the task, not answered). */
    get inTask(): boolean {
      return this.#work !== undefined
    }

    /**
     * `progressToken`: the call's, for notifications/progress. A task's call passes `work` (its own cancellation,
     * instead of the request's), `quiet` (tasks send no notifications) and `onConfirmed` (the work may start).
     */
    constructor(ctx: CallContext, toolName: string, args: Record<string, unknown>, options: { progressToken?: RequestId | undefined; work?: CallAbort; quiet?: boolean; onConfirmed?: () => void; task?: TaskLink } = {}) {
      super(ctx, { target: toolTarget(toolName), args }, deps)
      this.#toolName = toolName
      this.#args = args
      this.#progressToken = options.quiet ? undefined : options.progressToken
      this.#work = options.work
      this.#quiet = options.quiet === true
      this.#onConfirmed = options.onConfirmed
      this.#task = options.task
    }

    /** Once the call is a task, its questions are the task's input requests (tasks/update answers them). */
    override async ask<R extends InputRequests>(requests: R, options?: AskOptions): Promise<InputResponses<R>> {
      const task = this.#task
      if (!task?.started()) {
        const answers = await super.ask(requests, options)
        task?.onAnswered?.()
        return answers
      }
      return (await fastify.tasks.ask(await task.id, requests, this.call.exchange.clientCapabilities)) as InputResponses<R>
    }

    override get signal(): AbortSignal {
      return this.#work?.signal ?? super.signal
    }

    progress(progress: number, total?: number, message?: string): void {
      // The spec requires strictly increasing progress; anything else is dropped rather than sent.
      if (this.#progressToken === undefined || !(progress > this.#lastProgress)) return
      this.#lastProgress = progress
      const p: Record<string, unknown> = { progressToken: this.#progressToken, progress }
      if (total !== undefined) p.total = total
      if (message !== undefined) p.message = message
      this.call.sink.send({ jsonrpc: '2.0', method: 'notifications/progress', params: p })
    }

    override log(level: Parameters<ToolContext['log']>[0], data: unknown, logger = 'tool'): void {
      if (!this.#quiet) super.log(level, data, logger)
    }

    async confirm(message: string): Promise<void> {
      // The elicitation plugin asks, checks the answer and audits it; once the call is a task, through the task.
      const inTask = this.#task?.started() === true ? <R extends InputRequests>(requests: R) => this.ask(requests) : undefined
      await fastify.elicitation.confirm(this.call, this.#toolName, this.#args, message, inTask)
      this.#onConfirmed?.()
    }

    audit(entry: Parameters<ToolContext['audit']>[0]): Promise<void> {
      return audit(this.call, this.#toolName, entry)
    }
  }
}

/** How a call run as a task reaches its task: the id once stored, whether it started, what its first answer starts. */
interface TaskLink {
  id: Promise<string>
  started: () => boolean
  /** The task starts once the first question is answered (asksBeforeTask). */
  onAnswered: (() => void) | undefined
}

/** What a tool call's questions are about, in a stateless requestState. */
function toolTarget(name: string): string {
  return `tools/call ${name}`
}

export default fp(toolsPlugin, { name: PLUGIN.tools, fastify: '5.x', dependencies: [PLUGIN.db, PLUGIN.processes, PLUGIN.rpc, PLUGIN.sessions, PLUGIN.rateLimits, PLUGIN.elicitation, PLUGIN.tasks] })

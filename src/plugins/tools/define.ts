import type { Principal, Scope } from '../../auth/principal.js'
import type { AuditOutcome } from '../../db/repos/audit.js'
import type { BrowserInputs } from '../browser-inputs.js'
import type { PipelineRunner } from '../../deployments/runner.js'
import type { SecretBox } from '../../lib/secret-box.js'
import type { Role } from '../../lib/roles.js'
import type { ContentBlock, Icon } from '../../mcp/content.js'
import type { RequestContext } from '../../rpc/handler-context.js'
import type { SchemaId } from '../../validation/index.js'

export type JsonSchema = Record<string, unknown>

export interface ToolAnnotations {
  readOnlyHint?: boolean
  destructiveHint?: boolean
  idempotentHint?: boolean
  openWorldHint?: boolean
}

/** What a tool handler receives besides its validated arguments: a handler's context, and a tool's own parts. */
export interface ToolContext extends RequestContext {
  /**
   * Sends notifications/progress when the call carried a progressToken; `progress` must increase. On the call's SSE
   * answer in both eras (a stateless call's answer becomes a stream with its first notification); dropped for tasks.
   */
  progress(progress: number, total?: number, message?: string): void
  /**
   * Asks the user to confirm `message` (the exact effect) and resolves only on accept + confirm: true; each answer is
   * written to the audit log. In a session it sends elicitation/create on the call's stream (throws
   * CAPABILITY_REQUIRED, ELICITATION_DENIED, ELICITATION_TIMEOUT or OPERATION_CANCELLED). On a stateless request the
   * first run of the tool ends here with an input_required result, and the client's retry runs the tool again, this
   * time past the question (or with ELICITATION_DENIED / ELICITATION_TIMEOUT). So: change nothing before it, and let
   * whatever it throws propagate. Tools declared `confirm: true` must call it before changing anything.
   */
  confirm(message: string): Promise<void>
  /**
   * Adds an audit-log entry for this call's member and organization (the action defaults to the tool name); resolves
   * once it is written. Never rejects: a failed write is logged.
   */
  audit(entry: { action?: string; targetType?: string; targetId?: string; outcome: AuditOutcome; details?: Record<string, unknown> }): Promise<void>
  /**
   * True when the call runs as a task (tasks extension): its questions are then the task's input requests, answered
   * with tasks/update, and may be asked at any point of the work.
   */
  readonly inTask: boolean
  /** Encrypts values kept at rest (env vars). */
  secrets: SecretBox
  /** Runs deployment pipelines. */
  pipelines: PipelineRunner
  /** Values typed on this server's own page (the built-in service_env_set_in_browser; plugins/browser-inputs.ts). */
  browserInputs: BrowserInputs
}

/**
 * What a handler may return instead of its output object: MCP content blocks (text, image, audio, resource links,
 * embedded resources), with structured output beside them or not, made by `toolResult`. A tool with an outputSchema
 * must give `structuredContent` matching it. Without this, a tool's output object is sent as JSON text (and as
 * `structuredContent` when the tool has an outputSchema).
 */
export class ToolResult<S extends Record<string, unknown> = Record<string, unknown>> {
  constructor(
    readonly content: readonly ContentBlock[],
    readonly structuredContent: S | undefined,
    /** A failure the model should see (a tool-level error with content of the tool's choosing). */
    readonly isError: boolean,
  ) {}
}

export function toolResult<S extends Record<string, unknown> = Record<string, unknown>>(content: readonly ContentBlock[], options: { structuredContent?: S; isError?: boolean } = {}): ToolResult<S> {
  return new ToolResult(content, options.structuredContent, options.isError === true)
}

/** What the audit log records for a successful call of a write tool. */
export interface AuditTarget {
  targetType: string
  targetId: string
  details?: Record<string, unknown>
}

/**
 * A tool is one module exporting one definition. Schemas are JSON Schema objects (compiled once when the server
 * starts) or the id of a schema under schemas/ (precompiled at build time).
 */
export interface ToolDefinition<I = Record<string, unknown>, O = Record<string, unknown>> {
  name: string
  title: string
  description: string
  inputSchema: JsonSchema | SchemaId
  outputSchema?: JsonSchema | SchemaId
  /** OAuth scope the token must carry. */
  scope: Scope
  /** Lowest role allowed to call it (roles include the ones below them). */
  role: Role
  annotations?: ToolAnnotations
  /** Icons a client may show beside it (2025-11-25 and later). */
  icons?: Icon[]
  /** Calls are confirmed by the user through elicitation before the handler runs. */
  confirm?: boolean
  /**
   * Streams progress and log lines while it runs; answered as SSE. A stateless call from a client that declares the
   * tasks extension runs it as a task (after its confirmation, if any).
   */
  longRunning?: boolean
  /**
   * With `longRunning`: the handler's first `ask()` is answered before the call becomes a task (input_required rounds
   * of the call itself); the task starts once it is answered, and later asks are the task's input requests.
   */
  asksBeforeTask?: boolean
  /** Calls per member per minute. */
  rateLimitPerMinute?: number
  /**
   * Names what a successful call changed, for the audit log. Every call of an `mcp:write` tool is audited (succeeded
   * or failed, never with argument values); this adds the target.
   */
  auditTarget?(args: I, output: O): AuditTarget
  /** Names what a failed write call was acting on, from its arguments alone (the audit entry of the failure). */
  auditSubject?(args: I): AuditTarget
  /** Returns the output object, or a ToolResult of content blocks. */
  handler(args: I, ctx: ToolContext): Promise<O | ToolResult> | O | ToolResult
}

/** Identity function that gives a tool definition its types. */
export function defineTool<I = Record<string, unknown>, O = Record<string, unknown>>(def: ToolDefinition<I, O>): ToolDefinition<I, O> {
  return def
}

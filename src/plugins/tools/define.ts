import type { FastifyBaseLogger } from 'fastify'
import type { Principal, Scope } from '../../auth/principal.js'
import type { Config } from '../../config.js'
import type { AuditOutcome } from '../../db/repos/audit.js'
import type { Repos } from '../../db/repos/index.js'
import type { PipelineRunner } from '../../deployments/runner.js'
import type { SecretBox } from '../../lib/secret-box.js'
import type { Role } from '../../db/schema.js'
import type { LogLevel, ProtocolVersion, RequestId } from '../../rpc/types.js'
import type { Session } from '../../sessions/session.js'
import type { SchemaId } from '../../validation/index.js'

export type JsonSchema = Record<string, unknown>

export interface ToolAnnotations {
  readOnlyHint?: boolean
  destructiveHint?: boolean
  idempotentHint?: boolean
  openWorldHint?: boolean
}

/** What a tool handler receives besides its validated arguments. */
export interface ToolContext {
  principal: Principal
  /** The legacy session of the call; null on stateless (2026-07-28) requests, which have none. */
  session: Session | null
  /** The revision the call came in: a session's negotiated one, or the request's own (`2026-07-28`). */
  protocolVersion: ProtocolVersion
  repos: Repos
  /**
   * Aborted when the client sends notifications/cancelled for this call (reason: CancelledByClient) or when the
   * session ends under it (reason: SessionEnded).
   */
  signal: AbortSignal
  requestId: RequestId
  /** Sends notifications/progress when the call carried a progressToken; `progress` must increase. */
  progress(progress: number, total?: number, message?: string): void
  /** Sends notifications/message when the level passes the session's logging/setLevel threshold. */
  log(level: LogLevel, data: unknown, logger?: string): void
  /** Server-side logger (never sent to the client). */
  logger: FastifyBaseLogger
  /**
   * Asks the user to confirm `message` (the exact effect) through elicitation/create, and resolves only on
   * accept + confirm: true. Throws CAPABILITY_REQUIRED, ELICITATION_DENIED, ELICITATION_TIMEOUT or OPERATION_CANCELLED;
   * each answer is written to the audit log. Tools declared `confirm: true` must call it before changing anything.
   */
  confirm(message: string): Promise<void>
  /** Adds an audit-log entry for this call's member and organization (the action defaults to the tool name). */
  audit(entry: { action?: string; targetType?: string; targetId?: string; outcome: AuditOutcome; details?: Record<string, unknown> }): void
  /** Encrypts values kept at rest (env vars). */
  secrets: SecretBox
  /** Runs deployment pipelines. */
  pipelines: PipelineRunner
  /** The server's configuration (read only). */
  config: Readonly<Config>
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
  /** Calls are confirmed by the user through elicitation before the handler runs. */
  confirm?: boolean
  /** Streams progress and log lines while it runs; answered as SSE. */
  longRunning?: boolean
  /** Calls per member per minute. */
  rateLimitPerMinute?: number
  /**
   * Names what a successful call changed, for the audit log. Every call of an `mcp:write` tool is audited (succeeded
   * or failed, never with argument values); this adds the target.
   */
  auditTarget?(args: I, output: O): AuditTarget
  /** Names what a failed write call was acting on, from its arguments alone (the audit entry of the failure). */
  auditSubject?(args: I): AuditTarget
  handler(args: I, ctx: ToolContext): Promise<O> | O
}

/** Identity function that gives a tool definition its types. */
export function defineTool<I = Record<string, unknown>, O = Record<string, unknown>>(def: ToolDefinition<I, O>): ToolDefinition<I, O> {
  return def
}

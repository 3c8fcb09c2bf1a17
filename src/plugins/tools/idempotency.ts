import type { FastifyBaseLogger, FastifyInstance } from 'fastify'
import type { Principal } from '../../auth/principal.js'
import type { IdempotencyKey, IdempotencyRecord } from '../../db/repos/idempotency.js'
import type { Repos } from '../../db/repos/index.js'
import { toToolResult } from '../../errors/render.js'
import { fail } from '../../errors/service-error.js'
import type { CallContext } from '../../rpc/dispatcher.js'
import type { RequestId } from '../../rpc/types.js'
import type { Exchange } from '../../rpc/exchange.js'

/** How long an ended call is remembered (decisions.md §6): 24 h after it finished or was interrupted. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000
/** How often expired records are purged. Expired records are ignored before that; the sweep only frees the rows. */
export const IDEMPOTENCY_SWEEP_MS = 10 * 60 * 1000

export type ToolResult = Record<string, unknown>

/** Who calls, in which exchange (session or stateless request), with which JSON-RPC id. */
export interface CallIdentity {
  exchange: Exchange
  principal: Principal
  requestId: RequestId
}

/**
 * The `session_id` of records of stateless (2026-07-28) calls: they have no session, and their `request_id` is
 * `op:<operation id>` (the id sealed in the confirmation's requestState), since each retry has a new JSON-RPC id.
 */
export const STATELESS_SCOPE = '-'

/**
 * What a retry of a call that the server never answered because it stopped (crash, or a shutdown before the call had
 * a result) gets: the operation may or may not have happened, and only its own traces can tell.
 */
export function interruptedResult(tool: string): ToolResult {
  return toToolResult(fail('OPERATION_FAILED', {
    message: `The server stopped and restarted while this ${tool} call was in progress: the operation may or may not have completed. ` +
      'Check its effect before calling again with a new request id (for a deployment: service_deployments_list, then service_deployments_logs)',
  }))
}

/**
 * Calls of confirmation-gated tools run at most once per (session, membership, organization, JSON-RPC id)
 * (interface.md "Confirmation-gated call identity", decisions.md §6), and on stateless (2026-07-28) requests per
 * (membership, organization, operation id sealed in the confirmation's requestState) (decisions.md §10). Every such
 * call is recorded in the database:
 *
 * - a second call with the id while the first is pending or running is refused with 409 IDEMPOTENCY_CONFLICT, from the
 *   tools/call precheck, before the answer's format is chosen (and before the dispatcher's own in-flight check);
 * - once the first has finished, whatever its outcome (success, failure, declined, timed out, cancelled), the same id
 *   gets the stored tool result again, unchanged: nothing runs and nobody is asked again;
 * - calls the server could not answer because it stopped are `interrupted`: at start for what a previous process left
 *   pending or running, at shutdown for calls aborted by it. A retry gets the result the call ended with when it got
 *   that far during a clean shutdown, else `interruptedResult`;
 * - the same id reused for another tool is a 409 too; a call answered with a JSON-RPC error (arguments refused in a
 *   session older than 2025-11-25) leaves no record.
 *
 * Records are kept 24 h after the call ended, then ignored and purged by a periodic sweep.
 */
export class CallIdempotency {
  readonly #repos: Repos
  readonly #log: FastifyBaseLogger
  readonly #ttlMs: number
  readonly #operationOf: (exchange: Exchange) => string | null

  constructor(repos: Repos, log: FastifyBaseLogger, operationOf: (exchange: Exchange) => string | null = () => null, ttlMs = IDEMPOTENCY_TTL_MS) {
    this.#repos = repos
    this.#log = log
    this.#operationOf = operationOf
    this.#ttlMs = ttlMs
  }

  /**
   * The instance of a running server: recovers what a previous process left, sweeps on an unref'd timer.
   * `operationOf` names the confirmed operation of a stateless call (from its verified requestState).
   */
  static attach(fastify: FastifyInstance, operationOf: (exchange: Exchange) => string | null): CallIdempotency {
    const idempotency = new CallIdempotency(fastify.repos, fastify.log, operationOf)
    const interrupted = idempotency.recover()
    if (interrupted > 0) fastify.log.warn({ calls: interrupted }, 'confirmed tool calls left unanswered by a previous process are marked interrupted')
    const timer = setInterval(() => idempotency.sweep(), IDEMPOTENCY_SWEEP_MS)
    timer.unref()
    fastify.addHook('onClose', async () => clearInterval(timer))
    return idempotency
  }

  /** At start: records left pending or running can never be answered; returns how many were marked interrupted. */
  recover(now = Date.now()): number {
    return this.#repos.idempotency.interruptUnfinished(now, now + this.#ttlMs)
  }

  /** Deletes records expired at `now`; returns how many. */
  sweep(now = Date.now()): number {
    try {
      return this.#repos.idempotency.purge(now)
    } catch (err) {
      this.#log.error({ err }, 'could not purge expired idempotency records')
      return 0
    }
  }

  /**
   * What identifies the call: (session, member, organization, JSON-RPC id) in a session; (member, organization,
   * operation) on a stateless request whose requestState names an operation. Null for a stateless call that carries
   * none (a first round, which only asks).
   */
  keyOf(call: CallIdentity): IdempotencyKey | null {
    const base = { membershipId: call.principal.membershipId, organizationId: call.principal.organizationId }
    const session = call.exchange.session
    if (session) return { ...base, sessionId: session.id, requestId: JSON.stringify(call.requestId) }
    const operation = call.exchange.era === 'modern' ? this.#operationOf(call.exchange) : null
    return operation === null ? null : { ...base, sessionId: STATELESS_SCOPE, requestId: `op:${operation}` }
  }

  /**
   * For the precheck: throws IDEMPOTENCY_CONFLICT (HTTP 409) when the id belongs to a call still pending or running, or
   * to a call of another tool; returns the stored result of an ended call, undefined for a new id.
   */
  check(call: CallIdentity, toolName: string, now = Date.now()): ToolResult | undefined {
    const key = this.keyOf(call)
    if (key === null) return undefined
    const record = this.#repos.idempotency.get(key, now)
    return record ? this.#answer(record, toolName) : undefined
  }

  /**
   * Records the call as pending, atomically. Returns its key, or `replay`: the result an ended call with this id gets
   * again. Throws IDEMPOTENCY_CONFLICT as `check` does (here a JSON-RPC error: the exchange has started).
   */
  begin(key: IdempotencyKey, toolName: string, now = Date.now()): { key: IdempotencyKey; replay?: ToolResult } {
    const begun = this.#repos.idempotency.begin(key, toolName, now, now + this.#ttlMs)
    if (begun.created) return { key }
    return { key, replay: this.#answer(begun.record, toolName) }
  }

  /** The tool starts: pending → running. */
  markRunning(key: IdempotencyKey, now = Date.now()): void {
    this.#write('mark running', () => this.#repos.idempotency.markRunning(key, now))
  }

  /**
   * Stores the result the call ended with: finished, or interrupted when the server's shutdown aborted the call, since
   * then the answer never reaches the client.
   */
  finish(ctx: CallContext, key: IdempotencyKey, result: ToolResult, now = Date.now()): void {
    if (abortedByShutdown(ctx)) this.#write('interrupt', () => this.#repos.idempotency.interrupt(key, result, now, now + this.#ttlMs))
    else this.#write('finish', () => this.#repos.idempotency.finish(key, result, now, now + this.#ttlMs))
  }

  /** Forgets a call that ended without a tool result (a JSON-RPC error): its id may be used again. */
  release(key: IdempotencyKey): void {
    this.#write('release', () => this.#repos.idempotency.release(key))
  }

  /**
   * Wraps the tools/call handler: calls of tools with `confirm: true` go through begin, markRunning and finish (or
   * release, when the handler throws); an id seen before gets its stored answer without calling `handle`.
   */
  guard<P>(
    toolOf: (params: P) => { name: string; confirm?: boolean } | undefined,
    handle: (params: P, ctx: CallContext) => Promise<ToolResult>,
  ): (params: P, ctx: CallContext) => Promise<ToolResult> {
    return async (params, ctx) => {
      const tool = toolOf(params)
      if (tool?.confirm !== true) return handle(params, ctx)
      const key = this.keyOf(ctx)
      // A stateless call without an accepted requestState runs only up to its question: nothing to record yet.
      if (key === null) return handle(params, ctx)
      const call = this.begin(key, tool.name)
      if (call.replay) return call.replay
      this.markRunning(call.key)
      let result: ToolResult
      try {
        result = await handle(params, ctx)
      } catch (err) {
        this.release(call.key)
        throw err
      }
      // Asked again (no answer yet, or a further confirmation): the operation has not run; a later round records it.
      if (result.resultType === 'input_required') this.release(call.key)
      else this.finish(ctx, call.key, result)
      return result
    }
  }

  #answer(record: IdempotencyRecord, toolName: string): ToolResult {
    // A session's record names its JSON-RPC id (JSON-encoded); a stateless one its operation (`op:<id>`), since every
    // retry of a stateless call has an id of its own.
    const stateless = record.sessionId === STATELESS_SCOPE
    const which = stateless ? 'this confirmation (the same requestState)' : `request id ${record.requestId} in this session`
    const details = {
      ...(stateless ? { operation: record.requestId.replace(/^op:/, '') } : { request_id: JSON.parse(record.requestId) as RequestId }),
      tool: record.tool,
      status: record.status,
    }
    if (record.tool !== toolName) {
      throw fail('IDEMPOTENCY_CONFLICT', {
        message: `Request id ${record.requestId} was already used in this session for a call of ${record.tool}; send a new id for a new call`,
        details,
      })
    }
    switch (record.status) {
      case 'pending':
      case 'running':
        throw fail('IDEMPOTENCY_CONFLICT', {
          message: `A call of ${record.tool} with ${which} is still ${record.status === 'pending' ? 'pending' : 'running'}`,
          details,
        })
      case 'finished':
        return record.result ?? interruptedResult(record.tool)
      case 'interrupted':
        return record.result ?? interruptedResult(record.tool)
    }
  }

  /** Bookkeeping never fails the call it records: a failed write is logged (a record left running ends at restart). */
  #write(what: string, fn: () => unknown): void {
    try {
      fn()
    } catch (err) {
      this.#log.error({ err }, `could not ${what} an idempotency record`)
    }
  }
}

/**
 * True when the call was aborted by the server stopping: the session's runtime was closed (every call aborted and
 * forgotten) while the session itself lives on. A notifications/cancelled leaves the call registered until its handler
 * returns, and a session that ends (DELETE, expiry, revocation) is marked ended.
 */
function abortedByShutdown(ctx: CallContext): boolean {
  const session = ctx.session
  if (!session || session.ended || !ctx.signal.aborted) return false
  return session.runtime?.inflight.has(ctx.requestId) !== true
}

import type { FastifyBaseLogger, FastifyInstance } from 'fastify'
import type { Principal } from '../../auth/principal.js'
import type { IdempotencyKey, IdempotencyRecord } from '../../db/repos/idempotency.js'
import type { Repos } from '../../db/repos/index.js'
import type { Abandoned } from '../../db/types.js'
import type { ProcessRegistry } from '../../coordination/process-registry.js'
import { toToolResult } from '../../errors/render.js'
import { fail, isServiceError } from '../../errors/service-error.js'
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
 * What a retry of a call that never started running gets when the server stopped before it could: nothing ran.
 * Recorded at start for calls a previous process left pending (only a call recorded running may have run).
 */
export function nothingRanResult(tool: string): ToolResult {
  return toToolResult(fail('OPERATION_FAILED', {
    message: `The server stopped before this ${tool} call started: nothing ran. Call again with a new request id to run it`,
  }))
}

/** What a call gets when its record cannot be written before it runs (a full or read-only disk): it does not run. */
function notRecorded(cause: unknown): Error {
  return fail('SERVICE_UNAVAILABLE', {
    message: 'The call could not be recorded, so it did not run: nothing was changed. Retry later with the same request id',
    retryAfter: 5,
    cause,
  })
}

/** A write this process could not make (a full or read-only disk), kept in memory and made again later. */
interface Unsaved {
  key: IdempotencyKey
  write: 'finish' | 'interrupt' | 'release'
  result: ToolResult | null
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
 *
 * The database alone cannot tell a call in progress from one whose bookkeeping failed (a full disk): both read pending
 * or running. So this process keeps the keys its calls hold (one server per database file makes that the whole
 * truth), and a record none of them holds is never answered as pending or running:
 * - the handler runs only once its record reads `running`; if that write fails, the call does not run and is answered
 *   SERVICE_UNAVAILABLE (a JSON-RPC error). So `pending` means the call never started running: nothing ran;
 * - a pending record no call holds is one whose call was answered with a JSON-RPC error and whose release could not be
 *   written: as for every such call, its id is free, and the next call with it takes the record over and runs;
 * - a call that ended but whose final write failed answers what it ended with from memory, to every retry, while the
 *   write is made again (at the next use of its id, and by the sweep); released likewise reads as absent;
 * - a running record no call holds, with nothing in memory, may have run: it reads as interrupted ("may or may not
 *   have completed"), and is recorded so;
 * - at start (no call of a previous process is live), pending records get a stored result saying that nothing ran, and
 *   running ones read "may or may not have completed".
 */
export class CallIdempotency {
  readonly #repos: Repos
  readonly #log: FastifyBaseLogger
  readonly #ttlMs: number
  readonly #operationOf: (exchange: Exchange) => string | null
  /** Keys held by calls of this process, from the start of begin to their end: only these are pending or running. */
  readonly #live = new Set<string>()
  /** The begin in progress of each key: begins of one key run one after the other, as they did synchronously. */
  readonly #beginning = new Map<string, Promise<unknown>>()
  /** Final writes that failed, by key, until they are made. */
  readonly #unsaved = new Map<string, Unsaved>()

  /** This process and its neighbours: a record another live process holds is that call's, never free. */
  readonly #processes: Pick<ProcessRegistry, 'id' | 'exclusive' | 'liveIds'> | null

  constructor(repos: Repos, log: FastifyBaseLogger, operationOf: (exchange: Exchange) => string | null = () => null, ttlMs = IDEMPOTENCY_TTL_MS, processes: Pick<ProcessRegistry, 'id' | 'exclusive' | 'liveIds'> | null = null) {
    this.#processes = processes
    this.#repos = repos
    this.#log = log
    this.#operationOf = operationOf
    this.#ttlMs = ttlMs
  }

  /**
   * The instance of a running server: recovers what a previous process left, sweeps on an unref'd timer.
   * `operationOf` names the confirmed operation of a stateless call (from its verified requestState).
   */
  static async attach(fastify: FastifyInstance, operationOf: (exchange: Exchange) => string | null): Promise<CallIdempotency> {
    const { processes } = fastify
    const idempotency = new CallIdempotency(fastify.repos, fastify.log, operationOf, IDEMPOTENCY_TTL_MS, processes)
    const interrupted = await idempotency.recover({ live: await processes.liveIds() })
    if (interrupted > 0) fastify.log.warn({ calls: interrupted }, 'confirmed tool calls left unanswered by a previous process are marked interrupted')
    processes.onDead(async (dead) => {
      const n = await idempotency.recover({ dead })
      if (n > 0) fastify.log.warn({ calls: n, processes: dead }, 'confirmed tool calls of processes whose lease lapsed are marked interrupted')
    })
    // A timer cannot wait: sweep never rejects (it logs what fails).
    const timer = setInterval(() => void idempotency.sweep(), IDEMPOTENCY_SWEEP_MS)
    timer.unref()
    fastify.addHook('onClose', async () => clearInterval(timer))
    return idempotency
  }

  /** Records left pending or running by processes that are gone can never be answered; returns how many were marked interrupted. */
  recover(abandoned: Abandoned = { live: [] }, now = Date.now()): Promise<number> {
    return this.#repos.idempotency.interruptUnfinished(now, now + this.#ttlMs, nothingRanResult, abandoned)
  }

  /**
   * Makes the final writes that failed before, then deletes records expired at `now`; returns how many were deleted.
   * Never rejects (a failure is logged).
   */
  async sweep(now = Date.now()): Promise<number> {
    await this.#saveUnsaved(now)
    try {
      return await this.#repos.idempotency.purge(now)
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
  async check(call: CallIdentity, toolName: string, now = Date.now()): Promise<ToolResult | undefined> {
    const key = this.keyOf(call)
    if (key === null) return undefined
    const record = await this.#repos.idempotency.get(key, now)
    if (!record) return undefined
    const answer = await this.#answer(key, record, toolName, now, false)
    return answer === FREE ? undefined : answer
  }

  /**
   * Records the call as pending, atomically. Returns its key, or `replay`: the result an ended call with this id gets
   * again. Throws IDEMPOTENCY_CONFLICT as `check` does (here a JSON-RPC error: the exchange has started), and
   * SERVICE_UNAVAILABLE when the record cannot be written (nothing runs).
   */
  async begin(key: IdempotencyKey, toolName: string, now = Date.now()): Promise<{ key: IdempotencyKey; replay?: ToolResult }> {
    const id = keyId(key)
    // Begins of one key run one after the other: each sees what the previous one decided (held, replayed, released).
    for (let previous = this.#beginning.get(id); previous !== undefined; previous = this.#beginning.get(id)) await previous
    const begun = this.#begin(key, id, toolName, now)
    const settled = begun.then(() => {}, () => {})
    this.#beginning.set(id, settled)
    try {
      return await begun
    } finally {
      if (this.#beginning.get(id) === settled) this.#beginning.delete(id)
    }
  }

  async #begin(key: IdempotencyKey, id: string, toolName: string, now: number): Promise<{ key: IdempotencyKey; replay?: ToolResult }> {
    const expiresAt = now + this.#ttlMs
    // Held from now on, before the record is read or written, unless another call of this process holds it: any other
    // call with this key (a precheck, or a begin) sees it held until this one holds it for good or lets go.
    const claimed = !this.#live.has(id)
    if (claimed) this.#live.add(id)
    try {
      let begun: Awaited<ReturnType<Repos['idempotency']['begin']>>
      try {
        begun = await this.#repos.idempotency.begin(key, toolName, now, expiresAt, this.#owner)
        if (!begun.created) {
          const answer = await this.#answer(key, begun.record, toolName, now, claimed)
          if (answer !== FREE) {
            if (claimed) this.#live.delete(id)
            return { key, replay: answer }
          }
          // The id is free: its record is taken over, or made anew when answering just wrote the release it waited for.
          const taken = (await this.#repos.idempotency.takeOver(key, toolName, now, expiresAt, this.#owner)) || (await this.#repos.idempotency.begin(key, toolName, now, expiresAt, this.#owner)).created
          if (!taken) throw new Error('an idempotency record changed while a free id was taken over')
        }
      } catch (err) {
        if (isServiceError(err)) throw err
        throw notRecorded(err)
      }
    } catch (err) {
      if (claimed) this.#live.delete(id)
      throw err
    }
    this.#live.add(id)
    return { key }
  }

  /** The tool starts: pending → running. Throws SERVICE_UNAVAILABLE when that cannot be recorded: the tool must not run. */
  async markRunning(key: IdempotencyKey, now = Date.now()): Promise<void> {
    try {
      await this.#repos.idempotency.markRunning(key, now)
    } catch (err) {
      this.#log.error({ err }, 'could not mark an idempotency record running; the call does not run')
      throw notRecorded(err)
    }
  }

  /**
   * Stores the result the call ended with: finished, or interrupted when the server's shutdown aborted the call, since
   * then the answer never reaches the client.
   */
  finish(ctx: CallContext, key: IdempotencyKey, result: ToolResult, now = Date.now()): Promise<void> {
    return this.#end({ key, write: abortedByShutdown(ctx) ? 'interrupt' : 'finish', result }, now)
  }

  /** Forgets a call that ended without a tool result (a JSON-RPC error): its id may be used again. */
  release(key: IdempotencyKey, now = Date.now()): Promise<void> {
    return this.#end({ key, write: 'release', result: null }, now)
  }

  /**
   * Wraps the tools/call handler: calls of tools with `confirm: true` go through begin, markRunning and finish (or
   * release, when the handler throws); an id seen before gets its stored answer without calling `handle`.
   */
  guard<P>(
    toolOf: (params: P) => { name: string; confirm?: boolean } | undefined,
    handle: (params: P, ctx: CallContext) => Promise<ToolResult>,
  ): (params: P, ctx: CallContext) => Promise<ToolResult> {
    // Not async itself: a call that needs no guard goes straight to the handler (no extra promise to resolve).
    return (params, ctx) => {
      const tool = toolOf(params)
      if (tool?.confirm !== true) return handle(params, ctx)
      return this.#guarded(tool as { name: string; confirm: true }, params, ctx, handle)
    }
  }

  /** A confirmed call: begin, markRunning, then finish (or release, when the handler throws or asks again). */
  async #guarded<P>(tool: { name: string; confirm: true }, params: P, ctx: CallContext, handle: (params: P, ctx: CallContext) => Promise<ToolResult>): Promise<ToolResult> {
    const key = this.keyOf(ctx)
    // A stateless call without an accepted requestState runs only up to its question: nothing to record yet.
    if (key === null) return handle(params, ctx)
    const call = await this.begin(key, tool.name)
    if (call.replay) return call.replay
    try {
      await this.markRunning(call.key)
    } catch (err) {
      await this.release(call.key)
      throw err
    }
    let result: ToolResult
    try {
      result = await handle(params, ctx)
    } catch (err) {
      await this.release(call.key)
      throw err
    }
    // Asked again (no answer yet, or a further confirmation): the operation has not run; a later round records it.
    if (result.resultType === 'input_required') await this.release(call.key)
    else await this.finish(ctx, call.key, result)
    return result
  }

  /**
   * The call ends: its final write, kept in memory when it fails. The key is no longer held either way (at once, before
   * the write). Never rejects.
   */
  async #end(write: Unsaved, now: number): Promise<void> {
    const id = keyId(write.key)
    this.#live.delete(id)
    this.#unsaved.set(id, write)
    await this.#save(id, write, now)
  }

  /**
   * Makes a final write; forgets it once made (unless a newer one replaced it meanwhile). Logged when it fails (it
   * stays in memory, and is made again later). Never rejects.
   */
  async #save(id: string, write: Unsaved, now: number): Promise<boolean> {
    try {
      const repo = this.#repos.idempotency
      if (write.write === 'release') await repo.release(write.key)
      else if (write.write === 'interrupt') await repo.interrupt(write.key, write.result, now, now + this.#ttlMs)
      else await repo.finish(write.key, write.result!, now, now + this.#ttlMs)
      if (this.#unsaved.get(id) === write) this.#unsaved.delete(id)
      return true
    } catch (err) {
      this.#log.error({ err, pending: this.#unsaved.size }, `could not ${write.write} an idempotency record; kept in memory and retried`)
      return false
    }
  }

  async #saveUnsaved(now: number): Promise<void> {
    for (const [id, write] of [...this.#unsaved]) if (!(await this.#save(id, write, now))) return
  }

  /**
   * The answer a record gets: a stored result, IDEMPOTENCY_CONFLICT, or FREE when the id may run (a pending record no
   * call holds). A pending or running record is taken at its word only while a call of this process holds it (`mine`:
   * the caller is the begin that holds it, which asks on behalf of no other call).
   */
  async #answer(key: IdempotencyKey, record: IdempotencyRecord, toolName: string, now: number, mine: boolean): Promise<ToolResult | typeof FREE> {
    const id = keyId(key)
    if ((record.status === 'pending' || record.status === 'running') && (mine || (!this.#live.has(id) && !(await this.#heldElsewhere(record))))) {
      const unsaved = this.#unsaved.get(id)
      if (unsaved) await this.#save(id, unsaved, now)
      if (unsaved?.write === 'release' || (!unsaved && record.status === 'pending')) return FREE
      if (unsaved) return this.#replay(record, unsaved.result, toolName)
      // Running, and no call holds it: it may have run. Recorded as what it is now, interrupted (best effort).
      this.#log.warn({ tool: record.tool }, 'an idempotency record no call holds reads running: answered as interrupted')
      const interrupted: Unsaved = { key, write: 'interrupt', result: null }
      this.#unsaved.set(id, interrupted)
      await this.#save(id, interrupted, now)
      return this.#replay(record, null, toolName)
    }
    return this.#replay(record, undefined, toolName)
  }

  /** Whether another live process runs the call of `record` (then it is that call's: answered as pending or running). */
  async #heldElsewhere(record: IdempotencyRecord): Promise<boolean> {
    const processes = this.#processes
    if (!processes || processes.exclusive || record.owner === null || record.owner === processes.id) return false
    return (await processes.liveIds()).includes(record.owner)
  }

  get #owner(): string | null {
    return this.#processes?.id ?? null
  }

  /** The answer of a record, whose result is `ended` when this process knows better than the row (undefined: the row). */
  #replay(record: IdempotencyRecord, ended: ToolResult | null | undefined, toolName: string): ToolResult {
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
    if (ended !== undefined) return ended ?? interruptedResult(record.tool)
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
}

/** #answer's word for "no call holds this id: it may run". */
const FREE = Symbol('free')

function keyId(key: IdempotencyKey): string {
  return JSON.stringify([key.sessionId, key.membershipId, key.organizationId, key.requestId])
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

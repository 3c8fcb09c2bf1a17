import { randomUUID } from 'node:crypto'
import type { FastifyBaseLogger, FastifyInstance } from 'fastify'
import type { Principal } from '../../auth/principal.js'
import type { IdempotencyKey, IdempotencyRecord } from '../../db/repos/idempotency.js'
import type { Repos } from '../../db/repos/index.js'
import type { Abandoned } from '../../db/types.js'
import type { ProcessRegistry } from '../../coordination/process-registry.js'
import { toToolResult } from '../../errors/render.js'
import { isServiceError, ServiceError } from '../../errors/service-error.js'
import type { CallContext } from '../../rpc/dispatcher.js'
import type { RequestId } from '../../rpc/types.js'
import type { Exchange } from '../../rpc/exchange.js'

/** How long an ended call is remembered (docs/decisions/idempotency.md): 24 h after it finished or was interrupted. */
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
  return toToolResult(new ServiceError('OPERATION_FAILED', {
    message: `The server stopped and restarted while this ${tool} call was in progress: the operation may or may not have completed. ` +
      'Check its effect before calling again with a new request id (for a deployment: service_deployments_list, then service_deployments_logs)',
  }))
}

/**
 * What a retry of a call that never started running gets when the server stopped before it could: nothing ran.
 * Recorded at start for calls a previous process left pending (only a call recorded running may have run).
 */
export function nothingRanResult(tool: string): ToolResult {
  return toToolResult(new ServiceError('OPERATION_FAILED', {
    message: `The server stopped before this ${tool} call started: nothing ran. Call again with a new request id to run it`,
  }))
}

/** What a call gets when its record cannot be written before it runs (a full or read-only disk): it does not run. */
function notRecorded(cause: unknown): Error {
  return new ServiceError('SERVICE_UNAVAILABLE', {
    message: 'The call could not be recorded, so it did not run: nothing was changed. Retry later with the same request id',
    retryAfter: 5,
    cause,
  })
}

/** A call's hold on its record, from its begin to its end: the key, and the claim token naming this call in the row. */
export interface Held {
  key: IdempotencyKey
  claim: string
}

/** The final write of a call, kept in memory until it is made (a full or read-only disk fails it), and made again later. */
interface Unsaved extends Held {
  write: 'finish' | 'interrupt' | 'release'
  result: ToolResult | null
  /** The write in progress, which a second save of the same write waits for instead of racing it. */
  saving?: Promise<boolean>
}

/**
 * How many times begin reads a record again after losing a compare-and-set to another process; by then some call holds
 * the id, which is a conflict. Each lost round means another process changed the record, so the next one rarely loses.
 */
const CLAIM_ROUNDS = 3

/**
 * Calls of confirmation-gated tools run at most once per (session, membership, organization, JSON-RPC id)
 * (interface.md "Confirmation-gated call identity", docs/decisions/idempotency.md), and on stateless (2026-07-28)
 * requests per (membership, organization, operation id sealed in the confirmation's requestState). Every such call is
 * recorded in the database:
 *
 * - a second call with the id while the first is pending or running is refused with 409 IDEMPOTENCY_CONFLICT, from the
 *   tools/call precheck, before the answer's format is chosen (and before the dispatcher's own in-flight check);
 * - once the first has finished, whatever its outcome (success, failure, declined, timed out, cancelled), the same id
 *   gets the stored tool result again, unchanged: nothing runs and nobody is asked again;
 * - calls the server could not answer because it stopped are `interrupted`: at start, or once a process's lease lapsed,
 *   for what that process left pending or running, and at shutdown for calls aborted by it. A retry gets the result the
 *   call ended with when it got that far during a clean shutdown, else `interruptedResult`;
 * - the same id reused for another tool is a 409 too; a call answered with a JSON-RPC error (arguments refused in a
 *   session older than 2025-11-25) leaves no record.
 *
 * At most once, by construction, whatever the interleaving of copies across processes: a record is held by one call,
 * named in the row by its process (`owner`) and a token of its own (`claim`). Every change of a live record is a
 * compare-and-set on the claim (db/repos/idempotency.ts), and the operation runs only after its call's own
 * pending → running succeeded. A record is taken from its holder only when no live call holds it: when its owner is
 * another process, only once that process's lease has lapsed (its lease is honoured, so "may or may not have completed"
 * is said only of a process that is gone); when it is this process, only when none of its calls holds that claim now.
 * A taken record's old holder then changes nothing: it does not run, and its late result is not stored.
 *
 * Records are kept 24 h after the call ended, then ignored and purged by a periodic sweep.
 *
 * The database alone cannot tell a call of this process in progress from one whose bookkeeping failed (a full disk):
 * both read pending or running, owned here. So this process keeps the claims its calls hold, and a record of its own
 * that none of them holds is never answered as pending or running:
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
  /** The claim held by a call of this process, by key, from the start of its begin to its end. */
  readonly #held = new Map<string, string>()
  /** The begin in progress of each key: begins of one key in this process run one after the other. */
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
    const answer = await this.#answer(key, record, toolName, now)
    return answer === FREE ? undefined : answer
  }

  /**
   * Records the call as pending, held by it, atomically: returns its hold, or `replay`, the result an ended call with
   * this id gets again. Throws IDEMPOTENCY_CONFLICT as `check` does (here a JSON-RPC error: the exchange has started),
   * and SERVICE_UNAVAILABLE when the record cannot be written (nothing runs).
   */
  async begin(key: IdempotencyKey, toolName: string, now = Date.now()): Promise<Held | { replay: ToolResult }> {
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

  async #begin(key: IdempotencyKey, id: string, toolName: string, now: number): Promise<Held | { replay: ToolResult }> {
    const held: Held = { key, claim: newClaim() }
    // Held from now on, before the row is written, unless another call of this process holds the key: a precheck of
    // this process that reads the new row meanwhile takes it for this call's, never for an abandoned one.
    if (!this.#held.has(id)) this.#held.set(id, held.claim)
    try {
      const claimed = await this.#claim(held, toolName, now)
      if (claimed === held) this.#held.set(id, held.claim)
      else this.#letGo(held)
      return claimed
    } catch (err) {
      this.#letGo(held)
      if (isServiceError(err)) throw err
      throw notRecorded(err)
    }
  }

  /**
   * Writes the record for `held`, or takes over a record no live call holds; else the answer the record gets. A round
   * that loses its compare-and-set lost it to another process, which changed the record: the next one reads it again.
   */
  async #claim(held: Held, toolName: string, now: number): Promise<Held | { replay: ToolResult }> {
    const repo = this.#repos.idempotency
    const holder = { owner: this.#owner, claim: held.claim }
    const expiresAt = now + this.#ttlMs
    for (let round = 1; ; round++) {
      const begun = await repo.begin(held.key, toolName, holder, now, expiresAt)
      if (begun.created) return held
      let record = begun.record
      if (record !== undefined) {
        const answer = await this.#answer(held.key, record, toolName, now)
        if (answer !== FREE) return { replay: answer }
        if (await repo.takeOver(held.key, record.claim, toolName, holder, now, expiresAt)) return held
        record = await repo.get(held.key, now)
      }
      if (round === CLAIM_ROUNDS) throw stillHeld(record ?? { tool: toolName, status: 'pending' }, held.key)
    }
  }

  /**
   * The tool starts: pending → running, by this call's claim. Undefined when it may run. Otherwise it must not, and
   * this is what it answers: the record's stored result, or IDEMPOTENCY_CONFLICT (thrown), when another process took
   * the record over or recovered it (this process's lease had lapsed), or SERVICE_UNAVAILABLE (thrown) when the write
   * failed (the record is then released).
   */
  async markRunning(held: Held, toolName: string, now = Date.now()): Promise<ToolResult | undefined> {
    let marked: boolean
    try {
      marked = await this.#repos.idempotency.markRunning(held.key, held.claim, now)
    } catch (err) {
      this.#log.error({ err }, 'could not mark an idempotency record running; the call does not run')
      await this.release(held, now)
      throw notRecorded(err)
    }
    if (marked) return undefined
    this.#letGo(held)
    this.#log.warn({ tool: toolName }, 'a confirmed call lost its idempotency record before it ran (taken over or recovered by another process): it does not run')
    const record = await this.#repos.idempotency.get(held.key, now)
    const answer = record === undefined ? FREE : await this.#answer(held.key, record, toolName, now)
    if (answer === FREE) throw stillHeld(record ?? { tool: toolName, status: 'pending' }, held.key)
    return answer
  }

  /**
   * Stores the result the call ended with: finished, or interrupted when the server's shutdown aborted the call, since
   * then the answer never reaches the client.
   */
  finish(ctx: CallContext, held: Held, result: ToolResult, now = Date.now()): Promise<void> {
    return this.#end({ ...held, write: abortedByShutdown(ctx) ? 'interrupt' : 'finish', result }, now)
  }

  /** Forgets a call that ended without a tool result (a JSON-RPC error): its id may be used again. */
  release(held: Held, now = Date.now()): Promise<void> {
    return this.#end({ ...held, write: 'release', result: null }, now)
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
    if ('replay' in call) return call.replay
    const lost = await this.markRunning(call, tool.name)
    if (lost !== undefined) return lost
    let result: ToolResult
    try {
      result = await handle(params, ctx)
    } catch (err) {
      await this.release(call)
      throw err
    }
    // Asked again (no answer yet, or a further confirmation): the operation has not run; a later round records it.
    if (result.resultType === 'input_required') await this.release(call)
    else await this.finish(ctx, call, result)
    return result
  }

  /**
   * The call ends: its final write, kept in memory until it is made. The key is no longer held (at once, before the
   * write: a retry meanwhile answers from memory). Never rejects.
   */
  async #end(write: Unsaved, now: number): Promise<void> {
    const id = keyId(write.key)
    this.#unsaved.set(id, write)
    this.#letGo(write)
    await this.#save(id, write, now)
  }

  /** This call no longer holds its key in this process (unless another call of it took the key meanwhile). */
  #letGo(held: Held): void {
    const id = keyId(held.key)
    if (this.#held.get(id) === held.claim) this.#held.delete(id)
  }

  /**
   * Makes a final write, once at a time (a second save waits for the first); forgets it once made (unless a newer one
   * replaced it meanwhile). Logged when it fails (it stays in memory, and is made again later). Never rejects.
   */
  #save(id: string, write: Unsaved, now: number): Promise<boolean> {
    write.saving ??= this.#write(id, write, now).finally(() => {
      write.saving = undefined
    })
    return write.saving
  }

  async #write(id: string, write: Unsaved, now: number): Promise<boolean> {
    try {
      const repo = this.#repos.idempotency
      let made: boolean
      if (write.write === 'release') made = await repo.release(write.key, write.claim)
      else if (write.write === 'interrupt') made = await repo.interrupt(write.key, write.claim, write.result, now, now + this.#ttlMs)
      else made = await repo.finish(write.key, write.claim, write.result!, now, now + this.#ttlMs)
      // The record was taken from this call (its process's lease lapsed meanwhile): it is another's, or recovered.
      if (!made && write.write !== 'release') this.#log.warn({ write: write.write }, 'a confirmed call ended after another process recovered its idempotency record; its outcome is not stored')
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
   * The answer a record gets: its stored result when it ended, IDEMPOTENCY_CONFLICT (thrown) while a live call holds
   * it or when it is another tool's, or FREE when the id may run again (a pending record no live call holds: nothing
   * ran). A running record no live call holds may have run: it is recorded interrupted and answered so.
   */
  async #answer(key: IdempotencyKey, record: IdempotencyRecord, toolName: string, now: number): Promise<ToolResult | typeof FREE> {
    if (record.tool !== toolName) throw otherTool(record)
    if (record.status === 'finished' || record.status === 'interrupted') return record.result ?? interruptedResult(record.tool)
    if (await this.#heldByLiveCall(key, record)) throw stillHeld(record, key)
    // No live call holds it: its call ended in this process but its final write failed, or its process is gone.
    const id = keyId(key)
    const unsaved = this.#unsaved.get(id)
    if (unsaved !== undefined && unsaved.claim === record.claim) {
      await this.#save(id, unsaved, now)
      return unsaved.write === 'release' ? FREE : unsaved.result ?? interruptedResult(record.tool)
    }
    if (record.status === 'pending') return FREE
    return this.#interruptAbandoned(key, record, toolName, now)
  }

  /**
   * A running record no live call holds: it may have run. Recorded as interrupted (best effort: a failed write is kept
   * in memory and made later), unless another process changed it first, in which case that change is answered.
   */
  async #interruptAbandoned(key: IdempotencyKey, record: IdempotencyRecord, toolName: string, now: number): Promise<ToolResult | typeof FREE> {
    this.#log.warn({ tool: record.tool, owner: record.owner }, 'an idempotency record no live call holds reads running: answered as interrupted')
    const write: Unsaved = { key, claim: record.claim ?? '', write: 'interrupt', result: null }
    let made: boolean
    try {
      made = await this.#repos.idempotency.interrupt(key, record.claim, null, now, now + this.#ttlMs)
    } catch (err) {
      this.#log.error({ err }, 'could not interrupt an abandoned idempotency record; kept in memory and retried')
      if (record.claim !== null) this.#unsaved.set(keyId(key), write)
      return interruptedResult(record.tool)
    }
    if (made) return interruptedResult(record.tool)
    const changed = await this.#repos.idempotency.get(key, now)
    return changed === undefined ? FREE : this.#answer(key, changed, toolName, now)
  }

  /**
   * Whether a live call holds `record`: one of this process's calls holding its claim, or any call of another process
   * whose lease has not lapsed (a process alone on its database knows every other one is gone).
   */
  async #heldByLiveCall(key: IdempotencyKey, record: IdempotencyRecord): Promise<boolean> {
    if (record.owner === this.#owner) return record.claim !== null && this.#held.get(keyId(key)) === record.claim
    const processes = this.#processes
    if (!processes || processes.exclusive || record.owner === null) return false
    return (await processes.liveIds()).includes(record.owner)
  }

  get #owner(): string | null {
    return this.#processes?.id ?? null
  }
}

/** #answer's word for "no live call holds this id: it may run". */
const FREE = Symbol('free')

/** A fresh claim: names one call's hold on its record, never reused. */
function newClaim(): string {
  return randomUUID()
}

function keyId(key: IdempotencyKey): string {
  return JSON.stringify([key.sessionId, key.membershipId, key.organizationId, key.requestId])
}

/** How a record names its call in an answer: a session's JSON-RPC id, or a stateless confirmation's operation. */
function describe(record: Pick<IdempotencyRecord, 'tool' | 'status'>, key: IdempotencyKey) {
  // A session's record names its JSON-RPC id (JSON-encoded); a stateless one its operation (`op:<id>`), since every
  // retry of a stateless call has an id of its own.
  const stateless = key.sessionId === STATELESS_SCOPE
  return {
    which: stateless ? 'this confirmation (the same requestState)' : `request id ${key.requestId} in this session`,
    details: {
      ...(stateless ? { operation: key.requestId.replace(/^op:/, '') } : { request_id: JSON.parse(key.requestId) as RequestId }),
      tool: record.tool,
      status: record.status,
    },
  }
}

/** 409: a live call holds the id. */
function stillHeld(record: Pick<IdempotencyRecord, 'tool' | 'status'>, key: IdempotencyKey): Error {
  const { which, details } = describe(record, key)
  return new ServiceError('IDEMPOTENCY_CONFLICT', {
    message: `A call of ${record.tool} with ${which} is still ${record.status === 'running' ? 'running' : 'pending'}`,
    details,
  })
}

/** 409: the id was used for a call of another tool. */
function otherTool(record: IdempotencyRecord): Error {
  return new ServiceError('IDEMPOTENCY_CONFLICT', {
    message: `Request id ${record.requestId} was already used in this session for a call of ${record.tool}; send a new id for a new call`,
    details: describe(record, record).details,
  })
}

/**
 * True when the call was stopped by the server's shutdown in a session that lives on (the call table says so: it
 * closed the call while it still ran). A notifications/cancelled leaves the call registered until its handler returns,
 * and a session that ends (DELETE, expiry, revocation) is marked ended.
 */
function abortedByShutdown(ctx: CallContext): boolean {
  const session = ctx.session
  if (!session || session.ended || !ctx.signal.aborted) return false
  return ctx.stoppedByShutdown
}

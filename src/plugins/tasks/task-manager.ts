import type { FastifyBaseLogger } from 'fastify'
import type { Principal } from '../../auth/principal.js'
import type { Config } from '../../config.js'
import type { Repos } from '../../db/repos/index.js'
import type { Abandoned } from '../../db/types.js'
import type { TaskRow } from '../../db/repos/tasks.js'
import { toRpcError } from '../../errors/render.js'
import { fail, ServiceError } from '../../errors/service-error.js'
import { checkAnswer, missingCapability, type InputRequest, type InputRequests } from '../../mcp/input-requests.js'
import type { ClientCapabilities } from '../../rpc/exchange.js'
import type { EventBus } from '../../lib/event-bus.js'
import { systemClock, type Clock } from '../../lib/clock.js'
import { randomSecret } from '../../lib/crypto.js'
import { isoTime } from '../../lib/iso-time.js'
import { TaskCancelled, type CallAbort } from '../../rpc/call-abort.js'

export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks'

export type ToolResult = Record<string, unknown>

/** A task whose work runs in this process: its cancellation, its end, and the question it waits on, if any. */
interface LiveTask {
  abort: CallAbort
  done: Promise<void>
  /** Questions asked so far: each round's keys are minted from its number. */
  rounds: number
  /** When the task's `ttlMs` runs out: no question waits past it (docs/decisions/tasks.md). */
  expiresAt: number
  /** The pending question: minted key → the handler's key, and how to hand the answers over. */
  waiting: { keys: Record<string, string>; resolve: (answers: Record<string, unknown>) => void } | null
}

/** The tool-failure code of a result, when it is one (`{"code", "message"}` in its text content). */
function failureCode(result: ToolResult): string | undefined {
  if (result.isError !== true) return undefined
  try {
    const text = (result.content as Array<{ text?: string }> | undefined)?.[0]?.text
    return text ? (JSON.parse(text) as { code?: string }).code : undefined
  } catch {
    return undefined
  }
}

/**
 * Owns the tasks of the tasks extension: a tools/call whose work outlives the request is adopted as a task, stored
 * before its handle is returned, and its outcome recorded when the work ends (completed with the tool result,
 * isError included; failed only for a JSON-RPC error; cancelled when tasks/cancel stopped it). Cancellation is
 * cooperative: tasks/cancel aborts the work's signal with CancelledByClient and the work decides (a deployment stops
 * its pipeline). Only the member who started a task can read or cancel it; anyone else is told there is no such task.
 */
export class TaskManager {
  readonly #repos: Repos
  readonly #config: Config
  readonly #events: EventBus
  readonly #log: FastifyBaseLogger
  /** Task lifetimes (created, updated, expired) are read from it (docs/decisions/clock.md). */
  readonly #clock: Clock
  readonly #live = new Map<string, LiveTask>()
  readonly #unsubscribe: () => void

  /** The process running the tasks this manager adopts (the `owner` of their rows). */
  readonly #owner: string | null

  constructor(options: { repos: Repos; config: Config; events: EventBus; log: FastifyBaseLogger; owner?: string | null; clock?: Clock }) {
    this.#clock = options.clock ?? systemClock
    this.#owner = options.owner ?? null
    this.#repos = options.repos
    this.#config = options.config
    this.#events = options.events
    this.#log = options.log
    // Answers and cancellations may arrive through another process: each shows as a task event (relayed by Redis).
    this.#unsubscribe = this.#events.subscribe((e) => {
      if (e.type === 'task' && this.#live.has(e.taskId)) void this.#wake(e.taskId)
    })
  }

  /** Stops following task events (the server is closing). */
  close(): void {
    this.#unsubscribe()
  }

  /** At start: tasks a previous process left working can never end; they complete with `interrupted`. */
  recover(interrupted: (tool: string) => ToolResult, abandoned: Abandoned = { live: [] }, now = this.#clock.now()): Promise<number> {
    return this.#repos.tasks.interruptWorking((tool) => ({ ...interrupted(tool), resultType: 'complete' }), 'interrupted: the server stopped while the task ran', now, abandoned)
  }

  /** Purges expired tasks. Never rejects (a failure is logged). */
  async sweep(now = this.#clock.now()): Promise<void> {
    try {
      await this.#repos.tasks.purge(now)
    } catch (err) {
      this.#log.error({ err }, 'could not purge expired tasks')
    }
  }

  /**
   * Makes `running` (a tool call that has started its work) a task owned by `owner`, and returns the CreateTaskResult
   * (`resultType: "task"`) once the task is stored. `abort` is the work's cancellation.
   */
  async adopt(owner: Principal, tool: string, running: Promise<ToolResult>, abort: CallAbort, now = this.#clock.now()): Promise<ToolResult> {
    const row = await this.#repos.tasks.create({
      id: randomSecret(16),
      membershipId: owner.membershipId,
      organizationId: owner.organizationId,
      tool,
      status: 'working',
      owner: this.#owner,
      statusMessage: `${tool} is running`,
      createdAt: now,
      updatedAt: now,
      expiresAt: now + this.#config.taskTtlMs,
    })
    const done = running.then(
      (result) => this.#end(row, result),
      (err: unknown) => this.#failed(row, err),
    ).finally(() => this.#live.delete(row.id))
    this.#live.set(row.id, { abort, done, rounds: 0, expiresAt: row.expiresAt, waiting: null })
    this.#events.emit({ type: 'task', taskId: row.id, membershipId: row.membershipId })
    return this.#handle(row)
  }

  /** The task, when it exists, has not expired and belongs to `owner` (anyone else: undefined, as for an unknown id). */
  async get(owner: Principal, id: string, now = this.#clock.now()): Promise<TaskRow | undefined> {
    const row = await this.#repos.tasks.byId(id, now)
    return row && row.membershipId === owner.membershipId && row.organizationId === owner.organizationId ? row : undefined
  }

  /**
   * A task handle answered again (the stored result of a replayed confirmation): with the task's current status, so a
   * client that lost the first answer sees where the task is. Unchanged when the task is gone or not the caller's.
   */
  async refreshHandle(owner: Principal, handle: ToolResult, now = this.#clock.now()): Promise<ToolResult> {
    const row = typeof handle.taskId === 'string' ? await this.get(owner, handle.taskId, now) : undefined
    return row ? this.#handle(row) : handle
  }

  /** Asks the work of an active task to stop (cooperative); a task that already ended stays as it is. */
  async cancel(row: TaskRow, reason: string, now = this.#clock.now()): Promise<void> {
    if (row.status !== 'working' && row.status !== 'input_required') return
    // Recorded before the work hears of it: how the work ends is read against it (#end).
    await this.#repos.tasks.markCancelRequested(row.id, now)
    const live = this.#live.get(row.id)
    if (live) live.abort.abort(new TaskCancelled(reason))
    // Run by another process: it hears of the request through the task event (#wake).
    else this.#events.emit({ type: 'task', taskId: row.id, membershipId: row.membershipId })
  }

  /**
   * A question of a running task's work (docs/decisions/tasks.md): the task turns `input_required` with `requests`
   * under keys minted for this round (never reused in the task's life), and the promise resolves with the answers,
   * by the handler's keys, once tasks/update (on any process) has delivered all of them. Rejects with
   * OPERATION_CANCELLED when the task is cancelled, INPUT_TIMEOUT after `taskInputTimeoutMs` (or when the task's TTL
   * runs out, if sooner), -32021 when the request
   * that started the task did not declare what a request needs.
   */
  async ask(taskId: string, requests: InputRequests, capabilities: Readonly<ClientCapabilities>): Promise<Record<string, unknown>> {
    const live = this.#live.get(taskId)
    if (!live) throw new ServiceError('OPERATION_CANCELLED')
    const required: Record<string, unknown> = {}
    for (const request of Object.values(requests)) Object.assign(required, missingCapability(request, capabilities))
    if (Object.keys(required).length > 0) {
      throw fail('MISSING_CLIENT_CAPABILITY', {
        message: `The task asks the client for input: declare ${Object.keys(required).join(' and ')} in the clientCapabilities of the request that starts it`,
        details: { requiredCapabilities: required },
      })
    }
    const round = ++live.rounds
    const keys = Object.fromEntries(Object.keys(requests).map((k) => [`${round}.${k}`, k]))
    const minted = Object.fromEntries(Object.entries(keys).map(([m, k]) => [m, requests[k]]))
    const answered = new Promise<Record<string, unknown>>((resolve, reject) => {
      const signal = live.abort.signal
      const stop = (err: Error) => {
        this.#clock.clearTimer(timer)
        signal.removeEventListener('abort', onAbort)
        live.waiting = null
        reject(err)
      }
      const onAbort = () => stop(new ServiceError('OPERATION_CANCELLED'))
      // The extension lets a server end a task once its ttlMs has passed: a question never outlives the task's TTL.
      const wait = Math.max(0, Math.min(this.#config.taskInputTimeoutMs, live.expiresAt - this.#clock.now()))
      const timer = this.#clock.setTimeout(() => this.#timedOut(taskId, stop), wait).unref()
      signal.addEventListener('abort', onAbort, { once: true })
      live.waiting = {
        keys,
        resolve: (answers) => {
          this.#clock.clearTimer(timer)
          signal.removeEventListener('abort', onAbort)
          live.waiting = null
          resolve(answers)
        },
      }
      if (signal.aborted) onAbort()
    })
    await this.#setInput(taskId, (row) => row.status === 'working'
      ? { status: 'input_required', statusMessage: `${row.tool} is waiting for ${Object.keys(minted).length} answer(s)`, inputRequests: minted, inputResponses: null }
      : null)
    return answered
  }

  /**
   * tasks/update: answers to the task's outstanding requests are kept (each checked against its request, -32602 when
   * one does not fit); keys that are not outstanding are ignored. Once none is left the task is `working` again and
   * its work takes the answers. Acknowledged whatever the task's status.
   */
  async update(row: TaskRow, given: Record<string, unknown>): Promise<void> {
    // Until stored: a lost compare-and-set means another write to the task won, and each write either takes at least
    // one outstanding answer or changes the status, so the losses are bounded by the questions of the round (once the
    // round is over, these keys are no longer outstanding and nothing is left to store). An answer is never dropped.
    for (let current: TaskRow | undefined = row; current; current = await this.#repos.tasks.byId(row.id, this.#clock.now())) {
      if (current.status !== 'input_required' || !current.inputRequests) return
      const pending = { ...current.inputRequests }
      const responses = { ...current.inputResponses }
      for (const [key, answer] of Object.entries(given)) {
        const request = pending[key] as InputRequest | undefined
        if (!request) continue
        const outcome = checkAnswer(request, answer)
        if ('problem' in outcome) throw fail('INVALID_PARAMS', { message: `inputResponses.${key} does not answer its ${request.method} request: ${outcome.problem}`, details: { param: `inputResponses.${key}` } })
        responses[key] = outcome.ok
        delete pending[key]
      }
      if (Object.keys(responses).length === Object.keys(current.inputResponses ?? {}).length) return
      const done = Object.keys(pending).length === 0
      const change = done
        ? { status: 'working' as const, statusMessage: `${current.tool} is running`, inputRequests: null, inputResponses: responses }
        : { status: 'input_required' as const, statusMessage: `${current.tool} is waiting for ${Object.keys(pending).length} answer(s)`, inputRequests: pending, inputResponses: responses }
      if (await this.#repos.tasks.changeInput(current, change, this.#clock.now())) {
        this.#events.emit({ type: 'task', taskId: row.id, membershipId: row.membershipId })
        return
      }
    }
  }

  /** A task as tasks/get and notifications/tasks show it (DetailedTask, without resultType). */
  view(row: TaskRow): Record<string, unknown> {
    const v: Record<string, unknown> = {
      taskId: row.id,
      status: row.status,
      createdAt: isoTime(row.createdAt),
      lastUpdatedAt: isoTime(row.updatedAt),
      ttlMs: row.expiresAt - row.createdAt,
      pollIntervalMs: this.#config.taskPollIntervalMs,
    }
    if (row.statusMessage !== null) v.statusMessage = row.statusMessage
    if (row.status === 'input_required' && row.inputRequests) v.inputRequests = row.inputRequests
    if (row.status === 'completed' && row.result) v.result = row.result
    if (row.status === 'failed' && row.error) v.error = row.error
    return v
  }

  /** The CreateTaskResult: the task's fields, never its result, error or input requests (tasks/get gives those). */
  #handle(row: TaskRow): ToolResult {
    const { result: _result, error: _error, inputRequests: _inputRequests, ...task } = this.view(row)
    return { ...task, resultType: 'task' }
  }

  /** Shutdown: waits (at most `ms`) for live tasks to record their outcome. */
  async settle(ms: number): Promise<void> {
    const pending = [...this.#live.values()].map((l) => l.done)
    if (pending.length === 0) return
    let timer: NodeJS.Timeout | undefined
    await Promise.race([Promise.allSettled(pending), new Promise((r) => (timer = setTimeout(r, ms)))])
    clearTimeout(timer)
  }

  /** A task event for a task run here: its cancellation requested elsewhere, or the answers its work waits for. */
  async #wake(taskId: string): Promise<void> {
    const live = this.#live.get(taskId)
    let row: TaskRow | undefined
    try {
      row = await this.#repos.tasks.byId(taskId, this.#clock.now())
    } catch (err) {
      this.#log.error({ err, task: taskId }, 'could not read a task')
      return
    }
    if (!live || !row) return
    if (row.cancelRequestedAt !== null && !live.abort.signal.aborted) live.abort.abort(new TaskCancelled('tasks/cancel'))
    const waiting = live.waiting
    const responses = row.inputResponses
    if (!waiting || row.status !== 'working' || !responses || !Object.keys(waiting.keys).every((m) => m in responses)) return
    waiting.resolve(Object.fromEntries(Object.entries(waiting.keys).map(([m, k]) => [k, responses[m]])))
  }

  /** The answers never came: the task works again (its work's question fails with INPUT_TIMEOUT). */
  async #timedOut(taskId: string, stop: (err: Error) => void): Promise<void> {
    await this.#setInput(taskId, (row) => row.status === 'input_required'
      ? { status: 'working', statusMessage: `${row.tool} is running: its input requests were not answered in time`, inputRequests: null, inputResponses: null }
      : null)
    stop(new ServiceError('INPUT_TIMEOUT'))
  }

  /** Changes the task's input state with `change` (null: leave it), read again when another write came first. */
  async #setInput(taskId: string, change: (row: TaskRow) => Parameters<Repos['tasks']['changeInput']>[1] | null): Promise<void> {
    // Until it holds or `change` says there is nothing to do: as in update(), every lost compare-and-set is another
    // write that won, and those are bounded.
    for (;;) {
      const row = await this.#repos.tasks.byId(taskId, this.#clock.now())
      const next = row && change(row)
      if (!row || !next) return
      if (await this.#repos.tasks.changeInput(row, next, this.#clock.now())) {
        this.#events.emit({ type: 'task', taskId, membershipId: row.membershipId })
        return
      }
    }
  }

  /** Records the work's result. Never rejects (a failure is logged). */
  async #end(row: TaskRow, result: ToolResult): Promise<void> {
    const code = failureCode(result)
    let current: TaskRow | undefined
    try {
      current = await this.#repos.tasks.byId(row.id, this.#clock.now())
    } catch (err) {
      this.#log.error({ err, task: row.id }, 'could not record the end of a task')
      return
    }
    const cancelled = current?.cancelRequestedAt != null && code === 'OPERATION_CANCELLED'
    await this.#write(row, cancelled
      ? { status: 'cancelled', statusMessage: 'cancelled with tasks/cancel' }
      : { status: 'completed', statusMessage: code ? `completed with a tool error (${code})` : 'completed', result: { ...result, resultType: 'complete' } })
  }

  /** Records the work's failure. Never rejects (a failure to record it is logged). */
  async #failed(row: TaskRow, err: unknown): Promise<void> {
    this.#log.error({ err, task: row.id, tool: row.tool }, 'task failed')
    const error = toRpcError(err, 'modern')
    await this.#write(row, { status: 'failed', statusMessage: error.message, error: { ...error } })
  }

  async #write(row: TaskRow, end: Parameters<Repos['tasks']['finish']>[1]): Promise<void> {
    try {
      if (await this.#repos.tasks.finish(row.id, end, this.#clock.now())) this.#events.emit({ type: 'task', taskId: row.id, membershipId: row.membershipId })
    } catch (err) {
      // Only when the database closed under a shutdown that did not wait: the next start marks it interrupted.
      this.#log.error({ err, task: row.id }, 'could not record the end of a task')
    }
  }
}

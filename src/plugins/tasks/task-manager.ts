import type { FastifyBaseLogger } from 'fastify'
import type { Principal } from '../../auth/principal.js'
import type { Config } from '../../config.js'
import type { Repos } from '../../db/repos/index.js'
import type { Abandoned } from '../../db/types.js'
import type { TaskRow } from '../../db/repos/tasks.js'
import { toRpcError } from '../../errors/render.js'
import type { EventBus } from '../../lib/event-bus.js'
import { systemClock, type Clock } from '../../lib/clock.js'
import { randomSecret } from '../../lib/crypto.js'
import { isoTime } from '../../lib/iso-time.js'
import { TaskCancelled, type CallAbort } from '../../rpc/call-abort.js'

export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks'

export type ToolResult = Record<string, unknown>

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
  readonly #live = new Map<string, { abort: CallAbort; done: Promise<void> }>()

  /** The process running the tasks this manager adopts (the `owner` of their rows). */
  readonly #owner: string | null

  constructor(options: { repos: Repos; config: Config; events: EventBus; log: FastifyBaseLogger; owner?: string | null; clock?: Clock }) {
    this.#clock = options.clock ?? systemClock
    this.#owner = options.owner ?? null
    this.#repos = options.repos
    this.#config = options.config
    this.#events = options.events
    this.#log = options.log
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
    this.#live.set(row.id, { abort, done })
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

  /** Asks the work of a working task to stop (cooperative); a task that already ended stays as it is. */
  async cancel(row: TaskRow, reason: string, now = this.#clock.now()): Promise<void> {
    if (row.status !== 'working') return
    // Recorded before the work hears of it: how the work ends is read against it (#end).
    await this.#repos.tasks.markCancelRequested(row.id, now)
    this.#live.get(row.id)?.abort.abort(new TaskCancelled(reason))
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
    if (row.status === 'completed' && row.result) v.result = row.result
    if (row.status === 'failed' && row.error) v.error = row.error
    return v
  }

  /** The CreateTaskResult: the task's fields, never its result or error (tasks/get gives those). */
  #handle(row: TaskRow): ToolResult {
    const { result: _result, error: _error, ...task } = this.view(row)
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

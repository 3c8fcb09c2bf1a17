import { and, eq, inArray, lte } from 'drizzle-orm'
import type { Store } from '../store.js'
import { abandonedBy } from './owners.js'
import type { Abandoned } from '../types.js'
import type { TaskRow, TaskStatus } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { TaskRow }

const TERMINAL: TaskStatus[] = ['completed', 'failed', 'cancelled']
/** A task whose work still runs: working, or waiting for the answers to its input requests. */
const ACTIVE: TaskStatus[] = ['working', 'input_required']

/** What changes when a task asks, is answered, or stops waiting (docs/decisions/tasks.md). */
export type InputChange = Pick<TaskRow, 'status' | 'statusMessage' | 'inputRequests' | 'inputResponses'>

/** Tasks of the tasks extension. Only an active task changes; a terminal one is final until it expires. */
export function tasksRepo(store: Store) {
  const { db, t: { tasks } } = store
  return {
    async create(row: Omit<TaskRow, 'statusMessage' | 'result' | 'error' | 'cancelRequestedAt' | 'owner' | 'inputRequests' | 'inputResponses'> & { statusMessage?: string | null; owner?: string | null }): Promise<TaskRow> {
      const task: TaskRow = { statusMessage: null, result: null, error: null, cancelRequestedAt: null, owner: null, inputRequests: null, inputResponses: null, ...row }
      await db.insert(tasks).values(task)
      return task
    },
    /** The task, unless it expired before `now`. */
    async byId(id: string, now: number): Promise<TaskRow | undefined> {
      const row = (await db.select().from(tasks).where(eq(tasks.id, id)))[0]
      return row && row.expiresAt > now ? row : undefined
    },
    /**
     * An active task's input state changed (asked, answered, stopped waiting), unless someone else changed the task
     * since `seen` was read (compare-and-set on updatedAt, which every write moves forward): false then, read it again.
     */
    async changeInput(seen: TaskRow, change: InputChange, at: number): Promise<boolean> {
      const changed = await db.update(tasks)
        .set({ ...change, updatedAt: Math.max(at, seen.updatedAt + 1) })
        .where(and(eq(tasks.id, seen.id), eq(tasks.updatedAt, seen.updatedAt), inArray(tasks.status, ACTIVE)))
        .returning({ id: tasks.id })
      return changed.length === 1
    },
    /** active → a terminal status with its result or error; false when the task had already ended. */
    async finish(id: string, end: { status: 'completed' | 'failed' | 'cancelled'; statusMessage: string | null; result?: Record<string, unknown>; error?: Record<string, unknown> }, at: number): Promise<boolean> {
      const finished = await db.update(tasks)
        .set({ status: end.status, statusMessage: end.statusMessage, result: end.result ?? null, error: end.error ?? null, inputRequests: null, inputResponses: null, updatedAt: at })
        .where(and(eq(tasks.id, id), inArray(tasks.status, ACTIVE)))
        .returning({ id: tasks.id })
      return finished.length === 1
    },
    async markCancelRequested(id: string, at: number): Promise<void> {
      await db.update(tasks).set({ cancelRequestedAt: at, updatedAt: at }).where(and(eq(tasks.id, id), inArray(tasks.status, ACTIVE)))
    },
    /** At start: tasks a previous process left active; they are completed with `result` (interrupted). */
    async interruptWorking(result: (tool: string) => Record<string, unknown>, statusMessage: string, at: number, abandoned: Abandoned): Promise<number> {
      const working = await db.select({ id: tasks.id, tool: tasks.tool }).from(tasks).where(and(inArray(tasks.status, ACTIVE), abandonedBy(tasks.owner, abandoned)))
      for (const t of working) {
        await db.update(tasks).set({ status: 'completed', statusMessage, result: result(t.tool), inputRequests: null, inputResponses: null, updatedAt: at })
          .where(and(eq(tasks.id, t.id), inArray(tasks.status, ACTIVE)))
      }
      return working.length
    },
    /** Deletes ended tasks that expired at or before `now`. */
    async purge(now: number): Promise<number> {
      const purged = await db.delete(tasks).where(and(lte(tasks.expiresAt, now), inArray(tasks.status, TERMINAL))).returning({ id: tasks.id })
      return purged.length
    },
  }
}

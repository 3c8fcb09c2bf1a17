import { and, eq, inArray, lte } from 'drizzle-orm'
import type { Store } from '../store.js'
import { abandonedBy } from './owners.js'
import type { Abandoned } from '../types.js'
import type { TaskRow, TaskStatus } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { TaskRow }

const TERMINAL: TaskStatus[] = ['completed', 'failed', 'cancelled']

/** Tasks of the tasks extension. Only a `working` task changes; a terminal one is final until it expires. */
export function tasksRepo(store: Store) {
  const { db, t: { tasks } } = store
  return {
    async create(row: Omit<TaskRow, 'statusMessage' | 'result' | 'error' | 'cancelRequestedAt' | 'owner'> & { statusMessage?: string | null; owner?: string | null }): Promise<TaskRow> {
      const task: TaskRow = { statusMessage: null, result: null, error: null, cancelRequestedAt: null, owner: null, ...row }
      await db.insert(tasks).values(task)
      return task
    },
    /** The task, unless it expired before `now`. */
    async byId(id: string, now: number): Promise<TaskRow | undefined> {
      const row = (await db.select().from(tasks).where(eq(tasks.id, id)))[0]
      return row && row.expiresAt > now ? row : undefined
    },
    /** working → a terminal status with its result or error; false when the task had already ended. */
    async finish(id: string, end: { status: 'completed' | 'failed' | 'cancelled'; statusMessage: string | null; result?: Record<string, unknown>; error?: Record<string, unknown> }, at: number): Promise<boolean> {
      const finished = await db.update(tasks)
        .set({ status: end.status, statusMessage: end.statusMessage, result: end.result ?? null, error: end.error ?? null, updatedAt: at })
        .where(and(eq(tasks.id, id), eq(tasks.status, 'working')))
        .returning({ id: tasks.id })
      return finished.length === 1
    },
    async markCancelRequested(id: string, at: number): Promise<void> {
      await db.update(tasks).set({ cancelRequestedAt: at, updatedAt: at }).where(and(eq(tasks.id, id), eq(tasks.status, 'working')))
    },
    /** At start: tasks a previous process left working; they are completed with `result` (interrupted). */
    async interruptWorking(result: (tool: string) => Record<string, unknown>, statusMessage: string, at: number, abandoned: Abandoned): Promise<number> {
      const working = await db.select({ id: tasks.id, tool: tasks.tool }).from(tasks).where(and(eq(tasks.status, 'working'), abandonedBy(tasks.owner, abandoned)))
      for (const t of working) {
        await db.update(tasks).set({ status: 'completed', statusMessage, result: result(t.tool), updatedAt: at }).where(and(eq(tasks.id, t.id), eq(tasks.status, 'working')))
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

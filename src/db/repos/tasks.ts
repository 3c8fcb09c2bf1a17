import { and, eq, inArray, lte } from 'drizzle-orm'
import type { Db } from '../client.js'
import { tasks } from '../schema.js'
import type { TaskRow, TaskStatus } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { TaskRow }

const TERMINAL: TaskStatus[] = ['completed', 'failed', 'cancelled']

/** Tasks of the tasks extension. Only a `working` task changes; a terminal one is final until it expires. */
export function tasksRepo(db: Db) {
  return {
    create(row: Omit<TaskRow, 'statusMessage' | 'result' | 'error' | 'cancelRequestedAt'> & { statusMessage?: string | null }): TaskRow {
      const task: TaskRow = { statusMessage: null, result: null, error: null, cancelRequestedAt: null, ...row }
      db.insert(tasks).values(task).run()
      return task
    },
    /** The task, unless it expired before `now`. */
    byId(id: string, now: number): TaskRow | undefined {
      const row = db.select().from(tasks).where(eq(tasks.id, id)).get()
      return row && row.expiresAt > now ? row : undefined
    },
    /** working → a terminal status with its result or error; false when the task had already ended. */
    finish(id: string, end: { status: 'completed' | 'failed' | 'cancelled'; statusMessage: string | null; result?: Record<string, unknown>; error?: Record<string, unknown> }, at: number): boolean {
      return db.update(tasks)
        .set({ status: end.status, statusMessage: end.statusMessage, result: end.result ?? null, error: end.error ?? null, updatedAt: at })
        .where(and(eq(tasks.id, id), eq(tasks.status, 'working'))).run().changes === 1
    },
    markCancelRequested(id: string, at: number): void {
      db.update(tasks).set({ cancelRequestedAt: at, updatedAt: at }).where(and(eq(tasks.id, id), eq(tasks.status, 'working'))).run()
    },
    /** At start: tasks a previous process left working; they are completed with `result` (interrupted). */
    interruptWorking(result: (tool: string) => Record<string, unknown>, statusMessage: string, at: number): number {
      const working = db.select({ id: tasks.id, tool: tasks.tool }).from(tasks).where(eq(tasks.status, 'working')).all()
      for (const t of working) {
        db.update(tasks).set({ status: 'completed', statusMessage, result: result(t.tool), updatedAt: at }).where(and(eq(tasks.id, t.id), eq(tasks.status, 'working'))).run()
      }
      return working.length
    },
    /** Deletes ended tasks that expired at or before `now`. */
    purge(now: number): number {
      return db.delete(tasks).where(and(lte(tasks.expiresAt, now), inArray(tasks.status, TERMINAL))).run().changes
    },
  }
}

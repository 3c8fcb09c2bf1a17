import { and, asc, count, desc, eq, exists, gt, inArray, isNotNull, isNull, lt, lte, notInArray, sql } from 'drizzle-orm'
import { newId } from '../../lib/crypto.js'
import type { Store } from '../store.js'
import { abandonedBy } from './owners.js'
import type { Abandoned } from '../types.js'
import type { Deployment, DeploymentLogLine, DeploymentStatus } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { Deployment, DeploymentLogLine }

/** Lines per INSERT where the lines are not written one by one: 5 parameters each, far below any dialect's limit. */
const LINES_PER_INSERT = 500

const LIVE: Array<Deployment['status']> = ['queued', 'running']

/** What a stored line counts toward its run's `output_bytes`: its text in UTF-8. */
export function lineBytes(line: Pick<DeploymentLogLine, 'line'>): number {
  return Buffer.byteLength(line.line, 'utf8')
}

/** The bytes a batch of lines adds to each of its runs. */
export function bytesByDeployment(lines: readonly DeploymentLogLine[]): Map<string, number> {
  const bytes = new Map<string, number>()
  for (const l of lines) bytes.set(l.deploymentId, (bytes.get(l.deploymentId) ?? 0) + lineBytes(l))
  return bytes
}

/** Deployments and their stored output, always addressed through the organization. */
export function deploymentsRepo(store: Store) {
  const { db, fastPaths, t: { deploymentLogs, deployments } } = store

  return {
    async create(input: { organizationId: string; appId: string; kind: 'deploy' | 'rollback'; rollbackOf?: string | null; pipeline: string; createdBy: string | null; owner?: string | null }): Promise<Deployment> {
      const row: Deployment = {
        id: newId('dep'),
        appId: input.appId,
        organizationId: input.organizationId,
        kind: input.kind,
        rollbackOf: input.rollbackOf ?? null,
        pipeline: input.pipeline,
        status: 'queued',
        createdBy: input.createdBy,
        createdAt: Date.now(),
        startedAt: null,
        finishedAt: null,
        exitCode: null,
        outcome: null,
        pgid: null,
        owner: input.owner ?? null,
        outputBytes: 0,
        outputPurgedAt: null,
      }
      await db.insert(deployments).values(row)
      return row
    },
    async byId(organizationId: string, id: string): Promise<Deployment | undefined> {
      return (await db.select().from(deployments).where(and(eq(deployments.organizationId, organizationId), eq(deployments.id, id))))[0]
    },
    /** Newest first, with offset paging (the catalog's deployments_list takes limit and offset). */
    async list(organizationId: string, options: { appId?: string; limit: number; offset: number }): Promise<{ items: Deployment[]; total: number }> {
      const where = options.appId === undefined
        ? eq(deployments.organizationId, organizationId)
        : and(eq(deployments.organizationId, organizationId), eq(deployments.appId, options.appId))
      const items = await db.select().from(deployments).where(where).orderBy(desc(deployments.id)).limit(options.limit).offset(options.offset)
      const total = (await db.select({ n: count() }).from(deployments).where(where))[0]?.n ?? 0
      return { items, total }
    },
    /** The run's process started; `pgid` is its process group, kept while it lives (what a restart stops after a crash). */
    async markRunning(id: string, at: number, pgid: number | null = null): Promise<void> {
      await db.update(deployments).set({ status: 'running', startedAt: at, pgid }).where(eq(deployments.id, id))
    },
    /** Final status; only a queued or running deployment can finish (a finished one is never rewritten). */
    async finish(id: string, status: Exclude<DeploymentStatus, 'queued' | 'running'>, at: number, exitCode: number | null, outcome: string): Promise<boolean> {
      const finished = await db.update(deployments).set({ status, finishedAt: at, exitCode, outcome, pgid: null })
        .where(and(eq(deployments.id, id), inArray(deployments.status, ['queued', 'running']))).returning({ id: deployments.id })
      return finished.length === 1
    },
    /** Of every organization: the runs left queued or running by processes that are gone, with their process group. */
    async unfinished(abandoned: Abandoned): Promise<Array<Pick<Deployment, 'id' | 'pgid'>>> {
      return db.select({ id: deployments.id, pgid: deployments.pgid }).from(deployments)
        .where(and(inArray(deployments.status, ['queued', 'running']), abandonedBy(deployments.owner, abandoned)))
    },
    /** Runs left queued or running by processes that are gone can never finish; returns how many were interrupted. */
    async interruptUnfinished(at: number, abandoned: Abandoned): Promise<number> {
      const interrupted = await db.update(deployments).set({ status: 'interrupted', finishedAt: at, outcome: 'interrupted: the server stopped while it ran', pgid: null })
        .where(and(inArray(deployments.status, ['queued', 'running']), abandonedBy(deployments.owner, abandoned))).returning({ id: deployments.id })
      return interrupted.length
    },
    /** Stores lines and adds their bytes to their runs' `output_bytes`, in one transaction (the quotas count it). */
    async appendLines(lines: DeploymentLogLine[]): Promise<void> {
      if (lines.length === 0) return
      const bytes = bytesByDeployment(lines)
      if (fastPaths.appendDeploymentLines) return fastPaths.appendDeploymentLines(lines, bytes)
      await store.transaction(async (tx) => {
        for (let i = 0; i < lines.length; i += LINES_PER_INSERT) {
          await tx.db.insert(tx.t.deploymentLogs).values(lines.slice(i, i + LINES_PER_INSERT))
        }
        for (const [id, n] of bytes) {
          await tx.db.update(tx.t.deployments).set({ outputBytes: sql`${tx.t.deployments.outputBytes} + ${n}` }).where(eq(tx.t.deployments.id, id))
        }
      })
    },
    /**
     * Retention (src/retention/deployment-output.ts): up to `limit` ended runs whose output is still kept and that are
     * past either limit: older than the `keepRuns` newest ended runs of their app (0: no count limit), or ended before
     * `endedBefore` (null: no age limit). Oldest first.
     */
    async outputToPurge(options: { keepRuns: number; endedBefore: number | null; limit: number }): Promise<string[]> {
      const ids = new Set<string>()
      const kept = and(notInArray(deployments.status, LIVE), isNull(deployments.outputPurgedAt))
      if (options.endedBefore !== null) {
        const old = await db.select({ id: deployments.id }).from(deployments)
          .where(and(kept, lt(deployments.finishedAt, options.endedBefore))).orderBy(asc(deployments.id)).limit(options.limit)
        for (const r of old) ids.add(r.id)
      }
      if (options.keepRuns > 0 && ids.size < options.limit) {
        // The apps with more ended runs than are kept; for each, the newest kept run bounds what goes.
        const crowded = await db.select({ appId: deployments.appId }).from(deployments)
          .where(notInArray(deployments.status, LIVE)).groupBy(deployments.appId).having(gt(count(), options.keepRuns))
        for (const { appId } of crowded) {
          const [oldestKept] = await db.select({ id: deployments.id }).from(deployments)
            .where(and(eq(deployments.appId, appId), notInArray(deployments.status, LIVE)))
            .orderBy(desc(deployments.id)).limit(1).offset(options.keepRuns - 1)
          if (!oldestKept) continue
          const beyond = await db.select({ id: deployments.id }).from(deployments)
            .where(and(eq(deployments.appId, appId), kept, lt(deployments.id, oldestKept.id)))
            .orderBy(asc(deployments.id)).limit(options.limit - ids.size)
          for (const r of beyond) ids.add(r.id)
          if (ids.size >= options.limit) break
        }
      }
      return [...ids]
    },
    /**
     * Marks ended runs' output deleted by retention at `at` (output_bytes 0); a run still queued or running is never
     * marked. Returns the ids marked; their lines are deleted next (deleteLines), in batches.
     */
    async markOutputPurged(ids: string[], at: number): Promise<string[]> {
      if (ids.length === 0) return []
      const marked = await db.update(deployments).set({ outputPurgedAt: at, outputBytes: 0 })
        .where(and(inArray(deployments.id, ids), notInArray(deployments.status, LIVE), isNull(deployments.outputPurgedAt)))
        .returning({ id: deployments.id })
      return marked.map((r) => r.id)
    },
    /** Runs marked purged whose lines are not all deleted yet (a purge that stopped halfway). */
    async purgedWithLines(limit: number): Promise<string[]> {
      // From the runs (far fewer rows than their lines), each probing its lines' primary key.
      const rows = await db.select({ id: deployments.id }).from(deployments)
        .where(and(isNotNull(deployments.outputPurgedAt), exists(db.select({ seq: deploymentLogs.seq }).from(deploymentLogs).where(eq(deploymentLogs.deploymentId, deployments.id)))))
        .limit(limit)
      return rows.map((r) => r.id)
    },
    /** Deletes the first `limit` stored lines of a run whose output was marked purged; returns how many went. */
    async deleteLines(deploymentId: string, limit: number): Promise<number> {
      const [last] = await db.select({ seq: deploymentLogs.seq }).from(deploymentLogs).where(eq(deploymentLogs.deploymentId, deploymentId))
        .orderBy(asc(deploymentLogs.seq)).limit(1).offset(limit - 1)
      const upTo = last ? lte(deploymentLogs.seq, last.seq) : undefined
      const gone = await db.delete(deploymentLogs).where(and(eq(deploymentLogs.deploymentId, deploymentId), upTo)).returning({ seq: deploymentLogs.seq })
      return gone.length
    },
    /** Lines after `afterSeq`, in order. */
    async lines(deploymentId: string, limit: number, afterSeq = -1): Promise<{ items: DeploymentLogLine[]; more: boolean }> {
      const rows = await db.select().from(deploymentLogs)
        .where(and(eq(deploymentLogs.deploymentId, deploymentId), gt(deploymentLogs.seq, afterSeq)))
        .orderBy(asc(deploymentLogs.seq)).limit(limit + 1)
      return { items: rows.slice(0, limit), more: rows.length > limit }
    },
    async lastLines(deploymentId: string, count: number): Promise<DeploymentLogLine[]> {
      const rows = await db.select().from(deploymentLogs).where(eq(deploymentLogs.deploymentId, deploymentId))
        .orderBy(desc(deploymentLogs.seq)).limit(count)
      return rows.reverse()
    },
    /**
     * Where a rollback of the app goes when none is named. `current` is the deploy the app runs now: the one its latest
     * succeeded run put live (a succeeded rollback puts its target back). `target` is the latest succeeded deploy made
     * before `current`. Both are undefined when nothing ever succeeded.
     */
    async rollbackTarget(organizationId: string, appId: string): Promise<{ current?: Deployment; target?: Deployment }> {
      const ofApp = and(eq(deployments.organizationId, organizationId), eq(deployments.appId, appId), eq(deployments.status, 'succeeded'))
      const [latest] = await db.select().from(deployments).where(ofApp).orderBy(desc(deployments.id)).limit(1)
      if (!latest) return {}
      const currentId = latest.kind === 'rollback' && latest.rollbackOf ? latest.rollbackOf : latest.id
      const current = currentId === latest.id ? latest : ((await db.select().from(deployments)
        .where(and(eq(deployments.organizationId, organizationId), eq(deployments.id, currentId))))[0] ?? latest)
      const [target] = await db.select().from(deployments)
        .where(and(ofApp, eq(deployments.kind, 'deploy'), lt(deployments.id, current.id)))
        .orderBy(desc(deployments.id)).limit(1)
      return target ? { current, target } : { current }
    },
    async active(organizationId: string, appId: string): Promise<Deployment | undefined> {
      return (await db.select().from(deployments)
        .where(and(eq(deployments.organizationId, organizationId), eq(deployments.appId, appId), inArray(deployments.status, ['queued', 'running'])))
        .limit(1))[0]
    },
  }
}

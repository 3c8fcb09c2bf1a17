import { and, asc, desc, eq, gt, inArray, lt, sql } from 'drizzle-orm'
import { newId } from '../../lib/crypto.js'
import type { Db } from '../client.js'
import { deploymentLogs, deployments } from '../schema.js'
import type { Deployment, DeploymentLogLine, DeploymentStatus } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { Deployment, DeploymentLogLine }

/** Deployments and their stored output, always addressed through the organization. */
export function deploymentsRepo(db: Db) {
  const appendLine = db.insert(deploymentLogs).values({
    deploymentId: sql.placeholder('deploymentId'),
    seq: sql.placeholder('seq'),
    stream: sql.placeholder('stream'),
    line: sql.placeholder('line'),
    at: sql.placeholder('at'),
  }).prepare()

  return {
    create(input: { organizationId: string; appId: string; kind: 'deploy' | 'rollback'; rollbackOf?: string | null; pipeline: string; createdBy: string | null }): Deployment {
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
      }
      db.insert(deployments).values(row).run()
      return row
    },
    byId(organizationId: string, id: string): Deployment | undefined {
      return db.select().from(deployments).where(and(eq(deployments.organizationId, organizationId), eq(deployments.id, id))).get()
    },
    /** Newest first, with offset paging (the catalog's deployments_list takes limit and offset). */
    list(organizationId: string, options: { appId?: string; limit: number; offset: number }): { items: Deployment[]; total: number } {
      const where = options.appId === undefined
        ? eq(deployments.organizationId, organizationId)
        : and(eq(deployments.organizationId, organizationId), eq(deployments.appId, options.appId))
      const items = db.select().from(deployments).where(where).orderBy(desc(deployments.id)).limit(options.limit).offset(options.offset).all()
      const total = db.select({ n: sql<number>`count(*)` }).from(deployments).where(where).get()?.n ?? 0
      return { items, total }
    },
    /** The run's process started; `pgid` is its process group, kept while it lives (what a restart stops after a crash). */
    markRunning(id: string, at: number, pgid: number | null = null): void {
      db.update(deployments).set({ status: 'running', startedAt: at, pgid }).where(eq(deployments.id, id)).run()
    },
    /** Final status; only a queued or running deployment can finish (a finished one is never rewritten). */
    finish(id: string, status: Exclude<DeploymentStatus, 'queued' | 'running'>, at: number, exitCode: number | null, outcome: string): boolean {
      return db.update(deployments).set({ status, finishedAt: at, exitCode, outcome, pgid: null })
        .where(and(eq(deployments.id, id), inArray(deployments.status, ['queued', 'running']))).run().changes === 1
    },
    /** At start, of every organization: the runs a previous process left queued or running, with their process group. */
    unfinished(): Array<Pick<Deployment, 'id' | 'pgid'>> {
      return db.select({ id: deployments.id, pgid: deployments.pgid }).from(deployments)
        .where(inArray(deployments.status, ['queued', 'running'])).all()
    },
    /** At start: runs a previous process left queued or running can never finish; returns how many. */
    interruptUnfinished(at: number): number {
      return db.update(deployments).set({ status: 'interrupted', finishedAt: at, outcome: 'interrupted: the server stopped while it ran', pgid: null })
        .where(inArray(deployments.status, ['queued', 'running'])).run().changes
    },
    appendLines(lines: DeploymentLogLine[]): void {
      if (lines.length === 0) return
      db.transaction(() => {
        for (const l of lines) appendLine.run(l)
      })
    },
    /** Lines after `afterSeq`, in order. */
    lines(deploymentId: string, limit: number, afterSeq = -1): { items: DeploymentLogLine[]; more: boolean } {
      const rows = db.select().from(deploymentLogs)
        .where(and(eq(deploymentLogs.deploymentId, deploymentId), gt(deploymentLogs.seq, afterSeq)))
        .orderBy(asc(deploymentLogs.seq)).limit(limit + 1).all()
      return { items: rows.slice(0, limit), more: rows.length > limit }
    },
    lastLines(deploymentId: string, count: number): DeploymentLogLine[] {
      return db.select().from(deploymentLogs).where(eq(deploymentLogs.deploymentId, deploymentId))
        .orderBy(desc(deploymentLogs.seq)).limit(count).all().reverse()
    },
    /**
     * Where a rollback of the app goes when none is named. `current` is the deploy the app runs now: the one its latest
     * succeeded run put live (a succeeded rollback puts its target back). `target` is the latest succeeded deploy made
     * before `current`. Both are undefined when nothing ever succeeded.
     */
    rollbackTarget(organizationId: string, appId: string): { current?: Deployment; target?: Deployment } {
      const ofApp = and(eq(deployments.organizationId, organizationId), eq(deployments.appId, appId), eq(deployments.status, 'succeeded'))
      const latest = db.select().from(deployments).where(ofApp).orderBy(desc(deployments.id)).limit(1).get()
      if (!latest) return {}
      const currentId = latest.kind === 'rollback' && latest.rollbackOf ? latest.rollbackOf : latest.id
      const current = currentId === latest.id ? latest : (db.select().from(deployments)
        .where(and(eq(deployments.organizationId, organizationId), eq(deployments.id, currentId))).get() ?? latest)
      const target = db.select().from(deployments)
        .where(and(ofApp, eq(deployments.kind, 'deploy'), lt(deployments.id, current.id)))
        .orderBy(desc(deployments.id)).limit(1).get()
      return target ? { current, target } : { current }
    },
    active(organizationId: string, appId: string): Deployment | undefined {
      return db.select().from(deployments)
        .where(and(eq(deployments.organizationId, organizationId), eq(deployments.appId, appId), inArray(deployments.status, ['queued', 'running']))).get()
    },
  }
}

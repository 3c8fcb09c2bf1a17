import { and, asc, count, eq, inArray, sum } from 'drizzle-orm'
import type { Store } from '../store.js'
import { auditRepo, credentialAuditEntry, type CredentialActor } from './audit.js'
import type { OrganizationQuota } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { OrganizationQuota }
export type QuotaName = OrganizationQuota['name']

/** The audit actions of quota changes (the CLI's). */
export const QUOTA_AUDIT_ACTIONS = { set: 'quota.set', reset: 'quota.reset' } as const

const ACTIVE = ['queued', 'running'] as const

/**
 * Organizations' own quota values (set by the operator with `service-mcp quotas set`), and what the quotas count.
 * Which quota counts what, and the checks, are src/limits/quotas.ts's; the queries are here, like every query.
 */
export function organizationQuotasRepo(store: Store) {
  const { db, t: { organizationQuotas: quotas, apps, envVars, deployments } } = store

  /** Writes the change and its audit entry in one transaction: the log and the quotas cannot disagree. */
  async function change(organizationId: string, name: QuotaName, value: number | null, by: CredentialActor): Promise<number | null> {
    return store.transaction(async (tx) => {
      const q = tx.t.organizationQuotas
      const where = and(eq(q.organizationId, organizationId), eq(q.name, name))
      const previous = (await tx.db.select({ value: q.value }).from(q).where(where))[0]?.value ?? null
      if (value === null) {
        await tx.db.delete(q).where(where)
      } else {
        await tx.db.insert(q).values({ organizationId, name, value, updatedAt: Date.now() })
          .onConflictDoUpdate({ target: [q.organizationId, q.name], set: { value, updatedAt: Date.now() } })
      }
      await auditRepo(tx).add(credentialAuditEntry(by, {
        organizationId,
        membershipId: null,
        action: value === null ? QUOTA_AUDIT_ACTIONS.reset : QUOTA_AUDIT_ACTIONS.set,
        targetType: 'quota',
        targetId: name,
        details: { quota: name, value, previous },
      }))
      return previous
    })
  }

  return {
    /** The organization's own value of `name`, or undefined when it follows the server's setting. */
    async get(organizationId: string, name: QuotaName): Promise<number | undefined> {
      return (await db.select({ value: quotas.value }).from(quotas).where(and(eq(quotas.organizationId, organizationId), eq(quotas.name, name))))[0]?.value
    },
    /** Every organization's own values (all of them, or one organization's). */
    async list(organizationId?: string): Promise<OrganizationQuota[]> {
      return db.select().from(quotas).where(organizationId === undefined ? undefined : eq(quotas.organizationId, organizationId))
        .orderBy(asc(quotas.organizationId), asc(quotas.name))
    },
    /** Gives the organization its own value (0 = unlimited), audited; returns the value it had (null: the setting). */
    set(organizationId: string, name: QuotaName, value: number, by: CredentialActor): Promise<number | null> {
      return change(organizationId, name, value, by)
    },
    /** Puts the organization back on the server's setting, audited; returns the value it had (null: none). */
    reset(organizationId: string, name: QuotaName, by: CredentialActor): Promise<number | null> {
      return change(organizationId, name, null, by)
    },
    /**
     * Inside a transaction, before the count it checks: holds the quota of the organization until the transaction ends,
     * so that two writers at its last slot check one after the other (Store.lockKey).
     */
    async lock(organizationId: string, name: QuotaName): Promise<void> {
      await store.lockKey(`quota:${name}:${organizationId}`)
    },
    /** What the quota `name` counts now for the organization (for env_vars_per_app: of the app `appId`); bytes for output. */
    async usage(name: QuotaName, organizationId: string, appId?: string): Promise<number> {
      switch (name) {
        case 'apps':
          return (await db.select({ n: count() }).from(apps).where(eq(apps.organizationId, organizationId)))[0]?.n ?? 0
        case 'env_vars_per_app':
          return (await db.select({ n: count() }).from(envVars)
            .where(and(eq(envVars.organizationId, organizationId), eq(envVars.appId, appId ?? ''))))[0]?.n ?? 0
        case 'concurrent_deployments':
          return (await db.select({ n: count() }).from(deployments)
            .where(and(eq(deployments.organizationId, organizationId), inArray(deployments.status, [...ACTIVE]))))[0]?.n ?? 0
        case 'deployment_output_mb':
          return Number((await db.select({ n: sum(deployments.outputBytes) }).from(deployments).where(eq(deployments.organizationId, organizationId)))[0]?.n ?? 0)
      }
    },
    /**
     * The usage of `name` of every organization that has any, in one aggregate query (the metrics, at scrape time):
     * for env_vars_per_app, the organization's fullest app.
     */
    async usageByOrganization(name: QuotaName): Promise<Map<string, number>> {
      const rows: Array<{ org: string; n: number | string | null }> = await (async () => {
        switch (name) {
          case 'apps':
            return db.select({ org: apps.organizationId, n: count() }).from(apps).groupBy(apps.organizationId)
          case 'env_vars_per_app':
            return db.select({ org: envVars.organizationId, n: count() }).from(envVars).groupBy(envVars.organizationId, envVars.appId)
          case 'concurrent_deployments':
            return db.select({ org: deployments.organizationId, n: count() }).from(deployments)
              .where(inArray(deployments.status, [...ACTIVE])).groupBy(deployments.organizationId)
          case 'deployment_output_mb':
            return db.select({ org: deployments.organizationId, n: sum(deployments.outputBytes) }).from(deployments).groupBy(deployments.organizationId)
        }
      })()
      const usage = new Map<string, number>()
      for (const row of rows) usage.set(row.org, Math.max(usage.get(row.org) ?? 0, Number(row.n ?? 0)))
      return usage
    },
  }
}

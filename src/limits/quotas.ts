import type { Config } from '../config.js'
import type { QuotaName } from '../db/repos/organization-quotas.js'
import type { TxRepos } from '../db/repos/index.js'
import { QUOTA_NAMES } from '../db/types.js'
import { ServiceError } from '../errors/service-error.js'

export type { QuotaName }
export { QUOTA_NAMES }

/** What a quota check reads: the organization's own values, what the quota counts, and the organization's slug. */
export type QuotaRepos = Pick<TxRepos, 'organizationQuotas' | 'organizations'>

const MIB = 1_048_576

interface QuotaSpec {
  /** Its setting, the value of every organization without one of its own. */
  readonly setting: string
  readonly configKey: 'quotaApps' | 'quotaEnvVarsPerApp' | 'quotaConcurrentDeployments' | 'quotaDeploymentOutputMb'
  /** What it counts, for its messages and `quotas list`: "apps", "MB of deployment output". */
  readonly unit: string
  /** How many of what the repository counts make one unit (bytes per MiB for output; 1 for the counts). */
  readonly scale: number
  /** Whose usage it counts, for the refusal: "this organization", "this app". */
  readonly whose: string
  /** How the member frees some, for the refusal. */
  readonly free: string
}

/**
 * The per-organization quotas (issue 29), each declared once: its setting (0 = unlimited), what it counts, and what its
 * refusal tells the model to do. An organization's own value (organization_quotas, set by `service-mcp quotas set`)
 * replaces the setting for that organization. The counts are the organizationQuotas repository's queries.
 * Why these choices: docs/decisions/quotas.md.
 */
export const QUOTAS: Readonly<Record<QuotaName, QuotaSpec>> = {
  apps: {
    setting: 'SERVICE_QUOTA_APPS',
    configKey: 'quotaApps',
    unit: 'apps',
    scale: 1,
    whose: 'this organization',
    free: 'delete an app it no longer needs with service_apps_delete',
  },
  env_vars_per_app: {
    setting: 'SERVICE_QUOTA_ENV_VARS_PER_APP',
    configKey: 'quotaEnvVarsPerApp',
    unit: 'env vars',
    scale: 1,
    whose: 'this app',
    free: 'remove an env var it no longer needs with service_env_unset (replacing the value of an existing one is allowed)',
  },
  concurrent_deployments: {
    setting: 'SERVICE_QUOTA_CONCURRENT_DEPLOYMENTS',
    configKey: 'quotaConcurrentDeployments',
    unit: 'deployments queued or running',
    scale: 1,
    whose: 'this organization',
    free: 'wait for a deployment to finish (service_deployments_list shows them) or cancel one with service_deployments_cancel',
  },
  deployment_output_mb: {
    setting: 'SERVICE_QUOTA_DEPLOYMENT_OUTPUT_MB',
    configKey: 'quotaDeploymentOutputMb',
    unit: 'MB of stored deployment output',
    scale: MIB,
    whose: 'this organization',
    free: 'delete apps it no longer needs with service_apps_delete (their deployments\' output goes with them), or ask the operator to keep less output (the retention settings)',
  },
}

export function isQuotaName(value: string): value is QuotaName {
  return (QUOTA_NAMES as readonly string[]).includes(value)
}

/** The limit of `name` for the organization: its own value, else the setting; 0 = unlimited. */
export async function quotaLimit(repos: Pick<TxRepos, 'organizationQuotas'>, config: Config, organizationId: string, name: QuotaName): Promise<{ value: number; source: 'organization' | 'setting' }> {
  const own = await repos.organizationQuotas.get(organizationId, name)
  return own === undefined ? { value: config[QUOTAS[name].configKey], source: 'setting' } : { value: own, source: 'organization' }
}

/** The usage in the quota's unit: counts as they are, output in MB (two decimals, rounded up: never shown under). */
export function inUnits(name: QuotaName, raw: number): number {
  const scale = QUOTAS[name].scale
  return scale === 1 ? raw : Math.ceil((raw / scale) * 100) / 100
}

/**
 * Refuses (QUOTA_EXCEEDED) when the organization has no room left under `name`: one more app, env var or deployment
 * would pass the limit, or the stored output is at or over it. `appId` names the app of env_vars_per_app. Inside a
 * transaction that then writes, call holdQuota instead, so the check stays true until the write commits.
 */
export async function checkQuota(repos: QuotaRepos, config: Config, organizationId: string, name: QuotaName, appId?: string): Promise<void> {
  const limit = await quotaLimit(repos, config, organizationId, name)
  if (limit.value === 0) return
  const raw = await repos.organizationQuotas.usage(name, organizationId, appId)
  if (raw < limit.value * QUOTAS[name].scale) return
  const slug = (await repos.organizations.byId(organizationId))?.slug ?? '<organization>'
  throw quotaExceeded(name, limit, inUnits(name, raw), slug)
}

/**
 * checkQuota inside the transaction that writes what the quota counts, holding the organization's quota first: two
 * creates at the last slot, in any process, check one after the other, so exactly the limit get in.
 */
export async function holdQuota(tx: QuotaRepos, config: Config, organizationId: string, name: QuotaName, appId?: string): Promise<void> {
  await tx.organizationQuotas.lock(organizationId, name)
  await checkQuota(tx, config, organizationId, name, appId)
}

/**
 * Whether the organization may start one more deployment: a place under concurrent_deployments, and its stored output
 * under deployment_output_mb. The runner calls it inside the transaction that queues the run (`hold`), the tools before
 * the user is asked to confirm.
 */
export async function checkDeploymentQuotas(repos: QuotaRepos, config: Config, organizationId: string, options: { hold?: boolean } = {}): Promise<void> {
  const check = options.hold === true ? holdQuota : checkQuota
  await check(repos, config, organizationId, 'concurrent_deployments')
  await checkQuota(repos, config, organizationId, 'deployment_output_mb')
}

/** The refusal: the quota, its value and where it comes from, the usage, what to free, and how the operator raises it. */
export function quotaExceeded(name: QuotaName, limit: { value: number; source: 'organization' | 'setting' }, usage: number, slug: string): ServiceError {
  const q = QUOTAS[name]
  const from = limit.source === 'setting' ? `the server's setting ${q.setting}` : `this organization's own value (the server's setting is ${q.setting})`
  const reached = name === 'deployment_output_mb' ? `holds ${usage} ${q.unit}` : `has ${usage} ${q.unit}`
  return new ServiceError('QUOTA_EXCEEDED', {
    message: `Quota ${name} reached: ${q.whose} may have ${limit.value} ${q.unit} (${from}) and ${reached}. ` +
      `To go on, ${q.free}; or ask the operator to raise it: service-mcp quotas set ${slug} ${name} <value> (0 = unlimited)`,
    details: { quota: name, limit: limit.value, usage, setting: q.setting },
  })
}

/** Over every organization, for the metrics: the highest usage/limit of each quota, and how many are at their limit. */
export async function quotaUsageSummary(repos: Pick<TxRepos, 'organizationQuotas'>, config: Config): Promise<Map<QuotaName, { ratioMax: number; atLimit: number }>> {
  const own = new Map<string, number>()
  for (const row of await repos.organizationQuotas.list()) own.set(`${row.name}:${row.organizationId}`, row.value)
  const summary = new Map<QuotaName, { ratioMax: number; atLimit: number }>()
  for (const name of QUOTA_NAMES) {
    const usage = await repos.organizationQuotas.usageByOrganization(name)
    let ratioMax = 0
    let atLimit = 0
    for (const [organizationId, raw] of usage) {
      const limit = own.get(`${name}:${organizationId}`) ?? config[QUOTAS[name].configKey]
      if (limit === 0) continue
      const ratio = raw / (limit * QUOTAS[name].scale)
      ratioMax = Math.max(ratioMax, ratio)
      if (ratio >= 1) atLimit++
    }
    summary.set(name, { ratioMax, atLimit })
  }
  return summary
}

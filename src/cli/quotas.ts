import type { Repos } from '../db/repos/index.js'
import { inUnits, isQuotaName, QUOTA_NAMES, quotaLimit, QUOTAS, type QuotaName } from '../limits/quotas.js'
import { UsageError, type Context } from './command.js'

/** `quotas list`, `quotas set` and `quotas reset` (docs/operating.md, "Quotas"). */

async function organization(repos: Repos, slug: string) {
  const o = await repos.organizations.bySlug(slug)
  if (!o) throw new UsageError(`no organization with slug ${slug}`)
  return o
}

function quotaName(value: string, command: string): QuotaName {
  if (!isQuotaName(value)) throw new UsageError(`quota must be one of ${QUOTA_NAMES.join(', ')}`, command)
  return value
}

function shown(value: number): string {
  return value === 0 ? '0 (unlimited)' : String(value)
}

/** Each organization's quotas: the value, where it comes from (the setting or its own), and the usage in the unit. */
export async function quotasList(c: Context): Promise<void> {
  const repos = await c.repos()
  const orgs = c.options.org ? [await organization(repos, c.options.org)] : await repos.organizations.list()
  // One aggregate query per quota, whatever the number of organizations.
  const usage = new Map<QuotaName, Map<string, number>>()
  for (const name of QUOTA_NAMES) usage.set(name, await repos.organizationQuotas.usageByOrganization(name))
  const rows: Array<Record<string, string>> = []
  for (const o of orgs) {
    for (const name of QUOTA_NAMES) {
      const limit = await quotaLimit(repos, c.config, o.id, name)
      rows.push({
        organization: o.slug,
        quota: name,
        value: shown(limit.value),
        from: limit.source === 'setting' ? QUOTAS[name].setting : 'organization',
        usage: String(inUnits(name, usage.get(name)!.get(o.id) ?? 0)),
        unit: name === 'env_vars_per_app' ? `${QUOTAS[name].unit} (fullest app)` : QUOTAS[name].unit,
      })
    }
  }
  if (rows.length === 0) return c.out('(none)')
  const cols = Object.keys(rows[0]!)
  const width = cols.map((col) => Math.max(col.length, ...rows.map((r) => r[col]!.length)))
  const line = (cells: string[]) => c.out(cells.map((cell, i) => cell.padEnd(width[i]!)).join('  ').trimEnd())
  line(cols)
  for (const r of rows) line(cols.map((col) => r[col]!))
}

/** Gives one organization its own value of a quota (0 = unlimited), audited as the CLI's change. */
export async function quotasSet(c: Context): Promise<void> {
  const [slug, rawName, rawValue] = c.args as [string, string, string]
  const name = quotaName(rawName, 'quotas set')
  if (!/^\d{1,15}$/.test(rawValue)) throw new UsageError('value must be a whole number, 0 or more (0 = unlimited)', 'quotas set')
  const value = Number(rawValue)
  const repos = await c.repos()
  const o = await organization(repos, slug)
  const previous = await repos.organizationQuotas.set(o.id, name, value, { via: 'cli' })
  const before = previous === null ? `the setting ${QUOTAS[name].setting} = ${shown(c.config[QUOTAS[name].configKey])}` : shown(previous)
  c.out(`${o.slug}: quota ${name} is ${shown(value)} ${QUOTAS[name].unit} (was ${before})`)
}

/** Puts one organization's quota back on the server's setting, audited. */
export async function quotasReset(c: Context): Promise<void> {
  const [slug, rawName] = c.args as [string, string]
  const name = quotaName(rawName, 'quotas reset')
  const repos = await c.repos()
  const o = await organization(repos, slug)
  if ((await repos.organizationQuotas.get(o.id, name)) === undefined) {
    return c.out(`${o.slug}: quota ${name} already follows the setting ${QUOTAS[name].setting} (${shown(c.config[QUOTAS[name].configKey])})`)
  }
  const previous = await repos.organizationQuotas.reset(o.id, name, { via: 'cli' })
  c.out(`${o.slug}: quota ${name} follows the setting ${QUOTAS[name].setting} again (${shown(c.config[QUOTAS[name].configKey])}; was ${shown(previous ?? 0)})`)
}

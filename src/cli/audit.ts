import { readFileSync, writeFileSync } from 'node:fs'
import { GENESIS, verifyChain, type Anchor, type ChainEntry, type ChainReport, type Checkpoint, type Problem } from '../audit/chain.js'
import { checkCheckpoint } from '../audit/checkpoint.js'
import { EXPORT_FORMAT, ExportFormatError, exportLines, readExport } from '../audit/export-format.js'
import { signHeads } from '../audit/signer.js'
import type { Organization } from '../db/repos/organizations.js'
import type { Repos } from '../db/repos/index.js'
import { CheckFailed, UsageError, type Context } from './command.js'

/** `audit verify` and `audit export` (docs/decisions/audit-chain.md; docs/operating.md, "The audit trail"). */

const PAGE = 1000

/** One organization's kept chain, its signed heads, and where it starts. */
async function chainOf(repos: Repos, organizationId: string, sinceMs?: number) {
  const points = await repos.audit.checkpoints(organizationId)
  const start = points.filter((p) => p.kind === 'start').at(-1)
  const anchor: Anchor = start ? { seq: start.seq, prevHash: start.hash } : { seq: 1, prevHash: GENESIS }
  const entries: ChainEntry[] = []
  // From the anchor: entries before it are what a retention purge in progress has still to delete.
  for (let from = anchor.seq; ; ) {
    const page = await repos.audit.chain(organizationId, from, PAGE)
    entries.push(...page.filter((e) => sinceMs === undefined || e.at >= sinceMs))
    if (page.length < PAGE) break
    from = page[page.length - 1]!.seq! + 1
  }
  const stray = await repos.audit.unchained(organizationId, PAGE)
  const heads: Checkpoint[] = points.filter((p) => p.kind === 'head').map(({ kind: _kind, ...c }) => c)
  return { entries, stray, heads, anchor, start }
}

/** A start checkpoint (written by retention) whose signature does not verify: the chain's start was moved by hand. */
async function anchorProblem(start: Checkpoint | undefined, keys: ReadonlyArray<Record<string, unknown>>): Promise<Problem | undefined> {
  if (!start || (await checkCheckpoint(start, keys)) !== false) return undefined
  return { kind: 'bad_signature', seq: start.seq, id: null, message: `The start checkpoint at seq ${start.seq} (key ${start.kid}) does not verify: where the kept chain starts was altered or not recorded by this server` }
}

function describe(name: string, report: ChainReport): string {
  if (report.problem) return `${name}: ${report.problem.message}`
  const signed = report.signedThrough === null ? 'no signed checkpoint yet' : `signed through seq ${report.signedThrough}`
  return `${name}: intact, ${report.entries} entries, ${signed}${report.unsigned > 0 ? ` (${report.unsigned} after it, not signed yet)` : ''}`
}

async function keysFrom(c: Context): Promise<Array<Record<string, unknown>> | null> {
  const where = c.options.keys
  if (where === undefined) return null
  let text: string
  try {
    text = /^https?:\/\//.test(where) ? await (await fetch(where)).text() : readFileSync(where, 'utf8')
  } catch (err) {
    throw new UsageError(`--keys: cannot read ${where}: ${(err as Error).message}`, 'audit verify')
  }
  const jwks = JSON.parse(text) as { keys?: unknown }
  if (!Array.isArray(jwks.keys)) throw new UsageError(`--keys: ${where} is not a JWK set ({"keys": [...]})`, 'audit verify')
  return jwks.keys as Array<Record<string, unknown>>
}

export async function auditVerify(c: Context): Promise<void> {
  const keys = await keysFrom(c)
  if (c.options.file !== undefined) return verifyFile(c, c.options.file, keys)
  const repos = await c.repos()
  // The database's own public keys unless --keys names the published set: whoever can write the database can
  // also add a key to it, so an outside check passes --keys.
  const trusted = keys ?? (await repos.signingKeys.all()).map((k) => k.publicJwk as unknown as Record<string, unknown>)
  const orgs = c.options.org !== undefined ? [await orgBySlug(repos, c.options.org)] : await repos.organizations.list()
  let failed = 0
  for (const o of orgs) {
    const { entries, stray, heads, anchor, start } = await chainOf(repos, o.id)
    const report = await verifyChain([...entries, ...stray], heads, (cp) => checkCheckpoint(cp, trusted), anchor)
    const moved = await anchorProblem(start, trusted)
    if (moved) report.problem = moved
    c.out(describe(o.slug, report))
    if (report.problem) failed++
  }
  if (failed > 0) throw new CheckFailed(`the audit trail of ${failed} organization(s) was altered`)
}

async function verifyFile(c: Context, file: string, keys: Array<Record<string, unknown>> | null): Promise<void> {
  if (keys === null) throw new UsageError('--file needs --keys: the JWK set the server publishes at /.well-known/jwks.json (saved when the export was made)', 'audit verify')
  let read: ReturnType<typeof readExport>
  try {
    read = readExport(readFileSync(file, 'utf8'))
  } catch (err) {
    if (err instanceof ExportFormatError) throw new CheckFailed(`${file}: ${err.message}`)
    throw new UsageError(`cannot read ${file}: ${(err as Error).message}`, 'audit verify')
  }
  const report = await verifyChain(read.entries, read.checkpoints, (cp) => checkCheckpoint(cp, keys), read.anchor)
  c.out(describe(`${read.header.organization.slug} (${file})`, report))
  if (report.problem) throw new CheckFailed('the exported audit trail was altered')
  if (report.signedThrough === null) throw new CheckFailed('no checkpoint of the export verifies with these keys: nothing in it is proven')
}

export async function auditExport(c: Context): Promise<void> {
  const repos = await c.repos()
  if ((c.options.format ?? 'jsonl') !== 'jsonl') throw new UsageError('--format: only jsonl is supported', 'audit export')
  if (c.options.org === undefined) throw new UsageError('--org is required: an export is one organization\'s trail', 'audit export')
  const since = c.options.since === undefined ? undefined : Date.parse(c.options.since)
  if (since !== undefined && Number.isNaN(since)) throw new UsageError('--since must be a date or time, e.g. 2026-11-01 or 2026-11-01T12:00:00Z', 'audit export')
  const o = await orgBySlug(repos, c.options.org)
  // The head is signed first, so the export ends with a checkpoint that covers every entry in it.
  await signHeads(repos, Date.now(), o.id)
  const { entries, heads, anchor } = await chainOf(repos, o.id, since)
  const first = entries[0]
  const start = first ? { seq: first.seq!, prev_hash: first.prevHash! } : { seq: anchor.seq, prev_hash: anchor.prevHash }
  const covering = heads.filter((h) => h.seq >= start.seq)
  const kids = new Set(covering.map((h) => h.kid))
  const keys = (await repos.signingKeys.all()).filter((k) => kids.has(k.kid)).map((k) => k.publicJwk as unknown as Record<string, unknown>)
  const header = {
    type: 'header' as const, format: EXPORT_FORMAT, organization: { id: o.id, slug: o.slug },
    since: since === undefined ? null : new Date(since).toISOString(), exported_at: new Date().toISOString(), start, keys,
  }
  const text = exportLines(header, entries, covering).join('\n') + '\n'
  if (c.options.output !== undefined) {
    writeFileSync(c.options.output, text, { mode: 0o600 })
    c.out(`exported ${entries.length} entries of ${o.slug} to ${c.options.output}`)
  } else {
    process.stdout.write(text)
  }
}

async function orgBySlug(repos: Repos, slug: string): Promise<Organization> {
  const o = await repos.organizations.bySlug(slug)
  if (!o) throw new UsageError(`no organization ${slug} (service-mcp orgs list)`)
  return o
}

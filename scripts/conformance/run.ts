/**
 * `npm run conformance`: the official MCP conformance suite (github:modelcontextprotocol/conformance) against this
 * server's conformance profile (`service-mcp serve --profile conformance`), in three runs, and its authorization
 * server as it ships in a fourth:
 *
 *   A  conformance 0.1.16, active suite                     30 scenarios, 2025-11-25 sessions
 *   B  conformance 0.2.0-alpha.12, active suite             31 scenarios, 2025-11-25 sessions
 *   C  conformance 0.2.0-alpha.12, --requirements 2026-07-28  37 scored + 13 unscored scenarios, stateless requests
 *   D  conformance 0.2.0-alpha.12, authorization            2 authorization-server scenarios (authorization-run.ts)
 *
 * each against a fresh profile server (its own in-memory database) and with its committed baseline of expected
 * failures (conformance/expected-failures.*.yaml; with a baseline, a WARNING counts as a failure and an entry that
 * passes fails the run). The suite's CLI needs Node 22 (fs.globSync): the npm package `node` provides it. Node 22 and
 * both suite releases are installed from the npm registry, each into its own folder under conformance/.install (never
 * into the project's node_modules, where a `node` binary would shadow the Node that builds the SQLite addon), from the
 * manifests and lockfiles under conformance/installs, and reused while those do not change.
 *
 * The four run at once (their reports are printed afterwards, in order). Exit code 0 when all four runs pass, 1
 * otherwise. The servers are always stopped.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { childEnv, execute, killAll } from '../lib/children.js'
import { ensurePinnedInstall } from '../lib/pinned-install.js'
import { runAuthorizationSuite } from './authorization-run.js'
import { startServing } from './serve.js'

const root = fileURLToPath(new URL('../..', import.meta.url))
const manifests = join(root, 'conformance', 'installs')
const installRoot = join(root, 'conformance', '.install')
const resultsRoot = join(root, 'conformance', '.results')

/** A run may take this long before it is stopped and fails (the suite's own per-scenario timeout is 30 s). */
const RUN_TIMEOUT_MS = 5 * 60_000
const SERVER_START_TIMEOUT_MS = 60_000

interface Run {
  id: string
  title: string
  install: 'suite-0.1.16' | 'suite-alpha'
  args: string[]
  /** The expected failures the suite itself checks; none for run D, which the runner judges (every check SUCCESS). */
  baseline: string | null
}

/** The runs of the suite's `server` command, each with its baseline. */
type ServerRun = Run & { baseline: string }

const RUNS: ServerRun[] = [
  { id: 'A', title: 'conformance 0.1.16, active suite (2025-11-25 sessions)', install: 'suite-0.1.16', args: [], baseline: 'expected-failures.0.1.16.yaml' },
  { id: 'B', title: 'conformance 0.2.0-alpha.12, active suite (2025-11-25 sessions)', install: 'suite-alpha', args: [], baseline: 'expected-failures.alpha.yaml' },
  { id: 'C', title: 'conformance 0.2.0-alpha.12, --requirements 2026-07-28 (stateless requests)', install: 'suite-alpha', args: ['--requirements', '2026-07-28'], baseline: 'expected-failures.alpha.yaml' },
]

const SUITE_ENTRY = join('node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js')
const NODE_ENTRY = join('node_modules', 'node', 'bin', 'node')

function log(line = ''): void {
  process.stdout.write(line + '\n')
}

/** Installs `name` (conformance/installs/<name>) into conformance/.install/<name>, unless installed already. */
async function ensureInstalled(name: string, probe: string): Promise<string> {
  const dir = join(installRoot, name)
  const done = await ensurePinnedInstall({ source: join(manifests, name), target: dir, probe })
  log(`  ${name}: ${done.reused ? 'reused' : `installed in ${done.seconds.toFixed(1)} s`} (${relative(root, dir)})`)
  return dir
}

interface Tally {
  scenarios: number
  byStatus: Record<string, number>
  /** FAILURE and WARNING checks, `scenario:check-id (STATUS) message`. */
  problems: string[]
}

/**
 * Scenarios a `--requirements <revision>` run executes without scoring them (the `not_scored` entries of the suite's
 * requirements/<revision>.yaml whose leg is `server`); none for the other runs.
 */
function unscored(run: ServerRun, suite: string): Set<string> {
  const at = run.args.indexOf('--requirements')
  if (at === -1) return new Set()
  const file = join(suite, 'node_modules', '@modelcontextprotocol', 'conformance', 'requirements', `${run.args[at + 1]}.yaml`)
  const text = readFileSync(file, 'utf8')
  const block = text.slice(text.indexOf('\nnot_scored:'))
  return new Set([...block.matchAll(/-\s+scenario:\s*(\S+)\s*\n\s+leg:\s*server\b/g)].map((m) => m[1]!))
}

/** Reads the checks the suite saved (`-o`): one folder per scenario with checks.json. */
function tally(dir: string, notScored: Set<string>): Tally {
  const t: Tally = { scenarios: 0, byStatus: {}, problems: [] }
  if (!existsSync(dir)) return t
  for (const entry of readdirSync(dir).sort()) {
    const file = join(dir, entry, 'checks.json')
    if (!existsSync(file)) continue
    t.scenarios++
    const scenario = entry.replace(/^(?:authorization-)?server-/, '').replace(/-\d{4}-\d{2}-\d{2}T[\d-]+Z$/, '')
    for (const check of JSON.parse(readFileSync(file, 'utf8')) as Array<{ id: string; status: string; errorMessage?: string }>) {
      t.byStatus[check.status] = (t.byStatus[check.status] ?? 0) + 1
      if (check.status === 'FAILURE' || check.status === 'WARNING') {
        t.problems.push(`${scenario}:${check.id} (${check.status}${notScored.has(scenario) ? ', not scored' : ''}) ${check.errorMessage ?? ''}`.trim())
      }
    }
  }
  return t
}

interface Outcome {
  run: Run
  code: number | null
  seconds: number
  tally: Tally
  /** What the run has to say, printed once every run has ended, in the order of the runs. */
  report: string[]
}

async function runSuite(run: ServerRun, node: string, suite: string): Promise<Outcome> {
  const report: string[] = []
  const log = (line: string) => report.push(line)
  const server = await startServing(root, ['--profile', 'conformance'], {}, SERVER_START_TIMEOUT_MS)
  const out = join(resultsRoot, run.id)
  rmSync(out, { recursive: true, force: true })
  const started = Date.now()
  let result: Awaited<ReturnType<typeof execute>>
  try {
    const args = [join(suite, SUITE_ENTRY), 'server', '--url', server.url, ...run.args, '--expected-failures', join(root, 'conformance', run.baseline), '-o', out]
    log(`\n=== Run ${run.id}: ${run.title}`)
    log(`    ${relative(root, node)} ${args.map((a) => (a.startsWith(root) ? relative(root, a) : a)).join(' ')}`)
    result = await execute(node, args, { cwd: root, env: childEnv(), timeoutMs: RUN_TIMEOUT_MS })
  } finally {
    await server.stop()
  }
  const seconds = (Date.now() - started) / 1000
  writeFileSync(join(resultsRoot, `${run.id}.log`), result.output)
  // The suite's own summary and baseline verdict; everything when the run failed.
  const summary = result.output.indexOf('=== SUMMARY ===')
  log(result.code === 0 && summary !== -1 ? result.output.slice(summary).trimEnd() : result.output.trimEnd())
  if (result.timedOut) log(`Run ${run.id} was stopped after ${RUN_TIMEOUT_MS / 1000} s`)
  if (result.code !== 0) log(`\n--- profile server output (run ${run.id}) ---\n${server.output().trimEnd()}`)
  return { run, code: result.timedOut ? null : result.code, seconds, tally: tally(out, unscored(run, suite)), report }
}

const AUTHORIZATION_RUN: Run = { id: 'D', title: 'conformance 0.2.0-alpha.12, authorization (the authorization server as it ships)', install: 'suite-alpha', args: [], baseline: null }

/** Run D (authorization-run.ts): passes when the suite exits 0 and every saved check is SUCCESS, none WARNING. */
async function runAuthorization(node: string, suite: string): Promise<Outcome> {
  const run = AUTHORIZATION_RUN
  const report: string[] = []
  const log = (line: string) => report.push(line)
  const out = join(resultsRoot, run.id)
  rmSync(out, { recursive: true, force: true })
  log(`\n=== Run ${run.id}: ${run.title}`)
  const started = Date.now()
  const result = await runAuthorizationSuite({ root, node, suiteEntry: join(suite, SUITE_ENTRY), out, timeoutMs: RUN_TIMEOUT_MS, startTimeoutMs: SERVER_START_TIMEOUT_MS })
  const seconds = (Date.now() - started) / 1000
  writeFileSync(join(resultsRoot, `${run.id}.log`), result.output)
  const t = tally(out, new Set())
  const passed = result.code === 0 && t.problems.length === 0 && (t.byStatus.SUCCESS ?? 0) > 0 && Object.keys(t.byStatus).every((s) => s === 'SUCCESS')
  log(passed ? result.output.slice(result.output.indexOf('=== SUMMARY ===')).trimEnd() : result.output.trimEnd())
  if (!passed) log(`\n--- server output (run ${run.id}) ---\n${result.server.output().trimEnd()}`)
  return { run, code: passed ? 0 : (result.code ?? 1) || 1, seconds, tally: t, report }
}

async function main(): Promise<number> {
  const started = Date.now()
  log('Installing Node 22 and the conformance suite (npm registry, pinned by conformance/installs/*/package-lock.json)')
  mkdirSync(installRoot, { recursive: true })
  const [node22, release, alpha] = await Promise.all([
    ensureInstalled('node22', NODE_ENTRY),
    ensureInstalled('suite-0.1.16', SUITE_ENTRY),
    ensureInstalled('suite-alpha', SUITE_ENTRY),
  ])
  const node = join(node22, NODE_ENTRY)
  const version = await execute(node, ['--version'], { cwd: root, env: childEnv(), timeoutMs: 30_000 })
  if (version.code !== 0 || !version.output.startsWith('v22.')) throw new Error(`${relative(root, node)} is not Node 22: ${version.output}`)
  log(`  Node ${version.output.trim()} for the suite; the server runs on this project's Node ${process.version}`)
  mkdirSync(resultsRoot, { recursive: true })

  // `npm run conformance -- D` runs only the runs named (while working on one); all of them by default.
  const chosen = new Set(process.argv.slice(2).map((a) => a.toUpperCase()))
  const wanted = (id: string) => chosen.size === 0 || chosen.has(id)
  // The runs at once, each on a server of its own with its own results folder: they share nothing, and each mostly
  // waits on the other's answers, so one after another they left CI's cores idle for about 20 s. Their reports are
  // printed afterwards, in order.
  const outcomes = await Promise.all([
    ...RUNS.filter((run) => wanted(run.id)).map((run) => runSuite(run, node, run.install === 'suite-0.1.16' ? release : alpha)),
    ...(wanted(AUTHORIZATION_RUN.id) ? [runAuthorization(node, alpha)] : []),
  ])
  for (const o of outcomes) log(o.report.join('\n'))

  log('\n=== Conformance summary (checks by status; results in conformance/.results) ===')
  for (const o of outcomes) {
    const counts = Object.entries(o.tally.byStatus).sort().map(([s, n]) => `${n} ${s}`).join(', ')
    const judged = o.run.baseline ? `baseline conformance/${o.run.baseline}` : 'every check must be SUCCESS'
    log(`${o.code === 0 ? 'PASS' : 'FAIL'}  run ${o.run.id}  ${o.run.title}: ${o.tally.scenarios} scenarios, ${counts}; ${o.seconds.toFixed(1)} s; ${judged}`)
    for (const p of o.tally.problems) log(`        ${p}`)
  }
  const failed = outcomes.filter((o) => o.code !== 0)
  log(`${failed.length === 0 ? `All ${outcomes.length === 4 ? 'four ' : ''}runs pass` : `${failed.length} run(s) failed: ${failed.map((o) => o.run.id).join(', ')}`} (${((Date.now() - started) / 1000).toFixed(1)} s in all)`)
  return failed.length === 0 ? 0 : 1
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`conformance: ${err instanceof Error ? err.message : String(err)}\n`)
    killAll()
    process.exit(1)
  },
)

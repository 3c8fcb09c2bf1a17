/**
 * `npm run conformance`: the official MCP conformance suite (github:modelcontextprotocol/conformance) against this
 * server's conformance profile (`service-mcp serve --profile conformance`), in three runs:
 *
 *   A  conformance 0.1.16, active suite                     30 scenarios, 2025-11-25 sessions
 *   B  conformance 0.2.0-alpha.12, active suite             31 scenarios, 2025-11-25 sessions
 *   C  conformance 0.2.0-alpha.12, --requirements 2026-07-28  37 scored + 13 unscored scenarios, stateless requests
 *
 * each against a fresh profile server (its own in-memory database) and with its committed baseline of expected
 * failures (conformance/expected-failures.*.yaml; with a baseline, a WARNING counts as a failure and an entry that
 * passes fails the run). The suite's CLI needs Node 22 (fs.globSync): the npm package `node` provides it. Node 22 and
 * both suite releases are installed from the npm registry, each into its own folder under conformance/.install (never
 * into the project's node_modules, where a `node` binary would shadow the Node that builds the SQLite addon), from the
 * manifests and lockfiles under conformance/installs, and reused while those do not change.
 *
 * Exit code 0 when all three runs pass, 1 otherwise. The servers are always stopped.
 */
import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { childEnv, execute, killAll, track } from '../lib/children.js'
import { ensurePinnedInstall } from '../lib/pinned-install.js'

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
  baseline: string
}

const RUNS: Run[] = [
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

interface Served {
  /** Where the suite reaches the profile: `http://localhost:PORT/mcp` (see asLocalhost). */
  url: string
  output(): string
  stop(): Promise<void>
}

/**
 * The address the suite is given: the one its examples write, `http://localhost:PORT/mcp`, for the listening URL
 * `http://127.0.0.1:PORT/mcp`. The profile answers to every loopback name of its loopback base address
 * (docs/decisions/http-errors.md), which the suite's dns-rebinding-protection scenario checks by sending the URL's own
 * host as Host and Origin. Where `localhost` resolves to ::1 first, Node's clients fall back to 127.0.0.1 (happy
 * eyeballs, on by default since Node 20).
 */
function asLocalhost(url: string): string {
  const u = new URL(url)
  u.hostname = 'localhost'
  return u.href
}

/** Starts `service-mcp serve --profile conformance` on 127.0.0.1, port 0, with this project's Node; reads its URL. */
function startProfile(): Promise<Served> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'serve', '--profile', 'conformance', '--host', '127.0.0.1', '--port', '0'], {
    cwd: root,
    env: childEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  track(child)
  let output = ''
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    child.kill('SIGTERM')
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
    await exited
    clearTimeout(timer)
  }
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      void stop()
      reject(new Error(`the profile server did not start within ${SERVER_START_TIMEOUT_MS} ms:\n${output}`))
    }, SERVER_START_TIMEOUT_MS)
    child.stderr!.on('data', (d: Buffer) => (output += d.toString('utf8')))
    child.stdout!.on('data', (d: Buffer) => {
      output += d.toString('utf8')
      for (const line of output.split('\n')) {
        if (!line.startsWith('{')) continue
        try {
          const parsed = JSON.parse(line) as { msg?: string; url?: string }
          if (parsed.msg === 'MCP server listening' && parsed.url) {
            clearTimeout(timer)
            resolve({ url: asLocalhost(parsed.url), output: () => output, stop })
            return
          }
        } catch {
          // a line still being written
        }
      }
    })
    void exited.then((code) => {
      clearTimeout(timer)
      reject(new Error(`the profile server exited with ${code} before listening:\n${output}`))
    })
  })
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
function unscored(run: Run, suite: string): Set<string> {
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
    const scenario = entry.replace(/^server-/, '').replace(/-\d{4}-\d{2}-\d{2}T[\d-]+Z$/, '')
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
}

async function runSuite(run: Run, node: string, suite: string): Promise<Outcome> {
  const server = await startProfile()
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
  return { run, code: result.timedOut ? null : result.code, seconds, tally: tally(out, unscored(run, suite)) }
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

  const outcomes: Outcome[] = []
  for (const run of RUNS) outcomes.push(await runSuite(run, node, run.install === 'suite-0.1.16' ? release : alpha))

  log('\n=== Conformance summary (checks by status; results in conformance/.results) ===')
  for (const o of outcomes) {
    const counts = Object.entries(o.tally.byStatus).sort().map(([s, n]) => `${n} ${s}`).join(', ')
    log(`${o.code === 0 ? 'PASS' : 'FAIL'}  run ${o.run.id}  ${o.run.title}: ${o.tally.scenarios} scenarios, ${counts}; ${o.seconds.toFixed(1)} s; baseline conformance/${o.run.baseline}`)
    for (const p of o.tally.problems) log(`        ${p}`)
  }
  const failed = outcomes.filter((o) => o.code !== 0)
  log(`${failed.length === 0 ? 'All three runs pass' : `${failed.length} run(s) failed: ${failed.map((o) => o.run.id).join(', ')}`} (${((Date.now() - started) / 1000).toFixed(1)} s in all)`)
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

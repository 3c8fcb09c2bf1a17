/**
 * The suite as `npm test` runs it: the compiled test files (build/test, from `npm run build:tests`), four processes at
 * a time, on SQLite and then the PostgreSQL pass (scripts/postgres-pass.ts lists its files) with
 * SERVICE_TEST_DATABASE=postgres, between one start and one stop of the run's PostgreSQL and Redis (test/setup).
 *
 *   tsx scripts/run-tests.ts [--pass sqlite|postgres|both] [--jobs N] [--timeout SECONDS] [--per-process N]
 *                            [build/test/…/x.test.js …]
 *
 * A process runs up to --per-process files one after another (scripts/test-runner/shared-process.ts), each in a subtest
 * that is its own `t`; a file that says `// test-process: own (why)` gets a process of its own, as does every file with
 * --per-process 1. Starting node and loading tap, the server and the helpers cost more CPU than most files' tests, and
 * the suite is bound by CPU on CI's 2 cores (docs/decisions/test-processes.md).
 *
 * Why not tap's runner: it starts every test process with @tapjs/processinfo, which records each module loaded through
 * an off-thread loader and hooks child_process so that every node process a test starts (the command line, servers,
 * pipelines) loads it too. On Node 20 that costs about 1.7 s of CPU per process, more than
 * the tests themselves on CI's 2 cores, and tap has no setting to leave it out. This runner speaks tap's side of the
 * protocol only: TAP_TIMEOUT and t.setTimeout() over IPC, SIGALRM at the deadline (the file then reports what was still
 * running), and prints each file's TAP as a buffered subtest with the totals at the end, as `tap` does. Test files still
 * use tap's API, and one file still runs through tap and tsx from its source: `npx tap test/e2e/smoke.test.ts`.
 */
import { spawn } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { packageRoot } from '../src/lib/package-root.js'
import { compiledTestFile, postgresPassFiles } from './postgres-pass.js'
import { running, runFile, type Job } from './test-runner/file-process.js'
import { runShared } from './test-runner/shared-process.js'
import { noCounts, type Counts, type Outcome } from './test-runner/tap-output.js'

export { runFile, type Job } from './test-runner/file-process.js'
export { type Outcome } from './test-runner/tap-output.js'

const ROOT = packageRoot()
const BUILD_TESTS = join(ROOT, 'build', 'test')
const BEFORE = join(BUILD_TESTS, 'setup', 'backends-before.js')
const AFTER = join(BUILD_TESTS, 'setup', 'backends-after.js')

export interface Options {
  pass: 'sqlite' | 'postgres' | 'both'
  jobs: number
  timeoutMs: number
  /** How many files one process runs at most, one after another. */
  perProcess: number
  files: string[]
}

export function parseOptions(argv: string[]): Options {
  // Four processes at a time on CI's 2 cores, up to 16 files each (docs/decisions/test-processes.md): the cores were
  // still idle a quarter of the run with three (tests wait on sockets, timers and the processes they start).
  const options: Options = { pass: 'both', jobs: 4, timeoutMs: 120_000, perProcess: 16, files: [] }
  let passGiven = false
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    const [flag, inline] = arg.startsWith('--') && arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined]
    const value = () => {
      const v = inline ?? argv[++i]
      if (v === undefined) throw new Error(`${flag} needs a value`)
      return v
    }
    if (flag === '--pass') {
      const v = value()
      if (v !== 'sqlite' && v !== 'postgres' && v !== 'both') throw new Error(`--pass must be sqlite, postgres or both, not ${v}`)
      options.pass = v
      passGiven = true
    } else if (flag === '--jobs') {
      options.jobs = positiveInteger(flag, value())
    } else if (flag === '--per-process') {
      options.perProcess = positiveInteger(flag, value())
    } else if (flag === '--timeout') {
      options.timeoutMs = positiveInteger(flag, value()) * 1000
    } else if (flag.startsWith('-')) {
      throw new Error(`unknown option ${flag}`)
    } else {
      options.files.push(arg)
    }
  }
  // Files named on the command line run once, on SQLite, unless --pass says otherwise.
  if (options.files.length && !passGiven) options.pass = 'sqlite'
  return options
}

function positiveInteger(flag: string, v: string): number {
  if (!/^[1-9]\d*$/.test(v)) throw new Error(`${flag} must be a positive integer, not ${v}`)
  return Number(v)
}

/** Every compiled test file under build/test, in the order tap lists them. */
function allCompiledTests(dir = BUILD_TESTS): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .flatMap((e) => (e.isDirectory() ? allCompiledTests(join(dir, e.name)) : e.name.endsWith('.test.js') ? [join(dir, e.name)] : []))
}

const OWN_PROCESS = /^\/\/ test-process: own \((.+)\)\s*$/m

/** Whether a test file asks for a process of its own (`// test-process: own (why)`, kept by tsc in its compilation). */
export function wantsOwnProcess(file: string): boolean {
  const text = readFileSync(file, 'utf8')
  if (OWN_PROCESS.test(text)) return true
  // A misspelt declaration would silently share a process that the file said it must not.
  if (/^\/\/ test-process:/m.test(text)) throw new Error(`${relative(ROOT, file)}: a test-process line must read "// test-process: own (why)"`)
  return false
}

function jobsOf(options: Options): Job[] {
  const jobs: Job[] = []
  const sqlite = options.files.length ? options.files.map((f) => join(ROOT, f)) : allCompiledTests()
  if (options.pass !== 'postgres') for (const file of sqlite) jobs.push({ name: relative(ROOT, file), file, env: {} })
  if (options.pass !== 'sqlite') {
    const { run, leftOut } = postgresPassFiles(ROOT)
    const chosen = options.files.length ? run.filter((f) => options.files.includes(compiledTestFile(f))) : run
    if (!options.files.length) {
      console.log(`# PostgreSQL pass: ${run.length} test files again on PostgreSQL and Redis; left out (${leftOut.length}), each run once on SQLite:`)
      for (const l of leftOut) console.log(`#   ${l.file}: ${l.kind} (${l.reason})`)
    }
    for (const f of chosen) jobs.push({ name: `${compiledTestFile(f)} (PostgreSQL)`, file: join(ROOT, compiledTestFile(f)), env: { SERVICE_TEST_DATABASE: 'postgres' } })
  }
  const missing = jobs.filter((j) => !existsSync(j.file))
  if (missing.length) throw new Error(`${missing.map((j) => relative(ROOT, j.file)).join(', ')} not found: run npm run build:tests first`)
  for (const job of jobs) job.ownProcess = options.perProcess === 1 || wantsOwnProcess(job.file)
  return jobs
}

/** Runs a setup script (before, after) to its end; its output goes straight through. */
function runScript(file: string): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [file], { cwd: ROOT, stdio: 'inherit' })
    child.on('error', () => resolve(1))
    child.on('close', (code, signal) => resolve(code ?? (signal ? 1 : 0)))
  })
}

/** How many of the slowest files the run's end names: where to look first when the suite gets longer. */
const SLOWEST_SHOWN = 10

/** TAP comment lines naming the `count` slowest files, slowest first. */
export function slowest(durations: ReadonlyArray<{ name: string; ms: number }>, count: number): string[] {
  const top = [...durations].sort((a, b) => b.ms - a.ms).slice(0, count)
  return top.length ? [`# slowest ${top.length} files:`, ...top.map((d) => `#   ${(d.ms / 1000).toFixed(1).padStart(6)} s  ${d.name}`)] : []
}

function sameEnv(a: Record<string, string>, b: Record<string, string>): boolean {
  const keys = Object.keys(a)
  return keys.length === Object.keys(b).length && keys.every((k) => a[k] === b[k])
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((l) => (l ? `    ${l}` : l))
    .join('\n')
}

async function main(argv: string[]): Promise<number> {
  const options = parseOptions(argv)
  const started = Date.now()
  console.log('TAP version 14')
  const jobs = jobsOf(options)
  // Interrupted: the files running are killed and no other starts (the backends are still stopped, below).
  let stopped = false
  const stop = () => {
    stopped = true
    for (const child of running) child.kill('SIGKILL')
  }
  process.on('SIGINT', stop)
  process.on('SIGTERM', stop)

  const totals = noCounts()
  let failedFiles = 0
  const durations: Array<{ name: string; ms: number }> = []
  const beforeCode = await runScript(BEFORE)
  try {
    if (beforeCode !== 0) {
      console.log(`not ok 1 - ${relative(ROOT, BEFORE)} exited with ${beforeCode}\n1..1`)
      return 1
    }
    console.log(`1..${jobs.length}`)
    let next = 0
    let printed = 0
    const report = (job: Job, outcome: Outcome) => {
      printed++
      durations.push({ name: job.name, ms: outcome.ms })
      for (const k of Object.keys(totals) as Array<keyof Counts>) totals[k] += outcome.counts[k]
      if (!outcome.ok) failedFiles++
      const body = outcome.output.replace(/^TAP version 14\n/, '').trimEnd()
      const diag = outcome.problem ? `\n  ---\n  problem: ${JSON.stringify(outcome.problem)}\n  ...` : ''
      console.log(`# Subtest: ${job.name}\n${indent(body)}\n${outcome.ok ? 'ok' : 'not ok'} ${printed} - ${job.name} # time=${outcome.ms}ms${diag}\n`)
    }
    const worker = async (jobId: number) => {
      while (!stopped && next < jobs.length) {
        const first = jobs[next]!
        if (first.ownProcess) {
          next++
          report(first, await runFile(first, next, jobId, options.timeoutMs))
          continue
        }
        // A shared process takes files while the next one may share it: same pass, not one that wants its own.
        const take = () => {
          const job = jobs[next]
          if (stopped || !job || job.ownProcess || !sameEnv(job.env, first.env)) return undefined
          next++
          return job
        }
        const { files } = await runShared({ env: first.env, childId: next + 1, jobId, timeoutMs: options.timeoutMs, maxFiles: options.perProcess, take, onOutcome: report })
        // One that ended before asking for a file did not start: the run stops rather than start it again and again.
        if (files === 0 && !stopped && jobs[next] === first) {
          stop() // the other processes too, before the backends are stopped under them
          throw new Error('a shared test process (build/test/setup/shared-process.js) ended before taking a file')
        }
      }
    }
    await Promise.all(Array.from({ length: Math.min(options.jobs, jobs.length) }, (_, i) => worker(i)))
  } finally {
    const afterCode = await runScript(AFTER)
    if (afterCode !== 0) failedFiles++
  }
  // tap's closing line: total and pass always, the other counts when not zero.
  const counts = Object.entries(totals).filter(([k, v]) => k === 'total' || k === 'pass' || v > 0)
  console.log(`# { ${counts.map(([k, v]) => `${k}: ${v}`).join(', ')} }`)
  console.log(`# files: ${jobs.length}, failed: ${failedFiles}`)
  for (const line of slowest(durations, SLOWEST_SHOWN)) console.log(line)
  console.log(`# time=${Date.now() - started}ms`)
  return failedFiles || stopped ? 1 : 0
}

// A URL's pathname keeps %20 and the like: in a folder with a space the runner would run nothing and exit 0.
if (relative(process.argv[1] ?? '', fileURLToPath(import.meta.url)) === '') {
  main(process.argv.slice(2)).then(
    (code) => (process.exitCode = code),
    (error: Error) => {
      process.stderr.write(`run-tests: ${error.message}\n`)
      process.exitCode = 2
    },
  )
}

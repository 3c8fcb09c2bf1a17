/**
 * The suite as `npm test` runs it: the compiled test files (build/test, from `npm run build:tests`), each in a plain
 * node process, three at a time, on SQLite and then the PostgreSQL pass (scripts/postgres-pass.ts lists its files) with
 * SERVICE_TEST_DATABASE=postgres, between one start and one stop of the run's PostgreSQL and Redis (test/setup).
 *
 *   tsx scripts/run-tests.ts [--pass sqlite|postgres|both] [--jobs N] [--timeout SECONDS] [build/test/…/x.test.js …]
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
import { randomBytes } from 'node:crypto'
import { existsSync, readdirSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Parser, type Result } from 'tap-parser'
import { packageRoot } from '../src/lib/package-root.js'
import { compiledTestFile, postgresPassFiles } from './postgres-pass.js'

const ROOT = packageRoot()
const BUILD_TESTS = join(ROOT, 'build', 'test')
const BEFORE = join(BUILD_TESTS, 'setup', 'backends-before.js')
const AFTER = join(BUILD_TESTS, 'setup', 'backends-after.js')
/** After SIGALRM a tap file reports its timeout and exits; one that does not within this long is killed. */
const KILL_AFTER_ALARM_MS = 15_000

export interface Options {
  pass: 'sqlite' | 'postgres' | 'both'
  jobs: number
  timeoutMs: number
  files: string[]
}

export interface Job {
  /** As printed: the file relative to the repository, and the pass when it is the PostgreSQL one. */
  name: string
  file: string
  env: Record<string, string>
}

/** Leaf assertions (subtests' closing lines not counted), as tap's own totals count them. */
type Counts = { total: number; pass: number; fail: number; skip: number; todo: number }
const noCounts = (): Counts => ({ total: 0, pass: 0, fail: 0, skip: 0, todo: 0 })

export interface Outcome {
  ok: boolean
  counts: Counts
  output: string
  ms: number
  problem?: string
}

export function parseOptions(argv: string[]): Options {
  // Three files at a time on CI's 2 cores: with two, the cores were idle 40% of the run (tests wait on sockets, timers
  // and the processes they start); three took both passes from 781 s to 658 s there, with the same CPU.
  const options: Options = { pass: 'both', jobs: 3, timeoutMs: 120_000, files: [] }
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

const running = new Set<ReturnType<typeof spawn>>()

/** Runs one test file to its end, or to its deadline (timeoutMs, moved by the file's t.setTimeout()). */
export function runFile(job: Job, childId: number, jobId: number, timeoutMs: number): Promise<Outcome> {
  const started = Date.now()
  const key = randomBytes(8).toString('hex')
  const child = spawn(process.execPath, [job.file], {
    cwd: ROOT,
    // stderr goes straight through, as under tap; stdout is TAP, parsed and printed once the file ends.
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    env: { ...process.env, ...job.env, TAP: '1', TAP_CHILD_ID: String(childId), TAP_CHILD_KEY: key, TAP_JOB_ID: String(jobId), TAP_TIMEOUT: String(timeoutMs / 1000), TAP_BAIL: '0' },
  })
  running.add(child)
  const counts = noCounts()
  const parser = new Parser()
  const count = (p: Parser) => {
    p.on('child', count)
    p.on('assert', (r: Result) => {
      if (r.closingTestPoint) return
      counts.total++
      if (r.todo) counts.todo++
      else if (r.skip) counts.skip++
      else if (r.ok) counts.pass++
      else counts.fail++
    })
  }
  count(parser)
  let output = ''
  child.stdout!.setEncoding('utf8')
  child.stdout!.on('data', (d: string) => {
    output += d
    parser.write(d)
  })

  let problem: string | undefined
  let killTimer: NodeJS.Timeout | undefined
  let deadline: NodeJS.Timeout | undefined
  const arm = (ms: number) => {
    clearTimeout(deadline)
    deadline = setTimeout(() => {
      problem = `timed out after ${ms} ms`
      child.kill('SIGALRM')
      killTimer = setTimeout(() => child.kill('SIGKILL'), KILL_AFTER_ALARM_MS)
    }, ms)
  }
  arm(timeoutMs)
  // The file's t.setTimeout(n) moves its deadline, as tap's runner allows.
  child.on('message', (msg: { setTimeout?: unknown; key?: unknown }) => {
    if (msg && msg.key === key && typeof msg.setTimeout === 'number' && !problem) arm(msg.setTimeout)
  })

  return new Promise((resolve) => {
    const finish = (code: number | null, signal: NodeJS.Signals | null, error?: Error) => {
      clearTimeout(deadline)
      clearTimeout(killTimer)
      running.delete(child)
      parser.end()
      if (error) problem = `could not start: ${error.message}`
      else if (!problem && signal) problem = `killed by ${signal}`
      else if (!problem && code !== 0) problem = `exit code ${code}`
      const ok = !problem && parser.ok && counts.fail === 0
      if (!ok && !problem) problem = 'a test failed'
      resolve({ ok, counts, output, ms: Date.now() - started, ...(problem ? { problem } : {}) })
    }
    child.on('error', (e) => finish(null, null, e))
    child.on('close', (code, signal) => finish(code, signal))
  })
}

/** How many of the slowest files the run's end names: where to look first when the suite gets longer. */
const SLOWEST_SHOWN = 10

/** TAP comment lines naming the `count` slowest files, slowest first. */
export function slowest(durations: ReadonlyArray<{ name: string; ms: number }>, count: number): string[] {
  const top = [...durations].sort((a, b) => b.ms - a.ms).slice(0, count)
  return top.length ? [`# slowest ${top.length} files:`, ...top.map((d) => `#   ${(d.ms / 1000).toFixed(1).padStart(6)} s  ${d.name}`)] : []
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
    const worker = async (jobId: number) => {
      while (!stopped && next < jobs.length) {
        const index = next++
        const job = jobs[index]!
        const outcome = await runFile(job, index + 1, jobId, options.timeoutMs)
        printed++
        durations.push({ name: job.name, ms: outcome.ms })
        for (const k of Object.keys(totals) as Array<keyof Counts>) totals[k] += outcome.counts[k]
        if (!outcome.ok) failedFiles++
        const body = outcome.output.replace(/^TAP version 14\n/, '').trimEnd()
        const diag = outcome.problem ? `\n  ---\n  problem: ${JSON.stringify(outcome.problem)}\n  ...` : ''
        console.log(`# Subtest: ${job.name}\n${indent(body)}\n${outcome.ok ? 'ok' : 'not ok'} ${printed} - ${job.name} # time=${outcome.ms}ms${diag}\n`)
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

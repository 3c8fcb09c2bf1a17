// test-backends: none (the suite's runner, on test files of its own)
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { parseOptions, runFile, slowest, wantsOwnProcess, type Job, type Outcome } from '../../scripts/run-tests.js'
import { runShared } from '../../scripts/test-runner/shared-process.js'
import { TAP_ENTRY } from '../helpers/root.js'

/**
 * scripts/run-tests.ts, the runner of `npm test`: its options, and what it makes of a test file that passes, fails an
 * assertion, exits on its own with an error, outlives its deadline, or moves its deadline with t.setTimeout(), in a
 * process of its own and in a process shared with other files (scripts/test-runner/shared-process.ts).
 */

const TAP = JSON.stringify(TAP_ENTRY)

function testFile(t: Test, body: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'run-tests-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'x.test.mjs')
  writeFileSync(file, `import t from ${TAP}\n${body}\n`)
  return file
}

const run = (file: string, timeoutMs = 20_000) => runFile({ name: 'x', file, env: {} }, 1, 0, timeoutMs)

t.test('options: both passes by default; named files run once on SQLite unless --pass says otherwise', async (t) => {
  t.same(parseOptions([]), { pass: 'both', jobs: 4, timeoutMs: 120_000, perProcess: 16, files: [] })
  t.same(parseOptions(['build/test/e2e/a.test.js']), { pass: 'sqlite', jobs: 4, timeoutMs: 120_000, perProcess: 16, files: ['build/test/e2e/a.test.js'] })
  t.same(parseOptions(['--pass=postgres', '--jobs', '4', '--timeout', '5', '--per-process', '1', 'a.js']), { pass: 'postgres', jobs: 4, timeoutMs: 5000, perProcess: 1, files: ['a.js'] })
  t.throws(() => parseOptions(['--per-process', 'all']), /--per-process must be a positive integer, not all/)
  t.throws(() => parseOptions(['--pass', 'mysql']), /--pass must be sqlite, postgres or both, not mysql/)
  t.throws(() => parseOptions(['--jobs', '0']), /--jobs must be a positive integer, not 0/)
  t.throws(() => parseOptions(['--timeout']), /--timeout needs a value/)
  t.throws(() => parseOptions(['--bail']), /unknown option --bail/)
})

t.test('a passing file: ok, its leaf assertions counted as tap counts them (subtests not counted)', async (t) => {
  const outcome = await run(testFile(t, "t.test('a', async (t) => { t.ok(1); t.ok(2, 'two', { skip: 'later' }) })\nt.test('b', async (t) => { t.ok(3, 'todo', { todo: true }) })"))
  t.ok(outcome.ok, outcome.problem ?? 'the file passed')
  t.same(outcome.counts, { total: 3, pass: 1, fail: 0, skip: 1, todo: 1 })
  t.match(outcome.output, /# Subtest: a/)
})

t.test('a failed assertion fails the file, with its diagnostics in the output', async (t) => {
  const outcome = await run(testFile(t, "t.test('a', async (t) => { t.equal(1, 2, 'one is two') })"))
  t.notOk(outcome.ok)
  t.same(outcome.counts, { total: 1, pass: 0, fail: 1, skip: 0, todo: 0 })
  t.match(outcome.output, /not ok 1 - one is two/)
})

t.test('a file that passes its assertions but exits with an error fails', async (t) => {
  const outcome = await run(testFile(t, "t.test('a', async (t) => { t.ok(1) })\nsetTimeout(() => process.exit(3), 50)"))
  t.notOk(outcome.ok)
  t.equal(outcome.problem, 'exit code 3')
})

t.test('a file past its deadline is sent SIGALRM, reports the timeout, and fails', async (t) => {
  const outcome = await run(testFile(t, "t.test('hangs', async () => { await new Promise(() => setInterval(() => {}, 1000)) })"), 5000)
  t.notOk(outcome.ok)
  t.equal(outcome.problem, 'timed out after 5000 ms')
  t.match(outcome.output, /timeout!/, "tap's own report of what was still running")
})

t.test("a file's t.setTimeout() moves its deadline, as under tap", async (t) => {
  const outcome = await run(testFile(t, "t.setTimeout(10_000)\nt.test('slow', async (t) => { await new Promise((r) => setTimeout(r, 7000)); t.ok(1) })"), 5000)
  t.ok(outcome.ok, outcome.problem ?? 'the file passed')
  t.equal(outcome.counts.pass, 1)
})

t.test('the slowest files are named at the end, slowest first', async (t) => {
  const lines = slowest([{ name: 'a', ms: 1_000 }, { name: 'b', ms: 12_345 }, { name: 'c', ms: 500 }], 2)
  t.strictSame(lines, ['# slowest 2 files:', '#     12.3 s  b', '#      1.0 s  a'])
  t.strictSame(slowest([], 10), [], 'nothing when nothing ran')
})

/** Test files for a shared process, in a folder of their own: they import 'tap' as the suite's files do. */
function sharedFiles(t: Test, bodies: string[]): { dir: string; jobs: Job[] } {
  const dir = mkdtempSync(join(tmpdir(), 'run-tests-shared-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const jobs = bodies.map((body, i) => {
    const file = join(dir, `f${i + 1}.test.js`)
    writeFileSync(file, `import t from 'tap'\nimport { existsSync, readFileSync, writeFileSync } from 'node:fs'\nconst dir = ${JSON.stringify(dir)}\n${body}\n`)
    return { name: `f${i + 1}`, file, env: {} }
  })
  return { dir, jobs }
}

/** Runs `jobs` through shared processes as the runner does, starting another when one ends; the outcomes by name. */
async function runAllShared(jobs: Job[], options: { maxFiles?: number; timeoutMs?: number } = {}): Promise<{ outcomes: Map<string, Outcome>; processes: number[] }> {
  const queue = [...jobs]
  const outcomes = new Map<string, Outcome>()
  const processes: number[] = []
  while (queue.length) {
    const { files } = await runShared({
      env: {},
      childId: 1,
      jobId: 0,
      timeoutMs: options.timeoutMs ?? 20_000,
      maxFiles: options.maxFiles ?? 8,
      take: () => queue.shift(),
      onOutcome: (job, outcome) => outcomes.set(job.name, outcome),
    })
    processes.push(files)
  }
  return { outcomes, processes }
}

const PID = "writeFileSync(`${dir}/pid-${process.pid}`, '')"

t.test('files in a shared process: one process, and each file its own t (hooks, teardowns, counts)', async (t) => {
  const { dir, jobs } = sharedFiles(t, [
    `${PID}\nt.beforeEach(() => { globalThis.hooked = (globalThis.hooked ?? 0) + 1 })\nt.teardown(() => writeFileSync(dir + '/f1-down', String(process.pid)))\nt.test('a', async (t) => { t.ok(1); t.ok(2) })`,
    `t.test('b', async (t) => {\n  t.ok(existsSync(dir + '/f1-down'), "f1's teardown ran when f1 ended")\n  t.equal(readFileSync(dir + '/f1-down', 'utf8'), String(process.pid), 'in the same process')\n  t.equal(globalThis.hooked, 1, "f1's beforeEach ran for f1's test only")\n  t.ok(1, 'skipped', { skip: 'later' })\n})`,
  ])
  const { outcomes, processes } = await runAllShared(jobs)
  t.strictSame(processes, [2], 'both files in one process')
  for (const name of ['f1', 'f2']) {
    const outcome = outcomes.get(name)
    t.ok(outcome?.ok, `${name} passed${outcome?.ok ? '' : `: ${outcome?.problem}\n${outcome?.output}`}`)
  }
  t.same(outcomes.get('f1')!.counts, { total: 2, pass: 2, fail: 0, skip: 0, todo: 0 }, "f1's assertions, counted alone")
  t.same(outcomes.get('f2')!.counts, { total: 4, pass: 3, fail: 0, skip: 1, todo: 0 }, "f2's")
  t.match(outcomes.get('f2')!.output, /# Subtest: b\n/, "each file's output is its own TAP, unindented")
  t.notMatch(outcomes.get('f2')!.output, /# Subtest: a\n/)
  t.ok(readFileSync(join(dir, 'f1-down')), 'teardown file written')
})

t.test('a file that fails ends its process: the next file starts in a new one, and passes', async (t) => {
  const { dir, jobs } = sharedFiles(t, [
    `${PID}\nt.test('a', async (t) => { t.equal(1, 2, 'one is two') })`,
    `${PID}\nt.test('b', async (t) => { t.ok(1) })`,
  ])
  const { outcomes, processes } = await runAllShared(jobs)
  t.strictSame(processes, [1, 1], 'a process each')
  t.notOk(outcomes.get('f1')!.ok)
  t.equal(outcomes.get('f1')!.problem, 'a test failed')
  t.same(outcomes.get('f1')!.counts, { total: 1, pass: 0, fail: 1, skip: 0, todo: 0 })
  t.match(outcomes.get('f1')!.output, /not ok 1 - one is two/)
  t.ok(outcomes.get('f2')!.ok, outcomes.get('f2')!.problem ?? 'passed')
  t.equal(readdirPids(dir).length, 2, 'two processes wrote their pids')
})

t.test('a file that ends its process in a test fails; the next file runs in a new process', async (t) => {
  const { jobs } = sharedFiles(t, [
    "t.test('a', async (t) => { t.ok(1); process.exit(3) })",
    "t.test('b', async (t) => { t.ok(1) })",
  ])
  const { outcomes, processes } = await runAllShared(jobs)
  t.strictSame(processes, [1, 1])
  t.notOk(outcomes.get('f1')!.ok)
  t.match(outcomes.get('f1')!.output, /not ok 2 - test unfinished/, "tap's report of the test the exit cut short")
  t.ok(outcomes.get('f2')!.ok, outcomes.get('f2')!.problem ?? 'passed')
})

t.test('a shared process that ends between two files: the file before answers for it', async (t) => {
  const { jobs } = sharedFiles(t, [
    "t.test('a', async (t) => { t.ok(1) })\nt.teardown(() => process.exit(3))",
    "t.test('b', async (t) => { t.ok(1) })",
  ])
  const { outcomes, processes } = await runAllShared(jobs)
  t.strictSame(processes, [1, 1], 'f2 ran in a new process')
  t.notOk(outcomes.get('f1')!.ok)
  t.equal(outcomes.get('f1')!.problem, 'exit code 3')
  t.ok(outcomes.get('f2')!.ok, outcomes.get('f2')!.problem ?? 'passed')
})

t.test("in a shared process, a file past its deadline fails by tap's timer, the next one runs; t.setTimeout() moves it", async (t) => {
  const { jobs } = sharedFiles(t, [
    "t.test('hangs', async () => { await new Promise(() => setInterval(() => {}, 1000)) })",
    "t.setTimeout(60_000)\nt.test('longer than the default', async (t) => { await new Promise((r) => setTimeout(r, 1500)); t.ok(1) })",
  ])
  const { outcomes } = await runAllShared(jobs, { timeoutMs: 1000 })
  t.notOk(outcomes.get('f1')!.ok)
  t.match(outcomes.get('f1')!.output, /timeout!/, "tap's own report of what was still running")
  t.ok(outcomes.get('f2')!.ok, outcomes.get('f2')!.problem ?? 'passed')
})

t.test('a process runs at most maxFiles', async (t) => {
  const { jobs } = sharedFiles(t, ["t.test('a', async (t) => t.ok(1))", "t.test('b', async (t) => t.ok(1))", "t.test('c', async (t) => t.ok(1))"])
  const { outcomes, processes } = await runAllShared(jobs, { maxFiles: 2 })
  t.strictSame(processes, [2, 1])
  t.strictSame([...outcomes.values()].map((o) => o.ok), [true, true, true])
})

t.test('a file asks for a process of its own with a test-process line; a misspelt one is refused', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'run-tests-own-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const write = (name: string, text: string) => (writeFileSync(join(dir, name), text), join(dir, name))
  t.equal(wantsOwnProcess(write('own.test.js', "// test-process: own (it measures its memory)\nimport t from 'tap'\n")), true)
  t.equal(wantsOwnProcess(write('shared.test.js', "import t from 'tap'\n")), false)
  t.throws(() => wantsOwnProcess(write('typo.test.js', '// test-process: alone\n')), /a test-process line must read "\/\/ test-process: own \(why\)"/)
})

function readdirPids(dir: string): string[] {
  return readdirSync(dir).filter((n) => n.startsWith('pid-'))
}

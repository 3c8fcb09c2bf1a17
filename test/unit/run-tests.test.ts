// test-backends: none (the suite's runner, on test files of its own)
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { parseOptions, runFile, slowest } from '../../scripts/run-tests.js'

/**
 * scripts/run-tests.ts, the runner of `npm test`: its options, and what it makes of a test file that passes, fails an
 * assertion, exits on its own with an error, outlives its deadline, or moves its deadline with t.setTimeout().
 */

const TAP = JSON.stringify(import.meta.resolve('tap'))

function testFile(t: Test, body: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'run-tests-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'x.test.mjs')
  writeFileSync(file, `import t from ${TAP}\n${body}\n`)
  return file
}

const run = (file: string, timeoutMs = 20_000) => runFile({ name: 'x', file, env: {} }, 1, 0, timeoutMs)

t.test('options: both passes by default; named files run once on SQLite unless --pass says otherwise', async (t) => {
  t.same(parseOptions([]), { pass: 'both', jobs: 3, timeoutMs: 120_000, files: [] })
  t.same(parseOptions(['build/test/e2e/a.test.js']), { pass: 'sqlite', jobs: 3, timeoutMs: 120_000, files: ['build/test/e2e/a.test.js'] })
  t.same(parseOptions(['--pass=postgres', '--jobs', '4', '--timeout', '5', 'a.js']), { pass: 'postgres', jobs: 4, timeoutMs: 5000, files: ['a.js'] })
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

import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import t, { type Test } from 'tap'
import { groupMembers } from '../../src/deployments/process-group.js'
import { supervisorPath } from '../../src/deployments/runner.js'
import { processGone } from '../helpers/cli.js'
import { until } from '../helpers/stream.js'

/**
 * scripts/pipelines/supervise.mjs on its own: it reports the pipeline's end as the pipeline ended (exit code, or the
 * signal that killed it), passes its output through, stops the run on `stop` (SIGTERM, SIGKILL after the grace period)
 * and, when its stdin ends (the server is gone), leaves nothing of the run alive.
 */

interface Supervised {
  child: ChildProcess
  output(): string
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

function supervise(t: Test, code: string, graceMs = 200): Supervised {
  const child = spawn(process.execPath, [supervisorPath(), '--grace-ms', String(graceMs), '--', process.execPath, '-e', code], {
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout!.on('data', (d) => (output += d))
  child.stderr!.on('data', (d) => (output += d))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('close', (c, s) => resolve({ code: c, signal: s })))
  t.teardown(() => {
    if (child.pid && groupMembers(child.pid).length > 0) process.kill(-child.pid, 'SIGKILL')
  })
  return { child, output: () => output, exited }
}

const STUBBORN = "process.on('SIGTERM', () => console.log('ignoring SIGTERM')); console.log('pid=' + process.pid); setInterval(() => {}, 1000)"
const pidIn = (output: string) => Number(/pid=(\d+)/.exec(output)![1])

t.test('the exit code, the output and the killing signal are the pipeline\'s', async (t) => {
  const ok = supervise(t, "console.log('out'); console.error('err'); process.exit(7)")
  t.strictSame(await ok.exited, { code: 7, signal: null }, 'the exit code')
  t.match(ok.output(), /out\n/)
  t.match(ok.output(), /err\n/)

  const killed = supervise(t, "process.kill(process.pid, 'SIGKILL')")
  t.strictSame(await killed.exited, { code: null, signal: 'SIGKILL' }, 'killed by SIGKILL, as the pipeline was')

  const missing = spawn(process.execPath, [supervisorPath(), '--grace-ms', '100', '--', '/nonexistent/deploy.sh'], { stdio: ['pipe', 'pipe', 'pipe'] })
  let err = ''
  missing.stderr!.on('data', (d) => (err += d))
  const code = await new Promise((resolve) => missing.on('close', resolve))
  t.equal(code, 127, 'a pipeline that cannot start: 127, like a shell')
  t.match(err, /the pipeline could not start: spawn \/nonexistent\/deploy\.sh ENOENT/)
})

t.test('`stop`: SIGTERM to the run, SIGKILL to the pipeline after the grace period, reaped by the supervisor', { skip: !existsSync('/proc/self/stat') && 'needs /proc' }, async (t) => {
  const GRACE_MS = 300
  const run = supervise(t, STUBBORN, GRACE_MS)
  await until(() => run.output().includes('pid='), 5000, 'the pipeline')
  const pid = pidIn(run.output())
  const started = Date.now()
  run.child.stdin!.write('stop\n')
  const end = await run.exited
  t.ok(Date.now() - started >= GRACE_MS - 20, 'after the grace period')
  t.strictSame(end, { code: null, signal: 'SIGKILL' }, 'killed by SIGKILL')
  t.match(run.output(), /ignoring SIGTERM/, 'SIGTERM came first')
  t.ok(processGone(pid), 'the pipeline is gone and reaped (not a zombie)')

  const polite = supervise(t, "process.on('SIGTERM', () => { console.log('bye'); process.exit(143) }); setInterval(() => {}, 1000); console.log('ready')")
  await until(() => polite.output().includes('ready'), 5000, 'the pipeline')
  polite.child.stdin!.write('stop\n')
  t.strictSame(await polite.exited, { code: 143, signal: null }, 'a pipeline that exits on SIGTERM: its own exit code')
})

t.test('stdin ends (the server is gone): nothing of the run stays alive, grandchildren included', { skip: !existsSync('/proc/self/stat') && 'needs /proc' }, async (t) => {
  // The pipeline starts a grandchild in the same group that ignores SIGTERM too, then ends on SIGTERM itself.
  const code = [
    "const { spawn } = require('child_process');",
    "const g = spawn(process.execPath, ['-e', \"process.on('SIGTERM', () => {}); setInterval(() => {}, 1000)\"], { stdio: 'ignore' });",
    "console.log('grandchild=' + g.pid);",
    'setInterval(() => {}, 1000)',
  ].join(' ')
  const run = supervise(t, code, 300)
  await until(() => run.output().includes('grandchild='), 5000, 'the grandchild')
  const pgid = run.child.pid!
  await until(() => groupMembers(pgid).length === 3, 5000, 'supervisor, pipeline and grandchild in one group')
  run.child.stdin!.end()
  await until(() => groupMembers(pgid).length === 0, 3000, 'the group to be gone')
  t.strictSame(groupMembers(pgid), [], 'the supervisor, the pipeline and the grandchild are gone')
})

import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { packageRoot } from '../../src/lib/package-root.js'
import { deadlineFor, running, tapEnv, type Job } from './file-process.js'
import { countTap, noCounts, type Outcome } from './tap-output.js'

/**
 * Test files run one after another in one process (build/test/setup/shared-process.js, from test/setup/): node's start,
 * loading tap, the server and the helpers, and the JIT's warm-up are paid once per process instead of once per file,
 * which was most of what a short file cost. Each file still runs in a subtest that is its own `t` (see the setup
 * file); the runner hands the process one file at a time over IPC and reads each file's part of its TAP.
 */

/** The process's own deadline for a file comes this long after tap's timer for it, which fails the file cleanly. */
const BACKSTOP_MS = 10_000

const DRIVER = join(packageRoot(), 'build', 'test', 'setup', 'shared-process.js')

export interface SharedRun {
  env: Record<string, string>
  childId: number
  jobId: number
  timeoutMs: number
  /** At most this many files in the process; then it ends and the caller starts another. */
  maxFiles: number
  /** The next file for this process, or undefined when there is none it may run (another pass, or none left). */
  take(): Job | undefined
  /** Called once per file taken, in order, when it has ended. */
  onOutcome(job: Job, outcome: Outcome): void
}

/** One file's part of the process's TAP: from its `# Subtest:` line to the next file's. */
interface Block {
  job: Job
  started: number
  lines: string[]
  problem?: string
}

/** Runs files taken from `run.take()` in one process until none is left for it, it has run maxFiles, or one fails. */
export function runShared(run: SharedRun): Promise<{ files: number }> {
  const key = randomBytes(8).toString('hex')
  const child = spawn(process.execPath, [DRIVER], {
    cwd: packageRoot(),
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    // No deadline for the process as a whole: each file has its own (tap's timer in the process, and ours below).
    env: tapEnv(run.env, { childId: run.childId, jobId: run.jobId, key, timeoutSeconds: 0 }),
  })
  running.add(child)
  let taken = 0
  const sent: Job[] = []
  let block: Block | undefined
  const deadline = deadlineFor(child, (ms) => {
    if (block) block.problem = `timed out after ${ms - BACKSTOP_MS} ms`
  })

  const finishBlock = (problem?: string) => {
    if (!block) return
    const b = block
    block = undefined
    run.onOutcome(b.job, outcomeOf(b, problem))
  }

  let partial = ''
  child.stdout!.setEncoding('utf8')
  child.stdout!.on('data', (d: string) => {
    const lines = (partial + d).split('\n')
    partial = lines.pop()!
    for (const line of lines) {
      // A file's part begins with its subtest, named as handed over; any other line at the top level belongs to the
      // part before (a stray one fails that file, below).
      if (sent.length && line === `# Subtest: ${sent[0]!.name}`) {
        finishBlock()
        block = { job: sent.shift()!, started: Date.now(), lines: [] }
      } else if (block) {
        block.lines.push(line)
      }
    }
  })

  child.on('message', (msg: { key?: unknown; ready?: unknown; setTimeout?: unknown }) => {
    if (!msg || msg.key !== key) return
    if (msg.ready === true) {
      const job = taken < run.maxFiles ? run.take() : undefined
      if (job) {
        taken++
        sent.push(job)
        deadline.arm(run.timeoutMs + BACKSTOP_MS)
      }
      child.send({ key, next: job ? { name: job.name, file: job.file, timeoutMs: run.timeoutMs } : null })
    } else if (typeof msg.setTimeout === 'number') {
      deadline.arm(msg.setTimeout + BACKSTOP_MS)
    }
  })

  return new Promise((resolve) => {
    const finish = (code: number | null, signal: NodeJS.Signals | null, error?: Error) => {
      deadline.clear()
      running.delete(child)
      if (partial && block) block.lines.push(partial)
      const ended = error ? `could not start: ${error.message}` : signal ? `killed by ${signal}` : code !== 0 ? `exit code ${code}` : undefined
      finishBlock(ended)
      // A file handed over whose run never began (the process ended first).
      for (const job of sent.splice(0)) run.onOutcome(job, { ok: false, counts: noCounts(), output: '', ms: 0, problem: `not run: its process ended first (${ended ?? 'exit code 0'})` })
      resolve({ files: taken })
    }
    child.on('error', (e) => finish(null, null, e))
    child.on('close', (code, signal) => finish(code, signal))
  })
}

const CLOSING = /^(not )?ok \d+ - .*?(?: # time=([\d.]+)ms)?$/

/**
 * A file's outcome from its block: the subtest's lines (indented by tap: the file's own TAP once unindented), its
 * closing line, and what followed it before the next file (tap's diagnostics of a failed subtest, and anything the
 * process printed at the top level between two files, which is counted against the file before).
 */
function outcomeOf(block: Block, ended: string | undefined): Outcome {
  const closingAt = block.lines.findIndex((l) => CLOSING.test(l))
  const body = (closingAt === -1 ? block.lines : block.lines.slice(0, closingAt)).map((l) => (l.startsWith('    ') ? l.slice(4) : l))
  const after = closingAt === -1 ? [] : block.lines.slice(closingAt + 1)
  const closing = closingAt === -1 ? undefined : CLOSING.exec(block.lines[closingAt]!)!
  const { counts, ok: parsedOk } = countTap(body.join('\n') + '\n')
  // After the closing line: the root's plan and time when it was the last file, the subtest's YAML when it failed, or
  // a failure reported at the top level.
  // Only tap's diagnostics of the subtest, and the root's plan and time, may follow it: a test or a result at the top
  // level is one that ran outside any file's subtest.
  const stray = after.some((l) => /^(# Subtest: |(not )?ok \d+ )/.test(l))
  const failedInside = Boolean(closing?.[1]) || !parsedOk || counts.fail > 0
  let problem = block.problem
  // The last file of a process answers for how the process ended, unless that is tap's own exit code for the failure
  // the file's TAP already shows.
  if (ended && !(failedInside && ended === 'exit code 1')) problem ??= ended
  if (!closing) problem ??= 'its process ended before it did'
  else if (stray) problem ??= 'its process ran or reported tests outside any file after it'
  const ok = !problem && !failedInside
  if (!ok) problem ??= 'a test failed'
  const diagnostics = after.filter((l) => !/^(1\.\.\d+|# time=.*)$/.test(l) && l.trim() !== '').map((l) => `# ${l}`)
  return {
    ok,
    counts,
    output: [...body, ...diagnostics].join('\n'),
    ms: closing?.[2] ? Math.round(Number(closing[2])) : Date.now() - block.started,
    ...(problem ? { problem } : {}),
  }
}

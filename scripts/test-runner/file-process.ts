import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { packageRoot } from '../../src/lib/package-root.js'
import { countingParser, noCounts, type Outcome } from './tap-output.js'

/** After SIGALRM a tap file reports its timeout and exits; one that does not within this long is killed. */
export const KILL_AFTER_ALARM_MS = 15_000

/** Every test process running now: an interrupted run kills them. */
export const running = new Set<ChildProcess>()

/** A test file to run, and the environment of its pass. */
export interface Job {
  /** As printed: the file relative to the repository, and the pass when it is the PostgreSQL one. */
  name: string
  file: string
  env: Record<string, string>
  /** The file asked for a process of its own (`// test-process: own (why)`). */
  ownProcess?: boolean
}

/** tap's environment for a test process: its ids, the key its IPC messages carry, its deadline. */
export function tapEnv(env: Record<string, string>, ids: { childId: number; jobId: number; key: string; timeoutSeconds: number }): NodeJS.ProcessEnv {
  return {
    ...process.env,
    ...env,
    TAP: '1',
    TAP_CHILD_ID: String(ids.childId),
    TAP_CHILD_KEY: ids.key,
    TAP_JOB_ID: String(ids.jobId),
    TAP_TIMEOUT: String(ids.timeoutSeconds),
    TAP_BAIL: '0',
  }
}

/**
 * A deadline for a test process: at `ms` it gets SIGALRM (tap then reports what was still running and exits), and
 * SIGKILL if it is still there KILL_AFTER_ALARM_MS later. `onExpired` says what is reported.
 */
export function deadlineFor(child: ChildProcess, onExpired: (ms: number) => void): { arm(ms: number): void; clear(): void } {
  let deadline: NodeJS.Timeout | undefined
  let killTimer: NodeJS.Timeout | undefined
  return {
    arm(ms) {
      clearTimeout(deadline)
      deadline = setTimeout(() => {
        onExpired(ms)
        child.kill('SIGALRM')
        killTimer = setTimeout(() => child.kill('SIGKILL'), KILL_AFTER_ALARM_MS)
      }, ms)
    },
    clear() {
      clearTimeout(deadline)
      clearTimeout(killTimer)
    },
  }
}

/** Runs one test file in a process of its own to its end, or to its deadline (timeoutMs, moved by its t.setTimeout()). */
export function runFile(job: Job, childId: number, jobId: number, timeoutMs: number): Promise<Outcome> {
  const started = Date.now()
  const key = randomBytes(8).toString('hex')
  const child = spawn(process.execPath, [job.file], {
    cwd: packageRoot(),
    // stderr goes straight through, as under tap; stdout is TAP, parsed and printed once the file ends.
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    env: tapEnv(job.env, { childId, jobId, key, timeoutSeconds: timeoutMs / 1000 }),
  })
  running.add(child)
  const counts = noCounts()
  const parser = countingParser(counts)
  let output = ''
  child.stdout!.setEncoding('utf8')
  child.stdout!.on('data', (d: string) => {
    output += d
    parser.write(d)
  })

  let problem: string | undefined
  const deadline = deadlineFor(child, (ms) => (problem = `timed out after ${ms} ms`))
  deadline.arm(timeoutMs)
  // The file's t.setTimeout(n) moves its deadline, as tap's runner allows.
  child.on('message', (msg: { setTimeout?: unknown; key?: unknown }) => {
    if (msg && msg.key === key && typeof msg.setTimeout === 'number' && !problem) deadline.arm(msg.setTimeout)
  })

  return new Promise((resolve) => {
    const finish = (code: number | null, signal: NodeJS.Signals | null, error?: Error) => {
      deadline.clear()
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

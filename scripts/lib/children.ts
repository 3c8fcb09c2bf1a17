/**
 * Child processes for the project's own scripts (the conformance runs, the Node versions' runs): an environment
 * without npm's, the server's settings or Node options, a run-to-completion helper that collects output, and the
 * guarantee that no child outlives an interrupted script.
 */
import { spawn, type ChildProcess } from 'node:child_process'

/** The environment of a child: ours without npm's, SERVICE_* settings or Node options (each child gets its own). */
export function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {}
  for (const [k, v] of Object.entries(process.env)) {
    if (/^npm_/i.test(k) || k.startsWith('SERVICE_') || k === 'NODE_OPTIONS' || k.startsWith('TAP')) continue
    env[k] = v
  }
  return { ...env, ...extra }
}

export interface Executed {
  code: number | null
  output: string
  timedOut: boolean
  seconds: number
}

export interface ExecuteOptions {
  cwd: string
  env: NodeJS.ProcessEnv
  timeoutMs: number
  /** Also write the output through as it comes. */
  echo?: boolean
}

/** Children still running: killed when this process is interrupted. */
const running = new Set<ChildProcess>()
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    killAll()
    process.exit(130)
  })
}

/** Kills every child still running (a script that fails stops what it started). */
export function killAll(): void {
  for (const child of running) child.kill('SIGKILL')
}

/** Keeps `child` in the set killed on interruption until it closes. */
export function track(child: ChildProcess): ChildProcess {
  running.add(child)
  child.on('close', () => running.delete(child))
  return child
}

/** Runs a command to completion; resolves with its exit code, its output (stdout and stderr as they came) and time. */
export function execute(command: string, args: string[], options: ExecuteOptions): Promise<Executed> {
  return new Promise((resolve, reject) => {
    const started = Date.now()
    const child = track(spawn(command, args, { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'] }))
    let output = ''
    let timedOut = false
    const take = (chunk: Buffer) => {
      output += chunk.toString('utf8')
      if (options.echo) process.stdout.write(chunk)
    }
    child.stdout!.on('data', take)
    child.stderr!.on('data', take)
    const timer = setTimeout(() => {
      timedOut = true
      child.kill('SIGKILL')
    }, options.timeoutMs)
    child.on('error', (err) => {
      clearTimeout(timer)
      reject(err)
    })
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, output, timedOut, seconds: (Date.now() - started) / 1000 })
    })
  })
}

import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { BUILD, FROM_BUILD, ROOT as root } from './root.js'
import { newestIn } from '../../scripts/lib/newest-file.js'

/** The real `service-mcp` CLI (its build, or src/cli.ts through tsx: cliEntry), run from the repository root with a clean environment. */

/** The caller's environment without any SERVICE_* setting, plus `extra`. */
export function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {}
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('SERVICE_') && !k.startsWith('TAP')) env[k] = v
  return { ...env, NODE_OPTIONS: '', ...extra }
}

export function spawnCli(args: string[], env: Record<string, string>): ChildProcess {
  // A settle period on SIGTERM would wait for the idle keep-alive connections that a test's own client keeps: tests of
  // the stop's settle phase set their own (rolling-restart).
  return spawn(process.execPath, [...cliEntry(), ...args], { cwd: root, env: cleanEnv({ SERVICE_STOP_SETTLE_MS: '0', ...env }), stdio: ['ignore', 'pipe', 'pipe'] })
}

let entry: string[] | undefined

/**
 * How to start the CLI (node's arguments before the CLI's own). Beside the compiled suite (root.ts), its compilation:
 * build/src/cli.js. From the sources, the build (`dist/src/cli.js`, what `npm start` runs) when it is newer than every
 * source file, as after `npm ci` or `npm run build`; otherwise the sources through tsx, so a test never runs stale
 * code. A build starts in about half the time and CPU, and the suite starts the CLI a few hundred times.
 */
export function cliEntry(): string[] {
  if (entry) return entry
  if (FROM_BUILD) return (entry = [join(BUILD, 'src', 'cli.js')])
  const built = join(root, 'dist', 'src', 'cli.js')
  const fresh = existsSync(built) && newestIn(join(root, 'src')) < statSync(built).mtimeMs
  // Absolute, tsx's hook too: some tests start the CLI in a folder of their own, where `tsx` would not resolve.
  return (entry = fresh ? [built] : ['--import', import.meta.resolve('tsx'), join(root, 'src', 'cli.ts')])
}

export interface Run {
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
}

/** Runs the CLI to completion (bounded). */
export function cli(args: string[], env: Record<string, string>, timeoutMs = 30_000): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawnCli(args, env)
    let stdout = ''
    let stderr = ''
    child.stdout!.on('data', (d) => (stdout += d))
    child.stderr!.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`service-mcp ${args.join(' ')} did not finish in ${timeoutMs} ms\nstdout: ${stdout}\nstderr: ${stderr}`))
    }, timeoutMs)
    child.on('error', reject)
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr })
    })
  })
}

export interface Served {
  child: ChildProcess
  /** The /mcp URL the server logged. */
  url: string
  stdout: () => string
  stderr: () => string
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

/** Starts `serve` and waits for the "MCP server listening" log line (bounded). */
export function startServe(env: Record<string, string>, timeoutMs = 30_000): Promise<Served> {
  const child = spawnCli(['serve'], env)
  let out = ''
  let err = ''
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('close', (code, signal) => resolve({ code, signal })))
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`serve did not start in ${timeoutMs} ms\nstdout: ${out}\nstderr: ${err}`))
    }, timeoutMs)
    child.stderr!.on('data', (d) => (err += d))
    child.stdout!.on('data', (d) => {
      out += d
      for (const line of out.split('\n')) {
        if (!line.startsWith('{')) continue
        let parsed: { msg?: string; url?: string }
        try {
          parsed = JSON.parse(line)
        } catch {
          continue
        }
        if (parsed.msg === 'MCP server listening' && parsed.url) {
          clearTimeout(timer)
          resolve({ child, url: parsed.url, stdout: () => out, stderr: () => err, exited })
          return
        }
      }
    })
    void exited.then(({ code }) => {
      clearTimeout(timer)
      reject(new Error(`serve exited with ${code} before listening\nstdout: ${out}\nstderr: ${err}`))
    })
  })
}

/** True once no process has `pid` (kill 0 fails with ESRCH). */
export function processGone(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return false
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH'
  }
}

/**
 * Runs the CLI without the power to write files it may not write. Root writes anything (CAP_DAC_OVERRIDE): as root it
 * runs through setpriv(1) with that capability dropped, staying root, so a folder of mode 500 is as read-only to it as
 * to anyone. Other users run the CLI as it is.
 */
export function cliWithoutOverride(args: string[], env: Record<string, string>, timeoutMs = 30_000): Promise<Run> {
  if (process.getuid?.() !== 0) return cli(args, env, timeoutMs)
  return new Promise((resolve, reject) => {
    const command = ['--bounding-set=-dac_override', '--inh-caps=-dac_override', process.execPath, ...cliEntry(), ...args]
    const child = spawn('setpriv', command, { cwd: root, env: cleanEnv(env), stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout!.on('data', (d) => (stdout += d))
    child.stderr!.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.on('error', reject)
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr })
    })
  })
}

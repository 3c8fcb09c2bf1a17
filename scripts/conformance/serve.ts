import { spawn } from 'node:child_process'
import { existsSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { childEnv, track } from '../lib/children.js'
import { newestIn } from '../lib/newest-file.js'

/** A server the suite runs against, started by the runner with this project's Node (serverEntry says from what). */
export interface Served {
  /** Where the suite reaches the profile: `http://localhost:PORT/mcp` (see asLocalhost). */
  url: string
  /** The origin it listens on as it logged it (`http://127.0.0.1:PORT`): its base URL, the OAuth issuer. */
  origin: string
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
export function asLocalhost(url: string): string {
  const u = new URL(url)
  u.hostname = 'localhost'
  return u.href
}

/**
 * Node's arguments that start the CLI: its build (dist/src/cli.js, what `npm start` runs) when it is newer than every
 * source file, as after `npm ci` or `npm run build`; otherwise the sources through tsx, so a run never tests stale
 * code. The build starts on about half the CPU (0.85 s against 1.6 s), and CI starts sixteen of these servers.
 */
export function serverEntry(root: string): string[] {
  const built = join(root, 'dist', 'src', 'cli.js')
  const fresh = existsSync(built) && newestIn(join(root, 'src')) < statSync(built).mtimeMs
  return fresh ? [built] : ['--import', 'tsx', 'src/cli.ts']
}

/**
 * Starts `service-mcp serve <args>` on 127.0.0.1, port 0, with this project's Node, and reads the URL it listens on
 * from its log. `env` adds SERVICE_* variables to the runner's own.
 */
export function startServing(root: string, args: readonly string[], env: Record<string, string> = {}, startTimeoutMs = 60_000): Promise<Served> {
  const child = spawn(process.execPath, [...serverEntry(root), 'serve', ...args, '--host', '127.0.0.1', '--port', '0'], {
    cwd: root,
    env: { ...childEnv(), ...env },
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
      reject(new Error(`the server did not start within ${startTimeoutMs} ms:\n${output}`))
    }, startTimeoutMs)
    child.stderr!.on('data', (d: Buffer) => (output += d.toString('utf8')))
    child.stdout!.on('data', (d: Buffer) => {
      output += d.toString('utf8')
      for (const line of output.split('\n')) {
        if (!line.startsWith('{')) continue
        try {
          const parsed = JSON.parse(line) as { msg?: string; url?: string }
          if (parsed.msg === 'MCP server listening' && parsed.url) {
            clearTimeout(timer)
            resolve({ url: asLocalhost(parsed.url), origin: new URL(parsed.url).origin, output: () => output, stop })
            return
          }
        } catch {
          // a line still being written
        }
      }
    })
    void exited.then((code) => {
      clearTimeout(timer)
      reject(new Error(`the server exited with ${code} before listening:\n${output}`))
    })
  })
}


/**
 * What the benchmarks (mcp.bench.ts, streams.bench.ts) share: the server child (`node dist/src/cli.js serve`, or
 * src/cli.ts through tsx) with scripts/bench/probe.mjs preloaded, its readiness, its memory and /proc facts, sessions,
 * option parsing, and the end of a run (children killed, temporary directories removed, whatever happens).
 *
 * Importing this module runs nothing: the exit and signal handlers are installed by the first startServerChild() and
 * by runMain().
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { createServer as createNetServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { Pool, request } from 'undici'
import { packageRoot } from '../../src/lib/package-root.js'
import { OWNER_PASSWORD } from '../../test/helpers/server.js'

/** The repository, whether this module runs from scripts/bench or compiled into build/scripts/bench (the suite's build). */
export const ROOT = packageRoot()
const PROBE = pathToFileURL(join(ROOT, 'scripts', 'bench', 'probe.mjs')).href
export const API_KEY = 'service_mcp_' + 'B'.repeat(43)
// The limiter still runs on every request; only its ceilings are out of the benchmark's reach.
export const RAISED_LIMITS = {
  SERVICE_RATE_LIMIT_OAUTH_MEMBER: '1000000000',
  SERVICE_RATE_LIMIT_API_KEY_MEMBER: '1000000000',
  SERVICE_RATE_LIMIT_ORGANIZATION: '1000000000',
  SERVICE_RATE_LIMIT_TOOL_FACTOR: '100000000',
  // The load generator is one address holding thousands of connections (10,000 idle streams): no per-address cap.
  SERVICE_MAX_CONNECTIONS_PER_ADDRESS: '0',
}
export const PROTOCOL = '2025-11-25'
export const ACCEPT = 'application/json, text/event-stream'

export const sleep = (ms: number) => new Promise<void>((ok) => setTimeout(ok, ms))
export const mb = (b: number) => `${(b / 1_048_576).toFixed(1)} MB`

// ---------------------------------------------------------------------------------------------------------------
// Options

/** `--help`: prints the opening comment of the benchmark at `scriptUrl` (its import.meta.url) and exits 0. */
export function printHelpAndExit(scriptUrl: string): never {
  process.stdout.write(readFileSync(fileURLToPath(scriptUrl), 'utf8').split('*/')[0]!.replace(/^\/\*\*\n/, '').replace(/^ \* ?/gm, '') + '\n')
  process.exit(0)
}

/** A reader of string options: the flag, else BENCH_<NAME> from the environment (when not empty), else `fallback`. */
export function optionReader<K extends string>(flags: { [name in K]?: string | boolean }): (name: K, fallback: string) => string {
  return (name, fallback) => {
    const env = process.env[`BENCH_${name.toUpperCase().replace(/-/g, '_')}`]
    const v = flags[name]
    return typeof v === 'string' ? v : env !== undefined && env !== '' ? env : fallback
  }
}

/** `raw` as a number that is `kind` (positive: > 0; non-negative: >= 0), an integer if asked; else an error naming --name. */
export function numberOption(name: string, raw: string, kind: 'positive' | 'non-negative', integer = false): number {
  const n = Number(raw)
  const tooLow = kind === 'positive' ? n <= 0 : n < 0
  if (!Number.isFinite(n) || tooLow || (integer && !Number.isInteger(n))) throw new Error(`--${name} must be a ${kind} ${integer ? 'integer' : 'number'}, got ${raw}`)
  return n
}

// ---------------------------------------------------------------------------------------------------------------
// Process facts from /proc (Linux)

/** VmRSS of a process in bytes. */
export function vmRss(pid: number): number {
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return m ? Number(m[1]) * 1024 : NaN
}

/** User + system CPU time of a process in seconds, from /proc/<pid>/stat (clock ticks of 1/100 s on Linux). */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[11]) + Number(fields[12])) / 100
}

/** RLIMIT_NOFILE of a process ('self' or a pid): the soft limit, or the hard one. */
export function openFileLimit(pid: number | 'self', which: 'soft' | 'hard' = 'soft'): number {
  const line = readFileSync(`/proc/${pid}/limits`, 'utf8').split('\n').find((l) => l.startsWith('Max open files'))
  const value = line?.trim().split(/\s+/)[which === 'soft' ? 3 : 4]
  return value === undefined ? NaN : value === 'unlimited' ? Infinity : Number(value)
}

export function openFds(pid: number | 'self'): number {
  return readdirSync(`/proc/${pid}/fd`).length
}

// ---------------------------------------------------------------------------------------------------------------
// The server child

export interface ProbeMemory {
  gc: boolean
  rss: number
  heapTotal: number
  heapUsed: number
  external: number
  arrayBuffers: number
}

export interface ServerChild {
  child: ChildProcess
  pid: number
  port: number
  origin: string
  dbPath: string
  output(): string
  /** The probe's process.memoryUsage() after a forced GC; without the probe, VmRSS only. */
  memory(): Promise<ProbeMemory>
  /** SIGTERM, then SIGKILL after 15 s; resolves with how the process ended and how long it took. Idempotent. */
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }>
}

export interface ServerChildOptions {
  /** The server's entry point: the build (dist/src/cli.js), or src/cli.ts (run through tsx). */
  entry: string
  /** Preload scripts/bench/probe.mjs and open an IPC channel for it. */
  probe: boolean
  /** Write a --cpu-prof profile into this directory. */
  cpuProfDir?: string
  /** Settings on top of the base environment (127.0.0.1, a free port, a fresh database, the bootstrap credentials). */
  env?: Record<string, string>
  /** Start through `sh -c 'ulimit -n …'` so the server may open at least this many files (when the hard limit allows). */
  openFiles?: number
  /**
   * A command the server is started under, e.g. `['taskset', '-c', '0']`. It must exec its arguments, so that the
   * child's pid (its /proc facts, its signals) stays the server's.
   */
  prefix?: readonly string[]
}

const children = new Set<ChildProcess>()
const tempDirs = new Set<string>()
let cleanupInstalled = false

/** Kills every child still running and removes every temporary directory (synchronous: also runs on 'exit'). */
export function cleanupSync(): void {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL')
  for (const d of tempDirs) rmSync(d, { recursive: true, force: true })
}

function installCleanup(): void {
  if (cleanupInstalled) return
  cleanupInstalled = true
  process.on('exit', cleanupSync)
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.on(sig, () => {
      cleanupSync()
      process.exit(130)
    })
  }
}

export async function freePort(): Promise<number> {
  const srv = createNetServer()
  await new Promise<void>((ok, ko) => srv.once('error', ko).listen(0, '127.0.0.1', () => ok()))
  const address = srv.address()
  await new Promise<void>((ok) => srv.close(() => ok()))
  if (!address || typeof address !== 'object') throw new Error('no port')
  return address.port
}

/** Starts `serve` on a free port of 127.0.0.1 with a fresh database, and resolves once /mcp answers over HTTP. */
export async function startServerChild(options: ServerChildOptions): Promise<ServerChild> {
  installCleanup()
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'service-mcp-bench-'))
  tempDirs.add(dir)
  const dbPath = join(dir, 'bench.db')
  const nodeArgs = ['--expose-gc']
  if (options.entry.endsWith('.ts')) nodeArgs.push('--import', 'tsx')
  if (options.probe) nodeArgs.push('--import', PROBE)
  // Node names the files itself (CPU.<date>.<pid>.<thread>.…): the main thread's profile is the largest one (tsx's
  // module-loader thread writes its own, small one).
  if (options.cpuProfDir) nodeArgs.push('--cpu-prof', `--cpu-prof-dir=${options.cpuProfDir}`)
  const argv = [...nodeArgs, options.entry, 'serve']
  // Node has no setrlimit: the shell raises the limit when it is lower than needed (beyond the hard limit only with
  // CAP_SYS_RESOURCE; `ulimit -n` sets soft and hard alike, so it is never used to lower them) and execs node in its
  // place, so the pid, the pipes and the IPC channel (fd 3) are the server's own. Node raises its soft limit to the
  // hard one itself.
  const script = '[ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$1" ] && ulimit -n "$1" 2>/dev/null; shift; exec "$@"'
  const [command, args] = options.openFiles === undefined
    ? [process.execPath, argv]
    : ['/bin/sh', ['-c', script, 'sh', String(options.openFiles), process.execPath, ...argv]]
  const [file, argList] = options.prefix?.length ? [options.prefix[0]!, [...options.prefix.slice(1), command, ...args]] : [command, args]
  const child = spawn(file, argList, {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe', options.probe ? 'ipc' : 'ignore'],
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? tmpdir(),
      NODE_ENV: 'production',
      SERVICE_HOST: '127.0.0.1',
      SERVICE_PORT: String(port),
      SERVICE_DATABASE: dbPath,
      SERVICE_LOG_LEVEL: 'warn',
      SERVICE_BOOTSTRAP_API_KEY: API_KEY,
      SERVICE_BOOTSTRAP_PASSWORD: OWNER_PASSWORD,
      ...options.env,
    },
  })
  children.add(child)
  let out = ''
  const keep = (chunk: Buffer) => {
    out = (out + chunk.toString('utf8')).slice(-32_768)
  }
  child.stdout!.on('data', keep)
  child.stderr!.on('data', keep)
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((ok) => child.once('exit', (code, signal) => ok({ code, signal })))
  const origin = `http://127.0.0.1:${port}`

  // Ready when /mcp answers anything over HTTP (401 without a credential).
  const deadline = Date.now() + 30_000
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`server exited during start (${child.exitCode ?? child.signalCode}):\n${out}`)
    try {
      const res = await request(`${origin}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json', accept: ACCEPT }, body: '{}' })
      await res.body.dump()
      break
    } catch {
      if (Date.now() > deadline) {
        child.kill('SIGKILL')
        throw new Error(`server did not answer within 30 s:\n${out}`)
      }
      await sleep(50)
    }
  }

  let stopped: ReturnType<ServerChild['stop']> | undefined
  const stop = async () => {
    const t0 = performance.now()
    let result = { code: child.exitCode, signal: child.signalCode }
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM') // graceful: the server closes and exits 0 (and writes its --cpu-prof profile)
      const killer = setTimeout(() => child.kill('SIGKILL'), 15_000)
      result = await exited
      clearTimeout(killer)
    }
    children.delete(child)
    rmSync(dir, { recursive: true, force: true })
    tempDirs.delete(dir)
    return { ...result, ms: performance.now() - t0 }
  }

  return {
    child,
    pid: child.pid!,
    port,
    origin,
    dbPath,
    output: () => out,
    memory() {
      if (!options.probe) return Promise.resolve({ gc: false, rss: vmRss(child.pid!), heapTotal: NaN, heapUsed: NaN, external: NaN, arrayBuffers: NaN })
      return new Promise<ProbeMemory>((ok, ko) => {
        const timer = setTimeout(() => {
          child.off('message', onMessage)
          ko(new Error('memory probe did not answer'))
        }, 30_000)
        const onMessage = (m: unknown) => {
          if (typeof m !== 'object' || m === null || (m as { type?: unknown }).type !== 'memory') return
          clearTimeout(timer)
          child.off('message', onMessage)
          ok(m as ProbeMemory)
        }
        child.on('message', onMessage)
        child.send({ type: 'memory' })
      })
    },
    stop: () => (stopped ??= stop()),
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Sessions

/** The headers of an initialize request with `token` (the bootstrap API key unless told). */
export function initHeaders(token = API_KEY): Record<string, string> {
  return { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: ACCEPT }
}

export function initializeBody(id: number): string {
  return JSON.stringify({ jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: 'bench', version: '1.0.0' } } })
}

/** The headers of a stateless (2026-07-28) request: no session, the revision and the method mirrored from the body. */
export function modernHeaders(init: Record<string, string>, method: string, name?: string): Record<string, string> {
  return { ...init, 'mcp-protocol-version': '2026-07-28', 'mcp-method': method, ...(name !== undefined ? { 'mcp-name': name } : {}) }
}

/** The `params._meta` every stateless request carries, as a JSON fragment (`"_meta":{…}`). */
export const MODERN_META = '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1.0.0"}}'

/** initialize + notifications/initialized over a plain request; returns the session's header set. */
export async function openSession(pool: Pool, init: Record<string, string>): Promise<Record<string, string>> {
  const res = await pool.request({ path: '/mcp', method: 'POST', headers: init, body: initializeBody(0) })
  const text = await res.body.text()
  const id = res.headers['mcp-session-id']
  if (res.statusCode !== 200 || typeof id !== 'string') throw new Error(`initialize failed: ${res.statusCode} ${text}`)
  const headers = { ...init, 'mcp-session-id': id, 'mcp-protocol-version': PROTOCOL }
  const ack = await pool.request({ path: '/mcp', method: 'POST', headers, body: '{"jsonrpc":"2.0","method":"notifications/initialized"}' })
  await ack.body.dump()
  if (ack.statusCode !== 202) throw new Error(`notifications/initialized failed: ${ack.statusCode}`)
  return headers
}

/** `n` sessions, 16 at a time, on `target` (a pool, or an origin for a pool of 16 connections of its own). */
export async function openSessions(target: Pool | string, n: number, init: Record<string, string>): Promise<Array<Record<string, string>>> {
  const pool = typeof target === 'string' ? new Pool(target, { connections: 16, pipelining: 1 }) : target
  const sessions: Array<Record<string, string>> = []
  try {
    let left = n
    const worker = async () => {
      while (left > 0) {
        left--
        sessions.push(await openSession(pool, init))
      }
    }
    await Promise.all(Array.from({ length: Math.min(16, n) }, worker))
  } finally {
    if (typeof target === 'string') await pool.close()
  }
  return sessions
}

// ---------------------------------------------------------------------------------------------------------------
// The run

/** Whatever happens, the run ends: after `budgetMs` the process exits 2. */
export function watchdog(budgetMs: number): void {
  setTimeout(() => {
    process.stderr.write(`benchmark exceeded its time budget (${(budgetMs / 1000).toFixed(0)} s); stopping\n`)
    process.exit(2)
  }, budgetMs).unref()
}

/** Runs `main`, then cleans up and exits with its code (0 when it returns nothing; 1 when it throws). */
export function runMain(main: () => Promise<number | void>): void {
  installCleanup()
  main().then(
    (code) => {
      cleanupSync()
      process.exit(code ?? 0)
    },
    (err: unknown) => {
      process.stderr.write(`benchmark failed: ${(err as Error).stack ?? String(err)}\n`)
      cleanupSync()
      process.exit(1)
    },
  )
}

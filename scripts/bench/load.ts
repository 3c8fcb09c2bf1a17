/**
 * The load of one measurement of `npm run bench` (both modes): closed-loop workers over an undici Pool (one connection
 * each, no pipelining), with the server's CPU read from /proc/<pid>/stat over the timed window. The first `warmupMs`
 * are not counted; requests that start and end inside the timed window are.
 */
import { performance } from 'node:perf_hooks'
import { Pool } from 'undici'
import { cpuSeconds } from './child.js'

export interface Shot {
  headers: Record<string, string>
  body: string
}

/** What is wrong with an answer, or null. Called for every answer, warm-up included: string work only. */
export type Check = (status: number, headers: Record<string, string | string[] | undefined>, text: string) => string | null

export interface LoadOptions {
  origin: string
  /** The server's pid, for its CPU time. */
  pid: number
  concurrency: number
  warmupMs: number
  durationMs: number
  next: () => Shot
  check: Check
}

export interface LoadStats {
  concurrency: number
  /** Answers completed inside the timed window. */
  requests: number
  seconds: number
  rps: number
  p50: number
  p99: number
  max: number
  /** Answers of the timed window that failed their check (or requests that failed outright). */
  errors: number
  /** CPU the server used over the timed window, in cores (1.0 = one core busy all the time). */
  serverCpu: number
  /** Server CPU time per completed request, in microseconds. */
  cpuUsPerCall: number
  /** CPU this load generator used over the timed window, in cores: near 1.0 means the driver, not the server, is the limit. */
  clientCpu: number
  firstError?: string
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!
}

export async function load(options: LoadOptions): Promise<LoadStats> {
  const { concurrency, next, check } = options
  const pool = new Pool(options.origin, { connections: concurrency, pipelining: 1, keepAliveTimeout: 30_000 })
  let latencies = new Float64Array(1 << 16)
  let count = 0
  let errors = 0
  let firstError: string | undefined
  const t0 = performance.now()
  const measureFrom = t0 + options.warmupMs
  const stopAt = measureFrom + options.durationMs
  // The timed window's CPU is read when it opens (the first request that starts in it) and when the last worker ends.
  let cpuStart = { server: cpuSeconds(options.pid), client: process.cpuUsage(), at: performance.now() }
  let started = options.warmupMs === 0

  const worker = async () => {
    for (;;) {
      const begin = performance.now()
      if (begin >= stopAt) return
      if (!started && begin >= measureFrom) {
        started = true
        cpuStart = { server: cpuSeconds(options.pid), client: process.cpuUsage(), at: begin }
      }
      const shot = next()
      let problem: string | null
      try {
        const res = await pool.request({ path: '/mcp', method: 'POST', headers: shot.headers, body: shot.body })
        const text = await res.body.text()
        problem = check(res.statusCode, res.headers, text)
      } catch (err) {
        problem = (err as Error).message
      }
      const end = performance.now()
      if (begin < measureFrom || end > stopAt) continue
      if (problem !== null) {
        errors++
        firstError ??= problem
      }
      if (count === latencies.length) {
        const bigger = new Float64Array(latencies.length * 2)
        bigger.set(latencies)
        latencies = bigger
      }
      latencies[count++] = end - begin
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
  const serverCpu = cpuSeconds(options.pid) - cpuStart.server
  const client = process.cpuUsage(cpuStart.client)
  const window = (performance.now() - cpuStart.at) / 1000
  await pool.close()

  const seconds = options.durationMs / 1000
  const sorted = latencies.slice(0, count).sort()
  return {
    concurrency,
    requests: count,
    seconds,
    rps: count / seconds,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    max: sorted.length ? sorted[sorted.length - 1]! : NaN,
    errors,
    serverCpu: serverCpu / window,
    cpuUsPerCall: count > 0 ? (serverCpu * 1e6) / count : NaN,
    clientCpu: (client.user + client.system) / 1e6 / window,
    ...(firstError !== undefined ? { firstError } : {}),
  }
}

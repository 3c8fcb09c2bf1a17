/**
 * The load of one measurement of the benchmarks: closed-loop workers over undici pools (one connection each, no
 * pipelining). `closedLoop` is the loop itself, shared by `npm run bench` (both modes, through `load`: one server, its
 * CPU read from /proc/<pid>/stat over the timed window) and `npm run bench:processes` (one pool per process). The first
 * `warmupMs` are not counted; requests that start and end inside the timed window are.
 */
import { performance } from 'node:perf_hooks'
import { Pool } from 'undici'
import { cpuSeconds } from './child.js'

export interface Shot {
  headers: Record<string, string>
  body: string
  /** Which of the loop's pools this request goes to (default 0). */
  target?: number
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

export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!
}

export interface ClosedLoopOptions {
  pools: Pool[]
  concurrency: number
  warmupMs: number
  durationMs: number
  /** The next request of worker `worker` (0 … concurrency - 1). */
  next: (worker: number) => Shot
  check: Check
  /** Called once, when the timed window opens: at the start without a warm-up, else at the first request in it. */
  onWindowOpen: () => void
}

export interface ClosedLoopResult {
  /** Answers completed inside the timed window. */
  requests: number
  /** Their latencies in ms, sorted. */
  latencies: Float64Array
  /** Answers of the timed window that failed their check (or requests that failed outright). */
  errors: number
  firstError?: string
  /** Answers of the timed window per pool. */
  perTarget: number[]
}

export async function closedLoop(options: ClosedLoopOptions): Promise<ClosedLoopResult> {
  const { pools, next, check } = options
  let latencies = new Float64Array(1 << 16)
  let count = 0
  let errors = 0
  let firstError: string | undefined
  const perTarget = new Array<number>(pools.length).fill(0)
  const measureFrom = performance.now() + options.warmupMs
  const stopAt = measureFrom + options.durationMs
  let started = options.warmupMs === 0
  if (started) options.onWindowOpen()

  const worker = async (i: number) => {
    for (;;) {
      const begin = performance.now()
      if (begin >= stopAt) return
      if (!started && begin >= measureFrom) {
        started = true
        options.onWindowOpen()
      }
      const shot = next(i)
      const target = shot.target ?? 0
      let problem: string | null
      try {
        const res = await pools[target]!.request({ path: '/mcp', method: 'POST', headers: shot.headers, body: shot.body })
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
      perTarget[target]!++
      if (count === latencies.length) {
        const bigger = new Float64Array(latencies.length * 2)
        bigger.set(latencies)
        latencies = bigger
      }
      latencies[count++] = end - begin
    }
  }
  await Promise.all(Array.from({ length: options.concurrency }, (_, i) => worker(i)))
  return {
    requests: count,
    latencies: latencies.slice(0, count).sort(),
    errors,
    ...(firstError !== undefined ? { firstError } : {}),
    perTarget,
  }
}

/** One server at `origin`: the closed loop, with the server's and this process's CPU over the timed window. */
export async function load(options: LoadOptions): Promise<LoadStats> {
  const { concurrency } = options
  const pool = new Pool(options.origin, { connections: concurrency, pipelining: 1, keepAliveTimeout: 30_000 })
  // The timed window's CPU is read when it opens and when the last worker ends.
  let cpuStart = { server: 0, client: process.cpuUsage(), at: 0 }
  const run = await closedLoop({
    pools: [pool],
    concurrency,
    warmupMs: options.warmupMs,
    durationMs: options.durationMs,
    next: () => options.next(),
    check: options.check,
    onWindowOpen: () => {
      cpuStart = { server: cpuSeconds(options.pid), client: process.cpuUsage(), at: performance.now() }
    },
  })
  const serverCpu = cpuSeconds(options.pid) - cpuStart.server
  const client = process.cpuUsage(cpuStart.client)
  const window = (performance.now() - cpuStart.at) / 1000
  await pool.close()

  const seconds = options.durationMs / 1000
  const sorted = run.latencies
  const count = run.requests
  return {
    concurrency,
    requests: count,
    seconds,
    rps: count / seconds,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    max: sorted.length ? sorted[sorted.length - 1]! : NaN,
    errors: run.errors,
    serverCpu: serverCpu / window,
    cpuUsPerCall: count > 0 ? (serverCpu * 1e6) / count : NaN,
    clientCpu: (client.user + client.system) / 1e6 / window,
    ...(run.firstError !== undefined ? { firstError: run.firstError } : {}),
  }
}

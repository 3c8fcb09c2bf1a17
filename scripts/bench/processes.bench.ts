/**
 * Throughput of 1, 2 and 4 server processes sharing one PostgreSQL database (coordinated through Redis), beside one
 * process on SQLite (issue 14). Every server is `node dist/src/cli.js serve` (`npm run bench:processes` builds it first),
 * started by scripts/bench/child.ts with the raised rate limits and the bootstrap API key of `npm run bench`.
 *
 *   npm run bench:processes -- [--duration 5] [--warmup 1] [--rounds 3] [--concurrency 32]
 *                              [--configs sqlite1,pg1,pgredis1,pgredis2,pgredis4] [--scenarios stateless,session,write]
 *                              [--prewarm 2] [--idle 1] [--json <file>] [--server-entry dist/src/cli.js | src/cli.ts]
 *                              [--cpu-prof <dir>]
 *
 * Every flag also reads BENCH_<NAME> from the environment (BENCH_DURATION=10, BENCH_ROUNDS=5, …).
 *
 * The script starts its own throwaway PostgreSQL 15 and Redis (test/setup/backends.ts, Debian's binaries, free loopback
 * ports; state in .tap/backends/<this pid>.json) and stops them at the end, after a failure or Ctrl-C too.
 *
 * Configurations (each round starts each one afresh, on a database of its own, then stops it):
 *   sqlite1    `sqlite×1`: one process on a temporary SQLite file
 *   pg1        `postgres×1`: one process on PostgreSQL, no Redis
 *   pgredis1   `postgres+redis×1`: one process on PostgreSQL with SERVICE_REDIS_URL
 *   pgredis2   `postgres+redis×2`: two processes on one PostgreSQL database, one Redis prefix, one SERVICE_ENV_KEY
 *   pgredis4   `postgres+redis×4`: four of them (all started together)
 *
 * Once a configuration is started, --prewarm seconds of untimed stateless load warm every process (each compiles its own
 * code; with N processes each gets only 1/N of a warm-up), then its CPU with no load is read over --idle seconds (the
 * background work of heartbeats, leases and pollers, which grows with N whatever the load).
 *
 * Scenarios (on each configuration, in this order; the write comes last so the listed organization stays empty):
 *   stateless  (a) tools/call service_apps_list on the 2026-07-28 revision: no session, one POST each. Worker i is
 *              pinned to process i mod N, so connections are spread evenly.
 *   session    (b) tools/call service_apps_list on 2025-11-25 sessions: each worker opens its own session on process
 *              i mod N, and its calls then go round-robin over all processes (call k to process (i + k) mod N): the
 *              realistic non-sticky case, where most calls land on a process that did not create the session and
 *              loads it from the database.
 *   write      (c) tools/call service_apps_create on the 2026-07-28 revision with unique names (one INSERT, one audit
 *              row): what a database write costs. Workers pinned as in (a).
 *
 * The load generator spreads the requests over the N processes itself (one undici pool per process) rather than going
 * through nginx: on 2 cores a proxy's own CPU would be measured as well and compete with the servers; nginx's
 * round-robin in front of several processes is exercised by the e2e test (test/e2e/cluster.test.ts) instead.
 *
 * CPU is read from /proc over each timed window: the N server processes, the PostgreSQL postmaster with its live
 * children (backends, background workers) and the time of its children that ended (cutime/cstime), and redis-server;
 * reported in CPU seconds per 1000 requests, in total and per part. Each figure of the tables is the median over the
 * rounds (of each figure on its own). Ratios are the configuration's median req/s over sqlite×1's and postgres+redis×1's.
 *
 * --cpu-prof <dir> starts every server with node --cpu-prof, its profile written under <dir>/<configuration>-r<round>-p<i>/
 * when the configuration stops (read it with scripts/bench/cpuprofile-top.ts); profiling slows the servers, so the
 * figures of such a run are not the benchmark's.
 *
 * Limits of what this shows on a small machine: the load generator, PostgreSQL, Redis and the N servers all share the
 * same cores, so with N > cores the processes compete for them and the figures show contention, not scaling; the CPU
 * per request (not the req/s) is what carries over to bigger machines. Only 127.0.0.1 is used; the PostgreSQL server is
 * a throwaway one with fsync off and synchronous_commit off (test/setup/backends.ts), so writes cost less than on a
 * durable server.
 */
import { randomBytes } from 'node:crypto'
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { availableParallelism, cpus } from 'node:os'
import { join, resolve } from 'node:path'
import { performance } from 'node:perf_hooks'
import { parseArgs } from 'node:util'
import { Client } from 'pg'
import { Pool } from 'undici'
import { alive, PG_ROLE, startBackends, stateFile, stopBackends, type BackendsState } from '../../test/setup/backends.js'
import { closedLoop, percentile, type Check, type Shot as LoadShot } from './load.js'
import { cleanupSync, initHeaders, sleep, MODERN_META, modernHeaders, numberOption, openSession, optionReader, printHelpAndExit, RAISED_LIMITS, ROOT, runMain, startServerChild, watchdog, type ServerChild } from './child.js'

// ---------------------------------------------------------------------------------------------------------------
// Options

const CONFIGS = {
  sqlite1: { label: 'sqlite×1', backend: 'sqlite', redis: false, processes: 1 },
  pg1: { label: 'postgres×1', backend: 'postgres', redis: false, processes: 1 },
  pgredis1: { label: 'postgres+redis×1', backend: 'postgres', redis: true, processes: 1 },
  pgredis2: { label: 'postgres+redis×2', backend: 'postgres', redis: true, processes: 2 },
  pgredis4: { label: 'postgres+redis×4', backend: 'postgres', redis: true, processes: 4 },
} as const
type ConfigName = keyof typeof CONFIGS
const SCENARIOS = {
  stateless: '(a) stateless 2026-07-28 tools/call service_apps_list',
  session: '(b) 2025-11-25 sessions, tools/call service_apps_list round-robin over the processes',
  write: '(c) stateless 2026-07-28 tools/call service_apps_create (one write each)',
} as const
type ScenarioName = keyof typeof SCENARIOS

function readOptions() {
  const { values: flags } = parseArgs({
    options: {
      duration: { type: 'string' },
      warmup: { type: 'string' },
      rounds: { type: 'string' },
      prewarm: { type: 'string' },
      idle: { type: 'string' },
      concurrency: { type: 'string' },
      configs: { type: 'string' },
      scenarios: { type: 'string' },
      json: { type: 'string' },
      'server-entry': { type: 'string' },
      'cpu-prof': { type: 'string' },
      help: { type: 'boolean' },
    },
    strict: true,
  })
  if (flags.help) printHelpAndExit(import.meta.url)
  const option = optionReader(flags)
  const list = <T extends string>(name: string, raw: string, known: readonly T[]): T[] => {
    const items = raw.split(',').map((s) => s.trim()).filter(Boolean)
    for (const item of items) if (!known.includes(item as T)) throw new Error(`--${name}: unknown ${item} (${known.join(', ')})`)
    if (items.length === 0) throw new Error(`--${name} is empty`)
    return items as T[]
  }
  const opts = {
    durationMs: numberOption('duration', option('duration', '5'), 'positive') * 1000,
    warmupMs: numberOption('warmup', option('warmup', '1'), 'non-negative') * 1000,
    rounds: numberOption('rounds', option('rounds', '3'), 'positive', true),
    /** Untimed stateless service_apps_list load on freshly started processes, so that every one of them is warm (JIT). */
    prewarmMs: numberOption('prewarm', option('prewarm', '2'), 'non-negative') * 1000,
    /** CPU of the started configuration with no load, over this long (heartbeats, lease renewals, pollers). */
    idleMs: numberOption('idle', option('idle', '1'), 'non-negative') * 1000,
    concurrency: numberOption('concurrency', option('concurrency', '32'), 'positive', true),
    configs: list('configs', option('configs', Object.keys(CONFIGS).join(',')), Object.keys(CONFIGS) as ConfigName[]),
    scenarios: list('scenarios', option('scenarios', Object.keys(SCENARIOS).join(',')), Object.keys(SCENARIOS) as ScenarioName[]),
    json: option('json', ''),
    serverEntry: resolve(ROOT, option('server-entry', 'dist/src/cli.js')),
    cpuProfDir: option('cpu-prof', ''),
  }
  // The table keeps the scenarios' order (the write last), whatever order they were given in.
  opts.scenarios = (Object.keys(SCENARIOS) as ScenarioName[]).filter((s) => opts.scenarios.includes(s))
  if (!existsSync(opts.serverEntry)) {
    throw new Error(`${opts.serverEntry} does not exist: run \`npm run build\` first (\`npm run bench:processes\` does), or pass --server-entry src/cli.ts`)
  }
  return opts
}
let OPTS!: ReturnType<typeof readOptions>

// ---------------------------------------------------------------------------------------------------------------
// PostgreSQL and Redis: started here, always stopped

let BACKENDS: BackendsState | undefined
let backendsStopped = false
const ENV_KEY = randomBytes(32).toString('base64')

/**
 * The synchronous last resort (Ctrl-C, the watchdog, an exit before the normal stop): the servers are killed, Redis
 * SIGKILLed, the postmaster told to stop at once (SIGQUIT) and waited for a few seconds, the folder and state removed.
 */
function stopBackendsSync(): void {
  cleanupSync()
  const state = BACKENDS
  if (!state || backendsStopped) return
  backendsStopped = true
  const pids: number[] = []
  try {
    process.kill(state.redisPid, 'SIGKILL')
  } catch {
    // already gone
  }
  const postmaster = postmasterPid(state)
  if (postmaster !== undefined) {
    try {
      process.kill(postmaster, 'SIGQUIT')
      pids.push(postmaster)
    } catch {
      // already gone
    }
  }
  const deadline = Date.now() + 5000
  const pause = new Int32Array(new SharedArrayBuffer(4))
  while (pids.some(alive) && Date.now() < deadline) Atomics.wait(pause, 0, 0, 50)
  for (const pid of pids.filter(alive)) process.kill(pid, 'SIGKILL')
  rmSync(state.dir, { recursive: true, force: true })
  rmSync(stateFile(process.pid), { force: true })
}

// Installed before runMain() installs child.ts's handlers, so these run first (theirs exit the process).
process.on('exit', stopBackendsSync)
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    process.stderr.write(`\n${sig}: stopping the servers, PostgreSQL and Redis\n`)
    stopBackendsSync()
    process.exit(130)
  })
}

function postmasterPid(state: BackendsState): number | undefined {
  try {
    const pid = Number(readFileSync(join(state.pgDataDir, 'postmaster.pid'), 'utf8').split('\n')[0])
    return Number.isInteger(pid) && pid > 0 ? pid : undefined
  } catch {
    return undefined
  }
}

async function asAdmin<T>(fn: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: BACKENDS!.postgresUrl })
  await client.connect()
  try {
    return await fn(client)
  } finally {
    await client.end()
  }
}

/** A fresh database owned by service_mcp (as the test helpers make them); its URL and its drop. */
async function createDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `bench_${randomBytes(6).toString('hex')}`
  await asAdmin((c) => c.query(`CREATE DATABASE ${name} OWNER ${PG_ROLE}`))
  const url = new URL(BACKENDS!.postgresUrl)
  url.pathname = `/${name}`
  return { url: url.href, drop: () => asAdmin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined) }
}

// ---------------------------------------------------------------------------------------------------------------
// CPU from /proc (clock ticks of 1/100 s)

function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  } catch {
    return undefined
  }
}

/** utime + stime (+ cutime + cstime: the children that ended and were waited for), in seconds. */
function procCpu(pid: number, withEndedChildren = false): number {
  const f = statFields(pid)
  if (!f) return 0
  const own = Number(f[11]) + Number(f[12])
  return (withEndedChildren ? own + Number(f[13]) + Number(f[14]) : own) / 100
}

/** The postmaster, its live children (backends, workers) and its ended children: the whole of PostgreSQL's CPU. */
function postgresCpu(postmaster: number): number {
  let total = procCpu(postmaster, true)
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    const f = statFields(Number(name))
    if (f && Number(f[1]) === postmaster) total += (Number(f[11]) + Number(f[12])) / 100
  }
  return total
}

interface CpuSample {
  servers: number
  perServer: number[]
  postgres: number
  redis: number
  client: NodeJS.CpuUsage
  at: number
}

function sampleCpu(servers: ServerChild[], backend: 'sqlite' | 'postgres', redis: boolean): CpuSample {
  const postmaster = backend === 'postgres' && BACKENDS ? postmasterPid(BACKENDS) : undefined
  const perServer = servers.map((s) => procCpu(s.pid))
  return {
    servers: perServer.reduce((sum, c) => sum + c, 0),
    perServer,
    postgres: postmaster !== undefined ? postgresCpu(postmaster) : 0,
    redis: redis && BACKENDS ? procCpu(BACKENDS.redisPid) : 0,
    client: process.cpuUsage(),
    at: performance.now(),
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The load: closed-loop workers over one pool per process

/** A request of worker i, with `target` the index of the process it goes to. */
type Shot = LoadShot & { target: number }

interface Stats {
  config: string
  scenario: ScenarioName
  round: number
  processes: number
  concurrency: number
  requests: number
  rps: number
  p50: number
  p99: number
  max: number
  errors: number
  firstError?: string
  /** CPU seconds over the timed window. */
  cpu: { servers: number; postgres: number; redis: number; client: number; window: number }
  /** CPU seconds per 1000 requests: servers + PostgreSQL + Redis. */
  cpuPer1000: number
  /** Requests each process answered in the timed window. */
  perProcess: number[]
  /** CPU seconds of each server process over the timed window. */
  perProcessCpu: number[]
}

/** `concurrency` workers; worker i asks `next(i)` for each request. The first warmupMs are not counted. */
async function runLoad(
  meta: { config: string; scenario: ScenarioName; round: number; backend: 'sqlite' | 'postgres'; redis: boolean },
  pools: Pool[],
  servers: ServerChild[],
  next: (worker: number) => Shot,
  check: Check,
  window: { warmupMs: number; durationMs: number } = OPTS,
): Promise<Stats> {
  let start = sampleCpu(servers, meta.backend, meta.redis)
  const run = await closedLoop({
    pools,
    concurrency: OPTS.concurrency,
    ...window,
    next,
    check,
    onWindowOpen: () => {
      start = sampleCpu(servers, meta.backend, meta.redis)
    },
  })
  const end = sampleCpu(servers, meta.backend, meta.redis)
  const client = process.cpuUsage(start.client)
  const cpu = {
    servers: end.servers - start.servers,
    postgres: end.postgres - start.postgres,
    redis: end.redis - start.redis,
    client: (client.user + client.system) / 1e6,
    window: (end.at - start.at) / 1000,
  }
  const sorted = run.latencies
  const count = run.requests
  return {
    config: meta.config,
    scenario: meta.scenario,
    round: meta.round,
    processes: pools.length,
    concurrency: OPTS.concurrency,
    requests: count,
    rps: count / (window.durationMs / 1000),
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    max: sorted.length ? sorted[sorted.length - 1]! : NaN,
    errors: run.errors,
    ...(run.firstError !== undefined ? { firstError: run.firstError } : {}),
    cpu,
    cpuPer1000: count > 0 ? ((cpu.servers + cpu.postgres + cpu.redis) * 1000) / count : NaN,
    perProcess: run.perTarget,
    perProcessCpu: end.perServer.map((c, i) => c - start.perServer[i]!),
  }
}

// ---------------------------------------------------------------------------------------------------------------
// One configuration, one round

const INIT = initHeaders()
const LIST_CALL = '"method":"tools/call","params":{"name":"service_apps_list","arguments":{}'
const okCall: Check = (status, _h, text) => {
  if (status !== 200) return `HTTP ${status}: ${text.slice(0, 200)}`
  if (!text.includes('"isError":false')) return `tool error: ${text.slice(0, 200)}`
  return null
}
const okStateless: Check = (status, h, text) =>
  okCall(status, h, text) ?? (text.includes('"resultType":"complete"') && h['mcp-session-id'] === undefined ? null : `not a 2026-07-28 answer: ${text.slice(0, 200)}`)

/** CPU of a started configuration with no load, in cores (1.0 = one core busy all the time). */
interface Idle {
  config: string
  round: number
  servers: number
  postgres: number
  redis: number
}

async function runConfig(name: ConfigName, round: number): Promise<{ stats: Stats[]; startMs: number; idle: Idle | undefined }> {
  const config = CONFIGS[name]
  const database = config.backend === 'postgres' ? await createDatabase() : undefined
  const env: Record<string, string> = {
    ...RAISED_LIMITS,
    ...(database ? { SERVICE_DATABASE: database.url, SERVICE_ENV_KEY: ENV_KEY } : {}),
    ...(config.redis ? { SERVICE_REDIS_URL: BACKENDS!.redisUrl, SERVICE_REDIS_PREFIX: `bench:${randomBytes(6).toString('hex')}:` } : {}),
  }
  const servers: ServerChild[] = []
  const pools: Pool[] = []
  try {
    // All N together: a fresh database's migrations and bootstrap are safe to race.
    const t0 = performance.now()
    const profile = (i: number) => (OPTS.cpuProfDir ? { cpuProfDir: join(resolve(OPTS.cpuProfDir), `${name}-r${round}-p${i}`) } : {})
    const starting = Array.from({ length: config.processes }, (_, i) => startServerChild({ entry: OPTS.serverEntry, probe: false, env, ...profile(i) }))
    const settled = await Promise.allSettled(starting)
    for (const s of settled) if (s.status === 'fulfilled') servers.push(s.value)
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected')
    if (failed) throw new Error(`${config.label}: a server did not start: ${(failed.reason as Error).message}`)
    const startMs = performance.now() - t0
    for (const s of servers) pools.push(new Pool(s.origin, { connections: OPTS.concurrency, pipelining: 1, keepAliveTimeout: 30_000 }))
    const n = servers.length
    const meta = { config: config.label, round, backend: config.backend, redis: config.redis }
    const stats: Stats[] = []
    let id = 1

    if (OPTS.prewarmMs > 0) {
      const headers = modernHeaders(INIT, 'tools/call', 'service_apps_list')
      const warm = await runLoad({ ...meta, scenario: 'stateless' }, pools, servers, (i) => ({ target: i % n, headers, body: `{"jsonrpc":"2.0","id":${id++},${LIST_CALL},${MODERN_META}}}` }), okStateless, { warmupMs: 0, durationMs: OPTS.prewarmMs })
      if (warm.errors > 0) throw new Error(`${config.label}: the pre-warm load failed: ${warm.firstError}`)
    }
    let idle: Idle | undefined
    if (OPTS.idleMs > 0) {
      const before = sampleCpu(servers, config.backend, config.redis)
      await sleep(OPTS.idleMs)
      const after = sampleCpu(servers, config.backend, config.redis)
      const seconds = (after.at - before.at) / 1000
      idle = { config: config.label, round, servers: (after.servers - before.servers) / seconds, postgres: (after.postgres - before.postgres) / seconds, redis: (after.redis - before.redis) / seconds }
      process.stdout.write(`    idle      CPU in cores: servers ${idle.servers.toFixed(3)}, postgres ${idle.postgres.toFixed(3)}, redis ${idle.redis.toFixed(3)} (over ${seconds.toFixed(2)} s with no load)\n`)
    }

    for (const scenario of OPTS.scenarios) {
      let result: Stats
      if (scenario === 'stateless') {
        const headers = modernHeaders(INIT, 'tools/call', 'service_apps_list')
        result = await runLoad({ ...meta, scenario }, pools, servers, (i) => ({ target: i % n, headers, body: `{"jsonrpc":"2.0","id":${id++},${LIST_CALL},${MODERN_META}}}` }), okStateless)
      } else if (scenario === 'session') {
        // Worker i's session is opened on process i mod N; its k-th call goes to process (i + k) mod N.
        const sessions = await Promise.all(Array.from({ length: OPTS.concurrency }, (_, i) => openSession(pools[i % n]!, INIT)))
        const calls = new Array<number>(OPTS.concurrency).fill(0)
        result = await runLoad({ ...meta, scenario }, pools, servers, (i) => ({ target: (i + calls[i]!++) % n, headers: sessions[i]!, body: `{"jsonrpc":"2.0","id":${id++},${LIST_CALL}}}` }), okCall)
      } else {
        const headers = modernHeaders(INIT, 'tools/call', 'service_apps_create')
        const tag = randomBytes(3).toString('hex')
        let made = 0
        result = await runLoad(
          { ...meta, scenario },
          pools,
          servers,
          (i) => ({
            target: i % n,
            headers,
            body: `{"jsonrpc":"2.0","id":${id++},"method":"tools/call","params":{"name":"service_apps_create","arguments":{"name":"bench-${tag}-${++made}"},${MODERN_META}}}`,
          }),
          okStateless,
        )
      }
      report(result)
      stats.push(result)
    }
    return { stats, startMs, idle }
  } finally {
    await Promise.all(pools.map((p) => p.close()))
    await Promise.all(servers.map((s) => s.stop()))
    await database?.drop()
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Output

function report(r: Stats): void {
  const c = r.cpu
  process.stdout.write(
    `    ${r.scenario.padEnd(9)} ${r.rps.toFixed(0).padStart(6)} req/s  p50 ${r.p50.toFixed(2)} ms  p99 ${r.p99.toFixed(2)} ms  errors ${r.errors}  ` +
      `CPU s/1000 req ${r.cpuPer1000.toFixed(3)} (servers ${c.servers.toFixed(2)} s, postgres ${c.postgres.toFixed(2)} s, redis ${c.redis.toFixed(2)} s, ` +
      `load generator ${c.client.toFixed(2)} s over ${c.window.toFixed(2)} s)  per process ${r.perProcess.join('/')} requests, ${r.perProcessCpu.map((c) => c.toFixed(2)).join('/')} CPU s` +
      (r.firstError ? `\n      first error: ${r.firstError}` : '') +
      '\n',
  )
}

function median(values: number[]): number {
  const v = values.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b)
  if (v.length === 0) return NaN
  const mid = v.length >> 1
  return v.length % 2 ? v[mid]! : (v[mid - 1]! + v[mid]!) / 2
}

interface Summary {
  config: string
  scenario: ScenarioName
  processes: number
  rounds: number
  rps: number
  p50: number
  p99: number
  errors: number
  cpuPer1000: number
  serversPer1000: number
  postgresPer1000: number
  redisPer1000: number
  clientPer1000: number
  /** Cores busy over the window (servers + PostgreSQL + Redis + load generator). */
  coresBusy: number
  vsSqlite: number
  vsPgRedis1: number
}

function summarize(all: Stats[]): Summary[] {
  const out: Summary[] = []
  for (const scenario of OPTS.scenarios) {
    for (const name of OPTS.configs) {
      const label = CONFIGS[name].label
      const rs = all.filter((r) => r.scenario === scenario && r.config === label)
      if (rs.length === 0) continue
      const per1000 = (f: (r: Stats) => number) => median(rs.map((r) => (r.requests > 0 ? (f(r) * 1000) / r.requests : NaN)))
      out.push({
        config: label,
        scenario,
        processes: CONFIGS[name].processes,
        rounds: rs.length,
        rps: median(rs.map((r) => r.rps)),
        p50: median(rs.map((r) => r.p50)),
        p99: median(rs.map((r) => r.p99)),
        errors: rs.reduce((s, r) => s + r.errors, 0),
        cpuPer1000: median(rs.map((r) => r.cpuPer1000)),
        serversPer1000: per1000((r) => r.cpu.servers),
        postgresPer1000: per1000((r) => r.cpu.postgres),
        redisPer1000: per1000((r) => r.cpu.redis),
        clientPer1000: per1000((r) => r.cpu.client),
        coresBusy: median(rs.map((r) => (r.cpu.servers + r.cpu.postgres + r.cpu.redis + r.cpu.client) / r.cpu.window)),
        vsSqlite: NaN,
        vsPgRedis1: NaN,
      })
    }
    const sqlite = out.find((s) => s.scenario === scenario && s.config === CONFIGS.sqlite1.label)
    const pgRedis1 = out.find((s) => s.scenario === scenario && s.config === CONFIGS.pgredis1.label)
    for (const s of out.filter((s) => s.scenario === scenario)) {
      if (sqlite) s.vsSqlite = s.rps / sqlite.rps
      if (pgRedis1) s.vsPgRedis1 = s.rps / pgRedis1.rps
    }
  }
  return out
}

function tables(summaries: Summary[]): string {
  const ratio = (x: number) => (Number.isNaN(x) ? '–' : `${x.toFixed(2)}×`)
  const parts: string[] = []
  for (const scenario of OPTS.scenarios) {
    const rows = summaries.filter((s) => s.scenario === scenario)
    if (rows.length === 0) continue
    parts.push(
      [
        `${SCENARIOS[scenario]}, concurrency ${OPTS.concurrency}`,
        '',
        '| configuration | req/s | p50 ms | p99 ms | errors | CPU s/1000 req (servers+pg+redis) | servers | postgres | redis | load gen. | cores busy | vs sqlite×1 | vs postgres+redis×1 |',
        '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
        ...rows.map((s) =>
          `| ${s.config} | ${s.rps.toFixed(0)} | ${s.p50.toFixed(2)} | ${s.p99.toFixed(2)} | ${s.errors} | ${s.cpuPer1000.toFixed(3)} | ${s.serversPer1000.toFixed(3)} | ` +
            `${s.postgresPer1000.toFixed(3)} | ${s.redisPer1000.toFixed(3)} | ${s.clientPer1000.toFixed(3)} | ${s.coresBusy.toFixed(2)} | ${ratio(s.vsSqlite)} | ${ratio(s.vsPgRedis1)} |`),
      ].join('\n'),
    )
  }
  return parts.join('\n\n')
}

// ---------------------------------------------------------------------------------------------------------------
// The run

async function main(): Promise<void> {
  const processesPerRound = OPTS.configs.reduce((s, c) => s + CONFIGS[c].processes, 0)
  watchdog(
    OPTS.rounds * (OPTS.configs.length * (OPTS.scenarios.length * (OPTS.durationMs + OPTS.warmupMs + 5_000) + OPTS.prewarmMs + OPTS.idleMs) + processesPerRound * 30_000) + 180_000,
  )
  const cores = availableParallelism()
  process.stdout.write(
    `service-mcp processes benchmark: node ${process.version}, ${cores} cores (${cpus()[0]?.model.trim() ?? 'unknown CPU'}), ` +
      `concurrency ${OPTS.concurrency}, ${OPTS.durationMs / 1000} s per run after ${OPTS.warmupMs / 1000} s warm-up (and ${OPTS.prewarmMs / 1000} s of untimed load on each configuration once started), ${OPTS.rounds} round(s), server ${OPTS.serverEntry}\n` +
      `On ${cores} cores, N > ${cores} processes compete for the same cores with PostgreSQL, Redis and this load generator: ` +
      `beyond ${cores} the figures show contention, not how the design scales; CPU per 1000 requests is what carries over.\n`,
  )
  const t0 = performance.now()
  BACKENDS = await startBackends(process.pid)
  process.stdout.write(`PostgreSQL 15 and Redis started in ${((performance.now() - t0) / 1000).toFixed(1)} s (${BACKENDS.postgresUrl}, ${BACKENDS.redisUrl})\n`)

  const all: Stats[] = []
  const starts: Array<{ config: string; round: number; startMs: number }> = []
  const idles: Idle[] = []
  try {
    for (let round = 1; round <= OPTS.rounds; round++) {
      process.stdout.write(`\nRound ${round}/${OPTS.rounds}\n`)
      for (const name of OPTS.configs) {
        process.stdout.write(`  ${CONFIGS[name].label}\n`)
        const { stats, startMs, idle } = await runConfig(name, round)
        if (idle) idles.push(idle)
        process.stdout.write(`    (${CONFIGS[name].processes} process(es) started in ${(startMs / 1000).toFixed(2)} s)\n`)
        starts.push({ config: CONFIGS[name].label, round, startMs })
        all.push(...stats)
      }
    }
  } finally {
    await stopBackends(process.pid)
    backendsStopped = true
  }

  const summaries = summarize(all)
  process.stdout.write(`\nMedians over ${OPTS.rounds} round(s)\n\n${tables(summaries)}\n\n`)
  if (idles.length > 0) {
    const rows = OPTS.configs.map((name) => {
      const is = idles.filter((i) => i.config === CONFIGS[name].label)
      const m = (f: (i: Idle) => number) => median(is.map(f)).toFixed(3)
      return `| ${CONFIGS[name].label} | ${m((i) => i.servers)} | ${m((i) => i.postgres)} | ${m((i) => i.redis)} |`
    })
    process.stdout.write(
      `Idle CPU of each configuration once warm (cores, over ${OPTS.idleMs / 1000} s with no load)\n\n` +
        `| configuration | servers | postgres | redis |\n|---|---:|---:|---:|\n${rows.join('\n')}\n\n`,
    )
  }
  process.stdout.write(
    'CPU s/1000 req: CPU seconds of the server processes + PostgreSQL (postmaster, backends, workers) + redis-server per 1000 ' +
      'answered requests; load gen. (this process) is apart. cores busy: all of them (load generator included) over the window.\n',
  )
  if (all.some((r) => r.errors > 0)) process.stdout.write('Some runs had errors: see the "first error" lines above.\n')
  if (OPTS.json) {
    writeFileSync(OPTS.json, JSON.stringify({ options: OPTS, cores, node: process.version, starts, idle: idles, results: all, summaries }, null, 2))
    process.stdout.write(`Raw results written to ${OPTS.json}\n`)
  }
}

OPTS = readOptions()
runMain(main)

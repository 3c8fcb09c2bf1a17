/**
 * Load benchmark of /mcp over real loopback sockets. The server runs in a child process (`node dist/src/cli.js serve`,
 * what `npm start` runs; `npm run bench` builds it first), so its CPU and memory are separate from this load generator.
 *
 *   npx tsx scripts/bench/mcp.bench.ts [--duration 5] [--warmup 1] [--concurrency 1,16,64] [--sessions 10000]
 *                                      [--apps 0,20] [--scenarios call,init,memory] [--cpu-prof <dir>] [--json <file>]
 *                                      [--server-entry dist/src/cli.js | src/cli.ts] [--no-probe] [--pre-sql "<sql>"]
 *                                      [--auth key|oauth] [--rate-limits raised|contract]
 *
 * Every flag also reads BENCH_<NAME> from the environment (BENCH_DURATION=10, BENCH_CPU_PROF=/tmp/prof, …).
 *
 * Scenarios (each on a fresh server and database):
 *   call    tools/call service_apps_list, once per `--apps` count (default 0,20): that many apps are seeded into the
 *           default organization first (0 = the empty list; the tool returns at most 20 per page), seeded through a
 *           second SQLite connection. At each concurrency, on the same server, one after the other: the legacy call
 *           (all connections sharing one pre-opened 2025-11-25 session) and the stateless 2026-07-28 call (one POST
 *           with its `_meta` and headers, no session, no initialize).
 *   ping    (not run by default) `ping` on one pre-opened session: the cost of HTTP + auth + session + dispatch alone,
 *           a floor for tools/call.
 *   init    session creation: POST initialize (Accept: application/json, text/event-stream), nothing else.
 *   memory  N idle sessions (initialize + notifications/initialized each): server memory before/after, per session.
 *
 * Memory is read two ways: VmRSS of the child from /proc/<pid>/status, and process.memoryUsage() after a forced full
 * GC, taken inside the child by scripts/bench/probe.mjs (preloaded; the child runs with --expose-gc).
 * Only 127.0.0.1 is used. The script ends by itself: every phase is bounded and the child is always killed.
 *
 * Comparison mode (its own options; `npm run bench -- --compare --help` for all of them):
 *
 *   npm run bench -- --compare [--duration 5] [--warmup 1] [--rounds 3] [--concurrency 16] [--sessions 2000]
 *                              [--scenarios call,apps,init,memory] [--pin auto|off] [--json <file>]
 *
 *   starts this project (the build, through the embedding API), the official SDK's stateful server and a bare Fastify
 *   route, all answering the same 2.7 KB tools/call result, each pinned to one core (the load generator on another),
 *   measures them interleaved over several rounds (tools/call, service_apps_list, initialize, idle-session memory) and
 *   prints the medians and the ratios of issue 13 with their targets (scripts/bench/compare/).
 */
import { existsSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { performance } from 'node:perf_hooks'
import { parseArgs } from 'node:util'
import { Pool } from 'undici'
import { load as closedLoop, type Check, type LoadStats, type Shot } from './load.js'
import { openDatabase } from '../../src/db/sqlite/client.js'
import { createRepos } from '../../src/db/sqlite/repos.js'
import { oauthTokens } from '../../test/helpers/oauth.js'
import type { TestServer } from '../../test/helpers/server.js'
import { runCompare } from './compare/run.js'
import { initHeaders, initializeBody, mb, MODERN_META, modernHeaders, numberOption, openSession, openSessions, optionReader, printHelpAndExit, RAISED_LIMITS, ROOT, runMain, sleep, startServerChild, vmRss, watchdog, type ServerChild } from './child.js'

// ---------------------------------------------------------------------------------------------------------------
// Options

// `--compare` is a mode of its own, with its own options (scripts/bench/compare/run.ts).
const COMPARE = process.argv.slice(2).includes('--compare')

/** The options of this (non-compare) mode, read once, before the run. */
function readOptions() {
  const { values: flags } = parseArgs({
    options: {
      duration: { type: 'string' },
      warmup: { type: 'string' },
      concurrency: { type: 'string' },
      sessions: { type: 'string' },
      apps: { type: 'string' },
      scenarios: { type: 'string' },
      'cpu-prof': { type: 'string' },
      json: { type: 'string' },
      'server-entry': { type: 'string' },
      'no-probe': { type: 'boolean' },
      'pre-sql': { type: 'string' },
      auth: { type: 'string' },
      'rate-limits': { type: 'string' },
      help: { type: 'boolean' },
    },
    strict: true,
  })

  const option = optionReader(flags)
  const positive = (name: string, raw: string, integer = false) => numberOption(name, raw, 'non-negative', integer)

  if (flags.help) printHelpAndExit(import.meta.url)

  const opts = {
    durationMs: positive('duration', option('duration', '5')) * 1000,
    warmupMs: positive('warmup', option('warmup', '1')) * 1000,
    concurrency: option('concurrency', '1,16,64').split(',').map((c) => positive('concurrency', c.trim(), true)).filter((c) => c > 0),
    sessions: positive('sessions', option('sessions', '10000'), true),
    apps: option('apps', '0,20').split(',').map((a) => positive('apps', a.trim(), true)),
    scenarios: new Set(option('scenarios', 'call,init,memory').split(',').map((s) => s.trim())),
    cpuProfDir: option('cpu-prof', ''),
    json: option('json', ''),
    /** The server's entry point: the build (what `npm start` runs) by default; src/cli.ts runs through tsx. */
    serverEntry: resolve(ROOT, option('server-entry', 'dist/src/cli.js')),
    /** SQL run on each server's database (second connection) before its load starts: try an index without editing src. */
    preSql: option('pre-sql', ''),
    /** `key`: the bootstrap API key; `oauth`: an access token from a full OAuth flow (register, sign in, consent, token). */
    auth: option('auth', 'key'),
    /** `raised`: every limit is checked on every request but set out of reach; `contract`: the defaults (429s expected). */
    rateLimits: option('rate-limits', 'raised'),
    /** Without the probe (and its IPC channel) the memory scenario reports VmRSS only. */
    probe: !(flags['no-probe'] ?? ['1', 'true'].includes(process.env.BENCH_NO_PROBE ?? '')),
  }
  if (!['key', 'oauth'].includes(opts.auth)) throw new Error(`--auth must be key or oauth, got ${opts.auth}`)
  if (!['raised', 'contract'].includes(opts.rateLimits)) throw new Error(`--rate-limits must be raised or contract, got ${opts.rateLimits}`)
  for (const s of opts.scenarios) if (!['call', 'ping', 'init', 'memory'].includes(s)) throw new Error(`Unknown scenario ${s} (call, ping, init, memory)`)
  if (!existsSync(opts.serverEntry)) {
    throw new Error(`${opts.serverEntry} does not exist: run \`npm run build\` first (\`npm run bench\` does), or pass --server-entry src/cli.ts`)
  }
  return opts
}
// Assigned before the run starts (below); only the functions of the run read it.
let OPTS!: ReturnType<typeof readOptions>

// ---------------------------------------------------------------------------------------------------------------
// The server child

/** A server for one scenario; its CPU profile (--cpu-prof) goes to a directory named `label`. */
async function startChild(label: string): Promise<ServerChild> {
  const server = await startServerChild({
    entry: OPTS.serverEntry,
    probe: OPTS.probe,
    ...(OPTS.cpuProfDir ? { cpuProfDir: join(resolve(OPTS.cpuProfDir), label) } : {}),
    env: OPTS.rateLimits === 'raised' ? RAISED_LIMITS : {},
  })
  if (OPTS.preSql) {
    const handle = openDatabase(server.dbPath, { migrate: false })
    handle.sqlite.exec(OPTS.preSql)
    handle.close()
  }
  return server
}

// ---------------------------------------------------------------------------------------------------------------
// Load generation

/** One measurement: the load's figures under the scenario's name. */
interface LoadResult extends LoadStats {
  scenario: string
}

/** `concurrency` closed-loop workers (load.ts) against `server`, warm-up and timed window from the options. */
async function load(scenario: string, server: ServerChild, concurrency: number, next: () => Shot, check: Check): Promise<LoadResult> {
  const stats = await closedLoop({ origin: server.origin, pid: server.pid, concurrency, warmupMs: OPTS.warmupMs, durationMs: OPTS.durationMs, next, check })
  return { scenario, ...stats }
}

let INIT_HEADERS = initHeaders()

/** With --auth oauth: a real access token for the owner, through the server's own OAuth flow. */
async function useCredential(server: ServerChild): Promise<void> {
  if (OPTS.auth === 'key') return
  const { tokens } = await oauthTokens({ url: server.origin } as unknown as TestServer)
  INIT_HEADERS = initHeaders(tokens.access_token)
}

// ---------------------------------------------------------------------------------------------------------------
// Scenarios

async function scenarioCall(appCount: number): Promise<LoadResult[]> {
  const server = await startChild(`call-${appCount}-apps`)
  try {
    if (appCount > 0) {
      // A second connection to the server's SQLite file (WAL): the rows are committed before the first call.
      const handle = openDatabase(server.dbPath, { migrate: false })
      const repos = createRepos(handle.db)
      const org = await repos.organizations.bySlug('default')
      if (!org) throw new Error('the default organization was not bootstrapped')
      for (let i = 0; i < appCount; i++) await repos.apps.create({ organizationId: org.id, name: `App ${i + 1}`, description: `Benchmark app number ${i + 1}` })
      handle.close()
    }
    await useCredential(server)
    const setup = new Pool(server.origin, { connections: 1 })
    const headers = await openSession(setup, INIT_HEADERS)
    const probe = await setup.request({ path: '/mcp', method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 'probe', method: 'tools/call', params: { name: 'service_apps_list', arguments: {} } }) })
    const probeText = await probe.body.text()
    await setup.close()
    const apps = (JSON.parse(probeText) as { result?: { structuredContent?: { apps?: unknown[] } } }).result?.structuredContent?.apps?.length
    if (apps !== Math.min(appCount, 20)) throw new Error(`tools/call probe returned ${apps} apps: ${probeText.slice(0, 500)}`)
    process.stdout.write(`  tools/call answer: ${Buffer.byteLength(probeText)} bytes (${apps} apps)\n`)

    let id = 1
    const next = (): Shot => ({ headers, body: `{"jsonrpc":"2.0","id":${id++},"method":"tools/call","params":{"name":"service_apps_list","arguments":{}}}` })
    const stateless = modernHeaders(INIT_HEADERS, 'tools/call', 'service_apps_list')
    const nextStateless = (): Shot => ({ headers: stateless, body: `{"jsonrpc":"2.0","id":${id++},"method":"tools/call","params":{"name":"service_apps_list","arguments":{},${MODERN_META}}}` })
    const check = (status: number, _h: unknown, text: string) => {
      if (status !== 200) return `HTTP ${status}: ${text.slice(0, 200)}`
      if (!text.includes('"isError":false')) return `tool error: ${text.slice(0, 200)}`
      return null
    }
    const checkStateless = (status: number, h: Record<string, string | string[] | undefined>, text: string) =>
      check(status, h, text) ?? (text.includes('"resultType":"complete"') && h['mcp-session-id'] === undefined ? null : `not a 2026-07-28 answer: ${text.slice(0, 200)}`)
    const results: LoadResult[] = []
    for (const c of OPTS.concurrency) {
      const legacy = await load(`tools/call apps_list (${appCount} apps), 2025-11-25 session`, server, c, next, check)
      report(legacy)
      const modern = await load(`tools/call apps_list (${appCount} apps), 2026-07-28 stateless`, server, c, nextStateless, checkStateless)
      report(modern)
      results.push(legacy, modern)
    }
    return results
  } finally {
    await server.stop()
  }
}

async function scenarioPing(): Promise<LoadResult[]> {
  const server = await startChild('ping')
  try {
    await useCredential(server)
    const setup = new Pool(server.origin, { connections: 1 })
    const headers = await openSession(setup, INIT_HEADERS)
    await setup.close()
    let id = 1
    const next = (): Shot => ({ headers, body: `{"jsonrpc":"2.0","id":${id++},"method":"ping"}` })
    const check = (status: number, _h: unknown, text: string) => {
      if (status !== 200) return `HTTP ${status}: ${text.slice(0, 200)}`
      if (!text.includes('"result":{}')) return `unexpected answer: ${text.slice(0, 200)}`
      return null
    }
    const results: LoadResult[] = []
    for (const c of OPTS.concurrency) {
      const r = await load('ping', server, c, next, check)
      report(r)
      results.push(r)
    }
    return results
  } finally {
    await server.stop()
  }
}

async function scenarioInit(): Promise<LoadResult[]> {
  const server = await startChild('init')
  try {
    await useCredential(server)
    let id = 1
    const next = (): Shot => ({ headers: INIT_HEADERS, body: initializeBody(id++) })
    const check = (status: number, headers: Record<string, string | string[] | undefined>, text: string) => {
      if (status !== 200) return `HTTP ${status}: ${text.slice(0, 200)}`
      if (typeof headers['mcp-session-id'] !== 'string') return 'no Mcp-Session-Id'
      return null
    }
    const results: LoadResult[] = []
    for (const c of OPTS.concurrency) {
      const r = await load('initialize', server, c, next, check)
      report(r)
      results.push(r)
    }
    return results
  } finally {
    await server.stop()
  }
}

interface MemoryResult {
  sessions: number
  seconds: number
  rssBefore: number
  rssAfter: number
  heapBefore: number
  heapAfter: number
  externalBefore: number
  externalAfter: number
  gc: boolean
  rssPerSession: number
  heapPerSession: number
  heapExternalPerSession: number
}

async function scenarioMemory(): Promise<MemoryResult> {
  const server = await startChild('memory')
  await useCredential(server)
  const pool = new Pool(server.origin, { connections: 16, pipelining: 1 })
  try {
    const openMany = (n: number) => openSessions(pool, n, INIT_HEADERS)
    // Warm up code paths, allocator and SQLite cache with sessions that are counted in the baseline.
    await openMany(Math.min(500, OPTS.sessions))
    await sleep(1500) // let the 1 s activity flush run
    const before = await server.memory()
    const rssBefore = vmRss(server.pid)

    const t0 = performance.now()
    await openMany(OPTS.sessions)
    const seconds = (performance.now() - t0) / 1000
    await sleep(1500)
    const after = await server.memory()
    const rssAfter = vmRss(server.pid)
    const n = Math.max(1, OPTS.sessions)
    const result: MemoryResult = {
      sessions: OPTS.sessions,
      seconds,
      rssBefore,
      rssAfter,
      heapBefore: before.heapUsed,
      heapAfter: after.heapUsed,
      externalBefore: before.external,
      externalAfter: after.external,
      gc: before.gc && after.gc,
      rssPerSession: (rssAfter - rssBefore) / n,
      heapPerSession: (after.heapUsed - before.heapUsed) / n,
      heapExternalPerSession: (after.heapUsed + after.external - before.heapUsed - before.external) / n,
    }
    process.stdout.write(
      `  ${OPTS.sessions} idle sessions opened in ${seconds.toFixed(2)} s (${(OPTS.sessions / seconds).toFixed(0)} initialize+initialized pairs/s)\n` +
        `  VmRSS      ${mb(rssBefore)} -> ${mb(rssAfter)}  = ${result.rssPerSession.toFixed(0)} B/session\n` +
        `  heapUsed   ${mb(before.heapUsed)} -> ${mb(after.heapUsed)}  = ${result.heapPerSession.toFixed(0)} B/session (after forced GC: ${result.gc})\n` +
        `  heap+ext   = ${result.heapExternalPerSession.toFixed(0)} B/session\n`,
    )
    return result
  } finally {
    await pool.close()
    await server.stop()
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Output

const pad = (s: string, n: number) => s.padStart(n)

function report(r: LoadResult): void {
  process.stdout.write(
    `  c=${pad(String(r.concurrency), 2)}  ${pad(r.rps.toFixed(0), 6)} req/s  p50 ${r.p50.toFixed(2)} ms  p99 ${r.p99.toFixed(2)} ms  ` +
      `errors ${r.errors}  server CPU ${r.serverCpu.toFixed(2)}  client CPU ${r.clientCpu.toFixed(2)}` +
      (r.firstError ? `\n      first error: ${r.firstError}` : '') +
      '\n',
  )
}

function table(results: LoadResult[], memory: MemoryResult | null): string {
  const lines = results.length === 0 ? [] : [
    '| scenario | conc. | req/s | p50 ms | p99 ms | max ms | errors | server CPU (cores) | client CPU (cores) |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...results.map((r) =>
      `| ${r.scenario} | ${r.concurrency} | ${r.rps.toFixed(0)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${r.max.toFixed(1)} | ${r.errors} | ${r.serverCpu.toFixed(2)} | ${r.clientCpu.toFixed(2)} |`),
  ]
  if (memory) {
    if (lines.length > 0) lines.push('')
    lines.push(
      '| idle sessions | VmRSS delta | RSS B/session | heapUsed delta (after GC) | heap B/session | heap+external B/session |',
      '|---:|---:|---:|---:|---:|---:|',
      `| ${memory.sessions} | ${mb(memory.rssAfter - memory.rssBefore)} | ${memory.rssPerSession.toFixed(0)} | ${mb(memory.heapAfter - memory.heapBefore)} | ${memory.heapPerSession.toFixed(0)} | ${memory.heapExternalPerSession.toFixed(0)} |`,
    )
  }
  return lines.join('\n')
}

function targets(results: LoadResult[], memory: MemoryResult | null): string {
  const lines: string[] = []
  const calls16 = results.filter((r) => r.scenario.startsWith('tools/call') && r.concurrency === 16)
  for (const c of OPTS.concurrency) {
    for (const legacy of results.filter((r) => r.concurrency === c && r.scenario.endsWith('2025-11-25 session'))) {
      const modern = results.find((r) => r.concurrency === c && r.scenario === legacy.scenario.replace('2025-11-25 session', '2026-07-28 stateless'))
      if (modern) lines.push(`${modern.scenario} / session at concurrency ${c}: ${(modern.rps / legacy.rps).toFixed(2)}× the throughput`)
    }
  }
  const initBest = results.filter((r) => r.scenario === 'initialize').sort((a, b) => b.rps - a.rps)[0]
  const verdict = (ok: boolean) => (ok ? 'MET' : 'BELOW TARGET')
  for (const r of calls16) lines.push(`${r.scenario} at concurrency 16: ${r.rps.toFixed(0)} req/s (target > 9000) ${verdict(r.rps > 9000)}`)
  if (initBest) lines.push(`session creation (best concurrency, ${initBest.concurrency}): ${initBest.rps.toFixed(0)} /s (target > 5000) ${verdict(initBest.rps > 5000)}`)
  if (memory) {
    // The heap after a full GC is the marginal cost of a session; the RSS delta also holds bounded one-off growth
    // (SQLite page cache, V8 heap reservation), so it only converges with many sessions (try --sessions 50000).
    if (Number.isFinite(memory.heapExternalPerSession)) {
      lines.push(`idle session memory (JS heap + external after GC): ${memory.heapExternalPerSession.toFixed(0)} B/session (target < 2048) ${verdict(memory.heapExternalPerSession < 2048)}`)
    }
    lines.push(`idle session memory (VmRSS delta): ${memory.rssPerSession.toFixed(0)} B/session (target < 2048) ${verdict(memory.rssPerSession < 2048)}`)
  }
  return lines.join('\n')
}

async function main(): Promise<void> {
  const budgetMs =
    (OPTS.scenarios.has('call') ? OPTS.apps.length * 2 : 0) * OPTS.concurrency.length * (OPTS.durationMs + OPTS.warmupMs) +
    (OPTS.scenarios.has('init') ? 1 : 0) * OPTS.concurrency.length * (OPTS.durationMs + OPTS.warmupMs) +
    (OPTS.scenarios.has('ping') ? 1 : 0) * OPTS.concurrency.length * (OPTS.durationMs + OPTS.warmupMs) +
    (OPTS.scenarios.has('memory') ? OPTS.sessions * 2 : 0) + // generous: 500 sessions/s
    180_000
  watchdog(budgetMs)

  process.stdout.write(
    `service-mcp benchmark: node ${process.version}, ${OPTS.durationMs / 1000} s per run after ${OPTS.warmupMs / 1000} s warm-up, ` +
      `concurrency ${OPTS.concurrency.join('/')}, ${OPTS.apps.join('/')} seeded apps, ${OPTS.sessions} idle sessions, server ${OPTS.serverEntry}` +
      (OPTS.cpuProfDir ? `, server CPU profiles in ${resolve(OPTS.cpuProfDir)}` : '') +
      '\n',
  )
  const results: LoadResult[] = []
  let memory: MemoryResult | null = null
  if (OPTS.scenarios.has('call')) {
    for (const appCount of OPTS.apps) {
      process.stdout.write(`\n(b) tools/call service_apps_list, ${appCount} apps in the organization: on one session, then stateless\n`)
      results.push(...(await scenarioCall(appCount)))
    }
  }
  if (OPTS.scenarios.has('ping')) {
    process.stdout.write('\n(floor) ping on one session\n')
    results.push(...(await scenarioPing()))
  }
  if (OPTS.scenarios.has('init')) {
    process.stdout.write('\n(a) session creation: POST initialize\n')
    results.push(...(await scenarioInit()))
  }
  if (OPTS.scenarios.has('memory')) {
    process.stdout.write('\n(c) idle session memory\n')
    memory = await scenarioMemory()
  }
  process.stdout.write(`\nSummary\n\n${table(results, memory)}\n\n${targets(results, memory)}\n\n`)
  if (OPTS.json) writeFileSync(OPTS.json, JSON.stringify({ options: { ...OPTS, scenarios: [...OPTS.scenarios] }, results, memory }, null, 2))
}

if (COMPARE) {
  runCompare(process.argv.slice(2))
} else {
  OPTS = readOptions()
  runMain(main)
}

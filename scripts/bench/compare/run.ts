/**
 * Comparison mode of the load benchmark: this project side by side with the official MCP SDK's server and a bare
 * Fastify route, in one interleaved run, each server pinned to one core.
 *
 *   npm run bench -- --compare [--duration 5] [--warmup 1] [--rounds 3] [--concurrency 16[,64…]] [--sessions 2000]
 *                              [--scenarios call,apps,init,memory] [--pin auto|off] [--json <file>]
 *
 * Every flag also reads BENCH_<NAME> from the environment (BENCH_ROUNDS=5, …).
 *
 * Servers (each its own process, scripts/bench/compare/server-*.ts), all serving the same tool with the same answer
 * (scripts/bench/compare/fixed.ts: ten services; the complete tools/call answer is 2,695 bytes):
 *   project  this project from the build (dist/, what `npm start` runs) through the embedding API: createServer with
 *            the built-in tools and the fixed tool, SQLite in a temporary directory, the bootstrap API key, every rate
 *            limiter running with its ceiling out of reach, log level warn, NODE_ENV=production; 20 apps seeded.
 *   sdk      @modelcontextprotocol/sdk 1.x, the shape of its simpleStreamableHttp example: Express, a McpServer and a
 *            StreamableHTTPServerTransport per session, stateful, answers on SSE; no logging, no event store, no auth.
 *   bare     a bare Fastify 5 route answering precomputed bodies (the request's id spliced in): the floor. It also
 *            answers service_apps_list with the project's own result, byte for byte: the harness starts the project
 *            first, takes that result from its answer on a session, and starts the bare server with it (a temporary
 *            file named by COMPARE_BARE_APPS_RESULT, removed once the server answers).
 *
 * With `--pin auto` (default) and at least two cores and `taskset`, every server runs under `taskset -c <first core>`
 * and this load generator pins itself (all threads) to the second; otherwise it warns and runs unpinned.
 *
 * All servers start once and stay up. A probe first asserts that their tools/call results are deep-equal (and the bare
 * server's service_apps_list result the project's) and prints the answers' sizes. Then, for each round (`--rounds`), for each scenario, every server is measured one after the
 * other, the order rotating per round; a measurement is a warm-up (`--warmup` s) and a timed window (`--duration`
 * s) of closed-loop requests at each `--concurrency` (default 16):
 *   call    tools/call of the fixed tool: the project on one pre-opened 2025-11-25 session and as a stateless
 *           2026-07-28 request; the SDK on one pre-opened session (SSE answers); the bare route.
 *   apps    the project's built-in service_apps_list with a page of 20 apps (about 8.5 KB), on a session and
 *           stateless, and the bare route answering the same result: the floor for the same answer.
 *   init    POST initialize, nothing else. The sessions a measurement opened are closed with DELETE /mcp right after
 *           it (untimed), so that every round starts from the same state.
 *   memory  last, on fresh server processes (scripts/bench/probe.mjs preloaded, --expose-gc), one at a time: N idle
 *           sessions (`--sessions`, initialize + notifications/initialized), heapUsed + external after a forced GC
 *           before and after, per session. The bare route stores nothing: its figure is the floor.
 *
 * Every answer is checked (HTTP status, the JSON-RPC message of the SSE event for the SDK, its exact length, the
 * result); a measurement with errors is flagged. Per measurement: requests/s, p50/p99, errors, the server's CPU per
 * call in µs (its CPU time from /proc/<pid>/stat over the timed window ÷ answers completed in it), and this load
 * generator's CPU (near 1.0 core means the driver, not the server, limited the rate). A server that used well under
 * its core while the driver was not busy either waited for requests: its rate is bound by the latency between the
 * processes (noisy on shared and virtual machines), and the summary says so; its CPU per call does not depend on it,
 * hence the column "req/s per busy core" (1,000,000 ÷ µs/call) and the CPU-based ratios printed beside the targets.
 *
 * Then the medians of the rounds in the issue's columns, and the ratios with their targets (MET / BELOW TARGET):
 * project CPU/call ÷ bare CPU/call ≤ 2.0, project req/s ÷ SDK req/s ≥ 5.0 (on a session and stateless), project
 * initialize/s ÷ SDK initialize/s ≥ 6.0; for service_apps_list, project CPU/call ÷ bare CPU/call for the same answer
 * ≤ 2.0 (session and stateless), its req/s ÷ the SDK's fixed-tool req/s printed as informational only (the SDK serves
 * no service_apps_list). A missed target is a result, not a failure: the exit code is 0; it is
 * non-zero when the harness fails (a server does not start, the probe finds different answers, more than 1 % errors).
 */
import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { Pool } from 'undici'
import { mb, openSession, openSessions, printHelpAndExit, ROOT, runMain, sleep, watchdog, type ServerChild } from '../child.js'
import { APPS_TOOL_NAME, FIXED_TOOL_NAME, SEEDED_APPS } from './fixed.js'
import { load, type Check, type LoadStats, type Shot } from '../load.js'
import { parseCompareOptions, type CompareOptions, type CompareScenario } from './options.js'
import {
  callBody,
  closeSessions,
  initHeadersOf,
  initializeBody,
  messageOf,
  PROBE_ID,
  probeServers,
  projectAppsResult,
  SERVER_KINDS,
  SERVER_LABELS,
  startCompareServer,
  statelessHeaders,
  type ProbeReport,
  type ServerKind,
} from './servers.js'

// ---------------------------------------------------------------------------------------------------------------
// Pinning

interface Pinning {
  /** The core of every server (taskset -c), or null when unpinned. */
  serverCore: number | null
  /** The core of this load generator, or null when unpinned. */
  clientCore: number | null
  note: string
}

/** The CPUs this process may run on (Cpus_allowed_list of /proc/self/status), e.g. [0, 1]. */
function allowedCpus(): number[] {
  try {
    const list = /^Cpus_allowed_list:\s*(\S+)/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? ''
    return list.split(',').flatMap((part) => {
      const [from, to] = part.split('-').map(Number)
      if (from === undefined || !Number.isInteger(from)) return []
      return Array.from({ length: (to ?? from) - from + 1 }, (_, i) => from + i)
    })
  } catch {
    return []
  }
}

function setUpPinning(mode: CompareOptions['pin']): Pinning {
  const unpinned = (why: string): Pinning => ({ serverCore: null, clientCore: null, note: `UNPINNED (${why}): servers and load generator share the cores; the figures are noisier and the ratios less reliable` })
  if (mode === 'off') return unpinned('--pin off')
  const cpus = allowedCpus()
  if (cpus.length < 2 || availableParallelism() < 2) return unpinned(`${Math.max(cpus.length, 1)} core available, 2 needed`)
  if (spawnSync('taskset', ['-V'], { stdio: 'ignore' }).status !== 0) return unpinned('taskset not found (util-linux)')
  const [serverCore, clientCore] = cpus as [number, number]
  // -a: every thread of this process (the main thread, libuv's pool, V8's helpers and tsx's loader thread).
  const self = spawnSync('taskset', ['-a', '-cp', String(clientCore), String(process.pid)], { encoding: 'utf8' })
  if (self.status !== 0) return unpinned(`taskset -a -cp ${clientCore} ${process.pid} failed: ${(self.stderr || '').trim()}`)
  return { serverCore, clientCore, note: `servers pinned to core ${serverCore} (taskset -c ${serverCore}), load generator to core ${clientCore} (taskset -a -cp)` }
}

// ---------------------------------------------------------------------------------------------------------------
// Measurements

/** One thing measured in every round: a server, a scenario, and how its requests look. */
interface Spec {
  key: string
  scenario: Exclude<CompareScenario, 'memory'>
  server: ServerKind
  label: string
  /** Bytes of the JSON-RPC answer (the probe's); every answer of a call must have exactly this length. */
  bytes: number
  shot(): Shot
  check: Check
  /** Sessions opened by the current measurement (init only), closed after it. */
  opened?: string[]
}

interface Measurement extends LoadStats {
  round: number
  key: string
  scenario: string
  server: ServerKind
  label: string
  bytes: number
  /** Sessions closed after an init measurement, and how many DELETEs failed. */
  closed?: number
  closeFailures?: number
}

interface MemoryResult {
  server: ServerKind
  sessions: number
  seconds: number
  heapBefore: number
  heapAfter: number
  externalBefore: number
  externalAfter: number
  rssBefore: number
  rssAfter: number
  gc: boolean
  heapPerSession: number
  errors: number
  firstError?: string
}

/** Ids of the load generator: ten digits (as the probe's), so every answer of a call has the probe's length. */
let nextId = PROBE_ID + 1
const id = () => nextId++

/** The check of a tools/call answer: HTTP 200, the JSON-RPC message (an SSE event's data for the SDK), its length. */
function callCheck(bytes: number): Check {
  return (status, headers, text) => {
    if (status !== 200) return `HTTP ${status}: ${text.slice(0, 200)}`
    const message = messageOf(headers['content-type'], text)
    if (message === null) return `no JSON-RPC message in the SSE answer: ${text.slice(0, 200)}`
    if (message.length !== bytes) return `answer of ${message.length} bytes, expected ${bytes}: ${message.slice(0, 200)}`
    if (!message.includes('"result":{') || !message.includes('"isError":false')) return `not a successful tool result: ${message.slice(0, 200)}`
    return null
  }
}

function initCheck(opened: string[] | null): Check {
  return (status, headers, text) => {
    if (status !== 200) return `HTTP ${status}: ${text.slice(0, 200)}`
    const session = headers['mcp-session-id']
    if (typeof session !== 'string') return 'no Mcp-Session-Id'
    opened?.push(session)
    const message = messageOf(headers['content-type'], text)
    if (message === null || !message.includes('"result":{') || !message.includes('"protocolVersion"')) return `not an initialize result: ${text.slice(0, 200)}`
    return null
  }
}

function bytesOf(probe: ProbeReport, server: ServerKind, path: string, tool: string): number {
  const call = probe.calls.find((c) => c.server === server && c.path === path && c.tool === tool)
  if (!call) throw new Error(`the probe did not call ${tool} on ${server} (${path})`)
  return call.messageBytes
}

async function buildSpecs(opts: CompareOptions, servers: Record<ServerKind, ServerChild>, probe: ProbeReport): Promise<Spec[]> {
  const specs: Spec[] = []
  const sessionOf = async (kind: ServerKind) => {
    const pool = new Pool(servers[kind].origin, { connections: 1 })
    try {
      return await openSession(pool, initHeadersOf(kind))
    } finally {
      await pool.close()
    }
  }
  const call = (key: string, scenario: 'call' | 'apps', server: ServerKind, label: string, tool: string, path: 'session' | 'stateless', headers: Record<string, string>) => {
    const bytes = bytesOf(probe, server, path, tool)
    specs.push({ key, scenario, server, label, bytes, shot: () => ({ headers, body: callBody(tool, id(), path === 'stateless') }), check: callCheck(bytes) })
  }
  if (opts.scenarios.has('call')) {
    call('call/project/session', 'call', 'project', 'project, 2025-11-25 session', FIXED_TOOL_NAME, 'session', await sessionOf('project'))
    call('call/project/stateless', 'call', 'project', 'project, 2026-07-28 stateless', FIXED_TOOL_NAME, 'stateless', statelessHeaders(FIXED_TOOL_NAME))
    call('call/sdk', 'call', 'sdk', 'SDK, session (SSE)', FIXED_TOOL_NAME, 'session', await sessionOf('sdk'))
    // The bare route needs no session: a plain POST.
    call('call/bare', 'call', 'bare', 'bare Fastify', FIXED_TOOL_NAME, 'session', initHeadersOf('bare'))
  }
  if (opts.scenarios.has('apps')) {
    call('apps/project/session', 'apps', 'project', `project apps_list ${SEEDED_APPS} apps, 2025-11-25 session`, APPS_TOOL_NAME, 'session', await sessionOf('project'))
    call('apps/project/stateless', 'apps', 'project', `project apps_list ${SEEDED_APPS} apps, 2026-07-28 stateless`, APPS_TOOL_NAME, 'stateless', statelessHeaders(APPS_TOOL_NAME))
    // The floor for the same answer: the project's session result, precomputed (the probe checked it is the same).
    call('apps/bare', 'apps', 'bare', `bare Fastify, apps_list answer (${kb(bytesOf(probe, 'bare', 'session', APPS_TOOL_NAME))})`, APPS_TOOL_NAME, 'session', initHeadersOf('bare'))
  }
  if (opts.scenarios.has('init')) {
    for (const server of SERVER_KINDS) {
      // The bare route stores nothing: its sessions need no closing.
      const opened: string[] | undefined = server === 'bare' ? undefined : []
      const headers = initHeadersOf(server)
      specs.push({
        key: `init/${server}`,
        scenario: 'init',
        server,
        label: server === 'project' ? 'project' : server === 'sdk' ? 'SDK' : 'bare Fastify',
        bytes: probe.initializeBytes[server],
        shot: () => ({ headers, body: initializeBody(id()) }),
        check: initCheck(opened ?? null),
        ...(opened ? { opened } : {}),
      })
    }
  }
  return specs
}

// ---------------------------------------------------------------------------------------------------------------
// Output

const int = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '—')
const ratio = (n: number) => (Number.isFinite(n) ? `${n.toFixed(1)}×` : '—')
const kb = (bytes: number) => `${(bytes / 1000).toFixed(1)} KB`
const median = (values: number[]): number => {
  const v = values.filter(Number.isFinite).sort((a, b) => a - b)
  if (v.length === 0) return NaN
  const mid = v.length >> 1
  return v.length % 2 ? v[mid]! : (v[mid - 1]! + v[mid]!) / 2
}
/** The load generator used most of its core: the server could have answered faster than it was asked. */
const DRIVER_BOUND = 0.9
/** A server below this many cores, with the driver below DRIVER_BOUND, waited for requests: its rate is latency-bound. */
const UNSATURATED = 0.8

function measurementLine(m: Measurement): string {
  const flags = [m.errors > 0 ? `  ERRORS ${m.errors} (${((100 * m.errors) / Math.max(1, m.requests)).toFixed(2)} %)` : '', m.clientCpu >= DRIVER_BOUND ? '  [driver-bound]' : ''].join('')
  return (
    `  round ${m.round}  ${m.label.padEnd(46)} c=${String(m.concurrency).padStart(3)}  ${int(m.rps).padStart(7)} /s  ` +
    `p50 ${m.p50.toFixed(2).padStart(6)} ms  p99 ${m.p99.toFixed(2).padStart(6)} ms  server ${m.serverCpu.toFixed(2)} cores = ${int(m.cpuUsPerCall).padStart(5)} µs/call  ` +
    `driver ${m.clientCpu.toFixed(2)}  errors ${m.errors}${flags}` +
    (m.closed !== undefined ? `  (${m.closed} sessions closed${m.closeFailures ? `, ${m.closeFailures} DELETEs failed` : ''})` : '') +
    (m.firstError ? `\n      first error: ${m.firstError}` : '')
  )
}

interface Median {
  key: string
  scenario: string
  server: ServerKind
  label: string
  concurrency: number
  bytes: number
  rounds: number
  rps: number
  cpuUsPerCall: number
  p50: number
  p99: number
  serverCpu: number
  clientCpu: number
  errors: number
  requests: number
}

function medians(measurements: Measurement[]): Median[] {
  const groups = new Map<string, Measurement[]>()
  for (const m of measurements) {
    const k = `${m.key}@${m.concurrency}`
    groups.set(k, [...(groups.get(k) ?? []), m])
  }
  return [...groups.values()].map((ms) => {
    const first = ms[0]!
    return {
      key: first.key,
      scenario: first.scenario,
      server: first.server,
      label: first.label,
      concurrency: first.concurrency,
      bytes: first.bytes,
      rounds: ms.length,
      rps: median(ms.map((m) => m.rps)),
      cpuUsPerCall: median(ms.map((m) => m.cpuUsPerCall)),
      p50: median(ms.map((m) => m.p50)),
      p99: median(ms.map((m) => m.p99)),
      serverCpu: median(ms.map((m) => m.serverCpu)),
      clientCpu: median(ms.map((m) => m.clientCpu)),
      errors: ms.reduce((s, m) => s + m.errors, 0),
      requests: ms.reduce((s, m) => s + m.requests, 0),
    }
  })
}

interface Verdict {
  name: string
  value: number
  target: string
  met: boolean | null
}

function summarize(opts: CompareOptions, meds: Median[], memory: MemoryResult[], probe: ProbeReport): { text: string; verdicts: Verdict[] } {
  const lines: string[] = []
  const verdicts: Verdict[] = []
  const heap = (server: ServerKind) => memory.find((m) => m.server === server)?.heapPerSession ?? NaN
  const fixedBytes = bytesOf(probe, 'bare', 'session', FIXED_TOOL_NAME)
  const sdkBody = probe.calls.find((c) => c.server === 'sdk')?.bodyBytes
  lines.push(
    `tools/call answer of the fixed tool: ${int(fixedBytes)} bytes on every server (the SDK's SSE event: ${int(sdkBody ?? NaN)} bytes); ` +
      `project stateless: ${int(bytesOf(probe, 'project', 'stateless', FIXED_TOOL_NAME))} bytes (with resultType and _meta)`,
  )
  for (const c of opts.concurrency) {
    const get = (key: string) => meds.find((m) => m.key === key && m.concurrency === c)
    const sdk = get('call/sdk')
    const bare = get('call/bare')
    const ps = get('call/project/session')
    const pl = get('call/project/stateless')
    const initOf = (s: ServerKind) => get(`init/${s}`)?.rps ?? NaN
    const withRatio = (value: number, base: number, name: string) => (Number.isFinite(value) ? `${int(value)}${Number.isFinite(base) && base > 0 ? ` (${ratio(value / base)} ${name})` : ''}` : '—')
    lines.push(
      '',
      `Medians of ${opts.rounds} round${opts.rounds === 1 ? '' : 's'} at concurrency ${c}:`,
      '',
      `| server | tools/call c${c} req/s | server CPU µs/call | initialize c${c} /s | heap B/idle session |`,
      '|---|---:|---:|---:|---:|',
      `| ${SERVER_LABELS.sdk} | ${int(sdk?.rps ?? NaN)} | ${int(sdk?.cpuUsPerCall ?? NaN)} | ${int(initOf('sdk'))} | ${int(heap('sdk'))} |`,
      `| ${SERVER_LABELS.bare} | ${int(bare?.rps ?? NaN)} | ${int(bare?.cpuUsPerCall ?? NaN)} | ${int(initOf('bare'))} | ${int(heap('bare'))} |`,
      `| this project, 2025-11-25 session | ${withRatio(ps?.rps ?? NaN, sdk?.rps ?? NaN, 'SDK')} | ${withRatio(ps?.cpuUsPerCall ?? NaN, bare?.cpuUsPerCall ?? NaN, 'bare')} | ${withRatio(initOf('project'), initOf('sdk'), 'SDK')} | ${int(heap('project'))} |`,
      `| this project, 2026-07-28 stateless | ${withRatio(pl?.rps ?? NaN, sdk?.rps ?? NaN, 'SDK')} | ${withRatio(pl?.cpuUsPerCall ?? NaN, bare?.cpuUsPerCall ?? NaN, 'bare')} | — (no session) | — (no session) |`,
    )
    // service_apps_list: against the bare route answering the same bytes; the SDK serves no such tool, so its
    // req/s ratio is against the SDK's fixed tool and informational only.
    const bareApps = get('apps/bare')
    if (bareApps) lines.push(`| ${bareApps.label}: the project's service_apps_list result, ${int(bareApps.bytes)} B | ${int(bareApps.rps)} | ${int(bareApps.cpuUsPerCall)} | — | — |`)
    for (const path of ['session', 'stateless'] as const) {
      const a = get(`apps/project/${path}`)
      if (a) {
        lines.push(
          `| this project, service_apps_list ${SEEDED_APPS} apps (${int(a.bytes)} B), ${path === 'session' ? '2025-11-25 session' : '2026-07-28 stateless'} | ` +
            `${withRatio(a.rps, sdk?.rps ?? NaN, "SDK's fixed tool, informational")} | ${withRatio(a.cpuUsPerCall, bareApps?.cpuUsPerCall ?? NaN, 'bare, same answer')} | — | — |`,
        )
      }
    }

    // Every measurement's medians, for the record.
    lines.push(
      '',
      '| measurement | bytes | req/s | p50 ms | p99 ms | server cores | µs/call | req/s per busy core | driver cores | errors |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    )
    const idle: Median[] = []
    for (const m of meds.filter((x) => x.concurrency === c)) {
      if (m.serverCpu < UNSATURATED && m.clientCpu < DRIVER_BOUND) idle.push(m)
      lines.push(
        `| ${m.scenario}: ${m.label} | ${int(m.bytes)} | ${int(m.rps)} | ${m.p50.toFixed(2)} | ${m.p99.toFixed(2)} | ${m.serverCpu.toFixed(2)} | ${int(m.cpuUsPerCall)} | ${int(1e6 / m.cpuUsPerCall)} | ` +
          `${m.clientCpu.toFixed(2)}${m.clientCpu >= DRIVER_BOUND ? ' (driver-bound)' : ''} | ${m.errors}${m.errors > 0 ? ' FLAGGED' : ''} |`,
      )
    }
    if (idle.length > 0) {
      lines.push(
        '',
        `NOTE: ${idle.map((m) => `${m.label} (${m.scenario}) used ${m.serverCpu.toFixed(2)} of its core`).join('; ')}, while the driver was not saturated either: ` +
          'those rates are bound by the latency between the processes (wake-ups across cores, noisy on shared or virtual machines), not by the ' +
          'server\'s CPU. The CPU µs/call (and "req/s per busy core" = 1,000,000 ÷ µs/call) does not depend on it.',
      )
    }

    // The targets of issue 13.
    lines.push('', `Targets (concurrency ${c}, medians):`)
    const verdict = (name: string, value: number, target: string, ok: (v: number) => boolean) => {
      const met = Number.isFinite(value) ? ok(value) : null
      verdicts.push({ name: `${name} (c${c})`, value, target, met })
      lines.push(`  ${name}: ${Number.isFinite(value) ? value.toFixed(2) : 'not measured'} (target ${target}) ${met === null ? '' : met ? 'MET' : 'BELOW TARGET'}`)
    }
    verdict('project CPU/call ÷ bare CPU/call, 2025-11-25 session', (ps?.cpuUsPerCall ?? NaN) / (bare?.cpuUsPerCall ?? NaN), '≤ 2.0', (v) => v <= 2)
    verdict('project CPU/call ÷ bare CPU/call, 2026-07-28 stateless', (pl?.cpuUsPerCall ?? NaN) / (bare?.cpuUsPerCall ?? NaN), '≤ 2.0', (v) => v <= 2)
    verdict('project req/s ÷ SDK req/s, 2025-11-25 session', (ps?.rps ?? NaN) / (sdk?.rps ?? NaN), '≥ 5.0', (v) => v >= 5)
    verdict('project req/s ÷ SDK req/s, 2026-07-28 stateless', (pl?.rps ?? NaN) / (sdk?.rps ?? NaN), '≥ 5.0', (v) => v >= 5)
    verdict('project initialize/s ÷ SDK initialize/s', initOf('project') / initOf('sdk'), '≥ 6.0', (v) => v >= 6)
    // The same comparisons from CPU time alone: what the throughput ratios are when every server saturates its core.
    const cpuOf = (key: string) => get(key)?.cpuUsPerCall ?? NaN
    const informational = (name: string, value: number) => {
      if (Number.isFinite(value)) lines.push(`  ${name}: ${value.toFixed(2)} (informational: the ratio of req/s per busy core)`)
    }
    informational('SDK CPU/call ÷ project CPU/call, 2025-11-25 session', cpuOf('call/sdk') / cpuOf('call/project/session'))
    informational('SDK CPU/call ÷ project CPU/call, 2026-07-28 stateless', cpuOf('call/sdk') / cpuOf('call/project/stateless'))
    informational('SDK CPU/initialize ÷ project CPU/initialize', cpuOf('init/sdk') / cpuOf('init/project'))
    const appsSession = get('apps/project/session')
    const appsStateless = get('apps/project/stateless')
    if (appsSession || appsStateless) {
      lines.push(
        `  service_apps_list (${SEEDED_APPS} apps, ${int(appsSession?.bytes ?? appsStateless?.bytes ?? NaN)} B; the bare route answers the same result, ${int(bareApps?.bytes ?? NaN)} B; ` +
          `the SDK serves no such tool):`,
      )
      for (const [path, a] of [['2025-11-25 session', appsSession], ['2026-07-28 stateless', appsStateless]] as const) {
        if (!a) continue
        verdict(`service_apps_list CPU/call ÷ bare CPU/call (same answer), ${path}`, a.cpuUsPerCall / (bareApps?.cpuUsPerCall ?? NaN), '≤ 2.0', (v) => v <= 2)
      }
      for (const [path, a] of [['2025-11-25 session', appsSession], ['2026-07-28 stateless', appsStateless]] as const) {
        if (a && Number.isFinite(a.rps / (sdk?.rps ?? NaN))) {
          lines.push(`  service_apps_list req/s ÷ SDK req/s, ${path}: ${(a.rps / sdk!.rps).toFixed(2)} (informational: the SDK serves no service_apps_list; against its ${int(fixedBytes)} B fixed tool)`)
        }
      }
    }
  }
  if (memory.length > 0) {
    lines.push('', `Idle sessions (${int(memory[0]!.sessions)} per server, fresh processes; heapUsed + external after a forced GC):`)
    for (const m of memory) {
      lines.push(
        `  ${m.server.padEnd(8)} ${int(m.heapPerSession).padStart(7)} B/session   heap+external ${mb(m.heapBefore + m.externalBefore)} -> ${mb(m.heapAfter + m.externalAfter)}, ` +
          `VmRSS ${mb(m.rssBefore)} -> ${mb(m.rssAfter)}, opened in ${m.seconds.toFixed(2)} s${m.gc ? '' : ' (no forced GC!)'}${m.errors ? `  ERRORS ${m.errors}: ${m.firstError}` : ''}`,
      )
    }
    const p = heap('project')
    const s = heap('sdk')
    if (Number.isFinite(p) && Number.isFinite(s) && p > 0) lines.push(`  SDK ÷ project heap per idle session: ${ratio(s / p)} (informational)`)
  }
  return { text: lines.join('\n'), verdicts }
}

// ---------------------------------------------------------------------------------------------------------------
// The run

async function measureMemory(opts: CompareOptions, pinning: Pinning): Promise<MemoryResult[]> {
  const results: MemoryResult[] = []
  for (const kind of SERVER_KINDS) {
    const server = await startCompareServer(kind, { core: pinning.serverCore, probe: true })
    const pool = new Pool(server.origin, { connections: 16, pipelining: 1 })
    try {
      const init = initHeadersOf(kind)
      // Warm up the code paths (and the SQLite cache) with sessions counted in the baseline, as mcp.bench.ts does.
      await openSessions(pool, Math.min(500, opts.sessions), init)
      await sleep(1500) // the project flushes session activity every second
      const before = await server.memory()
      const t0 = performance.now()
      let errors = 0
      let firstError: string | undefined
      try {
        await openSessions(pool, opts.sessions, init)
      } catch (err) {
        errors++
        firstError = (err as Error).message
      }
      const seconds = (performance.now() - t0) / 1000
      await sleep(1500)
      const after = await server.memory()
      const result: MemoryResult = {
        server: kind,
        sessions: opts.sessions,
        seconds,
        heapBefore: before.heapUsed,
        heapAfter: after.heapUsed,
        externalBefore: before.external,
        externalAfter: after.external,
        rssBefore: before.rss,
        rssAfter: after.rss,
        gc: before.gc && after.gc,
        heapPerSession: (after.heapUsed + after.external - before.heapUsed - before.external) / opts.sessions,
        errors,
        ...(firstError !== undefined ? { firstError } : {}),
      }
      process.stdout.write(`  ${kind.padEnd(8)} ${int(result.heapPerSession).padStart(7)} B/idle session (${int(opts.sessions)} sessions in ${seconds.toFixed(2)} s)${errors ? `  ERROR: ${firstError}` : ''}\n`)
      results.push(result)
    } finally {
      await pool.close()
      await server.stop()
    }
  }
  return results
}

async function compare(opts: CompareOptions): Promise<number> {
  const dist = join(ROOT, 'dist', 'src', 'index.js')
  if (!existsSync(dist)) throw new Error(`${dist} does not exist: run \`npm run build\` first (\`npm run bench\` does)`)
  const throughputScenarios = (['call', 'apps', 'init'] as const).filter((s) => opts.scenarios.has(s))
  const perRound = (opts.scenarios.has('call') ? 4 : 0) + (opts.scenarios.has('apps') ? 3 : 0) + (opts.scenarios.has('init') ? 3 : 0)
  watchdog(
    opts.rounds * perRound * opts.concurrency.length * (opts.warmupMs + opts.durationMs + 15_000) + // + closing init sessions
      (opts.scenarios.has('memory') ? 3 * (opts.sessions * 3 + 20_000) : 0) + // generous: 333 sessions/s
      180_000,
  )

  const pinning = setUpPinning(opts.pin)
  process.stdout.write(
    `service-mcp comparison: node ${process.version}, ${opts.rounds} round${opts.rounds === 1 ? '' : 's'}, ${opts.durationMs / 1000} s per measurement after ${opts.warmupMs / 1000} s warm-up, ` +
      `concurrency ${opts.concurrency.join('/')}, scenarios ${[...opts.scenarios].join(',')}` +
      (opts.scenarios.has('memory') ? `, ${opts.sessions} idle sessions per server` : '') +
      `\n${pinning.serverCore === null ? 'WARNING: ' : ''}${pinning.note}\n`,
  )
  for (const kind of SERVER_KINDS) process.stdout.write(`  ${kind.padEnd(8)} ${SERVER_LABELS[kind]}${kind === 'project' ? ` (${dist})` : ''}\n`)

  const measurements: Measurement[] = []
  let probe!: ProbeReport
  // The servers of the throughput scenarios start once and stay up; the probe runs on them whatever the scenarios.
  // The project and the SDK first; then the bare server, with the project's service_apps_list result.
  {
    const started: ServerChild[] = []
    const servers = {} as Record<ServerKind, ServerChild>
    try {
      const first = await Promise.allSettled((['project', 'sdk'] as const).map((kind) => startCompareServer(kind, { core: pinning.serverCore, probe: false })))
      for (const s of first) if (s.status === 'fulfilled') started.push(s.value)
      for (const s of first) if (s.status === 'rejected') throw s.reason
      servers.project = (first[0] as PromiseFulfilledResult<ServerChild>).value
      servers.sdk = (first[1] as PromiseFulfilledResult<ServerChild>).value
      const appsResult = await projectAppsResult(servers.project)
      servers.bare = await startCompareServer('bare', { core: pinning.serverCore, probe: false, appsResult })
      started.push(servers.bare)

      probe = await probeServers(servers)
      process.stdout.write(
        `\nProbe: the tools/call results of the three servers are deep-equal; the bare server's ${APPS_TOOL_NAME} result is the project's (${int(Buffer.byteLength(appsResult))} B of result).\n`,
      )
      for (const c of probe.calls) process.stdout.write(`  ${c.server.padEnd(8)} ${c.path.padEnd(10)} ${c.tool.padEnd(20)} ${int(c.messageBytes).padStart(6)} B JSON-RPC answer, ${int(c.bodyBytes).padStart(6)} B body (${c.contentType})\n`)
      for (const kind of SERVER_KINDS) process.stdout.write(`  ${kind.padEnd(8)} initialize answer ${int(probe.initializeBytes[kind])} B\n`)

      const specs = await buildSpecs(opts, servers, probe)
      for (let round = 1; round <= opts.rounds; round++) {
        process.stdout.write(`\nRound ${round} of ${opts.rounds}\n`)
        for (const scenario of throughputScenarios) {
          const list = specs.filter((s) => s.scenario === scenario)
          // The order rotates per round: each server is measured first, in the middle and last in turn.
          const order = list.map((_, i) => list[(i + round - 1) % list.length]!)
          for (const concurrency of opts.concurrency) {
            for (const spec of order) {
              const server = servers[spec.server]
              const stats = await load({ origin: server.origin, pid: server.pid, concurrency, warmupMs: opts.warmupMs, durationMs: opts.durationMs, next: spec.shot, check: spec.check })
              const m: Measurement = { round, key: spec.key, scenario: spec.scenario, server: spec.server, label: spec.label, bytes: spec.bytes, ...stats }
              if (spec.opened) {
                const ids = spec.opened.splice(0)
                m.closed = ids.length
                m.closeFailures = await closeSessions(server.origin, spec.server, ids)
                await sleep(500) // let the servers finish what closing started before the next measurement
              }
              measurements.push(m)
              process.stdout.write(measurementLine(m) + '\n')
            }
          }
        }
      }
    } finally {
      await Promise.all(started.map((s) => s.stop()))
    }
  }

  let memory: MemoryResult[] = []
  if (opts.scenarios.has('memory')) {
    process.stdout.write(`\nIdle sessions: ${int(opts.sessions)} per server, on fresh processes, one server at a time\n`)
    memory = await measureMemory(opts, pinning)
  }

  const meds = medians(measurements)
  const { text, verdicts } = summarize(opts, meds, memory, probe)
  process.stdout.write(`\nSummary (${pinning.serverCore === null ? 'UNPINNED' : `servers on core ${pinning.serverCore}, load generator on core ${pinning.clientCore}`})\n\n${text}\n`)

  // A harness failure: more than 1 % of a measurement's answers were wrong (or a memory scenario failed).
  const broken = measurements.filter((m) => m.requests === 0 || m.errors / m.requests > 0.01)
  const memoryBroken = memory.filter((m) => m.errors > 0)
  const flagged = measurements.filter((m) => m.errors > 0)
  if (flagged.length > 0) process.stdout.write(`\nFLAGGED: ${flagged.length} measurement(s) with errors: ${flagged.map((m) => `round ${m.round} ${m.label} c=${m.concurrency} (${m.errors})`).join('; ')}\n`)
  if (opts.json) {
    writeFileSync(
      opts.json,
      JSON.stringify({ options: { ...opts, scenarios: [...opts.scenarios] }, node: process.version, servers: SERVER_LABELS, pinning, probe, measurements, medians: meds, memory, verdicts }, null, 2),
    )
    process.stdout.write(`\nEverything written to ${opts.json}\n`)
  }
  if (broken.length > 0 || memoryBroken.length > 0) {
    process.stderr.write(`\nharness failure: ${broken.length} measurement(s) with more than 1 % errors or no answers, ${memoryBroken.length} failed memory measurement(s)\n`)
    return 1
  }
  return 0
}

/** `npm run bench -- --compare …`: parses the arguments (a bad value ends the process with code 2) and runs the comparison. */
export function runCompare(args: readonly string[]): void {
  let opts: CompareOptions
  try {
    opts = parseCompareOptions(args)
  } catch (err) {
    process.stderr.write(`bench --compare: ${(err as Error).message} (--compare --help lists the options)\n`)
    process.exit(2)
  }
  if (opts.help) printHelpAndExit(import.meta.url)
  runMain(() => compare(opts))
}

/**
 * Open-stream benchmark: what N idle standalone SSE streams (GET /mcp) cost the server in memory, and what their
 * `: heartbeat` comments cost in CPU. The server runs in a child process (`node dist/src/cli.js serve`, what `npm start`
 * runs; build it first with `npm run build`), so its CPU and memory are separate from this client.
 *
 *   npx tsx scripts/bench/streams.bench.ts [--streams 10000] [--heartbeat-ms 1000] [--measure-s 10] [--json <file>]
 *                                          [--open-concurrency 128] [--server-entry dist/src/cli.js | src/cli.ts]
 *                                          [--cpu-prof <dir>]
 *
 * Every flag also reads BENCH_<NAME> from the environment (BENCH_STREAMS=20000, BENCH_HEARTBEAT_MS=500, …).
 *
 * Steps, on one server (SERVICE_HEARTBEAT_MS = --heartbeat-ms, rate limits raised, the bootstrap API key):
 *   1. warm-up: a few sessions open a stream each and close it again (code paths compiled, counted in the baseline);
 *   2. baseline memory: process.memoryUsage() after a forced GC (scripts/bench/probe.mjs, over IPC) and VmRSS;
 *   3. N sessions (initialize + notifications/initialized, one API key): memory again, then the server's CPU over
 *      --measure-s with the sessions idle and no stream open (the floor: timers, flushes);
 *   4. one GET /mcp stream per session, kept open and read (every byte is drained, so no backpressure builds up in the
 *      server; `: heartbeat` frames are counted per stream): memory again, and open file descriptors of the server;
 *   5. the server's CPU (utime + stime from /proc/<pid>/stat) over --measure-s with every stream idle, aligned to fall
 *      between two heartbeat ticks; minus the floor of step 3, divided by the heartbeats received in the window:
 *      µs of server CPU per heartbeat, and the share of one core the heartbeats of N streams take at the default 25 s;
 *   6. every stream must have received --measure-s / --heartbeat-ms heartbeats in the window (±1);
 *   7. the client closes every stream, the server gets SIGTERM and must exit 0.
 *
 * File descriptors: the server holds one socket per stream, and so does this process. Node raises its own soft
 * RLIMIT_NOFILE to the hard limit at start, so the hard limit of the shell that runs the bench (`ulimit -Hn`) is what
 * counts; the server is started through `sh -c 'ulimit -n <N + margin>; exec node …'` (which can only go beyond the hard
 * limit with CAP_SYS_RESOURCE). When either process's limit is too low, N is capped and the start says so.
 * Only 127.0.0.1 is used. The script ends by itself: every phase is bounded and the child is always killed.
 */
import { existsSync, writeFileSync } from 'node:fs'
import { Agent as HttpAgent, request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http'
import { join, resolve } from 'node:path'
import { performance } from 'node:perf_hooks'
import { parseArgs } from 'node:util'
import { cpuSeconds, initHeaders, mb, numberOption, openFds, openFileLimit, openSessions, optionReader, printHelpAndExit, PROTOCOL, RAISED_LIMITS, ROOT, runMain, sleep, startServerChild, vmRss, watchdog, type ProbeMemory, type ServerChild } from './child.js'

const HEARTBEAT = ': heartbeat\n\n'
const DEFAULT_HEARTBEAT_MS = 25_000
/** Descriptors besides the streams: stdio, the SQLite files, the listening socket, pools, epoll, … */
const FD_MARGIN = 256
const WARMUP_STREAMS = 200

// ---------------------------------------------------------------------------------------------------------------
// Options

const { values: flags } = parseArgs({
  options: {
    streams: { type: 'string' },
    'heartbeat-ms': { type: 'string' },
    'measure-s': { type: 'string' },
    'open-concurrency': { type: 'string' },
    json: { type: 'string' },
    'server-entry': { type: 'string' },
    'cpu-prof': { type: 'string' },
    help: { type: 'boolean' },
  },
  strict: true,
})

const option = optionReader(flags)
const positive = (name: string, raw: string, integer = false) => numberOption(name, raw, 'positive', integer)

if (flags.help) printHelpAndExit(import.meta.url)

const OPTS = {
  streams: positive('streams', option('streams', '10000'), true),
  heartbeatMs: positive('heartbeat-ms', option('heartbeat-ms', '1000'), true),
  measureMs: positive('measure-s', option('measure-s', '10')) * 1000,
  /** GET requests in flight while the streams are being opened (each waits for its response headers). */
  openConcurrency: positive('open-concurrency', option('open-concurrency', '128'), true),
  json: option('json', ''),
  /** The server's entry point: the build (what `npm start` runs) by default; src/cli.ts runs through tsx. */
  serverEntry: resolve(ROOT, option('server-entry', 'dist/src/cli.js')),
  cpuProfDir: option('cpu-prof', ''),
}
if (!existsSync(OPTS.serverEntry)) {
  throw new Error(`${OPTS.serverEntry} does not exist: run \`npm run build\` first, or pass --server-entry src/cli.ts`)
}

// ---------------------------------------------------------------------------------------------------------------
// The server child, sessions and streams

/** The server, allowed to open `openFiles` descriptors, with heartbeats every --heartbeat-ms and rate limits raised. */
function startChild(openFiles: number): Promise<ServerChild> {
  return startServerChild({
    entry: OPTS.serverEntry,
    probe: true,
    ...(OPTS.cpuProfDir ? { cpuProfDir: join(resolve(OPTS.cpuProfDir), 'streams') } : {}),
    env: { SERVICE_HEARTBEAT_MS: String(OPTS.heartbeatMs), ...RAISED_LIMITS },
    openFiles,
  })
}

const INIT_HEADERS = initHeaders()

/** One open GET /mcp: every byte is read as it arrives; heartbeat frames are counted. */
interface Stream {
  req: ClientRequest
  res: IncomingMessage | null
  beats: number
  bytes: number
  /** The unmatched end of the previous chunk (a frame split across chunks). */
  carry: string
  openedAt: number
  endedByServer: boolean
  error: string | null
  closedByUs: boolean
}

let lastBeatAt = 0

function countBeats(s: Stream, chunk: Buffer): void {
  s.bytes += chunk.length
  const text = s.carry + chunk.toString('latin1')
  let from = 0
  for (let i = text.indexOf(HEARTBEAT); i !== -1; i = text.indexOf(HEARTBEAT, from)) {
    s.beats++
    from = i + HEARTBEAT.length
  }
  if (from > 0) lastBeatAt = performance.now()
  const rest = text.slice(from)
  const carry = rest.length > HEARTBEAT.length - 1 ? rest.slice(-(HEARTBEAT.length - 1)) : rest
  s.carry = carry
}

/** GET /mcp on a session; resolves once the 200 and its SSE headers arrived. */
function openStream(agent: HttpAgent, port: number, headers: Record<string, string>): Promise<Stream> {
  return new Promise((ok, ko) => {
    const getHeaders = { authorization: headers.authorization!, 'mcp-session-id': headers['mcp-session-id']!, 'mcp-protocol-version': PROTOCOL, accept: 'text/event-stream' }
    const req = httpRequest({ host: '127.0.0.1', port, method: 'GET', path: '/mcp', agent, headers: getHeaders })
    const s: Stream = { req, res: null, beats: 0, bytes: 0, carry: '', openedAt: performance.now(), endedByServer: false, error: null, closedByUs: false }
    req.once('error', (err) => {
      s.error ??= err.message
      ko(err)
    })
    req.once('response', (res) => {
      s.res = res
      if (res.statusCode !== 200 || !String(res.headers['content-type'] ?? '').startsWith('text/event-stream')) {
        let body = ''
        res.setEncoding('utf8')
        res.on('data', (d: string) => (body += d))
        res.on('end', () => ko(new Error(`GET /mcp answered ${res.statusCode} ${res.headers['content-type']}: ${body.slice(0, 300)}`)))
        return
      }
      res.on('data', (chunk: Buffer) => countBeats(s, chunk))
      res.once('end', () => (s.endedByServer = true))
      res.once('error', (err) => {
        if (!s.closedByUs) s.error ??= err.message
      })
      res.once('close', () => {
        if (!s.endedByServer && !s.closedByUs) s.error ??= 'the connection closed before the end of the response'
      })
      ok(s)
    })
    req.end()
  })
}

async function openStreams(agent: HttpAgent, port: number, sessions: Array<Record<string, string>>): Promise<Stream[]> {
  const streams: Stream[] = new Array(sessions.length)
  let next = 0
  const worker = async () => {
    while (next < sessions.length) {
      const i = next++
      streams[i] = await openStream(agent, port, sessions[i]!)
    }
  }
  await Promise.all(Array.from({ length: Math.min(OPTS.openConcurrency, sessions.length) }, worker))
  return streams
}

function closeStreams(streams: Stream[]): void {
  for (const s of streams) {
    s.closedByUs = true
    s.req.destroy()
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Measurement

interface Snapshot {
  probe: ProbeMemory
  rss: number
  fds: number
}

async function snapshot(server: ServerChild): Promise<Snapshot> {
  const probe = await server.memory()
  return { probe, rss: vmRss(server.pid), fds: openFds(server.pid) }
}

interface PerUnit {
  heap: number
  heapExternal: number
  rss: number
}

function perUnit(a: Snapshot, b: Snapshot, n: number): PerUnit {
  return {
    heap: (b.probe.heapUsed - a.probe.heapUsed) / n,
    heapExternal: (b.probe.heapUsed + b.probe.external - a.probe.heapUsed - a.probe.external) / n,
    rss: (b.rss - a.rss) / n,
  }
}

interface Result {
  streams: number
  heartbeatMs: number
  measureMs: number
  fdLimit: { client: number; server: number; clientHard: number }
  sessionsSeconds: number
  streamsSeconds: number
  memory: { baseline: Snapshot; sessions: Snapshot; streams: Snapshot; gc: boolean }
  perSession: PerUnit
  perStream: PerUnit
  /** Session and its open stream together. */
  perSessionWithStream: PerUnit
  cpu: {
    /** Server CPU seconds over the window with N idle sessions and no stream. */
    idleSeconds: number
    /** Server CPU seconds over the window with N open streams. */
    streamsSeconds: number
    /** This process's CPU seconds over the stream window (reading the heartbeats). */
    clientSeconds: number
    heartbeatsExpected: number
    heartbeatsReceived: number
    usPerHeartbeat: number
    /** Cores used by the heartbeats at --heartbeat-ms (1.0 = one core). */
    coresAtInterval: number
    /** % of one core the heartbeats of N streams take at the default 25 s interval. */
    corePercentAtDefault: number
  }
  check: { expectedPerStream: number; min: number; max: number; outside: number; streamErrors: number; firstError: string | null; otherBytes: number }
  shutdown: { code: number | null; signal: NodeJS.Signals | null; ms: number }
}

async function run(): Promise<Result> {
  // File descriptors: the client's own limit is what it is (Node already raised soft to hard); the server's is raised
  // by the shell that starts it, if the hard limit allows.
  const clientLimit = openFileLimit('self')
  const clientHard = openFileLimit('self', 'hard')
  const need = OPTS.streams + WARMUP_STREAMS + FD_MARGIN
  let n = OPTS.streams
  if (clientLimit < need) {
    n = Math.max(1, clientLimit - WARMUP_STREAMS - FD_MARGIN)
    process.stdout.write(
      `\n  !! this process may open ${clientLimit} files (soft limit; hard ${clientHard}) but ${OPTS.streams} streams need about ${need}.\n` +
        `  !! Run the bench from a shell with a higher limit: \`ulimit -n ${need}\` (raising the hard limit needs root or CAP_SYS_RESOURCE).\n` +
        `  !! Capping to ${n} streams.\n\n`,
    )
  }
  const server = await startChild(need)
  const serverLimit = openFileLimit(server.pid)
  if (serverLimit < need && serverLimit - WARMUP_STREAMS - FD_MARGIN < n) {
    n = Math.max(1, serverLimit - WARMUP_STREAMS - FD_MARGIN)
    process.stdout.write(
      `\n  !! the server may open ${serverLimit} files (\`ulimit -n ${need}\` in its shell failed: above the hard limit); capping to ${n} streams.\n` +
        `  !! Raise the hard limit of the shell that runs the bench (\`ulimit -Hn ${need}\` as root) to measure ${OPTS.streams}.\n\n`,
    )
  }
  process.stdout.write(`  open-file limits: client ${clientLimit} (hard ${clientHard}), server ${serverLimit}; ${n} streams\n`)

  const agent = new HttpAgent({ keepAlive: false, maxSockets: Infinity })
  let streams: Stream[] = []
  try {
    // 1. Warm-up: the open and close paths of a stream run a few hundred times before the baseline.
    const warm = await openSessions(server.origin, Math.min(WARMUP_STREAMS, n), INIT_HEADERS)
    const fdsIdle = openFds(server.pid)
    const warmStreams = await openStreams(agent, server.port, warm)
    await sleep(Math.min(OPTS.heartbeatMs * 2 + 100, 3000))
    closeStreams(warmStreams)
    await waitFor(() => openFds(server.pid) <= fdsIdle + 2, 10_000, 'the server to close the warm-up streams')
    await sleep(1500) // let the 1 s activity flush run

    // 2. Baseline.
    const baseline = await snapshot(server)

    // 3. N idle sessions, then the CPU floor without streams.
    let t0 = performance.now()
    const sessions = await openSessions(server.origin, n, INIT_HEADERS)
    const sessionsSeconds = (performance.now() - t0) / 1000
    process.stdout.write(`  ${n} sessions opened in ${sessionsSeconds.toFixed(2)} s\n`)
    await sleep(1500)
    const afterSessions = await snapshot(server)
    const idleCpu0 = cpuSeconds(server.pid)
    await sleep(OPTS.measureMs)
    const idleSeconds = cpuSeconds(server.pid) - idleCpu0
    process.stdout.write(`  server CPU with ${n} idle sessions, no stream: ${(idleSeconds * 1000).toFixed(0)} ms in ${OPTS.measureMs / 1000} s\n`)

    // 4. One stream per session.
    t0 = performance.now()
    streams = await openStreams(agent, server.port, sessions)
    const streamsSeconds = (performance.now() - t0) / 1000
    process.stdout.write(`  ${n} streams opened in ${streamsSeconds.toFixed(2)} s (${(n / streamsSeconds).toFixed(0)}/s)\n`)
    // At least one heartbeat on every stream before measuring memory, so the write path has run on each.
    await waitFor(() => streams.every((s) => s.beats > 0), OPTS.heartbeatMs * 3 + 10_000, 'a first heartbeat on every stream', 50)
    await sleep(1500)
    const afterStreams = await snapshot(server)
    process.stdout.write(`  server descriptors: ${afterSessions.fds} -> ${afterStreams.fds} (+${afterStreams.fds - afterSessions.fds} for ${n} streams)\n`)

    // 5. CPU over the window, which starts half an interval after a tick so each stream sees whole ticks only.
    const beatAfter = performance.now()
    await waitFor(() => lastBeatAt > beatAfter, OPTS.heartbeatMs * 2 + 5000, 'a heartbeat tick')
    await sleep(OPTS.heartbeatMs / 2)
    const before = Uint32Array.from(streams, (s) => s.beats)
    const serverCpu0 = cpuSeconds(server.pid)
    const clientCpu0 = process.cpuUsage()
    await sleep(OPTS.measureMs)
    const serverCpu = cpuSeconds(server.pid) - serverCpu0
    const clientCpu = process.cpuUsage(clientCpu0)
    const window = Uint32Array.from(streams, (s, i) => s.beats - before[i]!)

    // 6. Every stream got its heartbeats.
    const expectedPerStream = OPTS.measureMs / OPTS.heartbeatMs
    let min = Infinity
    let max = -Infinity
    let outside = 0
    let received = 0
    for (const w of window) {
      received += w
      if (w < min) min = w
      if (w > max) max = w
      if (Math.abs(w - expectedPerStream) > 1) outside++
    }
    const errored = streams.filter((s) => s.error !== null || s.endedByServer)
    const heartbeatsExpected = n * expectedPerStream
    const heartbeatCpu = Math.max(0, serverCpu - idleSeconds)
    const usPerHeartbeat = received > 0 ? (heartbeatCpu * 1e6) / received : NaN
    const result: Omit<Result, 'shutdown'> = {
      streams: n,
      heartbeatMs: OPTS.heartbeatMs,
      measureMs: OPTS.measureMs,
      fdLimit: { client: clientLimit, server: serverLimit, clientHard },
      sessionsSeconds,
      streamsSeconds,
      memory: { baseline, sessions: afterSessions, streams: afterStreams, gc: baseline.probe.gc && afterSessions.probe.gc && afterStreams.probe.gc },
      perSession: perUnit(baseline, afterSessions, n),
      perStream: perUnit(afterSessions, afterStreams, n),
      perSessionWithStream: perUnit(baseline, afterStreams, n),
      cpu: {
        idleSeconds,
        streamsSeconds: serverCpu,
        clientSeconds: (clientCpu.user + clientCpu.system) / 1e6,
        heartbeatsExpected,
        heartbeatsReceived: received,
        usPerHeartbeat,
        coresAtInterval: heartbeatCpu / (OPTS.measureMs / 1000),
        corePercentAtDefault: ((usPerHeartbeat * n) / (DEFAULT_HEARTBEAT_MS / 1000) / 1e6) * 100,
      },
      check: {
        expectedPerStream,
        min,
        max,
        outside,
        streamErrors: errored.length,
        firstError: errored[0] ? (errored[0].error ?? 'ended by the server') : null,
        // Bytes that were not heartbeat frames (a priming event, messages); the carried tail is not classified yet.
        otherBytes: streams.reduce((sum, s) => sum + s.bytes - s.beats * HEARTBEAT.length - s.carry.length, 0),
      },
    }

    // 7. The client closes everything; the server stops on SIGTERM.
    closeStreams(streams)
    agent.destroy()
    await waitFor(() => openFds(server.pid) <= afterSessions.fds + 2, 30_000, 'the server to close the streams', 100)
    const shutdown = await server.stop()
    return { ...result, shutdown }
  } finally {
    closeStreams(streams)
    agent.destroy()
    await server.stop()
  }
}

async function waitFor(check: () => boolean, ms: number, what: string, everyMs = 10): Promise<void> {
  const deadline = performance.now() + ms
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`timed out after ${(ms / 1000).toFixed(0)} s waiting for ${what}`)
    await sleep(everyMs)
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Output

const b0 = (b: number) => (Number.isFinite(b) ? b.toFixed(0) : 'n/a')

function table(r: Result): string {
  const m = r.memory
  return [
    '| open streams | heartbeat | heapUsed (after GC) | heap B/stream | heap+external B/stream | VmRSS | RSS B/stream | server fds |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|',
    `| ${r.streams} | ${r.heartbeatMs} ms | ${mb(m.sessions.probe.heapUsed)} -> ${mb(m.streams.probe.heapUsed)} | ${b0(r.perStream.heap)} | ${b0(r.perStream.heapExternal)} | ${mb(m.sessions.rss)} -> ${mb(m.streams.rss)} | ${b0(r.perStream.rss)} | ${m.sessions.fds} -> ${m.streams.fds} |`,
    '',
    '| per … | heap B | heap+external B | VmRSS B |',
    '|---|---:|---:|---:|',
    `| idle session (no stream) | ${b0(r.perSession.heap)} | ${b0(r.perSession.heapExternal)} | ${b0(r.perSession.rss)} |`,
    `| open stream (on top of its session) | ${b0(r.perStream.heap)} | ${b0(r.perStream.heapExternal)} | ${b0(r.perStream.rss)} |`,
    `| session with an open stream | ${b0(r.perSessionWithStream.heap)} | ${b0(r.perSessionWithStream.heapExternal)} | ${b0(r.perSessionWithStream.rss)} |`,
    '',
    '| window | heartbeats (expected) | server CPU, streams open | server CPU, no stream | µs server CPU / heartbeat | cores at this interval | % of one core at 25 s | client CPU |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|',
    `| ${r.measureMs / 1000} s | ${r.cpu.heartbeatsReceived} (${r.cpu.heartbeatsExpected}) | ${(r.cpu.streamsSeconds * 1000).toFixed(0)} ms | ${(r.cpu.idleSeconds * 1000).toFixed(0)} ms | ${r.cpu.usPerHeartbeat.toFixed(2)} | ${r.cpu.coresAtInterval.toFixed(3)} | ${r.cpu.corePercentAtDefault.toFixed(3)} % | ${(r.cpu.clientSeconds * 1000).toFixed(0)} ms |`,
  ].join('\n')
}

function checks(r: Result): { text: string; ok: boolean } {
  const lines: string[] = []
  const heartbeatsOk = r.check.outside === 0
  lines.push(
    `heartbeats per stream in the window: min ${r.check.min}, max ${r.check.max}, expected ${r.check.expectedPerStream} ±1: ` +
      (heartbeatsOk ? 'every stream OK' : `${r.check.outside} streams OUTSIDE`),
  )
  lines.push(`streams that ended or failed before the client closed them: ${r.check.streamErrors}${r.check.firstError ? ` (first: ${r.check.firstError})` : ''}`)
  if (r.check.otherBytes > 0) lines.push(`bytes other than heartbeat frames on the streams: ${r.check.otherBytes} (priming events or messages)`)
  if (!r.memory.gc) lines.push('memory was read without a forced GC (the child did not run with --expose-gc)')
  const shutdownOk = r.shutdown.code === 0 && r.shutdown.signal === null
  lines.push(`shutdown on SIGTERM: ${r.shutdown.signal ? `killed by ${r.shutdown.signal}` : `exit code ${r.shutdown.code}`} after ${r.shutdown.ms.toFixed(0)} ms${shutdownOk ? '' : ' FAILED'}`)
  return { text: lines.join('\n'), ok: heartbeatsOk && shutdownOk && r.check.streamErrors === 0 }
}

async function main(): Promise<number> {
  const budgetMs = OPTS.streams * 3 + OPTS.measureMs * 2 + OPTS.heartbeatMs * 8 + 180_000
  watchdog(budgetMs)

  process.stdout.write(
    `service-mcp stream benchmark: node ${process.version}, ${OPTS.streams} streams, heartbeat every ${OPTS.heartbeatMs} ms, ` +
      `${OPTS.measureMs / 1000} s windows, server ${OPTS.serverEntry}` +
      (OPTS.cpuProfDir ? `, server CPU profile in ${join(resolve(OPTS.cpuProfDir), 'streams')}` : '') +
      '\n',
  )
  const result = await run()
  const verdict = checks(result)
  process.stdout.write(`\nSummary\n\n${table(result)}\n\n${verdict.text}\n\n`)
  if (OPTS.json) writeFileSync(OPTS.json, JSON.stringify({ options: OPTS, result }, null, 2))
  return verdict.ok ? 0 : 1
}

runMain(main)

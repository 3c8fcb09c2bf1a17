// test-backends: own (two processes on PostgreSQL and Redis, one stopped and started again behind Caddy)
/**
 * A restart behind docs/deploy/Caddyfile (the recipe itself, its site in plain HTTP on a loopback port): two server
 * processes on one PostgreSQL database coordinated through Redis, Caddy in front, and clients that never stop: plain
 * GETs (discovery metadata, any process answers them) and the official SDK v2 client writing on 2026-07-28. One process
 * gets SIGTERM, exits 0, is started again on the same port, and gets traffic again.
 *
 * Caddy retries errors, never a status: a 503 that reached it would reach the client. The recipe keeps no connection
 * to the server, so nothing new reaches a stopping process (its listener is closed: Caddy's connection is refused,
 * and Caddy tries the other process); its checks of /readyz take it out, and take it back once it answers again. So no
 * GET sees anything but 200. Caddy 2.6 (Debian's, which CI runs) cannot send a request body twice: a POST it sent to
 * the stopping process before its next check fails with a 502 (docs/deploy/README.md). A write may fail so, and only
 * so, never with the server's 503, and every write it acknowledged is kept.
 */
import { Client as V2Client, StreamableHTTPClientTransport as V2Transport } from '@modelcontextprotocol/client'
import t from 'tap'
import { Agent, request } from 'undici'
import { postgresClient } from '../helpers/backends.js'
import { startServe, type Served } from '../helpers/cli.js'
import { findBinary, PUBLIC_BASE, startCaddy } from '../helpers/proxy.js'
import { answered, deploymentEnv, distinctPorts } from '../helpers/processes.js'
import { OWNER_KEY } from '../helpers/server.js'
import { until } from '../helpers/stream.js'

/** The recipe's health_interval: a restarted process is taken back by the first check that finds it ready. */
const HEALTH_INTERVAL_MS = 1000
const METADATA = '/.well-known/oauth-protected-resource/mcp'

t.test('a process restarted behind Caddy: no GET sees its 503, no acknowledged write is lost, and it comes back', async (t) => {
  const caddy = findBinary('caddy')
  if (!caddy) throw new Error('caddy is missing: .ci/run installs it (Debian package caddy)')
  const ports = await distinctPorts(2)
  const { database, env } = await deploymentEnv(t, {
    // Every process behind the balancer has its public address (docs/several-processes.md); a loopback default
    // would make each refuse the proxy's Host as a DNS-rebinding attempt (docs/decisions/http-errors.md).
    SERVICE_BASE_URL: PUBLIC_BASE, SERVICE_STOP_SETTLE_MS: '5000', SERVICE_ACCESS_LOG: 'true' })
  const started: Served[] = await Promise.all(ports.map((port) => startServe(env(port))))
  t.teardown(() => {
    for (const s of started) s.child.kill('SIGKILL')
  })
  const proxy = await startCaddy(t, caddy, ports)
  const db = await postgresClient(t, database)

  const failures: string[] = []
  /** The writes that failed, by HTTP status: Caddy 2.6's failed retries are 502s. */
  const writeStatuses: number[] = []
  const statuses = new Map<number, number>()
  const kept: string[] = []
  let running = true
  // A failed check ends the test with the clients still going: they stop with it.
  t.teardown(() => {
    running = false
  })
  // Kept-alive connections from the client to Caddy, as a browser or an SDK keeps them.
  const agent = new Agent()
  t.teardown(() => agent.close())
  // Several at once, so that Caddy holds several connections to each process, as it would under real load: any it kept
  // would be used again after the stop began, and answered 503 (what keepalive off in the recipe prevents).
  const getters = Array.from({ length: 4 }, async () => {
    while (running) {
      try {
        const res = await request(`${proxy.url}${METADATA}`, { dispatcher: agent })
        await res.body.text()
        statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1)
      } catch (err) {
        failures.push(`GET: ${(err as Error).message}`)
      }
    }
  })
  const v2 = new V2Client({ name: 'rolling-caddy', version: '2.0.0' }, { capabilities: {}, versionNegotiation: { mode: { pin: '2026-07-28' } } } as any)
  // The transport reports what callTool rejects with too: the writes are judged by their rejections.
  v2.onerror = (err) => {
    if (typeof (err as { data?: { status?: unknown } }).data?.status !== 'number') failures.push(`v2 transport: ${err.message}`)
  }
  await v2.connect(new V2Transport(new URL(`${proxy.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${OWNER_KEY}` } } }))
  t.teardown(() => v2.close())
  const writers = ['a', 'b'].map(async (who) => {
    for (let n = 0; running; n++) {
      try {
        const made = await v2.callTool({ name: 'service_apps_create', arguments: { name: `caddy-${who}-${n}` } })
        if (made.isError) failures.push(`create caddy-${who}-${n}: ${JSON.stringify(made.content)}`)
        else kept.push(`caddy-${who}-${n}`)
      } catch (err) {
        const status = (err as { data?: { status?: unknown } }).data?.status
        if (typeof status === 'number') writeStatuses.push(status)
        else failures.push(`v2: ${(err as Error).message}`)
      }
    }
  })
  await until(() => started.every((s) => answered(s, METADATA).total > 0), 10_000, 'both processes to serve GETs through Caddy')

  const stopping = started[0]!
  const writesBefore = kept.length
  stopping.child.kill('SIGTERM')
  t.strictSame(await stopping.exited, { code: 0, signal: null }, 'the process stopped cleanly')
  t.equal(answered(stopping, METADATA).refused, 0, 'the stopping process refused no GET: none reached it after its stop began')
  const again = await startServe(env(ports[0]!))
  started.push(again)
  const readyAt = Date.now()
  await until(() => answered(again, METADATA).total > 0, HEALTH_INTERVAL_MS + 3000, 'Caddy to send traffic to the restarted process')
  t.pass(`Caddy sent traffic to the restarted process ${Date.now() - readyAt} ms after it listened`)
  t.ok(kept.length > writesBefore, `writes went on meanwhile (${kept.length - writesBefore})`)

  running = false
  await Promise.all([...getters, ...writers])
  t.strictSame(failures, [], 'no GET failed, and no write failed otherwise than with an HTTP status')
  t.strictSame([...new Set(writeStatuses)].filter((s) => s !== 502), [], 'a write that failed got Caddy\'s 502, never the server\'s 503')
  t.comment(`${writeStatuses.length} write(s) answered ${[...new Set(writeStatuses)].join(', ') || 'nothing but success'}`)
  t.strictSame([...statuses.keys()], [200], `every GET answered 200 (${statuses.get(200)} of them)`)
  const names = new Set((await db.query<{ name: string }>('select name from apps')).rows.map((r) => r.name))
  t.strictSame(kept.filter((name) => !names.has(name)), [], 'every acknowledged write is in the database')
})

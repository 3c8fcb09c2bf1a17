// test-backends: own (three processes on PostgreSQL and Redis, each stopped and started again behind nginx)
/**
 * A rolling restart behind docs/deploy/nginx.conf, under continuous load from clients nobody here wrote: three server
 * processes on one PostgreSQL database coordinated through Redis, nginx round-robin in front (the recipe itself, only
 * its ports and TLS lines swapped), and official SDK clients writing all along: SDK v1 on 2025 sessions (a write, and a
 * confirmed deletion per turn, the confirmation answered through whichever process nginx picks) and SDK v2 on
 * 2026-07-28 (the same, confirmed by input_required rounds). Each process in turn gets SIGTERM, exits 0, is started
 * again on the same port, and gets traffic again; then the next.
 *
 * What the clients see: nothing at all. No call fails, no tool result is an error, no SDK reports an error (its GET
 * stream, ended by the stopping process, reopens on another one). What the stopping process refused (503, nothing ran)
 * or never received (its listener closed) nginx sent to another process, a POST included (the recipe's
 * proxy_next_upstream and its @service_mcp_retry location); what it had in flight ended normally within its settle
 * period. Every acknowledged write is in the database, and nginx sends traffic to each restarted process again within
 * its fail_timeout (1 s in the recipe).
 */
import { Client as V2Client, StreamableHTTPClientTransport as V2Transport } from '@modelcontextprotocol/client'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { CallToolResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import t from 'tap'
import { request } from 'undici'
import { postgresClient } from '../helpers/backends.js'
import { startServe, type Served } from '../helpers/cli.js'
import { findBinary, PUBLIC_BASE, startNginx } from '../helpers/proxy.js'
import { answered, deploymentEnv, distinctPorts } from '../helpers/processes.js'
import { OWNER_KEY } from '../helpers/server.js'
import { until } from '../helpers/stream.js'

/**
 * The bound of each stop's settle phase. A stop ends its settle phase as soon as its requests in flight have ended and
 * nginx has let go of its connections; this only bounds it.
 */
const SETTLE_MS = 5000
/** The recipe's fail_timeout: nginx tries a process it left out again after this long. */
const FAIL_TIMEOUT_MS = 1000

interface Process {
  port: number
  served: Served
}

function toolData(result: { content?: unknown }): any {
  const content = result.content as Array<{ type: string; text: string }>
  return JSON.parse(content[0]!.text)
}

t.test('a rolling restart of three processes behind nginx: the clients see nothing of it', async (t) => {
  const nginx = findBinary('nginx')
  if (!nginx) throw new Error('nginx is missing: .ci/run installs it (Debian package nginx)')
  const ports = await distinctPorts(3)
  const { database, env } = await deploymentEnv(t, {
    // Every process behind the balancer has its public address (docs/several-processes.md); a loopback default
    // would make each refuse the proxy's Host as a DNS-rebinding attempt (docs/decisions/http-errors.md).
    SERVICE_BASE_URL: PUBLIC_BASE, SERVICE_STOP_SETTLE_MS: String(SETTLE_MS), SERVICE_ACCESS_LOG: 'true' })
  const processes: Process[] = await Promise.all(ports.map(async (port) => ({ port, served: await startServe(env(port)) })))
  const everyServed: Served[] = processes.map((p) => p.served)
  t.teardown(() => {
    for (const s of everyServed) s.child.kill('SIGKILL')
  })
  const proxy = await startNginx(t, nginx, ports)
  const mcpUrl = `${proxy.url}/mcp`
  const db = await postgresClient(t, database)

  // What the clients saw go wrong, and what they were told was done.
  const failures: string[] = []
  const kept: string[] = []
  const deleted: string[] = []
  let running = true
  let turns = 0
  // A failed check ends the test with the clients still going: they stop with it.
  t.teardown(() => {
    running = false
  })

  /** One turn of a client: a write kept, and a write undone by a confirmed deletion. */
  async function turn(who: string, n: number, call: (name: string, args: Record<string, unknown>) => Promise<{ isError?: boolean; content?: unknown }>) {
    const keep = `${who}-keep-${n}`
    const made = await call('service_apps_create', { name: keep })
    if (made.isError) return void failures.push(`${who}: create ${keep}: ${JSON.stringify(made.content)}`)
    kept.push(keep)
    const temporary = `${who}-gone-${n}`
    const madeToo = await call('service_apps_create', { name: temporary })
    if (madeToo.isError) return void failures.push(`${who}: create ${temporary}: ${JSON.stringify(madeToo.content)}`)
    const gone = await call('service_apps_delete', { app_id: toolData(madeToo).app.id })
    if (gone.isError) return void failures.push(`${who}: delete ${temporary}: ${JSON.stringify(gone.content)}`)
    deleted.push(temporary)
    turns++
  }

  async function loop(who: string, call: Parameters<typeof turn>[2]) {
    for (let n = 0; running; n++) {
      try {
        await turn(who, n, call)
      } catch (err) {
        failures.push(`${who}: ${(err as Error).message}`)
      }
    }
  }

  // SDK v1, 2025 sessions: any process serves any request of a session; the confirmation is answered by a new POST.
  const v1Clients = await Promise.all(['v1a', 'v1b'].map(async (who) => {
    const client = new Client({ name: `rolling-${who}`, version: '1.0.0' }, { capabilities: { elicitation: {} } })
    client.setRequestHandler(ElicitRequestSchema, () => ({ action: 'accept', content: { confirm: true } }))
    client.onerror = (err) => void failures.push(`${who} transport: ${err.message}`)
    const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), {
      requestInit: { headers: { Authorization: `Bearer ${OWNER_KEY}` } },
      // Its GET stream ends when the process holding it stops: reopened at once (through nginx, on another process).
      reconnectionOptions: { initialReconnectionDelay: 20, maxReconnectionDelay: 200, reconnectionDelayGrowFactor: 1.5, maxRetries: 5 },
    })
    await client.connect(transport)
    t.teardown(() => client.close())
    return { who, client }
  }))
  // SDK v2 on 2026-07-28: confirmations by input_required rounds, answered by the SDK through its handler.
  const v2 = new V2Client({ name: 'rolling-v2', version: '2.0.0' }, { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } } } as any)
  v2.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { confirm: true } }))
  v2.onerror = (err) => void failures.push(`v2 transport: ${err.message}`)
  await v2.connect(new V2Transport(new URL(mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${OWNER_KEY}` } } }))
  t.teardown(() => v2.close())
  t.equal(v2.getProtocolEra(), 'modern', 'SDK v2 speaks 2026-07-28')

  const loops = [
    ...v1Clients.map(({ who, client }) => loop(who, (name, args) => client.callTool({ name, arguments: args }, CallToolResultSchema) as Promise<{ isError?: boolean; content?: unknown }>)),
    loop('v2', (name, args) => v2.callTool({ name, arguments: args }) as Promise<{ isError?: boolean; content?: unknown }>),
  ]
  await until(() => turns >= 3, 10_000, 'the clients to get going')

  for (const [index, p] of processes.entries()) {
    const turnsBefore = turns
    const stoppedAt = Date.now()
    p.served.child.kill('SIGTERM')
    const exit = await p.served.exited
    const startedAt = Date.now()
    t.strictSame(exit, { code: 0, signal: null }, `process ${index + 1} stopped cleanly${exit.code ? `\n${p.served.stderr()}` : ''}`)
    const { refused } = answered(p.served, '/mcp')
    t.comment(`process ${index + 1}: stopped in ${startedAt - stoppedAt} ms; ${refused} request(s) refused with 503 meanwhile, each sent elsewhere by nginx`)

    p.served = await startServe(env(p.port))
    t.comment(`process ${index + 1}: started again in ${Date.now() - startedAt} ms`)
    everyServed.push(p.served)
    const ready = await request(`http://127.0.0.1:${p.port}/readyz`)
    t.equal(ready.statusCode, 200, `process ${index + 1} is ready again on port ${p.port}`)
    await ready.body.text()
    const readyAt = Date.now()
    // nginx left the process out when its connection was refused; it tries it again after fail_timeout.
    await until(() => answered(p.served, '/mcp').total > 0, FAIL_TIMEOUT_MS + 3000, `nginx to send traffic to restarted process ${index + 1}`)
    t.pass(`nginx sent traffic to process ${index + 1} again ${Date.now() - readyAt} ms after it was ready`)
    t.ok(turns > turnsBefore, `the clients went on while process ${index + 1} restarted (${turns - turnsBefore} turns)`)
  }

  running = false
  await Promise.all(loops)
  t.strictSame(failures, [], 'no client saw an error: no failed call, no error result, no transport error')
  t.ok(kept.length >= 6, `writes acknowledged all along (${kept.length} kept, ${deleted.length} confirmed deletions)`)

  const names = new Set((await db.query<{ name: string }>('select name from apps')).rows.map((r) => r.name))
  t.strictSame(kept.filter((name) => !names.has(name)), [], 'every acknowledged write is in the database')
  t.strictSame(deleted.filter((name) => names.has(name)), [], 'every acknowledged deletion is done')
  t.equal((await db.query('select count(*)::int as n from processes')).rows[0].n, 3, 'three processes registered: the restarted ones')
})

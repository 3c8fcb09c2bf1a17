// test-backends: own (three processes on PostgreSQL and Redis)
/**
 * Three server processes on one PostgreSQL database, coordinated through Redis, behind nginx round-robin from the
 * recipe in docs/deploy/nginx.conf (no sticky sessions), with real clients nobody here wrote: the official SDK v1 client
 * on a 2025 session (confirmations answered on another process than the one waiting, a deployment's stream, a
 * cancellation routed to the process running the call) and the SDK v2 client on the stateless revision. One process is
 * killed (SIGKILL) in the middle of a deployment: no acknowledged write is lost, its deployment is recovered by the
 * others as interrupted once its lease lapses, the SDK v1 client's resumption of the call's stream is replayed by a
 * survivor, which answers the call once the lease lapsed, and the clients are served by the rest.
 */
import { Client as V2Client, StreamableHTTPClientTransport as V2Transport } from '@modelcontextprotocol/client'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { CallToolResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import t from 'tap'
import { postgresClient } from '../helpers/backends.js'
import { startServe, type Served } from '../helpers/cli.js'
import { EXAMPLE } from '../helpers/modern-runs.js'
import { deploymentEnv, distinctPorts } from '../helpers/processes.js'
import { findBinary, PUBLIC_BASE, startNginx } from '../helpers/proxy.js'
import { OWNER_KEY } from '../helpers/server.js'
import { sleep, until } from '../helpers/stream.js'

const LEASE_MS = 1500
/** Long enough to be killed in the middle of: a line every 200 ms for 30 s. */
const SLOW = "let i = 0; const t = setInterval(() => { console.log('step ' + ++i); if (i === 150) { clearInterval(t) } }, 200)"

interface Process {
  port: number
  served: Served
}

/** The JSON log lines a process wrote so far. */
function logLines(p: Process): Array<Record<string, unknown>> {
  return p.served.stdout().split('\n').filter((l) => l.startsWith('{')).flatMap((l) => {
    try {
      return [JSON.parse(l) as Record<string, unknown>]
    } catch {
      return []
    }
  })
}

const said = (processes: Process[], msg: string) => processes.flatMap(logLines).filter((l) => l.msg === msg)

function toolData(result: { content?: unknown; isError?: boolean }): any {
  const content = result.content as Array<{ type: string; text: string }>
  return JSON.parse(content[0]!.text)
}

t.test('three processes behind nginx round-robin, real clients, one process killed mid-run', async (t) => {
  const nginx = findBinary('nginx')
  if (!nginx) throw new Error('nginx is missing: .ci/run installs it (Debian package nginx)')
  const ports = await distinctPorts(3)
  const { database, env } = await deploymentEnv(t, {
    // Every process behind the balancer has its public address (docs/several-processes.md); a loopback default
    // would make each refuse the proxy's Host as a DNS-rebinding attempt (docs/decisions/http-errors.md).
    SERVICE_BASE_URL: PUBLIC_BASE,
    SERVICE_LEASE_MS: String(LEASE_MS),
    SERVICE_LOG_LEVEL: 'debug',
    SERVICE_HEARTBEAT_MS: '1000',
    SERVICE_PIPELINE_GRACE_MS: '300',
    SERVICE_PIPELINES: JSON.stringify({ default: { argv: [process.execPath, EXAMPLE] }, slow: { argv: [process.execPath, '-e', SLOW] } }),
  })
  // Started together: they migrate and bootstrap the fresh database once between them.
  const processes: Process[] = await Promise.all(ports.map(async (port) => ({ port, served: await startServe(env(port)) })))
  t.teardown(() => {
    for (const p of processes) p.served.child.kill('SIGKILL')
  })
  const proxy = await startNginx(t, nginx, ports)
  const mcpUrl = `${proxy.url}/mcp`
  const db = await postgresClient(t, database)
  t.equal((await db.query('select count(*)::int as n from processes')).rows[0].n, 3, 'three processes registered')

  // ---- SDK v1, a 2025 session: every request of it goes wherever nginx sends it.
  const v1 = new Client({ name: 'cluster-v1', version: '1.0.0' }, { capabilities: { elicitation: {} } })
  const asked: string[] = []
  v1.setRequestHandler(ElicitRequestSchema, (request) => {
    asked.push(String(request.params.message))
    return { action: 'accept', content: { confirm: true } }
  })
  const v1Transport = new StreamableHTTPClientTransport(new URL(mcpUrl), {
    requestInit: { headers: { Authorization: `Bearer ${OWNER_KEY}` } },
    reconnectionOptions: { maxReconnectionDelay: 200, initialReconnectionDelay: 50, reconnectionDelayGrowFactor: 1, maxRetries: 5 },
  })
  await v1.connect(v1Transport)
  t.teardown(() => v1.close())

  // Confirmations: the call waits on one process, the SDK's answer is a new POST that nginx sends to the next one.
  for (let i = 0; i < 3; i++) {
    const created = await v1.callTool({ name: 'service_apps_create', arguments: { name: `doomed-${i}` } }, CallToolResultSchema)
    const app = toolData(created as any).app as { id: string }
    const deleted = await v1.callTool({ name: 'service_apps_delete', arguments: { app_id: app.id } }, CallToolResultSchema)
    t.equal(deleted.isError, false, `confirmed deletion ${i} ran`)
  }
  t.equal(asked.length, 3, 'each deletion asked the user once')
  t.ok(said(processes, 'answer forwarded to the process that asked').length >= 1, 'answers reached the waiting process from another one')
  t.equal((await db.query("select count(*)::int as n from apps where name like 'doomed-%'")).rows[0].n, 0, 'the apps are gone')

  // Deployments on the session: confirmed, streamed, then cancelled by the client (notifications/cancelled), which nginx
  // sends to any process: the one running the call stops the run. Until a cancellation has landed on another process
  // than the one running the call (nginx's round-robin makes that the usual case).
  const relayedCancels = () => said(processes, 'session news told to the other processes').filter((l) => l.news === 'cancel').length
  for (let attempt = 0; attempt < 4 && relayedCancels() === 0; attempt++) {
    const created = await v1.callTool({ name: 'service_apps_create', arguments: { name: `deployed-${attempt}`, pipeline: 'slow' } }, CallToolResultSchema)
    const deployed = toolData(created as any).app as { id: string }
    const abort = new AbortController()
    const progress: string[] = []
    const deploying = v1.callTool({ name: 'service_deployments_create', arguments: { app_id: deployed.id } }, CallToolResultSchema, {
      signal: abort.signal,
      onprogress: (p) => void progress.push(String(p.message)),
      resetTimeoutOnProgress: true,
    }).catch((err: unknown) => err)
    await until(() => progress.length >= 2, 10_000, 'two lines of the deployment')
    abort.abort('the user pressed stop')
    await deploying
    const cancelled = await until(async () => {
      const rows = (await db.query<{ status: string }>('select status from deployments where app_id = $1', [deployed.id])).rows
      return rows[0]?.status === 'cancelled' ? rows[0] : undefined
    }, 10_000, 'the deployment to end cancelled')
    t.equal(cancelled.status, 'cancelled', `deployment ${attempt}: the run stopped where it ran`)
  }
  t.ok(relayedCancels() >= 1, 'a cancellation reached the process running the call from another one')

  // ---- SDK v2 on the stateless revision, writing while a process dies.
  const v2 = new V2Client({ name: 'cluster-v2', version: '2.0.0' }, { capabilities: {}, versionNegotiation: { mode: 'pinned', protocolVersion: '2026-07-28' } } as any)
  await v2.connect(new V2Transport(new URL(mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${OWNER_KEY}` } } }))
  t.teardown(() => v2.close())
  t.equal(v2.getProtocolEra(), 'modern')

  // A deployment that runs long, started through raw SQL-free means: a v2 call that is confirmed by input_required rounds
  // is the modern path; here the run is started on the v1 session and left running.
  const longApp = toolData(await v1.callTool({ name: 'service_apps_create', arguments: { name: 'interrupted', pipeline: 'slow' } }, CallToolResultSchema) as any).app as { id: string }
  const running = v1.callTool({ name: 'service_deployments_create', arguments: { app_id: longApp.id } }, CallToolResultSchema, { timeout: 60_000 }).catch((err: unknown) => err)
  const run = await until(async () => (await db.query<{ id: string; owner: string | null; status: string }>("select id, owner, status from deployments where app_id = $1 and status = 'running'", [longApp.id])).rows[0], 10_000, 'the long deployment to run')
  t.ok(run.owner, 'the running deployment names its process')
  const ownerRow = (await db.query<{ pid: number }>('select pid from processes where id = $1', [run.owner])).rows[0]
  const victim = processes.find((p) => p.served.child.pid === ownerRow?.pid)
  t.ok(victim, 'the owner is one of the three')

  const acknowledged: string[] = []
  let writing = true
  const writer = (async () => {
    for (let n = 0; writing; n++) {
      const name = `w-${n}`
      try {
        const result = await v2.callTool({ name: 'service_apps_create', arguments: { name } })
        if (!result.isError) acknowledged.push(name)
      } catch {
        // not acknowledged: the client saw a failure, so it may retry; nothing is promised
      }
    }
  })()
  await sleep(300)
  victim!.served.child.kill('SIGKILL')
  const exited = await victim!.served.exited
  t.equal(exited.signal, 'SIGKILL', 'one process killed in the middle of the run')
  await sleep(1000)
  writing = false
  await writer
  t.ok(acknowledged.length > 5, `writes went on through the other processes (${acknowledged.length} acknowledged)`)
  const stored = new Set((await db.query<{ name: string }>("select name from apps where name like 'w-%'")).rows.map((r) => r.name))
  t.strictSame(acknowledged.filter((name) => !stored.has(name)), [], 'no acknowledged write is lost')

  const recovered = await until(async () => {
    const row = (await db.query<{ status: string; outcome: string }>('select status, outcome from deployments where id = $1', [run.id])).rows[0]
    return row?.status === 'interrupted' ? row : undefined
  }, LEASE_MS * 4 + 5000, 'the dead process\'s deployment to be recovered')
  t.equal(recovered.status, 'interrupted', 'the others recovered the dead process\'s deployment once its lease lapsed')
  // The call's stream died with its process; the SDK resumed it with Last-Event-ID, nginx sent that GET to a survivor,
  // which replayed the stream from Redis and, once the owner's lease lapsed, answered the call with an error.
  const ended = await Promise.race([running, sleep(LEASE_MS * 4 + 5000).then(() => 'still waiting')])
  t.match(String(ended), /stopped before it finished/, 'the client hears that its call\'s process stopped, long before its own timeout')
  t.ok(said(processes.filter((p) => p !== victim), 'call stream resumed from Redis: its call runs on another process').length >= 1, 'a survivor replayed the dead process\'s call stream')

  // The survivors serve both clients.
  const after = await v2.callTool({ name: 'service_apps_list', arguments: {} })
  t.equal(after.isError, false, 'SDK v2 served after the kill')
  const v1After = await v1.callTool({ name: 'service_apps_list', arguments: {} }, CallToolResultSchema)
  t.equal(v1After.isError, false, 'the SDK v1 session goes on after the kill')
  t.equal((await db.query('select count(*)::int as n from processes')).rows[0].n, 2, 'the dead process left the registry')
})

import t from 'tap'
import { Client, request } from 'undici'
import { isPostgresUrl } from '../../src/lib/database-url.js'
import { postgresClient } from '../helpers/backends.js'
import { ELICITING, LOG_LEVEL_KEY, modernLive } from '../helpers/modern.js'
import { answered, ask, ENV_KEY, PIPELINES, seedApp } from '../helpers/modern-runs.js'
import { startServer } from '../helpers/server.js'
import { until } from '../helpers/stream.js'

/**
 * GET /healthz and GET /readyz over real sockets: while running, while the database does not answer, and while the
 * server stops (its drain phase kept busy by a deployment whose pipeline ignores SIGTERM until the grace period ends).
 */

const DATE = /^\d{4}-\d{2}-\d{2}$/
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** A SQLite file database has a free-space check too (SERVICE_DISK_MIN_FREE_MB); this machine has the room. */
function diskCheck(dbPath: string): { disk?: 'ok' } {
  return isPostgresUrl(dbPath) ? {} : { disk: 'ok' }
}

async function getJson(client: Client | string, path: string, headers: Record<string, string> = {}) {
  const res = typeof client === 'string'
    ? await request(`${client}${path}`, { headers })
    : await client.request({ method: 'GET', path, headers })
  const text = await res.body.text()
  return { status: res.statusCode, headers: res.headers, json: text ? JSON.parse(text) : undefined }
}

t.test('running: /healthz and /readyz answer 200 without credentials, with the usual headers, and are never rate-limited', async (t) => {
  // The tightest limits the settings allow: any limiter on these routes would refuse the second request.
  const server = await startServer(t, { config: { rateLimitApiKeyMember: 1, rateLimitOAuthMember: 1, rateLimitOrganization: 1, authorizeRateLimit: 1 } })
  const live = await getJson(server.url, '/healthz')
  t.equal(live.status, 200)
  t.strictSame(live.json, { status: 'ok' })
  t.match(live.headers['x-service-mcp-version'], DATE)
  t.match(live.headers['x-request-id'], UUID)
  t.equal(live.headers['cache-control'], 'no-store')
  t.match(live.headers['content-type'], /^application\/json/)

  const ready = await getJson(server.url, '/readyz')
  t.equal(ready.status, 200)
  t.strictSame(ready.json, { status: 'ok', checks: { database: 'ok', ...diskCheck(server.dbPath), shutdown: 'ok' } })
  t.match(ready.headers['x-service-mcp-version'], DATE)
  t.match(ready.headers['x-request-id'], UUID)

  const statuses = await Promise.all(Array.from({ length: 40 }, (_, i) => getJson(server.url, i % 2 ? '/readyz' : '/healthz').then((r) => r.status)))
  t.strictSame([...new Set(statuses)], [200], '40 checks in a row, all answered 200')
  // A credential is neither needed nor looked at: even a bad one changes nothing.
  t.equal((await getJson(server.url, '/readyz', { authorization: 'Bearer nonsense' })).status, 200)
})

t.test('the database does not answer: /readyz 503 naming the check, /healthz still 200', async (t) => {
  const server = await startServer(t)
  t.equal((await getJson(server.url, '/readyz')).status, 200, 'ready before')
  if (isPostgresUrl(server.dbPath)) {
    // The server's connections, ended under it, and no new one let in: every query now fails, the readiness ping included.
    const admin = await postgresClient(t, server.dbPath)
    const name = new URL(server.dbPath).pathname.slice(1)
    await admin.query(`ALTER DATABASE ${name} CONNECTION LIMIT 0`)
    await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [name])
  } else {
    // The server's own connection, closed under it: every query through it now fails, the readiness ping included.
    server.app.database!.sqlite.close()
  }
  const ready = await getJson(server.url, '/readyz')
  t.equal(ready.status, 503)
  t.strictSame(ready.json, { status: 'unavailable', checks: { database: 'fail', ...diskCheck(server.dbPath), shutdown: 'ok' } })
  t.match(ready.headers['x-request-id'], UUID)
  t.match(ready.headers['x-service-mcp-version'], DATE)
  const live = await getJson(server.url, '/healthz')
  t.equal(live.status, 200, 'the process still serves: liveness is not readiness')
  t.strictSame(live.json, { status: 'ok' })
})

t.test('while the server stops: new connections refused; on open ones /readyz 503 (shutdown), /healthz 200, other routes 503', async (t) => {
  // The drain must outlast every check below on a loaded machine: with 1.5 s it ended mid-checks in CI (the listener
  // closed, ECONNREFUSED). Once they are done, the test kills the pipeline itself to end the drain.
  const GRACE_MS = 15_000
  // A pipeline that ignores SIGTERM: the drain phase would wait the whole grace period before it is killed.
  const stubborn = { argv: [process.execPath, '-e', "process.on('SIGTERM', () => {}); console.log('started pid=' + process.pid); setInterval(() => {}, 1000)"] }
  const server = await startServer(t, { config: { envKey: ENV_KEY, pipelines: { ...PIPELINES, stubborn }, pipelineGraceMs: GRACE_MS, heartbeatMs: 60_000 } })
  const app = await seedApp(server, 'web', {}, { pipeline: 'stubborn' })
  const { requestState } = await ask(t, server, server.apiKey, 'service_deployments_create', { app_id: app.id })
  const deploying = await modernLive(server.mcpUrl, server.apiKey, 'tools/call', { name: 'service_deployments_create', arguments: { app_id: app.id }, ...answered(requestState) }, { capabilities: ELICITING, id: 'deploy', meta: { [LOG_LEVEL_KEY]: 'info' } })
  t.teardown(() => deploying.close())
  // Its answer streams the pipeline's lines (logLevel info), so the call is open while the pipeline runs. Its first line
  // comes after its SIGTERM handler is set: a stop before that would kill it at once and end the drain early (CI did).
  const pid = Number(/started pid=(\d+)/.exec(await deploying.waitFor((text) => /started pid=\d+/.test(text), 10_000, "the pipeline's first line"))![1])
  t.equal(server.app.pipelines.running, 1, 'the deployment runs')

  // Keep-alive connections opened before the stop, one for each request after it: each answer then closes its own.
  const clients = Array.from({ length: 4 }, () => new Client(server.url, { pipelining: 1 }))
  t.teardown(() => Promise.all(clients.map((c) => c.destroy())))
  for (const client of clients) t.equal((await getJson(client, '/readyz')).status, 200, 'ready before the stop')
  const [forReady, forLive, forMcp, forOther] = clients as [Client, Client, Client, Client]

  const stopped = server.close()
  // From the first moment of the stop the listener is closed, so a proxy in front hears of it by the next connection it
  // opens: a refusal, which it sends to another process whatever the method (nothing was sent).
  await until(() => server.app.stopping, 5000, 'the stop to begin')
  const fresh = new Client(server.url)
  t.teardown(() => fresh.destroy())
  await t.rejects(getJson(fresh, '/healthz'), { code: 'ECONNREFUSED' }, 'a new connection is refused from the first moment')
  const refused = await getJson(forReady, '/readyz')
  t.equal(refused.status, 503, '/readyz answers 503 on a connection opened before the stop')
  t.strictSame(refused.json, { status: 'unavailable', checks: { database: 'ok', ...diskCheck(server.dbPath), shutdown: 'fail' } })
  t.match(refused.headers['x-request-id'], UUID)
  t.match(refused.headers['x-service-mcp-version'], DATE)
  t.equal(refused.headers.connection, 'close', 'and the client is told to close the connection')

  const live = await getJson(forLive, '/healthz')
  t.equal(live.status, 200, 'liveness: the process still serves')
  t.strictSame(live.json, { status: 'ok' })
  const mcp = await forMcp.request({ method: 'POST', path: '/mcp', headers: { authorization: `Bearer ${server.apiKey}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{}' })
  const body = JSON.parse(await mcp.body.text())
  t.equal(mcp.statusCode, 503, '/mcp is refused')
  t.equal(body.error.code, 'SERVICE_UNAVAILABLE')
  t.equal(body.error.message, 'The server is shutting down')
  t.equal(mcp.headers['retry-after'], String(Math.ceil(GRACE_MS / 1000)))
  t.match(mcp.headers['x-request-id'], UUID)
  t.match(mcp.headers['x-service-mcp-version'], DATE)
  const other = await getJson(forOther, '/.well-known/oauth-protected-resource/mcp')
  t.equal(other.status, 503, 'and so is every other route')
  t.equal(server.app.pipelines.running, 1, 'all of this during the drain')

  process.kill(pid, 'SIGKILL')
  await stopped
  await t.rejects(getJson(server.url, '/healthz'), { code: 'ECONNREFUSED' }, 'once stopped, nothing listens')
})

// test-backends: own (processes on PostgreSQL and Redis)
import t from 'tap'
import { loadConfig } from '../../src/config.js'
import { postgresClient, postgresDatabase, redisKeys, redisPrefix, redisUrl } from '../helpers/backends.js'
import { cli } from '../helpers/cli.js'
import { callTool, openSession, post } from '../helpers/mcp.js'
import { createMember } from '../helpers/seed.js'
import { startServer } from '../helpers/server.js'
import { join } from 'node:path'
import { ROOT } from '../helpers/root.js'

/**
 * Several processes on one PostgreSQL database, coordinated through Redis (SERVICE_REDIS_URL): each registers in the
 * `processes` table with a lease, they share the database's advisory lock where a process alone holds it exclusively,
 * and they reach each other over the bus. The processes are servers in this test process, which is what the
 * coordination sees of them: their own connections, ids and leases.
 */

const ENV_KEY = Buffer.alloc(32, 0x2b).toString('base64')

async function sharedServers(t: { teardown(fn: () => unknown): void }, count: number, extra: Record<string, unknown> = {}) {
  const url = await postgresDatabase(t)
  const prefix = redisPrefix(t)
  const config = { envKey: ENV_KEY, redisUrl: redisUrl(), redisPrefix: prefix, ...extra }
  const servers = []
  for (let i = 0; i < count; i++) servers.push(await startServer(t, { dbPath: url, config }))
  return { url, prefix, config, servers }
}

t.test('processes sharing a database register with leases, and a lone server is refused beside them', async (t) => {
  const { url, config, servers: [a, b] } = await sharedServers(t, 2)
  t.ok(a!.app.coordination.shared && b!.app.coordination.shared, 'both coordinate through Redis')
  t.not(a!.app.processes.id, b!.app.processes.id, 'each process has its own id')
  const db = await postgresClient(t, url)
  const rows = (await db.query<{ id: string; lease_until: string }>('select id, lease_until from processes order by id')).rows
  t.strictSame(rows.map((r) => r.id).sort(), [a!.app.processes.id, b!.app.processes.id].sort(), 'both are registered')
  t.ok(rows.every((r) => Number(r.lease_until) > Date.now()), 'with a lease running')
  t.strictSame((await a!.app.processes.liveIds()).sort(), rows.map((r) => r.id).sort(), 'each sees the other alive')

  // A server without Redis would take the others for dead: it is refused while they run, and says why.
  await t.rejects(startServer(t, { dbPath: url, config: { envKey: ENV_KEY } }), /in use by another server .*SERVICE_REDIS_URL/)

  // A process that stops removes its entry; the other is unaffected.
  await b!.close()
  t.strictSame(await a!.app.processes.liveIds(), [a!.app.processes.id], 'a stopped process leaves the registry')
  t.ok(config.redisUrl, 'shared')
})

t.test('a coordinated server is refused beside a server that holds the database alone', async (t) => {
  const url = await postgresDatabase(t)
  await startServer(t, { dbPath: url, config: { envKey: ENV_KEY } })
  await t.rejects(startServer(t, { dbPath: url, config: { envKey: ENV_KEY, redisUrl: redisUrl(), redisPrefix: redisPrefix(t) } }),
    /in use by another server .*serves the database alone/)
})

t.test('a process whose lease lapsed is recovered by another, once, and leaves the registry', async (t) => {
  const { url, servers: [a, b] } = await sharedServers(t, 2, { leaseMs: 60_000 })
  const db = await postgresClient(t, url)
  await db.query('insert into processes (id, host, pid, started_at, lease_until) values ($1, $2, $3, $4, $5)', ['proc_dead', 'elsewhere', 1, 1, Date.now() - 1])
  const recovered: string[][] = []
  a!.app.processes.onDead(async (ids) => { recovered.push(ids) })
  b!.app.processes.onDead(async (ids) => { recovered.push(ids) })
  const [fromA, fromB] = await Promise.all([a!.app.processes.recoverLapsed(), b!.app.processes.recoverLapsed()])
  t.ok(fromA.includes('proc_dead') || fromB.includes('proc_dead'), 'the dead process is found')
  t.ok(recovered.length >= 1 && recovered.every((ids) => ids.length === 1 && ids[0] === 'proc_dead'), 'its work is recovered, nobody else\'s')
  t.equal((await db.query('select 1 from processes where id = $1', ['proc_dead'])).rowCount, 0, 'its entry is removed')
  t.equal((await a!.app.processes.recoverLapsed()).length, 0, 'nothing left to recover')
})

t.test('a process whose entry was removed (its lease lapsed) registers again at its next renewal', async (t) => {
  const { url, servers: [a] } = await sharedServers(t, 1, { leaseMs: 60_000 })
  const db = await postgresClient(t, url)
  await db.query('delete from processes')
  await a!.app.processes.tick()
  t.strictSame(await a!.app.processes.liveIds(), [a!.app.processes.id])
})

t.test('the bus carries a message from one process to every process', async (t) => {
  const { prefix, servers: [a, b] } = await sharedServers(t, 2)
  const heard: Array<[string, unknown]> = []
  const both = new Promise<void>((resolve) => {
    for (const [name, server] of [['a', a!], ['b', b!]] as const) {
      void server.app.coordination.bus.subscribe('test', (message) => {
        heard.push([name, message])
        if (heard.length === 2) resolve()
      })
    }
  })
  // Subscriptions are acknowledged before subscribe resolves; give both a turn.
  await new Promise((resolve) => setTimeout(resolve, 50))
  await a!.app.coordination.bus.publish('test', { hello: 'world' })
  await both
  t.strictSame(heard.map(([name]) => name).sort(), ['a', 'b'])
  t.ok(heard.every(([, m]) => (m as { hello: string }).hello === 'world'))
  t.strictSame(await redisKeys(prefix), [], 'publish/subscribe leaves no key behind')
})

t.test('SERVICE_REDIS_URL is checked at start', async (t) => {
  t.throws(() => loadConfig({ env: { SERVICE_REDIS_URL: 'redis://127.0.0.1:1', SERVICE_DATABASE: '/tmp/x.db' }, argv: [] }), /must then be PostgreSQL/)
  t.throws(() => loadConfig({ env: { SERVICE_REDIS_URL: 'http://x', SERVICE_DATABASE: 'postgres://u@h/d', SERVICE_ENV_KEY: ENV_KEY }, argv: [] }), /redis:\/\/ or rediss:\/\//)
  const url = await postgresDatabase(t)
  await t.rejects(startServer(t, { dbPath: url, config: { envKey: ENV_KEY, redisUrl: 'redis://127.0.0.1:1', redisPrefix: 'x:' } }), /Redis redis:\/\/127\.0\.0\.1:1 \(SERVICE_REDIS_URL\) cannot be reached/)
})

t.test('a revocation made on one process counts on the very next request on another, CLI included', async (t) => {
  const { url, prefix, servers: [a, b] } = await sharedServers(t, 2)
  let id = 1
  const whoami = async (server: typeof b, headers: Record<string, string>) => (await post(server!.mcpUrl, callTool('service_whoami', {}, id++), headers)).status

  const first = await createMember(a!, { role: 'developer' })
  const onB = (await openSession(b!.mcpUrl, first.key)).headers
  t.equal(await whoami(b, onB), 200, 'the member is served by B')
  // A write nobody announces (straight SQL) is not seen: B serves the member from its cache. This is what the barrier
  // is for, and it shows that the refusal below comes from it.
  const db = await postgresClient(t, url)
  await db.query('update api_keys set revoked_at = $1 where id = $2', [Date.now(), first.keyId])
  t.equal(await whoami(b, onB), 200, 'B serves the key from its cache')
  await db.query('update api_keys set revoked_at = null where id = $1', [first.keyId])
  await a!.app.repos.apiKeys.revoke(first.keyId)
  t.equal(await whoami(b, onB), 401, 'revoked through A: refused by B on the very next request')

  // The command line joins the servers through Redis to change a credential; without it, it is refused beside them.
  const second = await createMember(a!, { role: 'developer' })
  const secondOnB = (await openSession(b!.mcpUrl, second.key)).headers
  t.equal(await whoami(b, secondOnB), 200)
  const env = { SERVICE_DATABASE: url }
  const refused = await cli(['keys', 'revoke', second.keyId], env)
  t.equal(refused.code, 2, 'the CLI without SERVICE_REDIS_URL is refused')
  t.match(refused.stderr, /coordinated through Redis, which cache credentials: a command that changes one needs SERVICE_REDIS_URL and SERVICE_REDIS_PREFIX/)
  t.equal(await whoami(b, secondOnB), 200, 'and changed nothing')
  // On another prefix (or another Redis) the servers would never hear of it: asked first, refused, nothing changed.
  const elsewhere = await cli(['keys', 'revoke', second.keyId], { ...env, SERVICE_REDIS_URL: redisUrl(), SERVICE_REDIS_PREFIX: `${prefix}other:`, SERVICE_LEASE_MS: '600' })
  t.equal(elsewhere.code, 2, 'the CLI on another SERVICE_REDIS_PREFIX is refused')
  t.match(elsewhere.stderr, /None of the 2 server processes .* answered through Redis .* \(SERVICE_REDIS_PREFIX\) .*nothing was changed/)
  t.equal(await whoami(b, secondOnB), 200, 'and changed nothing')
  const revoked = await cli(['keys', 'revoke', second.keyId], { ...env, SERVICE_REDIS_URL: redisUrl(), SERVICE_REDIS_PREFIX: prefix })
  t.equal(revoked.code, 0, revoked.stderr)
  t.equal(await whoami(b, secondOnB), 401, 'revoked by the CLI: refused by B on the very next request')

  // What changes no credential needs neither Redis nor the env key: lists, and a new key (read from the database by
  // whichever process sees it first).
  const listed = await cli(['keys', 'list'], env)
  t.equal(listed.code, 0, listed.stderr)
  t.match(listed.stdout, second.keyId, 'keys list without Redis or the env key')
  t.equal((await cli(['members', 'list'], env)).code, 0, 'members list too')
  const created = await cli(['keys', 'create', 'owner@example.com'], env)
  t.equal(created.code, 0, created.stderr)
  const fresh = created.stdout.trim()
  t.match(fresh, /^service_mcp_/)
  t.equal(await whoami(b, (await openSession(b!.mcpUrl, fresh)).headers), 200, 'a key created without Redis works on the servers')
})

t.test('processes started together on a fresh database migrate it once', async (t) => {
  const url = await postgresDatabase(t)
  const { openPostgres } = await import('../../src/db/postgres/client.js')
  const handles = await Promise.all([1, 2, 3, 4].map(() => openPostgres(url, { max: 2 })))
  t.teardown(() => Promise.all(handles.map((h) => h.close())))
  const db = await postgresClient(t, url)
  const applied = await db.query('select count(*)::int as n from drizzle.__drizzle_migrations')
  const { readdirSync } = await import('node:fs')
  const files = readdirSync(join(ROOT, 'drizzle', 'postgres')).filter((f) => f.endsWith('.sql'))
  t.equal(applied.rows[0].n, files.length, 'each migration recorded once')
})

t.test('replicas started together on a fresh database bootstrap it once', async (t) => {
  const url = await postgresDatabase(t)
  const { openRepos } = await import('../../src/db/open-repos.js')
  const { prepareBootstrap } = await import('../../src/bootstrap.js')
  const config = loadConfig({ env: { SERVICE_DATABASE: url, SERVICE_ENV_KEY: ENV_KEY, SERVICE_BOOTSTRAP_PASSWORD: 'correct horse battery staple' }, argv: [] })
  const opened = await Promise.all([1, 2, 3].map(() => openRepos(config)))
  t.teardown(() => Promise.all(opened.map((o) => o.close())))
  // Each found the database empty before any of them wrote: the race of replicas started together.
  const pending = await Promise.all(opened.map((o) => prepareBootstrap(o.repos, config)))
  t.ok(pending.every((p) => p !== null), 'all three found an empty database')
  const results = await Promise.all(pending.map((p) => p!.commit()))
  t.equal(results.filter((r) => r !== null).length, 1, 'one of them bootstrapped it; the others, nothing (no failure)')
  const db = await postgresClient(t, url)
  t.equal((await db.query('select count(*)::int as n from organizations')).rows[0].n, 1, 'one organization')
  t.equal((await db.query('select count(*)::int as n from users')).rows[0].n, 1, 'one owner')
})

// test-backends: own (PostgreSQL itself)
import t from 'tap'
import { request } from 'undici'
import { openRepos } from '../../src/db/open-repos.js'
import { coordinatedServers, lockPostgres, openPostgres } from '../../src/db/postgres/client.js'
import { appTools } from '../../src/plugins/tools/builtin/apps.js'
import { builtinTools } from '../../src/plugins/tools/builtin/index.js'
import type { ToolDefinition } from '../../src/plugins/tools/define.js'
import { postgresClient, postgresDatabase } from '../helpers/backends.js'
import { cli } from '../helpers/cli.js'
import { callTool, openSession, post } from '../helpers/mcp.js'
import { createMember } from '../helpers/seed.js'
import { OWNER_KEY, startServer } from '../helpers/server.js'
import { failureOf, okData, resultOf } from '../helpers/tools.js'

/**
 * SERVICE_DATABASE as a postgres:// URL: the server migrates a fresh database, bootstraps it, serves tools from it
 * through the same repositories as SQLite, keeps its data across a restart, and sees a credential revoked by the
 * command line on the very next request.
 */

/** PostgreSQL has no folder for a default env.key: the key is a setting. */
const ENV_KEY = Buffer.alloc(32, 0x2a).toString('base64')
const TOOLS = [...new Map<string, ToolDefinition<any, any>>([...builtinTools, ...appTools].map((d) => [d.name, d])).values()]
let nextId = 1

t.test('a server on PostgreSQL: tools, conflicts, revocation by another writer, restart', async (t) => {
  const url = await postgresDatabase(t)
  const server = await startServer(t, { dbPath: url, tools: TOOLS, config: { envKey: ENV_KEY } })
  t.equal(server.app.database, null, 'no SQLite connection')

  const ready = await request(`${server.url}/readyz`)
  t.equal(ready.statusCode, 200, '/readyz pings PostgreSQL')
  await ready.body.dump()

  const { headers } = await openSession(server.mcpUrl, OWNER_KEY)
  const call = async (name: string, args: Record<string, unknown>, h = headers) => resultOf(t, await post(server.mcpUrl, callTool(name, args, nextId++), h))
  const created = okData(t, await call('service_apps_create', { name: 'pg-one', description: 'stored in PostgreSQL' }))
  t.equal(created.app.name, 'pg-one')
  failureOf(t, await call('service_apps_create', { name: 'pg-one' }), 'CONFLICT')
  const listed = okData(t, await call('service_apps_list', {}))
  t.strictSame(listed.apps.map((a: { name: string }) => a.name), ['pg-one'], 'listed from PostgreSQL')

  const db = await postgresClient(t, url)
  const rows = await db.query('select name, description, created_at from apps')
  t.strictSame(rows.rows.map((r) => [r.name, r.description]), [['pg-one', 'stored in PostgreSQL']], 'the row is in the database')
  const organization = await server.app.repos.organizations.bySlug('default')
  const stored = await server.app.repos.apps.byId(organization!.id, created.app.id)
  t.type(stored?.createdAt, 'number', 'times read back as numbers (bigint columns)')

  // The server, alone on its database, caches credentials: a write nobody announces (straight SQL) is not seen. This
  // shows that the refusal below comes from the credential barrier, which the command line joins over the database
  // itself (LISTEN/NOTIFY): a key it revokes is refused on the very next request.
  const member = await createMember(server, { role: 'developer' })
  const memberHeaders = (await openSession(server.mcpUrl, member.key)).headers
  okData(t, await call('service_whoami', {}, memberHeaders))
  await db.query('update api_keys set revoked_at = $1 where id = $2', [Date.now(), member.keyId])
  t.equal((await post(server.mcpUrl, callTool('service_whoami', {}, nextId++), memberHeaders)).status, 200, 'served from the credential cache')
  await db.query('update api_keys set revoked_at = null where id = $1', [member.keyId])
  const env = { SERVICE_DATABASE: url, SERVICE_ENV_KEY: ENV_KEY }
  const revokedByCli = await cli(['keys', 'revoke', member.keyId], env)
  t.equal(revokedByCli.code, 0, revokedByCli.stderr)
  const refused = await post(server.mcpUrl, callTool('service_whoami', {}, nextId++), memberHeaders)
  t.equal(refused.status, 401, 'a key revoked by the CLI is refused on the very next request')
  t.equal(refused.json?.error?.code, 'TOKEN_REVOKED')

  // The command line on the same database, beside the running server.
  const migrated = await cli(['migrate'], env)
  t.equal(migrated.code, 0, migrated.stderr)
  const org = await cli(['orgs', 'create', 'from-cli'], env)
  t.equal(org.code, 0, org.stderr)
  t.ok(await server.app.repos.organizations.bySlug('from-cli'), 'the server reads what the CLI wrote')
  // The env key opens env var values: only the server and `env-key` need it.
  const keyless = await cli(['env-key', 'check'], { SERVICE_DATABASE: url })
  t.equal(keyless.code, 2, 'without SERVICE_ENV_KEY env-key check is refused')
  t.match(keyless.stderr, /set SERVICE_ENV_KEY/)
  const orgs = await cli(['orgs', 'list'], { SERVICE_DATABASE: url })
  t.equal(orgs.code, 0, `orgs list needs no env key${orgs.code ? `: ${orgs.stderr}` : ''}`)
  t.match(orgs.stdout, /from-cli/)
  const backup = await cli(['backup', '/tmp/never-written.db'], env)
  t.equal(backup.code, 2, 'backup refuses a PostgreSQL database')
  t.match(backup.stderr, /pg_dump/)

  // A second server on the same database is refused while the first runs (it would take the first one's running
  // deployments for a crash's leftovers), naming who holds it.
  await t.rejects(startServer(t, { dbPath: url, tools: TOOLS, config: { envKey: ENV_KEY } }),
    new RegExp(`is in use by another server \\(service-mcp \\S+ pid ${process.pid}`))

  // A restart on the same database: migrations are not applied twice, nothing is bootstrapped again, data is kept.
  await server.close()
  const again = await startServer(t, { dbPath: url, tools: TOOLS, config: { envKey: ENV_KEY } })
  const second = await openSession(again.mcpUrl, OWNER_KEY)
  const after = resultOf(t, await post(again.mcpUrl, callTool('service_apps_list', {}, nextId++), second.headers))
  t.strictSame(okData(t, after).apps.map((a: { name: string }) => a.name), ['pg-one'], 'the app survived the restart')
  const owners = await db.query("select count(*)::int as n from users")
  t.equal(owners.rows[0].n, 2, 'the owner and the member, no second bootstrap')
})

t.test('the connection holding the database lock ends under a running server: it serves on and takes the lock again', async (t) => {
  const url = await postgresDatabase(t)
  const logs: Array<{ level: number; msg: string }> = []
  const server = await startServer(t, { dbPath: url, tools: TOOLS, config: { envKey: ENV_KEY }, logger: { level: 'warn', stream: { write: (line: string) => void logs.push(JSON.parse(line)) } } })
  const db = await postgresClient(t, url)
  const holders = async () => (await db.query<{ pid: number }>(
    "select pid from pg_locks where locktype = 'advisory' and database = (select oid from pg_database where datname = current_database()) and classid = $1 and objid = 1 and granted",
    [0x73657276])).rows.map((r) => r.pid)
  const [first] = await holders()
  t.ok(first, 'the server holds the lock')

  // What a database restart or an administrator does to that connection. A pooled client that is checked out has no
  // 'error' listener of the pool's: unheard, the error would end the process (this test's, here).
  await db.query('select pg_terminate_backend($1)', [first])
  const deadline = Date.now() + 10_000
  let again: number | undefined
  while (!again && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100))
    again = (await holders()).find((pid) => pid !== first)
  }
  t.ok(again, 'the lock is held again, on a new connection')
  t.match(logs.map((l) => l.msg), [/connection holding this server's database lock ended/, /database lock is held again/], 'both logged')
  const { headers } = await openSession(server.mcpUrl, OWNER_KEY)
  okData(t, resultOf(t, await post(server.mcpUrl, callTool('service_apps_list', {}, nextId++), headers)))
  await t.rejects(startServer(t, { dbPath: url, tools: TOOLS, config: { envKey: ENV_KEY } }), /is in use by another server/, 'a second server is still refused')
  await server.close()
  t.strictSame(await holders(), [], 'released at close')
})

t.test('the connection listening for credential changes ends under a running server: nothing changed meanwhile is missed', async (t) => {
  const url = await postgresDatabase(t)
  const logs: Array<{ level: number; msg: string }> = []
  const server = await startServer(t, { dbPath: url, tools: TOOLS, config: { envKey: ENV_KEY }, logger: { level: 'info', stream: { write: (line: string) => void logs.push(JSON.parse(line)) } } })
  const db = await postgresClient(t, url)
  const listeners = async () => (await db.query<{ pid: number }>(
    "select pid from pg_stat_activity where datname = current_database() and application_name like '% bus' and query ilike 'LISTEN%'")).rows.map((r) => r.pid)
  const [first] = await listeners()
  t.ok(first, 'the server listens on its own connection')
  const member = await createMember(server, { role: 'developer' })
  const { headers } = await openSession(server.mcpUrl, member.key)
  const whoami = async () => (await post(server.mcpUrl, callTool('service_whoami', {}, nextId++), headers)).status
  t.equal(await whoami(), 200)

  // A change nobody announces while the server does not listen: it cannot have heard of it, so it trusts no cached
  // credential once it listens again.
  await db.query('select pg_terminate_backend($1)', [first])
  await db.query('update api_keys set revoked_at = $1 where id = $2', [Date.now(), member.keyId])
  const back = () => logs.some((l) => /listening for credential changes again/.test(l.msg))
  const deadline = Date.now() + 10_000
  while (!back() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100))
  t.ok(back(), 'it says it listens again')
  t.ok(logs.some((l) => /no longer listening for credential changes/.test(l.msg)), 'having said it did not')
  t.ok((await listeners()).some((pid) => pid !== first), 'on a new connection')
  t.equal(await whoami(), 401, 'the key revoked while it did not listen is refused')

  // And the barrier works over the new connection: a key the CLI revokes is refused on the very next request.
  const second = await createMember(server, { role: 'viewer' })
  const secondHeaders = (await openSession(server.mcpUrl, second.key)).headers
  t.equal((await post(server.mcpUrl, callTool('service_whoami', {}, nextId++), secondHeaders)).status, 200)
  const revoked = await cli(['keys', 'revoke', second.keyId], { SERVICE_DATABASE: url, SERVICE_ENV_KEY: ENV_KEY })
  t.equal(revoked.code, 0, revoked.stderr)
  t.equal((await post(server.mcpUrl, callTool('service_whoami', {}, nextId++), secondHeaders)).status, 401, 'refused on the very next request')
})

t.test('the lock and its lookups keep to their database: a server on another database of the cluster counts for nothing', async (t) => {
  const [x, y] = await Promise.all([postgresDatabase(t), postgresDatabase(t)])
  const [onX, onY] = await Promise.all([openPostgres(x), openPostgres(y)])
  t.teardown(() => Promise.all([onX.close(), onY.close()]))
  // A server on x coordinated through Redis (a shared lock), as another service or instance on the same cluster.
  const lock = await lockPostgres(onX.pool, x, 'shared')
  t.teardown(() => lock.release())
  t.equal(await coordinatedServers(onX.pool), 1, 'counted on its own database')
  t.equal(await coordinatedServers(onY.pool), 0, 'not on another one')
  const where = { redisUrl: '', redisPrefix: '', leaseMs: 15_000 }
  await t.rejects(openRepos({ ...where, database: x }, undefined, { changesCredentials: true }), /is served by 1 process coordinated through Redis/, 'a credential change from the command line without Redis is refused on x')
  const readingX = await openRepos({ ...where, database: x })
  await readingX.close()
  t.pass('anything else works on x without Redis')
  const cliOnY = await openRepos({ ...where, database: y })
  await cliOnY.close()
  t.pass('and works on y')
  const alone = await lockPostgres(onY.pool, y, 'exclusive')
  t.pass('a server without Redis takes y for itself')
  await alone.release()
})

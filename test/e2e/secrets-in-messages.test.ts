// test-backends: own (PostgreSQL and Redis URLs carrying passwords, reachable and not)
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { loadEnvKey } from '../../src/db/env-key.js'
import { openRepos } from '../../src/db/open-repos.js'
import { createServer } from '../../src/index.js'
import { maskCredentials } from '../../src/lib/mask-credentials.js'
import { postgresDatabase, redisUrl } from '../helpers/backends.js'
import { cli, startServe, type Run } from '../helpers/cli.js'
import { freePort } from '../helpers/ports.js'

/**
 * No start-up message repeats a password of the settings. Every refusal a start or a command can meet on PostgreSQL
 * and Redis URLs that carry one (a wrong or missing env key, a database or Redis that cannot be reached, a URL of the
 * wrong kind or form, a database in use) is driven through the command line as an operator meets it, and through
 * createServer as an embedder does; none may print or throw the password, and each must still say which setting is
 * wrong. The run's PostgreSQL trusts local connections, so a password in its URL changes nothing but the text.
 */

t.setTimeout(240_000)

const PG_PASSWORD = 'pg-Secret-7319'
const REDIS_PASSWORD = 'redis-Secret-6602'
const KEY_A = Buffer.alloc(32, 0x41).toString('base64')
const KEY_B = Buffer.alloc(32, 0x42).toString('base64')

function withPassword(url: string, password: string): string {
  const u = new URL(url)
  u.password = password
  return u.href
}

/** A PostgreSQL URL with PG_PASSWORD that nothing listens on. */
async function unreachablePostgres(): Promise<string> {
  return `postgres://service_mcp:${PG_PASSWORD}@127.0.0.1:${await freePort()}/service_mcp`
}

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'service-mcp-secrets-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** The run failed as a setting does (exit 2, one line naming `names`), and nothing it printed holds a password. */
function refusedWithoutSecret(t: Test, run: Run, names: RegExp, what: string): void {
  const printed = run.stdout + run.stderr
  t.equal(run.code, 2, `${what}: exit code 2${run.code === 2 ? '' : `\n${printed}`}`)
  t.match(run.stderr, names, `${what}: says what is wrong`)
  t.notMatch(printed, PG_PASSWORD, `${what}: no PostgreSQL password`)
  t.notMatch(printed, REDIS_PASSWORD, `${what}: no Redis password`)
}

/** A database whose env var values are sealed with KEY_A (its key check recorded), reached with PG_PASSWORD. */
async function databaseBoundToKeyA(t: Test): Promise<string> {
  const url = withPassword(await postgresDatabase(t, { migrated: true }), PG_PASSWORD)
  const { repos, close } = await openRepos({ database: url, redisUrl: '', redisPrefix: '', leaseMs: 15_000 })
  try {
    await loadEnvKey({ envKey: KEY_A, envKeyFile: '', database: url }, repos)
  } finally {
    await close()
  }
  return url
}

t.test('a wrong env key on PostgreSQL: the refusal names the database by its URL, without the password', async (t) => {
  const database = await databaseBoundToKeyA(t)
  const keyFile = join(tempDir(t), 'env.key')
  writeFileSync(keyFile, `${KEY_B}\n`, { mode: 0o600 })
  const masked = `database postgres://service_mcp:…@127.0.0.1:${new URL(database).port}${new URL(database).pathname} (SERVICE_DATABASE)`
  const mismatch = new RegExp(`does not match ${masked.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}`)
  const runs: Array<[string[], Record<string, string>, string]> = [
    [['serve'], { SERVICE_ENV_KEY: KEY_B, SERVICE_PORT: '0' }, 'serve, SERVICE_ENV_KEY'],
    [['serve'], { SERVICE_ENV_KEY_FILE: keyFile, SERVICE_PORT: '0' }, 'serve, SERVICE_ENV_KEY_FILE'],
    [['env-key', 'check'], { SERVICE_ENV_KEY: KEY_B }, 'env-key check'],
  ]
  // One after the other: a serve refused for its key holds the database's lock until it exits.
  const results: Run[] = []
  for (const [args, env] of runs) results.push(await cli(args, { SERVICE_DATABASE: database, ...env }))
  for (const [i, [, , what]] of runs.entries()) refusedWithoutSecret(t, results[i]!, mismatch, what)

  // The same refusal thrown to an embedder.
  const thrown = await createServer({ env: {}, config: { database, envKey: KEY_B, port: 0, logLevel: 'silent' } }).then(() => undefined, (err: Error) => err)
  t.match(thrown?.message, mismatch, 'createServer throws the refusal')
  t.notMatch(`${thrown?.stack}`, PG_PASSWORD, 'neither in its message nor its stack')
})

t.test('PostgreSQL or Redis out of reach, URLs of the wrong kind or form: refused without a password', async (t) => {
  const database = await unreachablePostgres()
  const reachable = withPassword(await postgresDatabase(t, { migrated: true }), PG_PASSWORD)
  const closedRedis = `redis://:${REDIS_PASSWORD}@127.0.0.1:${await freePort()}`
  const cases: Array<{ args: string[]; env: Record<string, string>; names: RegExp; what: string }> = [
    { args: ['serve'], env: { SERVICE_DATABASE: database, SERVICE_ENV_KEY: KEY_A }, names: /Database postgres:\/\/service_mcp:…@127\.0\.0\.1:\d+\/service_mcp \(SERVICE_DATABASE\) cannot be used/, what: 'serve, PostgreSQL unreachable' },
    { args: ['migrate'], env: { SERVICE_DATABASE: database }, names: /\(SERVICE_DATABASE\) cannot be used/, what: 'migrate, PostgreSQL unreachable' },
    { args: ['keys', 'list'], env: { SERVICE_DATABASE: database }, names: /\(SERVICE_DATABASE\) cannot be used/, what: 'keys list, PostgreSQL unreachable' },
    { args: ['env-key', 'check'], env: { SERVICE_DATABASE: database, SERVICE_ENV_KEY: KEY_A }, names: /\(SERVICE_DATABASE\) cannot be used/, what: 'env-key check, PostgreSQL unreachable' },
    { args: ['serve'], env: { SERVICE_DATABASE: database }, names: /SERVICE_DATABASE is a PostgreSQL database: set SERVICE_ENV_KEY/, what: 'serve, no env key' },
    { args: ['serve'], env: { SERVICE_DATABASE: `postgres:/service_mcp:${PG_PASSWORD}@127.0.0.1/db` }, names: /"postgres:\/service_mcp:…@127\.0\.0\.1\/db" is a URL .* two slashes/, what: 'serve, one slash' },
    { args: ['keys', 'list'], env: { SERVICE_DATABASE: `mysql://service_mcp:${PG_PASSWORD}@127.0.0.1/db` }, names: /"mysql:\/\/service_mcp:…@127\.0\.0\.1\/db" is a URL of a database this server cannot use/, what: 'keys list, another database' },
    { args: ['migrate'], env: { SERVICE_DATABASE: `postgres://service_mcp:${PG_PASSWORD}@127.0.0.1:port/db` }, names: /\(SERVICE_DATABASE\) cannot be used/, what: 'migrate, a port that is no number' },
    { args: ['backup', 'x.db'], env: { SERVICE_DATABASE: database }, names: /backup copies a SQLite file/, what: 'backup on PostgreSQL' },
    { args: ['serve'], env: { SERVICE_DATABASE: reachable, SERVICE_ENV_KEY: KEY_A, SERVICE_PORT: '0', SERVICE_REDIS_URL: closedRedis }, names: /Redis redis:\/\/:…@127\.0\.0\.1:\d+ \(SERVICE_REDIS_URL\) cannot be reached/, what: 'serve, Redis unreachable' },
    { args: ['serve'], env: { SERVICE_DATABASE: reachable, SERVICE_ENV_KEY: KEY_A, SERVICE_REDIS_URL: `http://:${REDIS_PASSWORD}@127.0.0.1:6379` }, names: /SERVICE_REDIS_URL "http:\/\/:…@127\.0\.0\.1:6379" must be a redis:\/\/ or rediss:\/\/ URL/, what: 'serve, not a Redis URL' },
    { args: ['serve'], env: { SERVICE_DATABASE: join(tempDir(t), 'x.db'), SERVICE_REDIS_URL: closedRedis }, names: /SERVICE_REDIS_URL lets several processes serve one database, which must then be PostgreSQL/, what: 'serve, Redis beside SQLite' },
  ]
  const runs = await Promise.all(cases.map((c) => cli(c.args, c.env, 60_000)))
  for (const [i, c] of cases.entries()) refusedWithoutSecret(t, runs[i]!, c.names, c.what)

  // What createServer throws an embedder, for the same settings.
  for (const config of [{ database, envKey: KEY_A }, { database: reachable, envKey: KEY_A, redisUrl: closedRedis, redisPrefix: 'secrets:' }]) {
    const thrown = await createServer({ env: {}, config: { ...config, port: 0, logLevel: 'silent' } }).then((s) => s.close().then(() => undefined), (err: Error) => err)
    t.ok(thrown, 'createServer refuses')
    const text = `${thrown?.stack} ${(thrown?.cause as Error | undefined)?.message}`
    t.notMatch(text, PG_PASSWORD, `${thrown?.message}: no PostgreSQL password`)
    t.notMatch(text, REDIS_PASSWORD, `${thrown?.message}: no Redis password`)
  }
})

t.test('a database in use by another server: refused without the password', async (t) => {
  const database = await databaseBoundToKeyA(t)
  const first = await createServer({ env: {}, config: { database, envKey: KEY_A, port: 0, logLevel: 'silent' } })
  t.teardown(() => first.close())
  refusedWithoutSecret(t, await cli(['serve'], { SERVICE_DATABASE: database, SERVICE_ENV_KEY: KEY_A, SERVICE_PORT: '0' }), /\(SERVICE_DATABASE\) is in use by another server/, 'serve beside a server')
})

t.test('a server that starts and stops on URLs with passwords logs neither password', async (t) => {
  const database = await databaseBoundToKeyA(t)
  const redis = withPassword(redisUrl(), REDIS_PASSWORD)
  const served = await startServe({ SERVICE_DATABASE: database, SERVICE_ENV_KEY: KEY_A, SERVICE_PORT: '0', SERVICE_REDIS_URL: redis, SERVICE_REDIS_PREFIX: `secrets-${process.pid}:`, SERVICE_LOG_LEVEL: 'debug' })
  served.child.kill('SIGTERM')
  const { code, signal } = await served.exited
  t.same({ code, signal }, { code: 0, signal: null }, `it served and stopped\n${served.stdout()}\n${served.stderr()}`)
  const printed = served.stdout() + served.stderr()
  t.notMatch(printed, PG_PASSWORD, 'no PostgreSQL password in its output')
  t.notMatch(printed, REDIS_PASSWORD, 'no Redis password in its output')
})

t.test('maskCredentials: every password of a text, and nothing else', async (t) => {
  const cases: Array<[string, string]> = [
    ['postgres://u:p@h/db', 'postgres://u:…@h/db'],
    ['postgresql://u:p@ss@h:5432/db?sslmode=require', 'postgresql://u:…@h:5432/db?sslmode=require'],
    ['postgres:/u:p@h/db', 'postgres:/u:…@h/db'],
    ['redis://:p@h:6379 and rediss://default:q@h2', 'redis://:…@h:6379 and rediss://default:…@h2'],
    ['{"redis":"redis://:p@h:6379","email":"a@b.c"}', '{"redis":"redis://:…@h:6379","email":"a@b.c"}'],
    ['postgres://h/db?user=u&password=p&x=1', 'postgres://h/db?user=u&password=…&x=1'],
    ['postgres://u@h/db', 'postgres://u@h/db'],
    ['/srv/data/a:b@c.db and owner@example.com', '/srv/data/a:b@c.db and owner@example.com'],
  ]
  for (const [text, masked] of cases) t.equal(maskCredentials(text), masked, text)
})

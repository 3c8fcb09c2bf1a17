import { randomBytes } from 'node:crypto'
import type { Redis, RedisOptions } from 'ioredis'
import type { Client } from 'pg'
import { MIGRATED_TEMPLATE, pgClient, PG_ROLE, readState, stateFile, type BackendsState } from '../setup/backends.js'

/**
 * PostgreSQL and Redis for tests: the throwaway servers tap's `before` started for this run (test/setup/backends.ts).
 * Each test takes its own database and its own Redis key prefix, both removed at its teardown, so the two parallel test
 * files and the tests within them never see each other's data. pg and ioredis load on first use: most test files take
 * neither.
 */

interface Teardown {
  teardown(fn: () => unknown): void
}

let state: BackendsState | undefined

/** This run's servers: the state file of the tap process that runs this test file. */
export function backends(): BackendsState {
  if (state) return state
  state = readState(process.ppid)
  if (!state) {
    throw new Error(
      `no PostgreSQL and Redis for this test (${stateFile(process.ppid)} is missing): tap's before ` +
        '(test/setup/backends-before.ts) starts them, so run the file through tap: npx tap <file>',
    )
  }
  return state
}

/** A connection as service_mcp to the `postgres` database, for CREATE and DROP DATABASE; closed after `fn`. */
async function asAdmin<T>(fn: (client: Client) => Promise<T>): Promise<T> {
  const { Client } = await pgClient()
  const client = new Client({ connectionString: backends().postgresUrl })
  await client.connect()
  try {
    return await fn(client)
  } finally {
    await client.end()
  }
}

/**
 * A fresh database owned by service_mcp (not a superuser), dropped at the test's teardown whatever still holds
 * connections to it: empty, or with the committed migrations applied (`migrated`, a copy of this run's template).
 * Returns its postgres:// URL.
 */
export async function postgresDatabase(t: Teardown, options: { migrated?: boolean } = {}): Promise<string> {
  const name = `t_${randomBytes(8).toString('hex')}`
  // FILE_COPY: for a small template, a copy of its files is faster than PostgreSQL 15's default (WAL_LOG).
  const from = options.migrated === true ? ` TEMPLATE ${MIGRATED_TEMPLATE} STRATEGY FILE_COPY` : ''
  await asAdmin((client) => client.query(`CREATE DATABASE ${name} OWNER ${PG_ROLE}${from}`))
  t.teardown(() => asAdmin((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)))
  const url = new URL(backends().postgresUrl)
  url.pathname = `/${name}`
  return url.href
}

/** A connected client to `url`, ended at teardown (before the database is dropped: teardowns run last first). */
export async function postgresClient(t: Teardown, url: string): Promise<Client> {
  const { Client } = await pgClient()
  const client = new Client({ connectionString: url })
  await client.connect()
  t.teardown(() => client.end())
  return client
}

/** Names of the databases that exist, for tests checking that teardown removed theirs. */
export function postgresDatabases(): Promise<string[]> {
  return asAdmin(async (client) => {
    const result = await client.query<{ datname: string }>('SELECT datname FROM pg_database')
    return result.rows.map((row) => row.datname)
  })
}

/** This run's Redis, shared by every test: isolation is by key prefix (redisPrefix). */
export function redisUrl(): string {
  return backends().redisUrl
}

/**
 * A fresh key prefix (`t:<16 hex>:`) for one test; every key under it is deleted at teardown (SCAN + UNLINK). Redis's
 * 16 numbered databases are too few to give each test its own, and publish/subscribe channels are shared by all of
 * them anyway: the code under test takes the prefix for its keys and its channel names alike.
 */
export function redisPrefix(t: Teardown): string {
  const prefix = `t:${randomBytes(8).toString('hex')}:`
  t.teardown(() => deleteRedisKeys(prefix))
  return prefix
}

/** A short-lived connection that fails fast instead of retrying, closed after `fn`. */
async function withRedis<T>(fn: (redis: Redis) => Promise<T>): Promise<T> {
  const { Redis } = await import('ioredis')
  const redis = new Redis(redisUrl(), { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null })
  await redis.connect()
  try {
    return await fn(redis)
  } finally {
    redis.disconnect()
  }
}

async function scanKeys(redis: Redis, prefix: string): Promise<string[]> {
  const keys: string[] = []
  let cursor = '0'
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
    keys.push(...batch)
    cursor = next
  } while (cursor !== '0')
  return keys
}

/** Keys under `prefix` (SCAN, never KEYS): for tests that check what is left. */
export function redisKeys(prefix: string): Promise<string[]> {
  return withRedis((redis) => scanKeys(redis, prefix))
}

function deleteRedisKeys(prefix: string): Promise<void> {
  return withRedis(async (redis) => {
    const keys = await scanKeys(redis, prefix)
    for (let i = 0; i < keys.length; i += 1000) await redis.unlink(...keys.slice(i, i + 1000))
  })
}

/** An ioredis connection to this run's Redis, closed at teardown. */
export async function redisClient(t: Teardown, options: RedisOptions = {}): Promise<Redis> {
  const { Redis } = await import('ioredis')
  const redis = new Redis(redisUrl(), { lazyConnect: true, maxRetriesPerRequest: 1, ...options })
  await redis.connect()
  t.teardown(() => redis.disconnect())
  return redis
}

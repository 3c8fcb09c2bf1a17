// test-backends: own (the throwaway PostgreSQL and Redis of the test run themselves)
import { once } from 'node:events'
import t, { type Test } from 'tap'
import {
  backends,
  postgresClient,
  postgresDatabase,
  postgresDatabases,
  redisClient,
  redisKeys,
  redisPrefix,
} from '../helpers/backends.js'

// The throwaway PostgreSQL 15 and Redis that tap's `before` starts for a run (test/setup/backends.ts), as tests use
// them through test/helpers/backends.ts: a database and a key prefix of their own, gone after their teardown.

t.test('PostgreSQL 15: a fresh database of its own, as service_mcp, on loopback', async (t) => {
  const url = await postgresDatabase(t)
  const name = new URL(url).pathname.slice(1)
  t.match(name, /^t_[0-9a-f]{16}$/)
  t.match(url, /^postgres:\/\/service_mcp@127\.0\.0\.1:\d+\/t_[0-9a-f]{16}$/)
  const db = await postgresClient(t, url)

  const version = await db.query<{ server_version: string }>('SHOW server_version')
  t.match(version.rows[0]?.server_version, /^15\./, 'PostgreSQL 15')
  const who = await db.query<{ db: string; role: string; superuser: boolean; address: string }>(
    `SELECT current_database() AS db, current_user AS role, host(inet_server_addr()) AS address,
            (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS superuser`,
  )
  t.same(who.rows[0], { db: name, role: 'service_mcp', address: '127.0.0.1', superuser: false })
  const settings = await db.query<{ name: string; setting: string }>(
    `SELECT name, setting FROM pg_settings
     WHERE name IN ('listen_addresses', 'fsync', 'synchronous_commit', 'full_page_writes') ORDER BY name`,
  )
  t.same(settings.rows, [
    { name: 'fsync', setting: 'off' },
    { name: 'full_page_writes', setting: 'off' },
    { name: 'listen_addresses', setting: '127.0.0.1' },
    { name: 'synchronous_commit', setting: 'off' },
  ])

  const empty = await db.query(`SELECT 1 FROM pg_tables WHERE schemaname = 'public'`)
  t.equal(empty.rowCount, 0, 'the database starts empty')
  await db.query('CREATE TABLE notes (id serial PRIMARY KEY, body text NOT NULL, at timestamptz NOT NULL DEFAULT now())')
  const inserted = await db.query<{ id: number }>(
    'INSERT INTO notes (body) VALUES ($1), ($2) RETURNING id',
    ['first', 'ünïcödé ✓'],
  )
  t.same(inserted.rows.map((row) => row.id), [1, 2])
  const read = await db.query<{ id: number; body: string }>('SELECT id, body FROM notes ORDER BY id')
  t.same(read.rows, [{ id: 1, body: 'first' }, { id: 2, body: 'ünïcödé ✓' }])
  await t.rejects(db.query('INSERT INTO notes (body) VALUES (NULL)'), { code: '23502' }, 'constraints hold')
})

t.test('Redis: SET/GET under the test prefix, PUBLISH/SUBSCRIBE between two connections', async (t) => {
  const prefix = redisPrefix(t)
  t.match(prefix, /^t:[0-9a-f]{16}:$/)
  t.match(backends().redisUrl, /^redis:\/\/127\.0\.0\.1:\d+$/)
  const redis = await redisClient(t)
  t.same(await redis.config('GET', 'bind'), ['bind', '127.0.0.1'])
  t.same(await redis.config('GET', 'save'), ['save', ''], 'no snapshots')
  t.same(await redis.config('GET', 'appendonly'), ['appendonly', 'no'], 'no append-only file')
  t.match(await redis.info('server'), /redis_version:\d+\./)

  t.equal(await redis.set(`${prefix}greeting`, 'hello', 'PX', 60_000), 'OK')
  t.equal(await redis.get(`${prefix}greeting`), 'hello')
  t.equal(await redis.incr(`${prefix}counter`), 1)
  t.equal(await redis.incr(`${prefix}counter`), 2)
  t.same((await redisKeys(prefix)).sort(), [`${prefix}counter`, `${prefix}greeting`])

  const subscriber = await redisClient(t)
  const channel = `${prefix}events`
  t.equal(await subscriber.subscribe(channel), 1)
  const received = once(subscriber, 'message')
  t.equal(await redis.publish(channel, JSON.stringify({ hello: 'world' })), 1, 'one subscriber received it')
  const [from, message] = (await received) as [string, string]
  t.equal(from, channel)
  t.same(JSON.parse(message), { hello: 'world' })
})

t.test('each test its own database and prefix, both removed at its teardown', async (t) => {
  const taken: { database: string; prefix: string }[] = []
  const take = async (t: Test) => {
    const url = await postgresDatabase(t)
    const database = new URL(url).pathname.slice(1)
    const db = await postgresClient(t, url)
    await db.query('CREATE TABLE kept (v int)')
    await db.query('INSERT INTO kept VALUES (1)')
    const prefix = redisPrefix(t)
    const redis = await redisClient(t)
    await redis.set(`${prefix}a`, '1')
    await redis.hset(`${prefix}b`, 'field', 'value')
    t.ok((await postgresDatabases()).includes(database), 'the database exists during the test')
    t.equal((await redisKeys(prefix)).length, 2, 'the keys exist during the test')
    taken.push({ database, prefix })
  }
  await t.test('first', take)
  await t.test('second', take)

  t.equal(taken.length, 2)
  const [first, second] = taken as [(typeof taken)[0], (typeof taken)[0]]
  t.not(first.database, second.database, 'different databases')
  t.not(first.prefix, second.prefix, 'different prefixes')
  const databases = await postgresDatabases()
  t.notOk(databases.includes(first.database), 'the first database was dropped')
  t.notOk(databases.includes(second.database), 'the second database was dropped')
  t.same(await redisKeys(first.prefix), [], "the first test's keys were deleted")
  t.same(await redisKeys(second.prefix), [], "the second test's keys were deleted")
})

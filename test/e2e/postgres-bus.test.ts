// test-process: own (it listens for a warning node gives once per process: an earlier file could have used it up)
import pg from 'pg'
import t from 'tap'
import { postgresBus } from '../../src/db/postgres/bus.js'
import { postgresDatabase } from '../helpers/backends.js'

/**
 * The PostgreSQL bus (src/db/postgres/bus.ts): channels subscribed concurrently, from anywhere in the server, are all
 * heard, and the one listening connection is given one command at a time (pg queues a second query on a busy client,
 * warns that pg 9 will not, and a suite run printed that warning).
 */
t.test('channels subscribed at once are each heard, and the listening connection never runs two commands together', async (t) => {
  const url = await postgresDatabase(t)
  const pool = new pg.Pool({ connectionString: url, max: 2 })
  // pg-pool's end() resolves once it has told its connections to end, not once they have: the database's drop at
  // teardown (WITH FORCE) can still terminate one, and an idle connection's error is the pool's 'error' event, which
  // would otherwise end the process (a CI run under load failed so, after both assertions had passed).
  pool.on('error', () => {})
  t.teardown(() => pool.end())
  const warnings: string[] = []
  const onWarning = (w: Error) => void warnings.push(w.message)
  process.on('warning', onWarning)
  t.teardown(() => void process.off('warning', onWarning))
  const bus = await postgresBus({ url, pool, applicationName: 'service-mcp bus test' })
  t.teardown(() => bus.close())

  const heard = new Map<string, unknown[]>()
  const channels = Array.from({ length: 20 }, (_, i) => `bus_test_${i}`)
  const arrived = new Map<string, () => void>()
  const arrivals = channels.map((channel) => new Promise<void>((resolve) => arrived.set(channel, resolve)))
  const unsubscribe = await Promise.all(channels.map((channel) => bus.subscribe(channel, (message) => {
    heard.set(channel, [...(heard.get(channel) ?? []), message])
    arrived.get(channel)!()
  })))
  await Promise.all(channels.map((channel, i) => bus.publish(channel, { n: i })))
  await Promise.all(arrivals)
  t.same(channels.map((c) => heard.get(c)), channels.map((_, i) => [{ n: i }]), 'each channel heard its own message once')

  for (const off of unsubscribe) off()
  await bus.subscribe('bus_test_after', () => {}) // queued behind every UNLISTEN: done once they are
  await new Promise((r) => setImmediate(r))
  t.same(warnings.filter((w) => w.includes('already executing a query')), [], 'no query given to a busy connection')
})

// test-backends: own (Redis, which serves only PostgreSQL databases)
import { connect, createServer, type Server, type Socket } from 'node:net'
import t from 'tap'
import { postgresDatabase, redisPrefix, redisUrl } from '../helpers/backends.js'
import { injectServer, type InjectServer } from '../helpers/inject.js'
import { until } from '../helpers/stream.js'

/**
 * GET /readyz with SERVICE_REDIS_URL: a `redis` check beside the database and the stop, failing while Redis does not
 * answer a PING within SERVICE_READY_REDIS_TIMEOUT_MS (timed by the server's clock, which only the test moves) or
 * cannot be reached at all, and ok again once it answers. Redis is reached through a relay the test can stall (bytes
 * held, connections kept) or cut (every connection closed at once).
 */

const TIMEOUT_MS = 200

class RedisRelay {
  readonly #server: Server
  readonly #sockets = new Set<Socket>()
  /** Held while stalled, each for the socket it goes to. */
  readonly #held: Array<[Socket, Buffer]> = []
  #mode: 'open' | 'stalled' | 'cut' = 'open'

  private constructor(server: Server, readonly url: string) {
    this.#server = server
  }

  static async start(target: string): Promise<RedisRelay> {
    const { hostname, port } = new URL(target)
    let relay: RedisRelay | undefined
    const server = createServer((client) => relay!.#connect(client, hostname, Number(port)))
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    relay = new RedisRelay(server, `redis://127.0.0.1:${(server.address() as { port: number }).port}`)
    return relay
  }

  #connect(client: Socket, host: string, port: number): void {
    if (this.#mode === 'cut') return void client.destroy()
    const upstream = connect(port, host)
    for (const [from, to] of [[client, upstream], [upstream, client]] as const) {
      this.#sockets.add(from)
      from.on('data', (chunk: Buffer) => (this.#mode === 'stalled' ? this.#held.push([to, chunk]) : to.write(chunk)))
      from.on('close', () => {
        this.#sockets.delete(from)
        to.destroy()
      })
      from.on('error', () => to.destroy())
    }
  }

  /** Nothing passes either way, and every connection stays open. */
  stall(): void {
    this.#mode = 'stalled'
  }

  /** Everything held passes, and what follows. */
  resume(): void {
    this.#mode = 'open'
    for (const [to, chunk] of this.#held.splice(0)) to.write(chunk)
  }

  /** Every connection is closed, and new ones are closed as they come, until `resume`. */
  cut(): void {
    this.#mode = 'cut'
    this.#held.length = 0
    for (const socket of this.#sockets) socket.destroy()
  }

  async close(): Promise<void> {
    this.cut()
    await new Promise<void>((resolve) => this.#server.close(() => resolve()))
  }
}

async function readyz(server: InjectServer) {
  const res = await server.app.inject({ method: 'GET', url: '/readyz' })
  return { status: res.statusCode, body: res.json() as unknown }
}

const READY = { status: 200, body: { status: 'ok', checks: { database: 'ok', redis: 'ok', shutdown: 'ok' } } }
const REDIS_FAILS = { status: 503, body: { status: 'unavailable', checks: { database: 'ok', redis: 'fail', shutdown: 'ok' } } }

t.test('/readyz reports Redis: unready while it stalls or is out of reach, ready again once it answers', async (t) => {
  const relay = await RedisRelay.start(redisUrl())
  t.teardown(() => relay.close())
  const database = await postgresDatabase(t, { migrated: true })
  const server = await injectServer(t, { dbPath: database, config: { redisUrl: relay.url, redisPrefix: redisPrefix(t), readyRedisTimeoutMs: TIMEOUT_MS } })
  t.strictSame(await readyz(server), READY, 'ready, with a redis check')

  // A Redis that does not answer: the check waits SERVICE_READY_REDIS_TIMEOUT_MS of the server's clock, no more.
  relay.stall()
  let answer: Awaited<ReturnType<typeof readyz>> | undefined
  const pending = readyz(server).then((a) => (answer = a))
  // Twice the timeout in real time: a check timed by the wall clock would have answered by now.
  await new Promise((resolve) => setTimeout(resolve, 2 * TIMEOUT_MS))
  await server.clock.advance(TIMEOUT_MS - 1)
  t.equal(answer, undefined, 'it waits for the timeout on the server\'s clock, not for the wall clock')
  await server.clock.advance(1)
  await pending
  t.strictSame(answer, REDIS_FAILS, 'then 503, naming redis')

  relay.resume()
  t.strictSame(await readyz(server), READY, 'ready again once Redis answers')

  // Redis out of reach: every connection closed, and reconnecting fails.
  relay.cut()
  const redis = server.app.coordination.redis!
  await until(() => redis.status !== 'ready', 10_000, 'the server to notice that its Redis connection closed')
  t.strictSame(await readyz(server), REDIS_FAILS, 'unready at once: no PING waits on a connection that is down')

  relay.resume()
  // ioredis reconnects on its own schedule; the check says ok from the first answer on.
  await until(async () => (await readyz(server)).status === 200, 20_000, 'ready once Redis is reached again')
  t.strictSame(await readyz(server), READY)
})

t.test('without SERVICE_REDIS_URL there is no redis check', async (t) => {
  // On a SQLite file, the disk check (SERVICE_DISK_MIN_FREE_MB) is there instead; off here, so only Redis is in question.
  const server = await injectServer(t, { config: { diskMinFreeMb: 0 } })
  t.strictSame((await readyz(server)).body, { status: 'ok', checks: { database: 'ok', shutdown: 'ok' } })
})

import pg from 'pg'
import { Channels, type Bus } from '../../coordination/bus.js'

export interface PostgresBusOptions {
  /** The database (SERVICE_DATABASE): the listening connection is a client of its own, outside the pool. */
  url: string
  /** Publishes (NOTIFY) on the pool: a listening connection is busy only with LISTEN. */
  pool: pg.Pool
  /** Named in pg_stat_activity. */
  applicationName: string
  /** How long a lost listening connection waits before it connects again. */
  retryMs?: number
  /** What the listening connection reports while it is lost and reconnects. */
  onError?(err: Error): void
}

/** The payload of a NOTIFY is at most 8000 bytes; the bus's messages are a few dozen. */
const NOTIFY = 'select pg_notify($1, $2)'

/**
 * The processes of one PostgreSQL database talking through it, without Redis: LISTEN and NOTIFY, which PostgreSQL
 * delivers to every session of the same database that listens on the channel, the publisher's own included, once the
 * publishing statement committed. Used by a server that serves its database alone and by the command line beside it,
 * for the credential barrier (coordination/credential-barrier.ts): what Redis's publish/subscribe is to processes
 * coordinated through Redis. Delivery is at most once, as with Redis: a message published while the listening
 * connection is down is lost, so the bus says when it is lost and back (`onLost`, `onResubscribed`), and the barrier
 * distrusts its cache from a loss until it hears its own heartbeat again.
 *
 * It lives beside the store (db/postgres/client.ts) because it is the driver's, not because it stores anything: no table is
 * read or written.
 */
export async function postgresBus(options: PostgresBusOptions): Promise<Bus> {
  const channels = new Channels()
  const lost = new Set<() => void>()
  const resubscribed = new Set<() => void>()
  const retryMs = options.retryMs ?? 1_000
  /** The listening connection, once it listens on every channel; null while it is lost. */
  let client: pg.Client | null = null
  let listening = false
  let closed = false
  let retry: NodeJS.Timeout | null = null

  /**
   * One command at a time on the listening connection: channels are subscribed from anywhere, concurrently, and a
   * client that is given a query while it runs another only queues it (pg warns that this ends with pg 9).
   */
  const queues = new WeakMap<pg.Client, Promise<unknown>>()
  const command = (on: pg.Client, sql: string): Promise<unknown> => {
    const done = (queues.get(on) ?? Promise.resolve()).then(() => on.query(sql))
    queues.set(on, done.catch(() => {}))
    return done
  }
  const listen = (on: pg.Client, channel: string) => command(on, `LISTEN ${pg.escapeIdentifier(channel)}`)

  /** A new listening connection, listening on every channel subscribed so far (and, as `client`, on later ones). */
  async function connect(): Promise<void> {
    const c = new pg.Client({ connectionString: options.url, application_name: options.applicationName, keepAlive: true })
    // Unheard, a connection's 'error' would end the process.
    c.on('error', (err) => drop(c, err))
    c.on('end', () => drop(c))
    c.on('notification', (n) => deliver(n.channel, n.payload))
    try {
      await c.connect()
      client = c
      for (const channel of [...channels.handlers.keys()]) await listen(c, channel)
    } catch (err) {
      if (client === c) client = null
      c.removeAllListeners('end')
      await c.end().catch(() => {})
      throw err
    }
    if (client !== c) return // dropped while it was listening: reconnecting already
    listening = true
  }

  function deliver(channel: string, payload: string | undefined): void {
    if (payload === undefined) return
    let message: unknown
    try {
      message = JSON.parse(payload)
    } catch {
      return // not ours: every message this bus publishes is JSON
    }
    channels.deliver(channel, message)
  }

  /** The listening connection ended or failed: the bus is deaf until it has connected and listens again. */
  function drop(c: pg.Client, err?: Error): void {
    if (client !== c) return
    client = null
    const was = listening
    listening = false
    if (err) options.onError?.(err)
    void c.end().catch(() => {})
    if (closed) return
    if (was) for (const fn of lost) fn()
    schedule()
  }

  function schedule(): void {
    if (closed || retry !== null) return
    retry = setTimeout(() => {
      retry = null
      connect().then(() => {
        for (const fn of resubscribed) fn()
      }, (err: Error) => {
        options.onError?.(err)
        schedule()
      })
    }, retryMs)
    // Waiting to listen again must not keep alive a process that is otherwise done.
    retry.unref()
  }

  await connect()
  return {
    get listening() {
      return listening
    },
    async publish(channel, message) {
      await options.pool.query(NOTIFY, [channel, JSON.stringify(message)])
    },
    async subscribe(channel, handler) {
      if (channels.add(channel, handler) && client !== null) await listen(client, channel)
      return () => {
        if (channels.remove(channel, handler) && client !== null) void command(client, `UNLISTEN ${pg.escapeIdentifier(channel)}`).catch(() => {})
      }
    },
    onResubscribed(fn) {
      resubscribed.add(fn)
    },
    onLost(fn) {
      lost.add(fn)
    },
    async close() {
      closed = true
      if (retry !== null) clearTimeout(retry)
      retry = null
      channels.handlers.clear()
      const c = client
      client = null
      listening = false
      if (c !== null) await c.end().catch(() => {})
    },
  }
}

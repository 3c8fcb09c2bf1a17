// test-backends: own (processes on PostgreSQL and Redis)
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import t, { type Test } from 'tap'
import { loadConfig, type Config } from '../../src/config.js'
import { RedisRateLimiter } from '../../src/limits/fixed-windows.js'
import { RedisHeldOpen } from '../../src/limits/held-open.js'
import { oauthAuthorize, oauthRegister } from '../../src/limits/named.js'
import { openLimitsStore } from '../../src/limits/store.js'
import { postgresDatabase, redisClient, redisKeys, redisPrefix, redisUrl } from '../helpers/backends.js'
import { modernLive, modernPost } from '../helpers/modern.js'
import { poll } from '../helpers/modern-runs.js'
import { startServer, type TestServer } from '../helpers/server.js'
import { messagesOf, type LiveStream } from '../helpers/stream.js'

/**
 * The limits store in Redis (src/limits/store.ts): the endpoint windows and the held-open counters shared by several
 * processes, held-open slots that free themselves when the process holding them dies (its lease is no longer renewed),
 * and the one behaviour of every limit when Redis does not answer: counted in this process, with the same limits, one
 * warning. The /mcp windows and the sign-in throttle across processes are in shared-rate-limits.test.ts.
 */

const ENV_KEY = Buffer.alloc(32, 0x4c).toString('base64')
const LEASE_MS = 60_000

/** A clock the test moves by hand: leases are measured with it, never with the wall clock. */
function handClock(start = Date.now()) {
  let now = start
  return { now: () => now, set: (ms: number) => void (now = ms) }
}

t.test('RedisRateLimiter.count: one window, its count and what is left, shared by two connections', async (t) => {
  const prefix = redisPrefix(t)
  const one = new RedisRateLimiter(await redisClient(t), { timeoutMs: 2000 })
  const two = new RedisRateLimiter(await redisClient(t), { timeoutMs: 2000 })
  const key = `${prefix}orl:register:10.0.0.1`
  t.match(await one.count(key, 3, 60_000), { allowed: true, limit: 3, remaining: 2 })
  t.match(await two.count(key, 3, 60_000), { allowed: true, remaining: 1 }, 'the other connection sees the first count')
  t.match(await one.count(key, 3, 60_000), { allowed: true, remaining: 0 })
  const refused = await two.count(key, 3, 60_000)
  t.match(refused, { allowed: false, limit: 3, remaining: 0 }, 'the fourth is refused')
  t.ok(refused.retryAfter >= 1 && refused.retryAfter <= 60, 'Retry-After within the window')
  t.match(await one.count(key, 3, 60_000), { allowed: false }, 'a refusal counted nothing: still full')
})

t.test('RedisHeldOpen: a capacity shared by two processes; a release frees a slot', async (t) => {
  const prefix = redisPrefix(t)
  const clock = handClock()
  const a = new RedisHeldOpen(await redisClient(t), { timeoutMs: 2000, leaseMs: LEASE_MS, now: clock.now })
  const b = new RedisHeldOpen(await redisClient(t), { timeoutMs: 2000, leaseMs: LEASE_MS, now: clock.now })
  const key = `${prefix}rl:ls:member`
  const first = await a.hold(key, 2)
  const second = await b.hold(key, 2)
  t.ok(first && second, 'one slot on each')
  t.equal(await a.hold(key, 2), null, 'a third, on either, is refused')
  t.equal(await b.hold(key, 2), null)
  t.equal(await a.count(key), 2)
  second!()
  await poll(async () => ((await a.count(key)) === 1 ? true : undefined), 2000, 'the release to reach Redis')
  t.ok(await a.hold(key, 2), 'the freed slot is taken on the other process')
  t.equal(a.held, 2)
  t.equal(b.held, 0)
})

t.test('RedisHeldOpen: renewed leases stay; a holder that stops renewing frees its slot within one lease', async (t) => {
  const prefix = redisPrefix(t)
  const start = Date.now()
  const clock = handClock(start)
  const a = new RedisHeldOpen(await redisClient(t), { timeoutMs: 2000, leaseMs: LEASE_MS, now: clock.now })
  const b = new RedisHeldOpen(await redisClient(t), { timeoutMs: 2000, leaseMs: LEASE_MS, now: clock.now })
  const key = `${prefix}rl:ls:member`
  t.ok(await a.hold(key, 1), 'A holds the only slot')
  clock.set(start + LEASE_MS * 0.9)
  await a.renew()
  clock.set(start + LEASE_MS * 1.5)
  t.equal(await b.hold(key, 1), null, 'past the first lease, A\'s renewal still holds the slot')
  // A stops renewing, as a process that died would.
  clock.set(start + LEASE_MS * 1.9 + 1)
  t.equal(await b.count(key), 0, 'its lease lapsed: nobody holds the slot')
  t.ok(await b.hold(key, 1), 'and B takes it')
  await a.renew()
  t.equal(await a.hold(key, 1), null, 'a late renewal does not bring a lapsed slot back')
})

/** A process that takes a slot in Redis and renews it until it is killed (SIGKILL: nothing released on the way out). */
async function holderProcess(t: Test, key: string): Promise<{ kill(): Promise<void> }> {
  const heldOpen = new URL('../../src/limits/held-open.js', import.meta.url).href
  const child = spawn(process.execPath, ['--input-type=module', '-e', `
    import { Redis } from 'ioredis'
    import { RedisHeldOpen } from ${JSON.stringify(heldOpen)}
    const redis = new Redis(process.env.REDIS_URL)
    await new Promise((resolve) => redis.once('ready', resolve))
    const held = new RedisHeldOpen(redis, { timeoutMs: 2000, leaseMs: ${LEASE_MS} })
    const release = await held.hold(process.env.KEY, 1)
    held.start({ failed() {}, answered() {} })
    process.stdout.write(release ? 'held\\n' : 'full\\n')
  `], { env: { ...process.env, REDIS_URL: redisUrl(), KEY: key }, stdio: ['ignore', 'pipe', 'pipe'] })
  t.teardown(() => void child.kill('SIGKILL'))
  let stderr = ''
  child.stderr!.on('data', (chunk: Buffer) => void (stderr += chunk.toString()))
  const exited = once(child, 'exit').then(([code]) => `exited (${String(code)}): ${stderr}`)
  const line = await Promise.race([once(child.stdout!, 'data').then(([chunk]) => String(chunk).trim()), exited])
  t.equal(line, 'held', 'the other process holds the slot')
  return {
    async kill() {
      if (child.exitCode !== null || child.signalCode !== null) return
      child.kill('SIGKILL')
      await once(child, 'exit')
    },
  }
}

t.test('a process killed while holding a slot: the slot is held until its lease lapses, then free', async (t) => {
  const prefix = redisPrefix(t)
  const key = `${prefix}rl:ls:member`
  const holder = await holderProcess(t, key)
  const clock = handClock()
  const here = new RedisHeldOpen(await redisClient(t), { timeoutMs: 2000, leaseMs: LEASE_MS, now: clock.now })
  t.equal(await here.hold(key, 1), null, 'refused here while the other process lives')
  await holder.kill()
  t.equal(await here.hold(key, 1), null, 'killed, it released nothing: still held for the rest of its lease')
  clock.set(Date.now() + LEASE_MS + 1)
  t.ok(await here.hold(key, 1), 'once its lease lapsed, the slot is free: no leak')
})

function recordingLog() {
  const warnings: string[] = []
  const infos: string[] = []
  const log = { warn: (_o: unknown, msg: string) => void warnings.push(msg), info: (msg: string) => void infos.push(msg) }
  return { warnings, infos, log: log as never }
}

t.test('Redis not answering: every limit counts in this process with the same limits, and one warning says so', async (t) => {
  const prefix = redisPrefix(t)
  const down = await redisClient(t)
  down.disconnect()
  const cfg: Config = { ...loadConfig({ env: {} }), registerRateLimit: 2, authorizeRateLimit: 1, listenMaxPerMember: 1, signInFreeAttempts: 1, signInDelayMs: 60_000, signInMaxDelayMs: 240_000 }
  const { warnings, log } = recordingLog()
  const store = openLimitsStore({ config: cfg, log, redis: down, key: (k) => prefix + k, leaseMs: LEASE_MS })
  t.teardown(() => store.close())

  t.match(await store.count(oauthRegister(cfg), '10.0.0.1'), { allowed: true, remaining: 1 }, 'registrations, in this process')
  t.match(await store.count(oauthRegister(cfg), '10.0.0.1'), { allowed: true, remaining: 0 })
  t.match(await store.count(oauthRegister(cfg), '10.0.0.1'), { allowed: false, limit: 2 }, 'refused at the same limit, not let through')
  t.match(await store.count(oauthAuthorize(cfg), '10.0.0.1'), { allowed: true })
  t.match(await store.count(oauthAuthorize(cfg), '10.0.0.1'), { allowed: false, limit: 1 }, 'authorizations too')

  const slot = await store.held.hold('ls:m', 1)
  t.ok(slot, 'a listen stream, held in this process')
  t.equal(await store.held.count('ls:m'), 1)
  t.equal(await store.held.hold('ls:m', 1), null, 'the same capacity')
  slot!()
  t.ok(await store.held.hold('ls:m', 1), 'released in this process')

  t.match(await store.signIn.begin('victim@example.com', '10.0.0.9'), { allowed: true }, 'failed sign-ins, in this process')
  t.match(await store.signIn.begin('victim@example.com', '10.0.0.9'), { allowed: false, by: 'account' }, 'still throttled')

  await t.rejects(store.shared!.takeStaged({ keys: [`${prefix}rl:m`], limits: [1], costs: [1], firstStage: 1 }, 1000), { name: 'RateStoreUnavailable' },
    '/mcp\'s script is refused at once (rate-limits.ts then counts in this process: shared-rate-limits.test.ts)')
  t.equal(warnings.length, 1, 'one warning for every limit')
  t.match(warnings[0], /Redis did not answer; this process counts on its own/)
  t.same(await redisKeys(prefix), [], 'nothing reached Redis')
})

async function twoProcesses(t: Test, config: Partial<Config>): Promise<[TestServer, TestServer, string]> {
  const url = await postgresDatabase(t)
  const prefix = redisPrefix(t)
  const shared = { envKey: ENV_KEY, redisUrl: redisUrl(), redisPrefix: prefix, heartbeatMs: 60_000, ...config }
  const a = await startServer(t, { dbPath: url, config: shared })
  const b = await startServer(t, { dbPath: url, config: shared })
  return [a, b, prefix]
}

async function listen(t: Test, server: TestServer, key: string, id: string): Promise<LiveStream> {
  const live = await modernLive(server.mcpUrl, key, 'subscriptions/listen', { notifications: {} }, { id })
  t.teardown(() => live.close())
  t.equal(live.status, 200, `${id}: a stream`)
  await live.waitFor(() => messagesOf(live).length >= 1, 3000, 'the acknowledgement')
  return live
}

t.test('open listen streams are bounded across two processes', async (t) => {
  const [a, b, prefix] = await twoProcesses(t, { listenMaxPerMember: 2 })
  const onA = await listen(t, a, a.apiKey, 'on-a')
  await listen(t, b, a.apiKey, 'on-b')
  t.ok((await redisKeys(prefix)).some((k) => k.startsWith(`${prefix}rl:ls:`)), 'the streams are held in Redis, under the deployment\'s prefix')
  for (const [server, name] of [[a, 'A'], [b, 'B']] as const) {
    const third = await modernPost(server.mcpUrl, a.apiKey, 'subscriptions/listen', { notifications: {} }, { id: 'third' })
    t.equal(third.status, 429, `a third stream, on ${name}: 429`)
    t.equal(third.json?.error?.code, 'RATE_LIMITED')
    t.equal(third.headers['x-ratelimit-limit'], '2')
  }
  onA.close()
  const again = await poll(async () => {
    const live = await modernLive(b.mcpUrl, a.apiKey, 'subscriptions/listen', { notifications: {} }, { id: 'again' })
    t.teardown(() => live.close())
    if (live.status === 429) {
      await live.ended(1000)
      return undefined
    }
    return live
  }, 3000, 'A to give its slot back')
  t.equal(again.status, 200, 'closed on A, its slot is taken on B')
})

t.test('/oauth/register: X-RateLimit-Remaining on every answer, counted across two processes', async (t) => {
  const [a, b] = await twoProcesses(t, { registerRateLimit: 3 })
  const register = async (server: TestServer) => {
    const res = await fetch(`${server.url}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'Test client', redirect_uris: ['http://127.0.0.1:9999/callback'] }),
    })
    await res.arrayBuffer()
    return { status: res.status, limit: res.headers.get('x-ratelimit-limit'), remaining: res.headers.get('x-ratelimit-remaining') }
  }
  t.same(await register(a), { status: 201, limit: '3', remaining: '2' })
  t.same(await register(b), { status: 201, limit: '3', remaining: '1' }, 'B sees A\'s registration')
  t.same(await register(a), { status: 201, limit: '3', remaining: '0' })
  t.same(await register(b), { status: 429, limit: '3', remaining: '0' })
})

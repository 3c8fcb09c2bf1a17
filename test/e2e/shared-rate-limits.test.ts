// test-backends: own (processes on PostgreSQL and Redis)
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import t, { type Test } from 'tap'
import { request } from 'undici'
import { SharedSignInThrottle } from '../../src/limits/shared-sign-in-throttle.js'
import { defineTool, type Config } from '../../src/index.js'
import { loadConfig } from '../../src/config.js'
import { RedisHeldOpen } from '../../src/limits/held-open.js'
import { oauthAuthorize, oauthRegister } from '../../src/limits/named.js'
import { openLimitsStore } from '../../src/limits/store.js'
import { RedisRateLimiter } from '../../src/limits/fixed-windows.js'
import { RateStoreUnavailable } from '../../src/limits/redis-answer.js'
import { builtinTools } from '../../src/plugins/tools/builtin/index.js'
import { postgresDatabase, redisClient, redisKeys, redisPrefix, redisUrl } from '../helpers/backends.js'
import { callTool, initializeMessage, openSession, post, type RpcReply } from '../helpers/mcp.js'
import { modernCall, modernLive, modernPost } from '../helpers/modern.js'
import { poll } from '../helpers/modern-runs.js'
import { messagesOf, type LiveStream } from '../helpers/stream.js'
import { startServer, type TestServer } from '../helpers/server.js'

/**
 * Limits counted in Redis when several processes share the database (src/limits/fixed-windows.ts RedisRateLimiter,
 * src/limits/shared-sign-in-throttle.ts, the OAuth endpoints' windows in the same store): requests alternated between two processes
 * are refused at the contract's limit, not at twice it.
 */

const ENV_KEY = Buffer.alloc(32, 0x4e).toString('base64')
const WINDOW_MS = 3000

const limited = defineTool<Record<string, never>, { ok: boolean }>({
  name: 'test_limited',
  title: 'Limited',
  description: 'Two calls per window.',
  inputSchema: { type: 'object', properties: {} },
  outputSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
  scope: 'mcp:read',
  role: 'viewer',
  rateLimitPerMinute: 2,
  async handler() {
    return { ok: true }
  },
})

async function twoProcesses(t: Test, config: Partial<Config>): Promise<[TestServer, TestServer, string]> {
  const url = await postgresDatabase(t)
  const prefix = redisPrefix(t)
  const shared = { envKey: ENV_KEY, redisUrl: redisUrl(), redisPrefix: prefix, rateLimitWindowMs: WINDOW_MS, rateLimitApiKeyMember: 1000, rateLimitOrganization: 1000, rateLimitToolFactor: 1, ...config }
  const a = await startServer(t, { dbPath: url, tools: [...builtinTools, limited], config: shared })
  const b = await startServer(t, { dbPath: url, tools: [...builtinTools, limited], config: shared })
  return [a, b, prefix]
}

function refused(t: Test, res: RpcReply, limit: number, what: string) {
  t.equal(res.status, 429, `${what}: HTTP 429`)
  t.equal(res.json?.error?.code, 'RATE_LIMITED', `${what}: RATE_LIMITED`)
  t.equal(res.headers['x-ratelimit-limit'], String(limit), `${what}: X-RateLimit-Limit ${limit}`)
  t.equal(res.headers['x-ratelimit-remaining'], '0', `${what}: X-RateLimit-Remaining 0`)
  t.match(String(res.headers['retry-after']), /^[1-3]$/, `${what}: Retry-After within the window`)
}

t.test('the member limit holds across two processes', async (t) => {
  const [a, b, prefix] = await twoProcesses(t, { rateLimitApiKeyMember: 12 })
  // Two POSTs each (initialize, notifications/initialized): 4 of the 12.
  const onA = await openSession(a.mcpUrl, a.apiKey)
  const onB = await openSession(b.mcpUrl, b.apiKey)
  for (let i = 0; i < 8; i++) {
    const [server, session] = i % 2 === 0 ? [a, onA] : [b, onB]
    t.equal((await post(server.mcpUrl, { jsonrpc: '2.0', id: i, method: 'tools/list', params: {} }, session.headers)).status, 200, `request ${5 + i} of 12 (${i % 2 === 0 ? 'A' : 'B'})`)
  }
  refused(t, await post(a.mcpUrl, { jsonrpc: '2.0', id: 'a', method: 'tools/list', params: {} }, onA.headers), 12, 'the 13th, on A')
  refused(t, await post(b.mcpUrl, { jsonrpc: '2.0', id: 'b', method: 'tools/list', params: {} }, onB.headers), 12, 'and on B')
  t.ok((await redisKeys(prefix)).some((k) => k.startsWith(`${prefix}rl:`)), 'the windows are in Redis, under the prefix')
})

t.test('a tool\'s limit holds across two processes', async (t) => {
  const [a, b] = await twoProcesses(t, {})
  const onA = await openSession(a.mcpUrl, a.apiKey)
  const onB = await openSession(b.mcpUrl, b.apiKey)
  t.equal((await post(a.mcpUrl, callTool('test_limited', {}, 1), onA.headers)).json?.result?.isError, false, 'first call, on A')
  t.equal((await post(b.mcpUrl, callTool('test_limited', {}, 2), onB.headers)).json?.result?.isError, false, 'second call, on B')
  const third = await post(a.mcpUrl, callTool('test_limited', {}, 3), onA.headers)
  t.equal(third.status, 429, 'the third, on A, is refused')
  t.equal(third.json?.error?.details?.scope, 'tool test_limited', 'by the tool\'s limit')
})

/**
 * The commands a server sends Redis about its rate limits (keys under `<prefix>rl:`), seen by wrapping its command
 * connection: each is one round trip.
 */
function rateCommands(t: Test, server: TestServer, prefix: string): { count(): number } {
  const redis = server.app.coordination.redis!
  const send = redis.sendCommand
  let n = 0
  redis.sendCommand = function (this: typeof redis, command, ...rest) {
    if (command.args.some((a) => String(a).startsWith(`${prefix}rl:`))) n++
    return send.call(this, command, ...rest)
  } as typeof send
  t.teardown(() => void (redis.sendCommand = send))
  return { count: () => n }
}

t.test('one Redis round trip per /mcp request, tools/call included: member, organization and tool windows together', async (t) => {
  const [a, , prefix] = await twoProcesses(t, {})
  const commands = rateCommands(t, a, prefix)
  const session = await openSession(a.mcpUrl, a.apiKey)
  // The script is loaded once per Redis: a first call may take two commands (EVALSHA, refused, then EVAL).
  t.equal((await post(a.mcpUrl, callTool('test_limited', {}, 0), session.headers)).json?.result?.isError, false)
  const trips = async (what: string, request: () => Promise<RpcReply | number>, expected = 1) => {
    const before = commands.count()
    const reply = await request()
    t.equal(commands.count() - before, expected, `${what}: ${expected} round trip`)
    return reply
  }
  const call = await trips('tools/call in a session', () => post(a.mcpUrl, callTool('service_apps_list', {}, 1), session.headers)) as RpcReply
  t.equal(call.json?.result?.isError, false, 'the call ran')
  const stateless = await trips('a stateless tools/call', () => modernCall(a.mcpUrl, a.apiKey, 'service_apps_list', {}, { id: 2 })) as RpcReply
  t.equal(stateless.status, 200)
  await trips('tools/list', () => post(a.mcpUrl, { jsonrpc: '2.0', id: 3, method: 'tools/list', params: {} }, session.headers))
  await trips('initialize', () => post(a.mcpUrl, initializeMessage(), { authorization: `Bearer ${a.apiKey}` }))
  await trips('a notification', () => post(a.mcpUrl, { jsonrpc: '2.0', method: 'notifications/initialized' }, session.headers))
  await trips('a POST refused before its methods are known (an unknown session)', () => post(a.mcpUrl, callTool('service_whoami', {}, 4), { ...session.headers, 'mcp-session-id': 'no-such-session' }))
  const old = await openSession(a.mcpUrl, a.apiKey, '2025-03-26')
  const batch = await trips('a batch of three tools/call', () => post(a.mcpUrl, [callTool('test_limited', {}, 5), callTool('service_whoami', {}, 6), callTool('service_whoami', {}, 7)], old.headers)) as RpcReply
  t.equal(batch.json?.length, 3, 'three answers')
  const deleted = await trips('DELETE', async () => {
    const res = await request(a.mcpUrl, { method: 'DELETE', headers: old.headers })
    await res.body.dump()
    return res.statusCode
  })
  t.equal(deleted, 204)
})

t.test('shared limits count every request once, refuse in the same order as in one process, and name the limiter', async (t) => {
  const [a, b] = await twoProcesses(t, { rateLimitApiKeyMember: 9 })
  const onA = await openSession(a.mcpUrl, a.apiKey) // 1, 2
  const onB = await openSession(b.mcpUrl, b.apiKey) // 3, 4
  t.equal((await post(a.mcpUrl, callTool('test_limited', {}, 1), onA.headers)).json?.result?.isError, false, '5: the tool\'s 1st call')
  t.equal((await post(b.mcpUrl, callTool('test_limited', {}, 2), onB.headers)).json?.result?.isError, false, '6: its 2nd, on B')
  const tool = await post(a.mcpUrl, callTool('test_limited', {}, 3), onA.headers)
  refused(t, tool, 2, '7: the tool\'s 3rd')
  t.equal(tool.json?.error?.details?.scope, 'tool test_limited', 'refused by the tool\'s window')
  // Refused by its tool, the request still counted for the member (as in one process, where the member's window is
  // counted at the entry): 7 of 9.
  t.equal((await post(b.mcpUrl, { jsonrpc: '2.0', id: 4, method: 'tools/list', params: {} }, onB.headers)).status, 200, '8')
  const unknown = await post(a.mcpUrl, callTool('service_whoami', {}, 5), { ...onA.headers, 'mcp-session-id': 'no-such-session' })
  t.equal(unknown.status, 404, '9: an unknown session is answered as such, and counted')
  const member = await post(b.mcpUrl, callTool('test_limited', {}, 6), onB.headers)
  refused(t, member, 9, '10: the member\'s window refuses before the tool\'s')
  t.equal(member.json?.error?.details?.scope, 'this member (API key)')
  refused(t, await post(a.mcpUrl, { jsonrpc: '2.0', method: 'notifications/initialized' }, onA.headers), 9, 'a notification')
  const get = await request(b.mcpUrl, { method: 'GET', headers: { ...onB.headers, accept: 'text/event-stream' } })
  t.equal(get.statusCode, 429, 'a GET')
  await get.body.dump()
  refused(t, await modernCall(a.mcpUrl, a.apiKey, 'service_whoami', {}, { id: 7 }), 9, 'a stateless call')
})

t.test('/oauth/register counts across two processes', async (t) => {
  const [a, b] = await twoProcesses(t, { registerRateLimit: 2 })
  const register = (server: TestServer) => request(`${server.url}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: 'Test client', redirect_uris: ['http://127.0.0.1:9999/callback'] }),
  }).then(async (res) => ({ status: res.statusCode, body: await res.body.json() as any }))
  t.equal((await register(a)).status, 201, 'first, on A')
  t.equal((await register(b)).status, 201, 'second, on B')
  const third = await register(a)
  t.equal(third.status, 429, 'the third, on A, is refused')
  t.equal(third.body.error, 'temporarily_unavailable', 'with an OAuth error body')
})

t.test('RedisRateLimiter: parallel checks from two connections never pass the limit; both windows or neither', async (t) => {
  const prefix = redisPrefix(t)
  const one = new RedisRateLimiter(await redisClient(t), { timeoutMs: 2000 })
  const two = new RedisRateLimiter(await redisClient(t), { timeoutMs: 2000 })
  const key = `${prefix}rl:race`
  const answers = await Promise.all(Array.from({ length: 200 }, (_, i) => (i % 2 === 0 ? one : two).take([key], [50], 10_000)))
  t.equal(answers.filter((a) => a === null).length, 50, 'exactly 50 of 200 parallel checks allowed')
  const refusal = answers.find((a) => a !== null)!
  t.match(refusal, { index: 0, allowed: false, limit: 50, remaining: 0 })

  const member = `${prefix}rl:m`
  const org = `${prefix}rl:o`
  t.equal(await one.take([member, org], [10, 2], 10_000, 2), null, 'a batch of 2 fits both')
  const over = await one.take([member, org], [10, 2], 10_000)
  t.match(over, { index: 1, limit: 2 }, 'the organization window refuses, and says so')
  t.equal(await one.take([member], [3], 10_000), null, 'refused by the organization, the request counted nothing for the member: 2 of 3 so far, room for 1')
  t.match(await one.take([member], [3], 10_000), { index: 0, remaining: 0 }, 'and then it is full')

  // Two stages (an /mcp request's member and organization windows, then its tool's), each window with its own cost.
  const m2 = `${prefix}rl:m2`
  const o2 = `${prefix}rl:o2`
  const tool = `${prefix}rl:t2`
  const staged = (costs: number[], limits = [5, 5, 2]) => one.takeStaged({ keys: [m2, o2, tool], limits, costs, firstStage: 2 }, 10_000)
  t.equal(await staged([2, 2, 2]), null, 'a batch of 2 calling the tool twice fits every window')
  t.match(await staged([1, 1, 1]), { index: 2, limit: 2, remaining: 0 }, 'the tool window refuses the next call')
  t.equal(await one.take([m2], [4], 10_000), null, 'refused by the second stage, the request counted in the first: the member holds 3, and 1 more fits 4')
  t.match(await staged([3, 3, 0], [5, 10, 2]), { index: 0, limit: 5 }, 'the member refuses 3 more (4 + 3 > 5)')
  t.equal(await one.take([o2], [4], 10_000), null, 'refused by the first stage, nothing counted: the organization holds 3 of 4')

  const short = `${prefix}rl:short`
  t.equal(await one.take([short], [1], 150), null)
  t.not(await one.take([short], [1], 150), null, 'refused within the window')
  await new Promise((r) => setTimeout(r, 200))
  t.equal(await one.take([short], [1], 150), null, 'allowed again once it passed')

  const down = new RedisRateLimiter(await redisClient(t, { lazyConnect: true }).then((r) => (r.disconnect(), r)), { timeoutMs: 2000 })
  await t.rejects(down.take([key], [50], 1000), RateStoreUnavailable, 'a connection that is down is answered at once')
})

t.test('SharedSignInThrottle: failures on one process make the other wait', async (t) => {
  const prefix = redisPrefix(t)
  const settings = { freeAttempts: 2, addressFreeAttempts: 100, delayMs: 1000, maxDelayMs: 4000 }
  let unavailable = 0
  const options = { key: (name: string) => prefix + name, timeoutMs: 2000, onUnavailable: () => void unavailable++ }
  const a = new SharedSignInThrottle(await redisClient(t), settings, options)
  const b = new SharedSignInThrottle(await redisClient(t), settings, options)
  const now = Date.now()
  t.match(await a.begin('victim@example.com', '10.0.0.1', now), { allowed: true, attempt: { accountFailures: 1 } })
  const second = await b.begin('victim@example.com', '10.0.0.2', now + 1)
  t.match(second, { allowed: true, attempt: { accountFailures: 2 } }, 'B counts A\'s failure: the last free attempt')
  const waiting = await a.begin('victim@example.com', '10.0.0.3', now + 2)
  t.match(waiting, { allowed: false, by: 'account' }, 'then A refuses: the account must wait')
  t.ok(!waiting.allowed && waiting.retryAfterMs > 900 && waiting.retryAfterMs <= 1000, 'for the first delay')
  t.notOk((await redisKeys(prefix)).some((k) => k.includes('victim')), 'no email in Redis keys')
  if (second.allowed) await b.succeeded(second.attempt)
  t.match(await a.begin('victim@example.com', '10.0.0.4', now + 3), { allowed: true, attempt: { accountFailures: 1 } }, 'a success through B starts the account afresh for A')
  t.equal(unavailable, 0)
})

/*
 * The limits store in Redis (src/limits/store.ts): the endpoint windows and the held-open counters shared by several
 * processes, held-open slots that free themselves when the process holding them dies (its lease is no longer renewed),
 * and the one behaviour of every limit when Redis does not answer: counted in this process, with the same limits, one
 * warning.
 */

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

async function twoPlainProcesses(t: Test, config: Partial<Config>): Promise<[TestServer, TestServer, string]> {
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
  const [a, b, prefix] = await twoPlainProcesses(t, { listenMaxPerMember: 2 })
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
  const [a, b] = await twoPlainProcesses(t, { registerRateLimit: 3 })
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

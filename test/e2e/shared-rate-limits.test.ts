// test-backends: own (processes on PostgreSQL and Redis)
import t, { type Test } from 'tap'
import { request } from 'undici'
import { SharedSignInThrottle } from '../../src/limits/shared-sign-in-throttle.js'
import { defineTool, type Config } from '../../src/index.js'
import { RedisRateLimiter } from '../../src/limits/fixed-windows.js'
import { RateStoreUnavailable } from '../../src/limits/redis-answer.js'
import { builtinTools } from '../../src/plugins/tools/builtin/index.js'
import { postgresDatabase, redisClient, redisKeys, redisPrefix, redisUrl } from '../helpers/backends.js'
import { callTool, initializeMessage, openSession, post, type RpcReply } from '../helpers/mcp.js'
import { modernCall } from '../helpers/modern.js'
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

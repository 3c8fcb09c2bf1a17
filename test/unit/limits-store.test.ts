/**
 * The limits store in memory (one process): each named limit counted in its window or held open up to its capacity,
 * the refusal each one declares, and the one reporter of Redis outages (a warning at most once per interval, info when
 * Redis answers again). The Redis backend of each is in test/e2e/shared-rate-limits.test.ts.
 */
import t from 'tap'
import { loadConfig, type Config } from '../../src/config.js'
import { isServiceError } from '../../src/errors/service-error.js'
import { RateLimiter } from '../../src/limits/fixed-windows.js'
import { MemoryHeldOpen } from '../../src/limits/held-open.js'
import { listenStreams, mcpMember, oauthAuthorize, oauthRegister, pendingAuthorizationsRefusal, signInRefusal } from '../../src/limits/named.js'
import { RedisOutage } from '../../src/limits/redis-answer.js'
import { openLimitsStore } from '../../src/limits/store.js'
import { SignInThrottle } from '../../src/limits/sign-in-throttle.js'

function config(overrides: Partial<Config> = {}): Config {
  return { ...loadConfig({ env: {} }), ...overrides }
}

/** A logger that keeps what it was told. */
function recordingLog() {
  const lines: Array<{ level: 'warn' | 'info'; msg: string }> = []
  const log = {
    warn: (_obj: unknown, msg?: string) => void lines.push({ level: 'warn', msg: String(msg) }),
    info: (msg: unknown) => void lines.push({ level: 'info', msg: String(msg) }),
  }
  return { lines, log: log as never }
}

t.test('RateLimiter.count: the decision either way, with what is left of the window', async (t) => {
  const windows = new RateLimiter()
  t.match(windows.count('k', 2, 10_000, 0), { allowed: true, limit: 2, remaining: 1, retryAfter: 10 })
  t.match(windows.count('k', 2, 10_000, 4_000), { allowed: true, remaining: 0, retryAfter: 6 })
  t.match(windows.count('k', 2, 10_000, 5_000), { allowed: false, remaining: 0, retryAfter: 5 }, 'the third is refused')
  t.match(windows.count('k', 2, 10_000, 5_001), { allowed: false }, 'a refusal counted nothing: still full, not over')
  t.match(windows.count('k', 2, 10_000, 10_000), { allowed: true, remaining: 1 }, 'a new window')
})

t.test('MemoryHeldOpen: up to the capacity per key; a release frees one slot, once', async (t) => {
  const held = new MemoryHeldOpen()
  const one = held.hold('a', 2)
  const two = held.hold('a', 2)
  t.ok(one && two, 'two slots of a capacity of 2')
  t.equal(held.hold('a', 2), null, 'the third is refused')
  t.ok(held.hold('b', 2), 'another key has slots of its own')
  t.equal(held.count('a'), 2)
  one!()
  one!()
  t.equal(held.count('a'), 1, 'released twice, freed once')
  t.ok(held.hold('a', 2), 'the freed slot is taken again')
  two!()
  t.equal(held.count('a'), 1)
})

t.test('the memory store: every named limit counts in this process', async (t) => {
  const cfg = config({ registerRateLimit: 2, registerRateLimitWindowMs: 60_000, authorizeRateLimit: 1, listenMaxPerMember: 1 })
  const store = openLimitsStore({ config: cfg, log: recordingLog().log, redis: null, key: (k) => `p:${k}` })
  t.teardown(() => store.close())
  t.equal(store.shared, null, 'no Redis')
  t.equal(store.name('m:x'), 'm:x', 'counters keep their short names')
  t.ok(store.signIn instanceof SignInThrottle, 'failed sign-ins in this process')

  t.match(await store.count(oauthRegister(cfg), '10.0.0.1'), { allowed: true, remaining: 1 })
  t.match(await store.count(oauthRegister(cfg), '10.0.0.1'), { allowed: true, remaining: 0 })
  const refused = await store.count(oauthRegister(cfg), '10.0.0.1')
  t.match(refused, { allowed: false, limit: 2 }, 'registrations: the third from one address')
  t.match(await store.count(oauthRegister(cfg), '10.0.0.2'), { allowed: true }, 'another address')
  t.match(await store.count(oauthAuthorize(cfg), '10.0.0.1'), { allowed: true }, 'the authorize window is another one')
  t.match(await store.count(oauthAuthorize(cfg), '10.0.0.1'), { allowed: false, limit: 1 })

  const slot = await store.held.hold('ls:member', 1)
  t.ok(slot, 'a listen stream')
  t.equal(await store.held.hold('ls:member', 1), null, 'the member\'s second, at a capacity of 1')
})

t.test('each named limit refuses in its own words, naming its limiter', async (t) => {
  const cfg = config({ registerRateLimit: 2, authorizeRateLimit: 3, listenMaxPerMember: 4, pendingAuthorizationsPerAddress: 5 })
  const decision = { allowed: false, limit: 2, remaining: 0, retryAfter: 7 }
  const cases = [
    { err: oauthRegister(cfg).refusal(decision), limiter: 'oauth_register', message: /^Too many registrations from this address: 2 per window$/, headers: true },
    { err: oauthAuthorize(cfg).refusal({ ...decision, limit: 3 }), limiter: 'oauth_authorize', message: /try again in 7 seconds\.$/, headers: true },
    { err: listenStreams.refusal(cfg), limiter: 'listen_streams', message: /keep 4 subscriptions\/listen streams open/, headers: true },
    { err: pendingAuthorizationsRefusal(cfg, 130), limiter: 'pending_authorizations', message: /try again in 3 minutes\.$/, headers: false },
    { err: signInRefusal('account', 1), limiter: 'sign_in_account', message: /for this account; try again in 1 second\.$/, headers: false },
    { err: signInRefusal('address', 42), limiter: 'sign_in_address', message: /from your network; try again in 42 seconds\.$/, headers: false },
    { err: mcpMember.refusal({ kind: 'oauth' } as never, decision), limiter: 'mcp_member_oauth', message: /this member \(OAuth\) allows 2 per window/, headers: true },
  ]
  for (const c of cases) {
    t.ok(isServiceError(c.err), `${c.limiter}: a service error`)
    t.equal(c.err.code, 'RATE_LIMITED', `${c.limiter}: RATE_LIMITED`)
    t.equal(c.err.limiter, c.limiter, `${c.limiter}: names its limiter`)
    t.match(c.err.message, c.message, `${c.limiter}: its message`)
    t.equal(c.err.headers?.['x-ratelimit-remaining'], c.headers ? '0' : undefined, `${c.limiter}: X-RateLimit-Remaining ${c.headers ? '0' : 'absent'}`)
  }
})

t.test('RedisOutage: one warning per interval while Redis fails, one info line when it answers again', async (t) => {
  const { lines, log } = recordingLog()
  const outage = new RedisOutage(log, 30_000)
  outage.answered()
  t.same(lines, [], 'nothing said while Redis answers')
  outage.failed('mcp', new Error('down'), 1_000)
  outage.failed('sign-in throttle', new Error('down'), 2_000)
  outage.failed('oauth_register', new Error('down'), 30_999)
  t.equal(lines.length, 1, 'one warning for every limit within the interval')
  t.equal(outage.down, true)
  outage.failed('mcp', new Error('down'), 31_000)
  t.equal(lines.length, 2, 'again once the interval passed')
  outage.answered()
  outage.answered()
  t.same(lines.map((l) => l.level), ['warn', 'warn', 'info'], 'its end, once')
  t.equal(outage.down, false)
  outage.failed('mcp', new Error('down'), 31_001)
  t.equal(lines.length, 4, 'a new outage warns at once')
})

import type { Redis } from 'ioredis'
import { sha256Hex } from '../lib/crypto.js'
import { redisAnswer } from './redis-answer.js'
import { SignInThrottle, type SignInAttempt, type SignInGate, type SignInThrottleSettings } from './sign-in-throttle.js'

/** What the sign-in forms ask of a throttle: SignInThrottle in one process, SharedSignInThrottle across several. */
export interface SignInGatekeeper {
  begin(account: string | null, address: string): SignInGate | Promise<SignInGate>
  succeeded(attempt: SignInAttempt): void | Promise<void>
  /** Forgets keys whose failures no longer matter (in this process). */
  sweep(now?: number): void
}

/**
 * SignInThrottle's rule, kept in Redis (one hash per account and per address: `count`, `lastAt`). KEYS are the
 * account (when there is one) and the address; ARGV[1] the time, ARGV[2] delayMs, ARGV[3] maxDelayMs, ARGV[3 + i] the
 * free failures of KEYS[i]. When no key must wait, each counts one more failure (from now on, until forgiven) and the
 * answer is {1, failures of KEYS[1], …}; otherwise nothing is counted and the answer is {0, i, ms to wait} for the key
 * that waits longest (the account on a tie). A key is forgotten (expires) once maxDelayMs has passed after its wait
 * ended, as in memory.
 */
const BEGIN_SCRIPT = `
local now = tonumber(ARGV[1])
local delay = tonumber(ARGV[2])
local maxDelay = tonumber(ARGV[3])
local function wait(count, free)
  if count < free then return 0 end
  return math.min(maxDelay, delay * 2 ^ math.min(count - free, 40))
end
local counts = {}
local longest, by = 0, 0
for i, key in ipairs(KEYS) do
  local free = tonumber(ARGV[3 + i])
  local f = redis.call('HMGET', key, 'count', 'lastAt')
  local count, lastAt = tonumber(f[1]), tonumber(f[2])
  if not count or not lastAt or now >= lastAt + wait(count, free) + maxDelay then
    count = 0
  else
    local left = lastAt + wait(count, free) - now
    if left > longest then longest, by = left, i end
  end
  counts[i] = count
end
if longest > 0 then return {0, by, math.ceil(longest)} end
local out = {1}
for i, key in ipairs(KEYS) do
  local count = counts[i] + 1
  redis.call('HSET', key, 'count', count, 'lastAt', ARGV[1])
  redis.call('PEXPIRE', key, math.floor(wait(count, tonumber(ARGV[3 + i])) + maxDelay))
  out[i + 1] = count
end
return out
`

/** KEYS[1] the address, KEYS[2] the account if any: the account starts afresh, the address gets one failure back. */
const SUCCEEDED_SCRIPT = `
if redis.call('EXISTS', KEYS[1]) == 1 and redis.call('HINCRBY', KEYS[1], 'count', -1) <= 0 then
  redis.call('DEL', KEYS[1])
end
if KEYS[2] then redis.call('DEL', KEYS[2]) end
return 0
`

const BEGIN_COMMAND = 'serviceMcpSignInBegin'
const SUCCEEDED_COMMAND = 'serviceMcpSignInSucceeded'

type BeginAnswer = [1, ...failures: number[]] | [0, by: number, waitMs: number]
type WithScripts = Redis & {
  [BEGIN_COMMAND](numKeys: number, ...args: Array<string | number>): Promise<BeginAnswer>
  [SUCCEEDED_COMMAND](numKeys: number, ...keys: string[]): Promise<0>
}

export interface SharedSignInThrottleOptions {
  /** A Redis key of this deployment (coordination.key). */
  key(name: string): string
  /** How long a check waits for Redis before this process decides alone. */
  timeoutMs: number
  /** Redis failed or did not answer in time: the attempt was judged by this process's throttle instead. */
  onUnavailable(err: unknown): void
  /** Redis answered (the end of an outage, RedisOutage.answered). */
  onAnswered?(): void
}

/**
 * The sign-in throttle shared by the processes of a deployment through Redis, so that N processes do not allow N
 * times the attempts. Each check is one script (one round trip), atomic: parallel attempts on any processes are
 * counted in turn, as in one process. Accounts are keyed by the SHA-256 of the normalized email (no address in Redis's
 * keys), addresses as clientAddressKey gives them.
 *
 * When Redis fails, the attempt is judged by this process's own SignInThrottle, with the same settings: password
 * guessing stays slowed down (per process) rather than either stopping sign-ins or running free, until Redis answers
 * (the one behaviour of every limit, docs/decisions/limits.md).
 */
export class SharedSignInThrottle implements SignInGatekeeper {
  readonly #redis: WithScripts
  readonly #settings: SignInThrottleSettings
  readonly #options: SharedSignInThrottleOptions
  readonly #local: SignInThrottle
  /** Attempts let through by the local throttle: it forgives them too. */
  readonly #judgedLocally = new WeakSet<SignInAttempt>()

  constructor(redis: Redis, settings: SignInThrottleSettings, options: SharedSignInThrottleOptions) {
    this.#redis = redis as unknown as WithScripts
    if (typeof this.#redis[BEGIN_COMMAND] !== 'function') redis.defineCommand(BEGIN_COMMAND, { lua: BEGIN_SCRIPT })
    if (typeof this.#redis[SUCCEEDED_COMMAND] !== 'function') redis.defineCommand(SUCCEEDED_COMMAND, { lua: SUCCEEDED_SCRIPT })
    this.#settings = settings
    this.#options = options
    this.#local = new SignInThrottle(settings)
  }

  #accountKey(account: string): string {
    return this.#options.key(`sin:a:${sha256Hex(account)}`)
  }

  #addressKey(address: string): string {
    return this.#options.key(`sin:ip:${address}`)
  }

  async begin(account: string | null, address: string, now = Date.now()): Promise<SignInGate> {
    const s = this.#settings
    const keys = account === null ? [this.#addressKey(address)] : [this.#accountKey(account), this.#addressKey(address)]
    const frees = account === null ? [s.addressFreeAttempts] : [s.freeAttempts, s.addressFreeAttempts]
    let answer: BeginAnswer
    try {
      if (this.#redis.status !== 'ready') throw new Error(`Redis connection is ${this.#redis.status}`)
      answer = await redisAnswer(this.#redis[BEGIN_COMMAND](keys.length, ...keys, now, s.delayMs, s.maxDelayMs, ...frees), this.#options.timeoutMs)
    } catch (err) {
      this.#options.onUnavailable(err)
      const gate = this.#local.begin(account, address, now)
      if (gate.allowed) this.#judgedLocally.add(gate.attempt)
      return gate
    }
    this.#options.onAnswered?.()
    if (answer[0] === 0) {
      const [, by, waitMs] = answer
      return { allowed: false, by: account !== null && by === 1 ? 'account' : 'address', retryAfterMs: waitMs }
    }
    const accountFailures = account === null ? 0 : answer[1]!
    const addressFailures = answer[account === null ? 1 : 2]!
    return { allowed: true, attempt: { account, address, accountFailures, addressFailures } }
  }

  async succeeded(attempt: SignInAttempt): Promise<void> {
    if (this.#judgedLocally.has(attempt)) return this.#local.succeeded(attempt)
    const keys = attempt.account === null ? [this.#addressKey(attempt.address)] : [this.#addressKey(attempt.address), this.#accountKey(attempt.account)]
    try {
      if (this.#redis.status !== 'ready') throw new Error(`Redis connection is ${this.#redis.status}`)
      await redisAnswer(this.#redis[SUCCEEDED_COMMAND](keys.length, ...keys), this.#options.timeoutMs)
    } catch (err) {
      // The failure stays counted until it is forgotten: one more than there should be, on the safe side.
      this.#options.onUnavailable(err)
    }
  }

  sweep(now = Date.now()): void {
    this.#local.sweep(now)
  }
}

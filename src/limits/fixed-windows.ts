import type { Redis } from 'ioredis'
import type { LimiterName } from '../errors/service-error.js'
import { systemClock, type Clock } from '../lib/clock.js'
import { RateStoreUnavailable, redisAnswer } from './redis-answer.js'

/**
 * Fixed-window counters: in memory when one process serves everything (`RateLimiter`: a hit costs one Map lookup;
 * expired windows are dropped by `sweep()`, so memory follows the number of keys active in the current window), in
 * Redis when several processes share the limits (`RedisRateLimiter`: one round trip per check, which may cover the
 * windows of a whole /mcp request).
 */
export interface RateDecision {
  allowed: boolean
  limit: number
  remaining: number
  /** Seconds until the window resets (for Retry-After), at least 1. */
  retryAfter: number
}

/**
 * A limit a JSON-RPC method declares for a request, beside the member's and the organization's (a tool's own, per
 * member and tool). Made once per thing limited (each tool), so that checking it allocates nothing.
 */
export interface DeclaredLimit {
  /** Names the window within a member's: requests declaring the same id share it (`t:<tool name>`). */
  readonly id: string
  /** Requests per window (SERVICE_RATE_LIMIT_WINDOW_MS). */
  readonly limit: number
  /** What the refusal names: "Too many requests: <scope> allows N per window". */
  readonly scope: string
  readonly limiter: LimiterName
}

export class RateLimiter {
  readonly #windows = new Map<string, { count: number; resetAt: number }>()

  /** @param clock decides when a window starts and resets (docs/decisions/clock.md). */
  constructor(readonly clock: Clock = systemClock) {}

  /**
   * Counts `cost` requests (a batch counts each of its messages). Null when they all fit the window (nothing is
   * allocated on that path, taken by every request); otherwise the refusal, and nothing is counted.
   */
  take(key: string, limit: number, windowMs: number, now = this.clock.now(), cost = 1): RateDecision | null {
    let w = this.#windows.get(key)
    if (w === undefined || w.resetAt <= now) {
      w = { count: 0, resetAt: now + windowMs }
      this.#windows.set(key, w)
    }
    if (w.count + cost <= limit) {
      w.count += cost
      return null
    }
    const retryAfter = Math.max(1, Math.ceil((w.resetAt - now) / 1000))
    return { allowed: false, limit, remaining: Math.max(0, limit - w.count), retryAfter }
  }

  /**
   * Takes back `cost` that `take` counted in the current window: when a request counted in one window is then refused
   * by another, it counts in neither.
   */
  giveBack(key: string, cost = 1, now = this.clock.now()): void {
    const w = this.#windows.get(key)
    if (w !== undefined && w.resetAt > now) w.count = Math.max(0, w.count - cost)
  }

  /**
   * Counts one request when it fits: the decision either way, with what is left of the window (for the
   * X-RateLimit-Remaining of an endpoint's every answer).
   */
  count(key: string, limit: number, windowMs: number, now = this.clock.now()): RateDecision {
    const refused = this.take(key, limit, windowMs, now)
    if (refused !== null) return refused
    const w = this.#windows.get(key)!
    return { allowed: true, limit, remaining: limit - w.count, retryAfter: Math.max(1, Math.ceil((w.resetAt - now) / 1000)) }
  }

  sweep(now = this.clock.now()): void {
    for (const [key, w] of this.#windows) if (w.resetAt <= now) this.#windows.delete(key)
  }

  get size(): number {
    return this.#windows.size
  }
}

/** A refusal by one of the windows of a `RedisRateLimiter.take`. */
export interface SharedRefusal extends RateDecision {
  /** Which window refused: its position in the keys given. */
  index: number
}

/**
 * Checks and counts fixed windows in two stages, in one round trip. KEYS are the windows; ARGV[1] the window length
 * (ms), ARGV[2] how many of the KEYS form the first stage; then, for each key i, its limit (ARGV[2i + 1]) and what it
 * counts (ARGV[2i + 2]). A stage counts in every window of it or, refused by one, in none: the first stage is checked
 * and counted, then the second. So a refusal by the first counts nothing, and one by the second leaves the first
 * counted, as two checks made one after the other would (an /mcp request's member and organization windows, then
 * the windows its method declares: a tool's). Each window counted opens a window that expires ARGV[1] ms later (the
 * key is the window). The answer is 0, or the first window that refused: {i, its count, ms until it resets}. As in
 * memory, a refusal that finds no window opens one (with nothing counted), so the windows start where they would
 * have in one process.
 *
 * A script runs alone in Redis: concurrent checks from any number of processes are serialized, so no two can both see
 * room for the last request.
 */
const TAKE_SCRIPT = `
local window = tonumber(ARGV[1])
local split = tonumber(ARGV[2])
local opened = {}
local function check(from, to)
  for i = from, to do
    local key = KEYS[i]
    local count = redis.call('GET', key)
    if count then
      count = tonumber(count)
    else
      count = 0
      opened[i] = true
    end
    if count + tonumber(ARGV[2 + 2 * i]) > tonumber(ARGV[1 + 2 * i]) then
      local left = redis.call('PTTL', key)
      if left < 0 then
        redis.call('SET', key, count, 'PX', window)
        left = window
      end
      return {i, count, left}
    end
  end
  return false
end
local function add(from, to)
  for i = from, to do
    redis.call('INCRBY', KEYS[i], ARGV[2 + 2 * i])
    if opened[i] then redis.call('PEXPIRE', KEYS[i], window) end
  end
end
local refused = check(1, split)
if refused then return refused end
add(1, split)
refused = check(split + 1, #KEYS)
if refused then return refused end
add(split + 1, #KEYS)
return 0
`

/**
 * One window, counted when it fits, answered either way: {1 or 0 (refused), its count, ms until it resets}. A refusal
 * counts nothing and, finding no window, opens one, as TAKE_SCRIPT does. KEYS[1] the window; ARGV[1] its length (ms),
 * ARGV[2] its limit.
 */
const COUNT_SCRIPT = `
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
if count + 1 > tonumber(ARGV[2]) then
  local left = redis.call('PTTL', KEYS[1])
  if left < 0 then
    redis.call('SET', KEYS[1], count, 'PX', ARGV[1])
    left = tonumber(ARGV[1])
  end
  return {0, count, left}
end
count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {1, count, redis.call('PTTL', KEYS[1])}
`
const COUNT_COMMAND = 'serviceMcpRateCount'

/** The name of the script's command on the connection (ioredis sends EVALSHA, and the script itself if Redis lost it). */
const TAKE_COMMAND = 'serviceMcpRateTake'

type TakeAnswer = 0 | [index: number, count: number, leftMs: number]
type WithTake = Redis & {
  [TAKE_COMMAND](numKeys: number, ...args: Array<string | number>): Promise<TakeAnswer>
  [COUNT_COMMAND](numKeys: number, key: string, windowMs: number, limit: number): Promise<[allowed: 0 | 1, count: number, leftMs: number]>
}

/** The windows of one staged check (RedisRateLimiter.takeStaged): limits and costs at the positions of their keys. */
export interface StagedWindows {
  keys: readonly string[]
  limits: readonly number[]
  costs: readonly number[]
  /** How many of the keys, from the first, form the first stage. */
  firstStage: number
}

export interface RedisRateLimiterOptions {
  /** A check Redis has not answered after this long fails (RateStoreUnavailable), rather than hold the request. */
  timeoutMs: number
}

/**
 * Fixed windows in Redis, shared by every process that uses the same keys.
 *
 * The checks made in one turn of the event loop go to Redis in one write: the first corks the connection's socket and
 * the rest are buffered behind it until the turn's I/O callbacks are done (setImmediate), when they leave together.
 * Under load a turn reads many requests, and each write to a socket costs a system call that, on a loopback or a
 * virtual machine's network, costs as much as a good part of the request; alone, a check waits for nothing but the
 * end of its own turn. Each check is still its own script and its own answer: one round trip per request.
 */
export class RedisRateLimiter {
  readonly #redis: WithTake
  readonly #timeoutMs: number
  #corked = false

  constructor(redis: Redis, options: RedisRateLimiterOptions) {
    this.#redis = redis as unknown as WithTake
    // Defined once per connection: every limiter on it shares the command.
    if (typeof this.#redis[TAKE_COMMAND] !== 'function') redis.defineCommand(TAKE_COMMAND, { lua: TAKE_SCRIPT })
    if (typeof this.#redis[COUNT_COMMAND] !== 'function') redis.defineCommand(COUNT_COMMAND, { lua: COUNT_SCRIPT })
    this.#timeoutMs = options.timeoutMs
  }

  /**
   * Counts `cost` in every window of `keys` (each with the limit at the same position in `limits`) when it fits all
   * of them: null. Otherwise nothing is counted, and the refusal of the first window that has no room. Rejects with
   * RateStoreUnavailable when Redis cannot be asked or does not answer within the timeout.
   */
  take(keys: readonly string[], limits: readonly number[], windowMs: number, cost = 1): Promise<SharedRefusal | null> {
    return this.takeStaged({ keys, limits, costs: keys.map(() => cost), firstStage: keys.length }, windowMs)
  }

  /**
   * One window, as RateLimiter.count: counted when it fits, the decision and what is left either way (one round trip).
   * Rejects with RateStoreUnavailable as `take` does.
   */
  count(key: string, limit: number, windowMs: number): Promise<RateDecision> {
    const redis = this.#redis
    if (redis.status !== 'ready') return Promise.reject(new RateStoreUnavailable(`Redis connection is ${redis.status}`))
    return redisAnswer(redis[COUNT_COMMAND](1, key, windowMs, limit), this.#timeoutMs).then(([allowed, count, leftMs]) => ({
      allowed: allowed === 1,
      limit,
      remaining: Math.max(0, limit - count),
      retryAfter: Math.max(1, Math.ceil(leftMs / 1000)),
    }))
  }

  /** Corks the connection until the end of this turn of the event loop, unless it already is. */
  #writeWithTurn(): void {
    if (this.#corked) return
    const stream = this.#redis.stream
    this.#corked = true
    stream.cork()
    setImmediate(() => {
      this.#corked = false
      stream.uncork()
    })
  }

  /**
   * Two stages of windows in one round trip: the first `firstStage` of `windows.keys`, then the rest, each window
   * counting its own cost (TAKE_SCRIPT). Null when every window counted; otherwise the refusal of the first window
   * that had no room (`index` into the keys), with its stage counted in none of its windows and an earlier stage
   * counted. Rejects with RateStoreUnavailable as `take` does.
   */
  takeStaged(windows: StagedWindows, windowMs: number): Promise<SharedRefusal | null> {
    const redis = this.#redis
    // While the connection is down, ioredis would queue the command until it gives up: answer at once instead.
    if (redis.status !== 'ready') return Promise.reject(new RateStoreUnavailable(`Redis connection is ${redis.status}`))
    const { keys, limits, costs } = windows
    const args: Array<string | number> = [keys.length, ...keys, windowMs, windows.firstStage]
    for (let i = 0; i < keys.length; i++) args.push(limits[i]!, costs[i]!)
    this.#writeWithTurn()
    return redisAnswer(redis[TAKE_COMMAND](...(args as [number, ...Array<string | number>])), this.#timeoutMs).then((a) => {
      if (a === 0) return null
      const [i, count, leftMs] = a
      const limit = limits[i - 1]!
      return { index: i - 1, allowed: false, limit, remaining: Math.max(0, limit - count), retryAfter: Math.max(1, Math.ceil(leftMs / 1000)) }
    })
  }
}

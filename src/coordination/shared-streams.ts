import type { ServerResponse } from 'node:http'
import type { FastifyBaseLogger } from 'fastify'
import type { Redis } from 'ioredis'
import { ServiceError } from '../errors/service-error.js'
import { formatEvent, HEARTBEAT_FRAME, type StreamMirror } from '../lib/sse.js'
import { errorResponse } from '../rpc/dispatcher.js'
import { messageJson } from '../lib/message-json.js'
import type { RequestId } from '../rpc/types.js'

/**
 * Resumable call streams that any process can replay. A 2025 client whose call stream dropped resumes with
 * `GET /mcp` + `Last-Event-ID`, and behind a balancer without sticky sessions that GET lands on any process. So, when
 * several processes share the database, every event of a call stream is also appended to a Redis stream, and a
 * process that does not hold the call replays what the client missed from there, then follows the new events until
 * the call's stream ends.
 *
 * Keys, per session and stream (a stream id is unique within its session, and a Last-Event-ID is only ever looked up
 * under the session the request proved it owns, so another session's stream is never found):
 * - `sse:<session>:<stream>`: the events, `{s: seq, f: frame}`, trimmed to about SERVICE_SSE_REPLAY_EVENTS like the
 *   buffer in memory, and a last entry `{e: 1}` when the stream ended;
 * - `sse:<session>:<stream>:m`: `{p: owner process, r: the stream's request ids}`.
 * Both expire LIVE_TTL_MS after the last event while the call runs (so a dead owner's keys cannot stay for ever), and
 * SERVICE_SSE_RETAIN_MS after the end, as a retained stream does in memory.
 *
 * Appends never hold or reorder the local stream: they are sent in order on the command connection, and a failure is
 * logged (that stream is then not replayable elsewhere; the local one is untouched). A follower reads with XREAD BLOCK
 * on a connection of its own, and every `checkEveryMs` without news asks whether the owner is still alive: once its
 * lease lapsed, the calls it ran cannot answer any more, so the follower answers each unanswered request with an error
 * and ends, rather than leave the client waiting for its own timeout.
 */

/** How long the keys of a stream still running live without a new event. */
export const LIVE_TTL_MS = 3_600_000

export interface SharedStreamsOptions {
  redis: Redis
  /** A Redis key of this deployment (coordination.key). */
  key(name: string): string
  /** This process: the owner of the streams it mirrors. */
  processId: string
  /** The processes whose lease has not lapsed (ProcessRegistry.liveIds). */
  liveIds(): Promise<string[]>
  /** SERVICE_SSE_REPLAY_EVENTS. */
  replayEvents: number
  /** SERVICE_SSE_RETAIN_MS. */
  retainMs: number
  /** SERVICE_HEARTBEAT_MS: a follower's heartbeats. */
  heartbeatMs: number
  /** How often a follower without news checks that the owner lives (a third of SERVICE_LEASE_MS). */
  checkEveryMs: number
  log: FastifyBaseLogger
}

interface StreamMeta {
  /** The owner process. */
  p: string
  /** The ids of the requests the stream answers. */
  r: RequestId[]
}

type Entry = [id: string, fields: string[]]

/** A stream entry's fields as a record (Redis returns them as a flat list). */
function fieldsOf(fields: string[]): Record<string, string> {
  const out: Record<string, string> = {}
  for (let i = 0; i + 1 < fields.length; i += 2) out[fields[i]!] = fields[i + 1]!
  return out
}

/** The id of the JSON-RPC response a frame carries, if it carries one. */
function answeredId(frame: string): RequestId | undefined {
  const at = frame.indexOf('\ndata: ')
  if (at < 0) return undefined
  try {
    const message = JSON.parse(frame.slice(at + 7)) as Record<string, unknown>
    if ('method' in message || !('id' in message)) return undefined
    return message.id as RequestId
  } catch {
    return undefined
  }
}

export class SharedStreams {
  readonly #o: SharedStreamsOptions
  /** Responses of followers still open, ended when the server closes. */
  readonly #followers = new Set<() => void>()
  #warnedAt = -Infinity

  constructor(options: SharedStreamsOptions) {
    this.#o = options
  }

  #keys(sessionId: string, streamId: string): { events: string; meta: string } {
    const events = this.#o.key(`sse:${sessionId}:${streamId}`)
    return { events, meta: `${events}:m` }
  }

  #appendFailed = (err: unknown): void => {
    const now = Date.now()
    if (now - this.#warnedAt < 30_000) return
    this.#warnedAt = now
    this.#o.log.warn({ err: (err as Error).message }, 'call stream events could not be kept in Redis: those streams resume only on this process')
  }

  /** Mirrors a call stream of this process into Redis. */
  mirror(sessionId: string, streamId: string, requestIds: readonly RequestId[]): StreamMirror {
    const { redis, replayEvents, retainMs } = this.#o
    const { events, meta } = this.#keys(sessionId, streamId)
    const owner: StreamMeta = { p: this.#o.processId, r: [...requestIds] }
    redis.set(meta, JSON.stringify(owner), 'PX', LIVE_TTL_MS).catch(this.#appendFailed)
    return {
      event: (seq, frame) => {
        redis.pipeline()
          .xadd(events, 'MAXLEN', '~', replayEvents, '*', 's', seq, 'f', frame)
          .pexpire(events, LIVE_TTL_MS)
          .pexpire(meta, LIVE_TTL_MS)
          .exec()
          .catch(this.#appendFailed)
      },
      end: () => {
        redis.pipeline()
          .xadd(events, 'MAXLEN', '~', replayEvents, '*', 'e', 1)
          .pexpire(events, retainMs)
          .pexpire(meta, retainMs)
          .exec()
          .catch(this.#appendFailed)
      },
    }
  }

  /**
   * Answers a GET whose Last-Event-ID names a call stream of this session that another process holds: the events after
   * `afterSeq`, then the live ones until the stream ends. False (nothing sent) when Redis knows no such stream of this
   * session. `open` writes the response's head.
   */
  async resume(raw: ServerResponse, open: () => void, sessionId: string, streamId: string, afterSeq: number, log: FastifyBaseLogger): Promise<boolean> {
    const { redis } = this.#o
    const { events, meta } = this.#keys(sessionId, streamId)
    const [[, metaJson], [, stored]] = (await redis.multi().get(meta).xrange(events, '-', '+').exec()) as [[null, string | null], [null, Entry[]]]
    if (metaJson === null) return false
    const owner = JSON.parse(metaJson) as StreamMeta
    open()
    const follower = new Follower(raw, { events, meta }, streamId, afterSeq, owner, this.#o, log)
    if (!follower.replay(stored)) log.warn({ stream: streamId, after: afterSeq }, 'resumed stream: some events were no longer kept in Redis')
    log.debug({ stream: streamId, owner: owner.p }, 'call stream resumed from Redis: its call runs on another process')
    if (follower.done) return true
    const stop = () => follower.stop()
    this.#followers.add(stop)
    void follower.follow(stored.at(-1)?.[0] ?? '0-0').finally(() => this.#followers.delete(stop))
    return true
  }

  /** Ends every follower (the server is closing): their clients resume elsewhere. */
  close(): void {
    for (const stop of [...this.#followers]) stop()
  }
}

/** One client following another process's call stream through Redis. */
class Follower {
  readonly #raw: ServerResponse
  /** The Redis keys of the stream's events and owner. */
  readonly #events: string
  readonly #meta: string
  readonly #streamId: string
  readonly #owner: StreamMeta
  readonly #o: SharedStreamsOptions
  readonly #log: FastifyBaseLogger
  #afterSeq: number
  readonly #unanswered: Set<RequestId>
  #reader: Redis | null = null
  #stopped = false
  done = false
  #lastWriteAt = Date.now()

  constructor(raw: ServerResponse, keys: { events: string; meta: string }, streamId: string, afterSeq: number, owner: StreamMeta, options: SharedStreamsOptions, log: FastifyBaseLogger) {
    this.#raw = raw
    this.#events = keys.events
    this.#meta = keys.meta
    this.#streamId = streamId
    this.#afterSeq = afterSeq
    this.#owner = owner
    this.#o = options
    this.#log = log
    this.#unanswered = new Set(owner.r)
    raw.once('close', () => this.stop())
  }

  /** Writes the entries the client has not seen; false when some it missed were trimmed away. */
  replay(entries: Entry[]): boolean {
    let complete = true
    let first = true
    for (const [, list] of entries) {
      const fields = fieldsOf(list)
      if (fields.e !== undefined) {
        this.#delivered()
        break
      }
      const seq = Number(fields.s)
      if (first && seq > this.#afterSeq + 1) complete = false
      first = false
      const frame = fields.f!
      // Responses seen before the resumption point count too: their requests are answered.
      const id = answeredId(frame)
      if (id !== undefined) this.#unanswered.delete(id)
      if (seq <= this.#afterSeq) continue
      this.#afterSeq = seq
      this.#write(frame)
    }
    return complete
  }

  /** Follows the stream from the entry `lastId` until it ends, the owner dies, the client goes, or the server closes. */
  async follow(lastId: string): Promise<void> {
    const { redis, checkEveryMs, heartbeatMs } = this.#o
    const reader = redis.duplicate()
    reader.on('error', (err: Error) => this.#log.debug({ err: err.message }, 'Redis reader of a resumed stream'))
    this.#reader = reader
    const block = Math.max(1, Math.min(checkEveryMs, heartbeatMs))
    let checkedAt = Date.now()
    try {
      while (!this.done && !this.#stopped) {
        const read = (await reader.xread('BLOCK', block, 'STREAMS', this.#events, lastId)) as Array<[string, Entry[]]> | null
        if (this.#stopped) break
        const entries = read?.[0]?.[1] ?? []
        if (entries.length > 0) {
          lastId = entries.at(-1)![0]
          this.replay(entries)
        } else if (Date.now() - this.#lastWriteAt >= heartbeatMs) this.#write(HEARTBEAT_FRAME)
        // Whether events come or not: a process whose lease lapsed is dead to the others, whatever it still sends.
        if (!this.done && Date.now() - checkedAt >= checkEveryMs) {
          checkedAt = Date.now()
          if (!(await this.#o.liveIds()).includes(this.#owner.p)) this.#ownerDied()
        }
      }
    } catch (err) {
      if (!this.#stopped) {
        this.#log.warn({ err: (err as Error).message, stream: this.#streamId }, 'a resumed stream stopped following Redis: the client may resume again')
        this.#end()
      }
    } finally {
      this.#reader = null
      reader.disconnect()
    }
  }

  /** The owner's lease lapsed: its calls will never answer; say so for each request still unanswered, then end. */
  #ownerDied(): void {
    this.#log.warn({ stream: this.#streamId, owner: this.#owner.p }, 'the process running a resumed call stream died: its unanswered requests get an error')
    for (const id of this.#unanswered) {
      const error = new ServiceError('SERVICE_UNAVAILABLE', { message: 'The server process running this call stopped before it finished; its work was recorded as interrupted. Check its outcome before calling again' })
      this.#write(formatEvent(`${this.#streamId}:${++this.#afterSeq}`, messageJson(errorResponse(id, error))))
    }
    this.#unanswered.clear()
    this.#delivered()
  }

  /**
   * The stream has reached its client to the end: its keys go, as a retained stream in memory goes once replayed to
   * the end. A client that asks again (SDK v1 does after an error answer) then gets the session's standalone stream
   * rather than an empty replay that ends at once, again and again.
   */
  #delivered(): void {
    this.#o.redis.del(this.#events, this.#meta).catch((err: unknown) => this.#log.debug({ err: (err as Error).message }, 'could not remove a delivered stream from Redis; it expires'))
    this.#end()
  }

  #write(frame: string): void {
    if (this.#raw.destroyed || this.#raw.writableEnded) return
    this.#raw.write(frame)
    this.#lastWriteAt = Date.now()
  }

  #end(): void {
    this.done = true
    if (!this.#raw.writableEnded) this.#raw.end()
  }

  /** The client went, or the server closes: stop reading (a blocked XREAD ends with its connection). */
  stop(): void {
    if (this.#stopped) return
    this.#stopped = true
    this.#reader?.disconnect()
    this.#end()
  }
}

import type { ServerResponse } from 'node:http'
import { randomBytes } from 'node:crypto'
import { systemClock, type Clock, type ClockTimer } from './clock.js'
import { messageJson } from './message-json.js'
import type { JsonRpcMessage } from '../rpc/types.js'

/**
 * Server-Sent Events writer over a raw Node response. The dispatcher writes frames itself: `event: message`, an
 * `id: <stream>:<seq>` unique within the session, and one JSON-RPC message per `data:` line.
 */

export const SSE_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache, no-transform',
  'x-accel-buffering': 'no',
  connection: 'keep-alive',
}

type ResponseHeaders = Record<string, string | number | readonly string[] | undefined>

/** Sends the status line and headers of an SSE response at once, so the client sees the stream open. */
export function writeStreamHead(raw: ServerResponse, headers: ResponseHeaders): void {
  const all: Record<string, string | number | readonly string[]> = {}
  for (const [k, v] of Object.entries(headers)) if (v !== undefined) all[k] = v
  Object.assign(all, SSE_HEADERS)
  raw.writeHead(200, all as Record<string, string>)
  raw.flushHeaders()
}

export function formatEvent(id: string | null, data: string): string {
  return (id === null ? '' : `id: ${id}\n`) + `event: message\ndata: ${data}\n\n`
}

export const HEARTBEAT_FRAME = ': heartbeat\n\n'

export function newStreamId(): string {
  return randomBytes(6).toString('base64url')
}

export interface SseStreamOptions {
  id?: string
  /**
   * Keep the last `replay` events so a client that lost the connection can resume with Last-Event-ID; while resumable,
   * a stream outlives its connection (detached) until it is ended. 0 (the default): the stream ends with its connection.
   */
  replay?: number
  /**
   * Give each event an `id: <stream>:<seq>` line (the default). Streams of 2026-07-28 requests carry none: that
   * revision has no resumption, and an id would invite a Last-Event-ID nobody honours.
   */
  eventIds?: boolean
  /**
   * Output allowed to wait for a client that reads too slowly (Node buffers what the socket cannot take yet). Beyond
   * it the connection is closed instead of buffering without bound: a resumable stream keeps its bounded replay buffer
   * for the client to come back to; any other stream ends. Default: unbounded.
   */
  maxBuffered?: number
  /** Told every event and the end, in order (a call stream replayable by other processes: coordination/shared-streams.ts). */
  mirror?: StreamMirror
}

/** Hears a stream's events as they are sent, and its end. */
export interface StreamMirror {
  event(seq: number, frame: string): void
  end(): void
}

/**
 * One logical SSE stream of a session. Events get ids `<stream>:<seq>`; a resumable stream keeps a bounded buffer of
 * its latest events and can be attached to a new connection (GET with Last-Event-ID), which first receives what it
 * missed. `send` buffers while detached, so a server request (a confirmation) waits for the client to come back.
 */
export class SseStream {
  readonly id: string
  private seq = 0
  private ended = false
  private raw: ServerResponse | null
  private readonly replay: number
  private readonly eventIds: boolean
  private readonly maxBuffered: number
  private readonly mirror: StreamMirror | null
  /** Bytes written at once when a connection resumed: allowed on top of maxBuffered until the socket drains. */
  private resumedBytes = 0
  private readonly buffer: Array<{ seq: number; frame: string }> = []
  private readonly closeListeners: Array<() => void> = []
  private readonly detachListeners: Array<() => void> = []

  constructor(raw: ServerResponse, options: SseStreamOptions | string = {}) {
    const opts = typeof options === 'string' ? { id: options } : options
    this.id = opts.id ?? newStreamId()
    this.replay = opts.replay ?? 0
    this.eventIds = opts.eventIds ?? true
    this.maxBuffered = opts.maxBuffered ?? Infinity
    this.mirror = opts.mirror ?? null
    this.raw = raw
    this.watch(raw)
  }

  /** Sends the status line and headers at once so the client sees the stream open. */
  open(headers: ResponseHeaders): void {
    if (this.raw) writeStreamHead(this.raw, headers)
  }

  /** Ended: nothing more will be sent. (A detached resumable stream is not closed.) */
  get closed(): boolean {
    return this.ended || (this.replay === 0 && this.raw === null)
  }

  /** A connection currently receives the events. */
  get attached(): boolean {
    return this.raw !== null && !this.raw.destroyed && !this.raw.writableEnded
  }

  get resumable(): boolean {
    return this.replay > 0
  }

  /** Writes one JSON-RPC message; returns its event id, or null when the stream is closed. */
  send(message: JsonRpcMessage): string | null {
    if (this.closed) return null
    const seq = ++this.seq
    const eventId = `${this.id}:${seq}`
    const frame = formatEvent(this.eventIds ? eventId : null, messageJson(message))
    if (this.replay > 0) {
      this.buffer.push({ seq, frame })
      if (this.buffer.length > this.replay) this.buffer.shift()
    }
    this.mirror?.event(seq, frame)
    if (this.attached) this.write(frame)
    return eventId
  }

  /** Writes to the connection, or closes it when the client has left too much unread (see `maxBuffered`). */
  private write(frame: string): void {
    const raw = this.raw!
    raw.write(frame)
    if (raw.writableLength > this.maxBuffered + this.resumedBytes) raw.destroy()
  }

  /**
   * The priming event (2025-11-25): an id and an empty data field, so the client has a Last-Event-ID to resume from
   * before the first message arrives.
   */
  prime(): void {
    if (this.attached) this.raw!.write(`id: ${this.id}:0\ndata: \n\n`)
  }

  heartbeat(): void {
    if (this.attached && !this.ended) this.write(HEARTBEAT_FRAME)
  }

  /**
   * Attaches a new connection (resumption): it first gets the buffered events after `afterSeq`, then the live ones;
   * an ended stream replays and ends the response. A previous connection still attached is ended. Returns false when
   * events after `afterSeq` are no longer buffered (the gap cannot be filled).
   */
  attach(raw: ServerResponse, afterSeq: number): boolean {
    const previous = this.raw
    this.raw = raw
    if (previous && previous !== raw && !previous.writableEnded) previous.end()
    this.watch(raw)
    const first = this.buffer[0]
    const complete = afterSeq >= this.seq || (first !== undefined && first.seq <= afterSeq + 1)
    this.resumedBytes = 0
    for (const e of this.buffer) {
      if (e.seq <= afterSeq) continue
      raw.write(e.frame)
      this.resumedBytes += e.frame.length
    }
    raw.once('drain', () => {
      this.resumedBytes = 0
    })
    if (this.ended) raw.end()
    return complete
  }

  /** Ends the stream cleanly (after the final response, on DELETE, expiry or shutdown). */
  end(): void {
    if (this.ended) return
    this.ended = true
    this.mirror?.end()
    if (this.attached) this.raw!.end()
    for (const l of this.closeListeners.splice(0)) l()
  }

  /** Called once, when the stream ends (for a plain stream: also when its connection goes away). */
  onClose(listener: () => void): void {
    if (this.closed) listener()
    else this.closeListeners.push(listener)
  }

  /** Called each time a resumable stream loses its connection before it ended. */
  onDetach(listener: () => void): void {
    this.detachListeners.push(listener)
  }

  private watch(raw: ServerResponse): void {
    raw.once('close', () => {
      if (this.raw !== raw) return
      this.raw = null
      if (this.replay === 0) this.end()
      else if (!this.ended) for (const l of this.detachListeners) l()
    })
  }
}

/** Parses a Last-Event-ID `<stream>:<seq>`. */
export function parseEventId(value: unknown): { stream: string; seq: number } | undefined {
  if (typeof value !== 'string') return undefined
  const m = /^([A-Za-z0-9_-]{1,32}):(\d{1,15})$/.exec(value.trim())
  return m ? { stream: m[1]!, seq: Number(m[2]) } : undefined
}

/**
 * One timer for all open streams: every `intervalMs` each stream gets a `: heartbeat` comment, so proxies and clients
 * keep idle connections. A single shared timer keeps the cost per stream to a Set entry.
 */
export class HeartbeatRegistry {
  private readonly streams = new Set<SseStream>()
  private timer: ClockTimer | null = null

  /** @param clock schedules the beats (docs/decisions/clock.md). */
  constructor(
    private readonly intervalMs: number,
    private readonly clock: Clock = systemClock,
  ) {}

  add(stream: SseStream): void {
    if (this.streams.has(stream)) return
    this.streams.add(stream)
    stream.onClose(() => this.streams.delete(stream))
    if (!this.timer) {
      this.timer = this.clock.setInterval(() => this.beat(), this.intervalMs)
      this.timer.unref()
    }
  }

  get size(): number {
    return this.streams.size
  }

  private beat(): void {
    for (const s of this.streams) s.heartbeat()
    if (this.streams.size === 0 && this.timer) {
      this.clock.clearTimer(this.timer)
      this.timer = null
    }
  }

  stop(): void {
    this.clock.clearTimer(this.timer ?? undefined)
    this.timer = null
  }
}

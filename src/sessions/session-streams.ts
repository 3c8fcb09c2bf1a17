import { systemClock, type Clock, type ClockTimer } from '../lib/clock.js'
import type { SseStream } from '../lib/sse.js'
import type { JsonRpcNotification } from '../rpc/types.js'

/** The SSE streams of one session held by this process. */
class StreamsOfSession {
  readonly open = new Set<SseStream>()
  /** Ended streams whose client was not connected at the end: kept a while so it can resume and read the rest. */
  readonly retained = new Map<string, { stream: SseStream; timer: ClockTimer }>()
  standalone: SseStream | null = null

  get empty(): boolean {
    return this.open.size === 0 && this.retained.size === 0
  }
}

/**
 * The SSE streams of 2025 sessions in this process: call streams (resumable), retained ones, and each session's
 * standalone GET stream. The legacy front-end opens and closes them; the sessions plugin ends a session's when the
 * store says it ended; others only send on the standalone stream or count. A session's entry exists only while it
 * holds a stream.
 */
export class SessionStreams {
  readonly #bySession = new Map<string, StreamsOfSession>()

  /** @param clock times the retention of ended streams (docs/decisions/clock.md). */
  constructor(private readonly clock: Clock = systemClock) {}

  /** A stream opened for the session; `standalone` replaces (and ends) the session's previous standalone stream. */
  add(sessionId: string, stream: SseStream, standalone = false): void {
    const streams = this.#of(sessionId)
    streams.open.add(stream)
    if (!standalone) return
    const previous = streams.standalone
    // One standalone stream per session: a reconnecting client replaces a connection the server may not have seen die.
    streams.standalone = stream
    previous?.end()
  }

  /**
   * The stream closed. A resumable one whose client was not attached is kept `retainMs`, unless the session ended,
   * so that its client can still read the end.
   */
  closed(sessionId: string, stream: SseStream, retain: { ms: number } | null): void {
    const streams = this.#bySession.get(sessionId)
    if (!streams) return
    streams.open.delete(stream)
    if (streams.standalone === stream) streams.standalone = null
    if (retain !== null) {
      const timer = this.clock.setTimeout(() => this.forgetRetained(sessionId, stream.id), retain.ms)
      timer.unref()
      streams.retained.set(stream.id, { stream, timer })
    }
    this.#release(sessionId, streams)
  }

  /** A live or retained stream of this session, for resumption. */
  find(sessionId: string, streamId: string): SseStream | undefined {
    const streams = this.#bySession.get(sessionId)
    if (!streams) return undefined
    for (const s of streams.open) if (s.id === streamId) return s
    return streams.retained.get(streamId)?.stream
  }

  /** An ended stream replayed to its end, or whose retention ended: no longer kept. */
  forgetRetained(sessionId: string, streamId: string): void {
    const streams = this.#bySession.get(sessionId)
    const retained = streams?.retained.get(streamId)
    if (!streams || !retained) return
    this.clock.clearTimer(retained.timer)
    streams.retained.delete(streamId)
    this.#release(sessionId, streams)
  }

  /**
   * Sends a notification on the session's standalone (GET) stream, where the 2025 revisions put messages unrelated to a
   * request (list changes, resource updates). False when the client keeps no such stream open: the notification is
   * dropped, as the spec allows.
   */
  notify(sessionId: string, notification: JsonRpcNotification): boolean {
    const stream = this.#bySession.get(sessionId)?.standalone
    return stream ? stream.send(notification) !== null : false
  }

  /** True while the session holds a stream (open or retained) here. */
  holds(sessionId: string): boolean {
    return this.#bySession.has(sessionId)
  }

  /** Ends every standalone stream (the start of a stop: their clients reopen them on another process). */
  endStandalone(): void {
    for (const streams of this.#bySession.values()) streams.standalone?.end()
  }

  /** The session ended: each of its streams ends, retained ones are dropped. */
  endSession(sessionId: string): void {
    const streams = this.#bySession.get(sessionId)
    if (!streams) return
    this.#bySession.delete(sessionId)
    for (const s of streams.open) s.end()
    streams.open.clear()
    for (const r of streams.retained.values()) this.clock.clearTimer(r.timer)
    streams.retained.clear()
    streams.standalone = null
  }

  /** Open streams, by kind (metrics): a session's standalone stream, and its call streams. */
  counts(): { standalone: number; calls: number } {
    let standalone = 0
    let calls = 0
    for (const streams of this.#bySession.values()) {
      for (const stream of streams.open) {
        if (stream === streams.standalone) standalone++
        else calls++
      }
    }
    return { standalone, calls }
  }

  #of(sessionId: string): StreamsOfSession {
    let streams = this.#bySession.get(sessionId)
    if (!streams) this.#bySession.set(sessionId, (streams = new StreamsOfSession()))
    return streams
  }

  #release(sessionId: string, streams: StreamsOfSession): void {
    if (streams.empty && this.#bySession.get(sessionId) === streams) this.#bySession.delete(sessionId)
  }
}

import type { ServerResponse } from 'node:http'
import { randomBytes } from 'node:crypto'

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

export function formatEvent(id: string | null, data: string): string {
  return (id === null ? '' : `id: ${id}\n`) + `event: message\ndata: ${data}\n\n`
}

export const HEARTBEAT_FRAME = ': heartbeat\n\n'

export function newStreamId(): string {
  return randomBytes(6).toString('base64url')
}

export class SseStream {
  readonly id: string
  private seq = 0
  private ended = false
  private readonly closeListeners: Array<() => void> = []

  constructor(private readonly raw: ServerResponse, id: string = newStreamId()) {
    this.id = id
    raw.once('close', () => this.markClosed())
  }

  /** Sends the status line and headers at once so the client sees the stream open. */
  open(headers: Record<string, string | number | readonly string[] | undefined>): void {
    const all: Record<string, string | number | readonly string[]> = {}
    for (const [k, v] of Object.entries(headers)) if (v !== undefined) all[k] = v
    Object.assign(all, SSE_HEADERS)
    this.raw.writeHead(200, all as Record<string, string>)
    this.raw.flushHeaders()
  }

  get closed(): boolean {
    return this.ended || this.raw.destroyed || this.raw.writableEnded
  }

  /** Writes one JSON-RPC message; returns its event id, or null when the stream is already closed. */
  send(message: unknown): string | null {
    if (this.closed) return null
    const eventId = `${this.id}:${++this.seq}`
    this.raw.write(formatEvent(eventId, JSON.stringify(message)))
    return eventId
  }

  heartbeat(): void {
    if (!this.closed) this.raw.write(HEARTBEAT_FRAME)
  }

  /** Ends the stream cleanly (after the final response, on DELETE, expiry or shutdown). */
  end(): void {
    if (!this.closed) this.raw.end()
    this.markClosed()
  }

  onClose(listener: () => void): void {
    if (this.ended) listener()
    else this.closeListeners.push(listener)
  }

  private markClosed(): void {
    if (this.ended) return
    this.ended = true
    for (const l of this.closeListeners.splice(0)) l()
  }
}

/**
 * One timer for all open streams: every `intervalMs` each stream gets a `: heartbeat` comment, so proxies and clients
 * keep idle connections. A single shared timer keeps the cost per stream to a Set entry.
 */
export class HeartbeatRegistry {
  private readonly streams = new Set<SseStream>()
  private timer: NodeJS.Timeout | null = null

  constructor(private readonly intervalMs: number) {}

  add(stream: SseStream): void {
    this.streams.add(stream)
    stream.onClose(() => this.streams.delete(stream))
    if (!this.timer) {
      this.timer = setInterval(() => this.beat(), this.intervalMs)
      this.timer.unref()
    }
  }

  get size(): number {
    return this.streams.size
  }

  private beat(): void {
    for (const s of this.streams) s.heartbeat()
    if (this.streams.size === 0 && this.timer) {
      clearInterval(this.timer)
      this.timer = null
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer)
    this.timer = null
  }
}

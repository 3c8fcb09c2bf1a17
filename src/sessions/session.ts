import type { Scope } from '../auth/principal.js'
import type { SseStream } from '../lib/sse.js'
import { SessionEnded, type CallAbort } from '../rpc/call-abort.js'
import type { ClientCapabilities } from '../rpc/exchange.js'
import type { JsonRpcNotification, LegacyProtocolVersion, LogLevel, RequestId } from '../rpc/types.js'

/** A server-to-client request awaiting the client's answer (elicitation uses this). */
export interface PendingOutbound {
  method: string
  /** Only an answer from the same membership may resolve it. */
  membershipId: string
  /**
   * Checks a result answer before it resolves the request: null to accept it, else why it is refused (the wait goes
   * on). Error answers are not checked.
   */
  accept?(result: Record<string, unknown>): string | null
  resolve(result: Record<string, unknown>): void
  reject(error: Error): void
  timer: NodeJS.Timeout | null
}

/** Raised locally (never sent) when an outbound request cannot complete. */
export class OutboundRequestError extends Error {
  constructor(readonly reason: 'timeout' | 'closed' | 'aborted' | 'error', message: string, readonly data?: unknown) {
    super(message)
    this.name = 'OutboundRequestError'
  }
}

/**
 * Live state of a session that is doing something: requests in flight, requests we sent and await, open streams.
 * Created on first use and dropped when empty, so an idle session costs only its `Session` record.
 */
export class SessionRuntime {
  readonly inflight = new Map<RequestId, CallAbort>()
  readonly pending = new Map<RequestId, PendingOutbound>()
  readonly streams = new Set<SseStream>()
  /** Ended streams whose client was not connected at the end: kept a while so it can resume and read the rest. */
  readonly retained = new Map<string, { stream: SseStream; timer: NodeJS.Timeout }>()
  standalone: SseStream | null = null
  private nextOutboundId = 1

  nextId(): number {
    return this.nextOutboundId++
  }

  /** A live or retained stream of this session, for resumption. */
  findStream(id: string): SseStream | undefined {
    for (const s of this.streams) if (s.id === id) return s
    return this.retained.get(id)?.stream
  }

  get empty(): boolean {
    return this.inflight.size === 0 && this.pending.size === 0 && this.streams.size === 0 && this.retained.size === 0
  }

  /** Aborts everything in flight, rejects what we await and ends every stream. */
  close(reason: string): void {
    for (const ac of this.inflight.values()) ac.abort(new SessionEnded(reason))
    this.inflight.clear()
    for (const p of this.pending.values()) {
      if (p.timer) clearTimeout(p.timer)
      p.reject(new OutboundRequestError('closed', reason))
    }
    this.pending.clear()
    for (const s of this.streams) s.end()
    this.streams.clear()
    for (const r of this.retained.values()) clearTimeout(r.timer)
    this.retained.clear()
    this.standalone = null
  }
}

export interface Session {
  readonly id: string
  /** `key:<api key id>` or `jwt:<jti>`: the credential the session is bound to. */
  readonly credential: string
  readonly membershipId: string
  readonly organizationId: string
  readonly protocolVersion: LegacyProtocolVersion
  /**
   * What the client declared at initialize, as the session keeps it (which known capabilities, never the client's own
   * payload: see sessionCapabilities).
   */
  readonly clientCapabilities: Readonly<ClientCapabilities>
  /** Resources the client subscribed to (resources/subscribe), in memory: a restart forgets them, like its streams. */
  subscriptions: ResourceSubscriptions | null
  logLevel: LogLevel
  initialized: boolean
  lastSeenAt: number
  ended: boolean
  runtime: SessionRuntime | null
}

/**
 * A session's resource subscriptions, with the scopes of the credential that made them: an update is delivered only
 * while the member may still read the resource (scopes, and the member's role read at delivery time).
 */
export interface ResourceSubscriptions {
  readonly uris: Set<string>
  readonly scopes: readonly Scope[]
}

export function runtimeOf(session: Session): SessionRuntime {
  return (session.runtime ??= new SessionRuntime())
}

/** Drops the runtime of a session that has nothing in flight any more. */
export function releaseRuntime(session: Session): void {
  if (session.runtime?.empty) session.runtime = null
}

/**
 * Sends a notification on the session's standalone (GET) stream, where the 2025 revisions put messages unrelated to a
 * request (list changes, resource updates). False when the client keeps no such stream open: the notification is
 * dropped, as the spec allows.
 */
export function notifySession(session: Session, notification: JsonRpcNotification): boolean {
  const stream = session.runtime?.standalone
  return stream ? stream.send(notification) !== null : false
}

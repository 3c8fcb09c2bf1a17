import { ServiceError } from '../errors/service-error.js'
import { systemClock, type Clock, type ClockTimer } from '../lib/clock.js'
import { ServerStopping, SessionEnded, type CallAbort } from './call-abort.js'
import type { JsonRpcNotification, JsonRpcRequest, JsonRpcResponse, RequestId } from './types.js'

/**
 * The call table: every call in flight and every question the server asked a client and awaits, in both eras. The
 * dispatcher owns it and is the only one that changes it; the rest ask it (is this id in flight? cancel it; stop them
 * all). Calls of a 2025 session are addressed by (session id, JSON-RPC id), since notifications/cancelled names them so
 * and an id may not be reused while its call runs; a stateless (2026-07-28) call has no such address (its client
 * cancels by closing the connection) and is held only so the shutdown can stop it.
 *
 * A session's entry exists only while it holds something: an idle session costs nothing here.
 */

/** Where a server-to-client request goes: the call's SSE stream. False when it could not be delivered. */
export interface OutboundSink {
  send(message: JsonRpcRequest | JsonRpcNotification | JsonRpcResponse): boolean
}

/** A server-to-client request awaiting the client's answer (elicitation, sampling, roots). */
interface PendingOutbound {
  method: string
  /** Only an answer from the same membership may resolve it. */
  membershipId: string
  /** Checks a result answer: null to accept it, else why it is refused (the wait goes on). Errors are not checked. */
  accept?(result: Record<string, unknown>): string | null
  resolve(result: Record<string, unknown>): void
  reject(error: Error): void
  timer: ClockTimer | null
}

/** Raised locally (never sent) when an outbound request cannot complete. */
export class OutboundRequestError extends Error {
  constructor(readonly reason: 'timeout' | 'closed' | 'aborted' | 'error', message: string, readonly data?: unknown) {
    super(message)
    this.name = 'OutboundRequestError'
  }
}

export interface AskOptions {
  timeoutMs: number
  signal?: AbortSignal
  accept?(result: Record<string, unknown>): string | null
}

/** What one session holds in the table. */
class SessionCalls {
  readonly inflight = new Map<RequestId, CallAbort>()
  readonly pending = new Map<RequestId, PendingOutbound>()
  #nextOutboundId = 1

  nextId(): number {
    return this.#nextOutboundId++
  }

  get empty(): boolean {
    return this.inflight.size === 0 && this.pending.size === 0
  }
}

/** Event-loop turns a stopped call's handler gets to return, so that a JSON answer can still be sent (stopAll). */
const STOPPED_CALL_TURNS = 20

export class CallTable {
  constructor(private readonly clock: Clock = systemClock) {}

  /**
   * Appended to the ids of the requests this process sends to clients (`<n>.<suffix>`): with several processes, the id
   * names the process that awaits the answer (sessions/session-relay.ts). Null: plain numbers.
   */
  outboundIdSuffix: string | null = null
  readonly #sessions = new Map<string, SessionCalls>()
  readonly #stateless = new Set<CallAbort>()
  /** Session calls the shutdown closed while they still ran: their answer never reaches the client. */
  readonly #stopped = new WeakSet<CallAbort>()

  /** Registers a call. False when its session already runs a call with this id (nothing is registered then). */
  begin(sessionId: string | null, id: RequestId, call: CallAbort): boolean {
    if (sessionId === null) {
      this.#stateless.add(call)
      return true
    }
    const calls = this.#of(sessionId)
    if (calls.inflight.has(id)) {
      this.#release(sessionId, calls)
      return false
    }
    calls.inflight.set(id, call)
    return true
  }

  /** The call ended (answered, failed or cancelled). */
  end(sessionId: string | null, id: RequestId, call: CallAbort): void {
    if (sessionId === null) {
      this.#stateless.delete(call)
      return
    }
    const calls = this.#sessions.get(sessionId)
    if (!calls) return
    if (calls.inflight.get(id) === call) calls.inflight.delete(id)
    this.#release(sessionId, calls)
  }

  /** True while the session runs a call with this id. */
  inFlight(sessionId: string, id: RequestId): boolean {
    return this.#sessions.get(sessionId)?.inflight.has(id) === true
  }

  /** Aborts the session's call with this id. False when no such call runs here. */
  cancel(sessionId: string, id: RequestId, reason: Error): boolean {
    const call = this.#sessions.get(sessionId)?.inflight.get(id)
    if (!call) return false
    call.abort(reason)
    return true
  }

  /** True when the shutdown closed the call while it ran (docs/decisions/idempotency.md: recorded as interrupted). */
  stoppedByShutdown(call: CallAbort): boolean {
    return this.#stopped.has(call)
  }

  /** True while the session has a call in flight or a question awaiting its answer here. */
  holds(sessionId: string): boolean {
    return this.#sessions.has(sessionId)
  }

  /** The methods of the questions awaiting an answer, one entry per question (metrics). */
  *pendingMethods(): Generator<string> {
    for (const calls of this.#sessions.values()) for (const p of calls.pending.values()) yield p.method
  }

  /**
   * Sends a request to the client over `sink` and waits for its answer, at most `timeoutMs`. On timeout the client is
   * told with `notifications/cancelled`. Rejects with OutboundRequestError (local only, never sent). `accept` checks a
   * result answer before it resolves the request: a refused answer (its reason) does not end the wait.
   */
  ask(sessionId: string, membershipId: string, sink: OutboundSink, method: string, params: Record<string, unknown>, options: AskOptions): Promise<Record<string, unknown>> {
    const calls = this.#of(sessionId)
    const n = calls.nextId()
    const id: RequestId = this.outboundIdSuffix === null ? n : `${n}.${this.outboundIdSuffix}`
    return new Promise((resolve, reject) => {
      const cleanup = () => {
        calls.pending.delete(id)
        options.signal?.removeEventListener('abort', onAbort)
        this.#release(sessionId, calls)
      }
      const abortNow = (sent: boolean) => {
        const entry = calls.pending.get(id)
        if (entry?.timer) this.clock.clearTimer(entry.timer)
        cleanup()
        // Only a request that was actually sent may be cancelled (MCP: cancellations reference issued requests).
        if (sent) sink.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'The request was cancelled' } })
        reject(new OutboundRequestError('aborted', 'the request was aborted'))
      }
      const onAbort = () => abortNow(true)
      // On the server's clock (docs/decisions/clock.md): a test moves time past an unanswered question's limit.
      const timer = this.clock.setTimeout(() => {
        cleanup()
        sink.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: `No answer within ${options.timeoutMs} ms` } })
        reject(new OutboundRequestError('timeout', `no answer within ${options.timeoutMs} ms`))
      }, options.timeoutMs)
      calls.pending.set(id, {
        method,
        membershipId,
        ...(options.accept ? { accept: options.accept } : {}),
        timer,
        resolve: (r) => {
          options.signal?.removeEventListener('abort', onAbort)
          resolve(r)
        },
        reject: (e) => {
          options.signal?.removeEventListener('abort', onAbort)
          reject(e)
        },
      })
      if (options.signal?.aborted) return abortNow(false)
      options.signal?.addEventListener('abort', onAbort, { once: true })
      if (!sink.send({ jsonrpc: '2.0', id, method, params })) {
        this.clock.clearTimer(timer)
        cleanup()
        reject(new OutboundRequestError('closed', 'no stream to send the request on'))
      }
    })
  }

  /**
   * A client's answer to one of the session's questions. It resolves the question only when it comes from the same
   * membership and, for a result, passes the question's `accept` check; otherwise it is refused (why) and the wait goes on.
   */
  answer(sessionId: string, membershipId: string, message: JsonRpcResponse): ServiceError | null {
    const calls = this.#sessions.get(sessionId)
    const pending = message.id === null ? undefined : calls?.pending.get(message.id)
    if (!calls || !pending || message.id === null) {
      return new ServiceError('INVALID_REQUEST', { message: `No request with id ${JSON.stringify(message.id)} is awaiting an answer in this session` })
    }
    if (pending.membershipId !== membershipId) {
      return new ServiceError('INVALID_REQUEST', { message: 'This answer does not come from the member the request was sent to' })
    }
    if (!message.error && pending.accept) {
      const problem = pending.accept(message.result ?? {})
      if (problem !== null) {
        return new ServiceError('INVALID_REQUEST', { message: `The answer to ${pending.method} ${JSON.stringify(message.id)} does not match what was asked: ${problem}` })
      }
    }
    calls.pending.delete(message.id)
    if (pending.timer) this.clock.clearTimer(pending.timer)
    if (message.error) pending.reject(new OutboundRequestError('error', message.error.message, message.error))
    else pending.resolve(message.result ?? {})
    this.#release(sessionId, calls)
    return null
  }

  /** The session ended (DELETE, expiry, revoked credential, another process closed it): its calls and questions stop. */
  endSession(sessionId: string, reason: string): void {
    const calls = this.#sessions.get(sessionId)
    if (!calls) return
    this.#sessions.delete(sessionId)
    this.#close(calls, reason)
  }

  /**
   * The shutdown's finish phase: every call still in flight, of either era, is aborted with ServerStopping, and its
   * front-end answers it at once on its stream. A JSON answer (a client that takes no stream) goes out when the handler
   * returns: handlers that heed their signal do within a few event-loop turns, and those are waited for; a handler that
   * ignores it is not. What sessions still hold then is closed.
   */
  async stopAll(): Promise<void> {
    const reason = new ServerStopping('the server is shutting down')
    for (const call of [...this.#stateless]) call.abort(reason)
    for (const calls of [...this.#sessions.values()]) for (const call of [...calls.inflight.values()]) call.abort(reason)
    for (let turn = 0; turn < STOPPED_CALL_TURNS && this.#anyInFlight(); turn++) {
      await new Promise((resolve) => setImmediate(resolve))
    }
    for (const [sessionId, calls] of [...this.#sessions]) {
      for (const call of calls.inflight.values()) this.#stopped.add(call)
      this.#sessions.delete(sessionId)
      this.#close(calls, 'server shutting down')
    }
  }

  #anyInFlight(): boolean {
    for (const calls of this.#sessions.values()) if (calls.inflight.size > 0) return true
    return false
  }

  #close(calls: SessionCalls, reason: string): void {
    for (const call of calls.inflight.values()) call.abort(new SessionEnded(reason))
    calls.inflight.clear()
    for (const p of calls.pending.values()) {
      if (p.timer) this.clock.clearTimer(p.timer)
      p.reject(new OutboundRequestError('closed', reason))
    }
    calls.pending.clear()
  }

  #of(sessionId: string): SessionCalls {
    let calls = this.#sessions.get(sessionId)
    if (!calls) this.#sessions.set(sessionId, (calls = new SessionCalls()))
    return calls
  }

  /** Drops the entry of a session that holds nothing any more (only if it is still the session's entry). */
  #release(sessionId: string, calls: SessionCalls): void {
    if (calls.empty && this.#sessions.get(sessionId) === calls) this.#sessions.delete(sessionId)
  }
}

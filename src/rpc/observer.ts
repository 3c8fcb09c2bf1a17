import { performance } from 'node:perf_hooks'
import type { FastifyRequest } from 'fastify'
import { toServiceError } from '../errors/render.js'
import { isServiceError, REQUEST_LIMITERS, type ServiceError } from '../errors/service-error.js'
import type { Era, JsonRpcRequest, JsonRpcResponse, ProtocolVersion } from './types.js'

/**
 * What the observability features (metrics, traces, the access log) learn of each JSON-RPC request: the intake of an
 * HTTP request (intake.ts) reports every JSON-RPC request it took, once it has its answer, to the dispatcher's
 * observer. The observer is null unless one of those features is on, and an intake then records nothing: the cost of
 * observing is paid only by servers that asked for it.
 */

/** One JSON-RPC request answered (or refused, or cancelled), as its intake saw it. Read it, never keep it. */
export interface MessageDone {
  /** The HTTP request that carried the message (a batch carries several). */
  readonly request: FastifyRequest
  readonly era: Era
  /** The request as received: observers read its method and names only, never argument values. */
  readonly message: JsonRpcRequest
  /** The revision the request was served under; null when it was refused before one was known. */
  readonly protocolVersion: ProtocolVersion | null
  /** `performance.now()` when the intake took the message, and when its answer was known. */
  readonly startedAt: number
  readonly endedAt: number
  /** The JSON-RPC answer; null when the request was cancelled (nothing is sent) or refused at the HTTP level. */
  readonly response: JsonRpcResponse | null
  /** The error the request was refused with at the HTTP level (403 scope, 404 session, 409, 429…); null otherwise. */
  readonly failure: ServiceError | null
}

export interface RpcObserver {
  onMessageDone(done: MessageDone): void
}

/** Several observers as one (each feature adds its own). */
export function bothObservers(first: RpcObserver, second: RpcObserver): RpcObserver {
  return {
    onMessageDone(done) {
      first.onMessageDone(done)
      second.onMessageDone(done)
    },
  }
}

/**
 * One request being answered, made by an intake only when an observer is set. The intake records the answer
 * (`answered`) or the HTTP-level refusal (`refused`) as soon as it is known, before it is sent, and the observer hears
 * of it then (once); `end()`, when the exchange is over, reports a request that got neither.
 */
export class Observation implements MessageDone {
  readonly startedAt = performance.now()
  endedAt = 0
  protocolVersion: ProtocolVersion | null = null
  response: JsonRpcResponse | null = null
  failure: ServiceError | null = null
  #reported = false

  constructor(private readonly observer: RpcObserver, readonly request: FastifyRequest, readonly era: Era, readonly message: JsonRpcRequest) {}

  /** The JSON-RPC answer (null: cancelled, nothing sent). */
  answered(response: JsonRpcResponse | null): void {
    if (this.#reported) return
    this.response = response
    this.#report()
  }

  /** Refused at the HTTP level (or failed while answering): the error as the client sees it. */
  refused(err: unknown): void {
    if (this.#reported) return
    // Refused by the member's or the organization's limit, the HTTP request was refused, not this message: it is not
    // reported, as it is not when those limits are counted at the entry, before the body is read (rate-limits.ts).
    if (isServiceError(err) && err.code === 'RATE_LIMITED' && err.limiter !== undefined && REQUEST_LIMITERS.has(err.limiter)) {
      this.#reported = true
      return
    }
    this.failure = toServiceError(err)
    this.#report()
  }

  /** The exchange is over: a request that got no answer yet is reported now (as cancelled: nothing was sent for it). */
  end(): void {
    if (!this.#reported) this.#report()
  }

  #report(): void {
    this.#reported = true
    this.endedAt = performance.now()
    this.observer.onMessageDone(this)
  }
}

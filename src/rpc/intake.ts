import type { FastifyRequest } from 'fastify'
import type { Principal } from '../auth/principal.js'
import { catalog, type ErrorSpec } from '../errors/catalog.js'
import { isServiceError, type ServiceError } from '../errors/service-error.js'
import type { DeclaredLimit } from '../limits/fixed-windows.js'
import type { CallAbort } from './call-abort.js'
import { errorResponse, type Answer, type CallSetup, type Dispatcher, type PrecheckContext, type PreparedRequest, type Refused } from './dispatcher.js'
import type { Exchange } from './exchange.js'
import { Observation, type RpcObserver } from './observer.js'
import { StoppableCall, stoppedByShutdown } from './stopping.js'
import type { Classified, Era, JsonRpcRequest, JsonRpcResponse, ProtocolVersion } from './types.js'

/**
 * The JSON-RPC requests of one HTTP request, in either era, from admission to answer. The entry makes one per POST and
 * its era's front-end hands it the messages; the intake prepares them, admits them (the
 * limits they count against, their method's precheck, what answer format and shutdown treatment the method asks for),
 * runs them, and is the one place the observer (metrics, traces, the access log) hears of each request: the front-end
 * never tells it anything (docs/decisions/call-state.md).
 */

/**
 * The limits an HTTP request's messages count against (the rate limits' plugin): `extra` messages beside the one the
 * entry already accounts for, and the limits their methods declare (a tool's); a promise when the windows are shared
 * through Redis (one round trip for all of them). What it throws (429) refuses the exchange.
 */
export interface AdmissionLimits {
  admit(request: FastifyRequest, principal: Principal, extra: number, declared: DeclaredLimit | readonly DeclaredLimit[] | null): void | Promise<void>
}

/** A request refused before it ran, answered with a JSON-RPC error under this HTTP status. */
export class Refusal {
  constructor(readonly status: number, readonly error: ServiceError, readonly response: JsonRpcResponse) {}
}

/** A request its method admitted, with what the method asked of its front-end. */
export interface Admitted {
  readonly call: PreparedRequest
  /** The answer should be an SSE stream even though the client also takes JSON (a confirmation, progress). */
  readonly prefersStream: boolean
  /** The call outlasts any stop (a deployment, a listen): a stopping server does not wait for it. */
  readonly longLived: boolean
}

export interface AdmitOptions {
  /** How many messages the HTTP request carried (a batch's notifications and answers count too); the calls' number by default. */
  messages?: number
  /**
   * The front-end's work once the messages are counted and before the prechecks run (a session POST's notifications
   * and answers to the server's questions, handled in order): what it throws refuses the exchange as well.
   */
  beforePrecheck?(): void | Promise<void>
}

/** What a run came to: its answer and failure, and `overHttp` when the front-end answers that failure as HTTP. */
export interface Outcome extends Answer {
  /** The failure the front-end's rule answers at the HTTP level (a 409 on a stateless request); not observed yet. */
  readonly overHttp: ServiceError | null
}

/** The revision's own errors keep HTTP 400 even when a method raises them; every other JSON-RPC error is HTTP 200. */
export const SPEC_ERROR_STATUS: Readonly<Record<number, number>> = { [-32020]: 400, [-32021]: 400, [-32022]: 400 }

export class Intake {
  /** The observations of the requests taken so far; null when no observer is set (nothing is recorded). */
  readonly #seen: Map<JsonRpcRequest, Observation> | null

  readonly #observer: RpcObserver | null

  constructor(private readonly dispatcher: Dispatcher, private readonly limits: AdmissionLimits, readonly era: Era, private readonly request: FastifyRequest) {
    this.#observer = dispatcher.observer
    this.#seen = this.#observer === null ? null : new Map()
  }

  /** Legacy: one message of the POST told apart (Dispatcher.classify); a request is observed from here on. */
  classify(value: unknown): Classified {
    const classified = this.dispatcher.classify(value)
    if (classified.kind === 'request') this.observe(classified.message)
    return classified
  }

  /** The request is observed from here on (a modern POST's one request, classified by the entry). */
  observe(message: JsonRpcRequest): void {
    if (this.#seen !== null) this.#seen.set(message, new Observation(this.#observer!, this.request, this.era, message))
  }

  /** The revision the requests are served under, once it is known (the session's, or the request's own). */
  servedUnder(version: ProtocolVersion): void {
    if (this.#seen !== null) for (const seen of this.#seen.values()) seen.protocolVersion = version
  }

  /** Method then params (Dispatcher.prepare); a refused request is answered (and observed) with its error. */
  prepare(message: JsonRpcRequest): PreparedRequest | Refused {
    const prepared = this.dispatcher.prepare(message, this.era)
    if (!('def' in prepared)) this.#answered(message, prepared.response)
    return prepared
  }

  /** A request refused by a check of its front-end (or of its session) before it ran: its error answer, observed. */
  refuse(message: JsonRpcRequest, status: number, error: ServiceError): Refusal {
    const response = errorResponse(message.id, error, this.era)
    this.#answered(message, response)
    return new Refusal(status, error, response)
  }

  /**
   * Admits the prepared requests of one HTTP request, all or none: they count against the limits (each of the
   * `messages` for the member and organization, each request also for what its method declares), then each method's
   * precheck runs. A refusal of the HTTP exchange (429, 403 scope, 409) is thrown; on a stateless request, an error
   * with a JSON-RPC code of its own is answered as one instead (a Refusal).
   */
  admit(
    calls: readonly PreparedRequest[],
    exchange: Exchange,
    principal: Principal,
    options: AdmitOptions = {},
  ): Admitted[] | Refusal | Promise<Admitted[] | Refusal> {
    const precheck = () => {
      const between = options.beforePrecheck?.()
      return between ? between.then(() => this.#precheck(calls, exchange, principal)) : this.#precheck(calls, exchange, principal)
    }
    try {
      const counted = this.limits.admit(this.request, principal, (options.messages ?? calls.length) - 1, declaredLimits(calls, principal))
      if (counted) return counted.then(precheck).catch((err: unknown) => this.#refusedBeforeRun(calls, err))
      const checked = precheck()
      return checked instanceof Promise ? checked.catch((err: unknown) => this.#refusedBeforeRun(calls, err)) : checked
    } catch (err) {
      return this.#refusedBeforeRun(calls, err)
    }
  }

  /** Each method's precheck, in order (one may read the database: a confirmed call's record); what it throws refuses. */
  #precheck(calls: readonly PreparedRequest[], exchange: Exchange, principal: Principal): Admitted[] | Promise<Admitted[]> {
    const contexts = calls.map((call) => precheckContext(call, exchange, principal))
    for (let i = 0; i < calls.length; i++) {
      const call = calls[i]!
      const checking = call.def.precheck?.(call.params, contexts[i]!)
      if (checking) {
        const rest = calls.slice(i + 1)
        return checking.then(() => this.#precheck(rest, exchange, principal)).then((later) => [...admitted(calls.slice(0, i + 1), contexts), ...later])
      }
    }
    return admitted(calls, contexts)
  }

  /** Legacy: every refusal before the run refuses the HTTP exchange. Modern: one with a JSON-RPC code is answered. */
  #refusedBeforeRun(calls: readonly PreparedRequest[], err: unknown): Refusal {
    if (this.era === 'modern' && calls.length > 0 && isServiceError(err)) {
      const rpcCode = (catalog[err.code] as ErrorSpec).rpc
      if (rpcCode !== undefined && err.status < 500) return this.refuse(calls[0]!.message, SPEC_ERROR_STATUS[rpcCode] ?? 200, err)
    }
    throw err
  }

  /**
   * Runs an admitted request in the dispatcher's call table and observes its answer. `overHttp`, the front-end's rule,
   * picks the failures it answers at the HTTP level instead (they are observed as refusals when it throws them).
   */
  async run(call: PreparedRequest, setup: CallSetup, controller?: CallAbort, overHttp?: (failure: ServiceError) => boolean): Promise<Outcome> {
    const { response, failure } = await this.dispatcher.run(call, setup, controller)
    if (failure !== null && overHttp?.(failure) === true) return { response, failure, overHttp: failure }
    this.#answered(call.message, response)
    return { response, failure, overHttp: null }
  }

  /**
   * The cancellation of a call that the shutdown may stop: `answer` then gets the call's answer at once (observed),
   * whether or not the handler heeds its signal (stopping.ts).
   */
  stoppable(call: PreparedRequest, answer: (stopped: Answer) => void): StoppableCall {
    return new StoppableCall(() => {
      const err = stoppedByShutdown(this.dispatcher.describe(call))
      const response = errorResponse(call.message.id, err, this.era)
      this.#answered(call.message, response)
      answer({ response, failure: err })
    })
  }

  /**
   * The HTTP request's work, observed: what it throws refuses every request not answered yet (the HTTP exchange was
   * refused: 404 session, 429, 403…), and a request that got no answer at the end is observed as cancelled.
   */
  settle<T>(work: () => T | Promise<T>): T | Promise<T> {
    if (this.#seen === null) return work()
    return this.#settled(work)
  }

  async #settled<T>(work: () => T | Promise<T>): Promise<T> {
    try {
      return await work()
    } catch (err) {
      for (const seen of this.#seen!.values()) seen.refused(err)
      throw err
    } finally {
      for (const seen of this.#seen!.values()) seen.end()
    }
  }

  #answered(message: JsonRpcRequest, response: JsonRpcResponse | null): void {
    this.#seen?.get(message)?.answered(response)
  }
}

function precheckContext(call: PreparedRequest, exchange: Exchange, principal: Principal): PrecheckContext {
  return { exchange, session: exchange.session, principal, requestId: call.message.id }
}

function admitted(calls: readonly PreparedRequest[], contexts: readonly PrecheckContext[]): Admitted[] {
  return calls.map((call, i) => ({
    call,
    prefersStream: call.def.prefersStream?.(call.params, contexts[i]!) === true,
    longLived: call.def.longLived?.(call.params, contexts[i]!) === true,
  }))
}

/**
 * What the requests declare against the limits (a tool's): the one limit of the usual single request as it is
 * (nothing allocated), a list for a batch.
 */
function declaredLimits(calls: readonly PreparedRequest[], principal: Principal): DeclaredLimit | DeclaredLimit[] | null {
  if (calls.length === 1) return calls[0]!.def.limits?.(calls[0]!.params, principal) ?? null
  const all: DeclaredLimit[] = []
  for (const call of calls) {
    const limit = call.def.limits?.(call.params, principal)
    if (limit) all.push(limit)
  }
  return all.length > 0 ? all : null
}

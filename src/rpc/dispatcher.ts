import type { ValidateFunction } from 'ajv'
import type { FastifyBaseLogger } from 'fastify'
import type { Principal } from '../auth/principal.js'
import type { DeclaredLimit } from '../limits/fixed-windows.js'
import { toRpcError } from '../errors/render.js'
import { isServiceError, ServiceError } from '../errors/service-error.js'
import { CallAbort } from './call-abort.js'
import { systemClock, type Clock } from '../lib/clock.js'
import { CallTable, type AskOptions } from './calls.js'
import { ServerCapabilities } from './capabilities.js'
import type { ClientCapabilities, Exchange, SessionView } from './exchange.js'
import type { ParamHeader } from './header-mirror.js'
import { bothObservers, type RpcObserver } from './observer.js'
import { validationDetails, validatorFor } from '../validation/index.js'
import {
  logLevelRank,
  type Classified,
  type Era,
  type JsonRpcNotification,
  type JsonRpcRequest,
  type JsonRpcResponse,
  type LogLevel,
  type RequestId,
} from './types.js'

/**
 * The one JSON-RPC dispatcher, shared by both protocol eras. Plugins register methods here, each naming the eras it
 * exists in; each era's front-end hands it parsed messages together with an `Exchange` (what the method may know of
 * the era). Validation order is parse (transport) → envelope → method → params, each against validators precompiled
 * from schemas/. Methods never see HTTP: they get a context with the exchange, the principal, an AbortSignal and
 * senders.
 */

/** Where messages related to one request go: the request's SSE stream, or nowhere for a plain JSON answer. */
export interface MessageSink {
  /** Sends a message; returns false when it could not be delivered (no stream, or the stream is gone). */
  send(message: JsonRpcRequest | JsonRpcNotification | JsonRpcResponse): boolean
  readonly streaming: boolean
}

export const NULL_SINK: MessageSink = { send: () => false, streaming: false }

/**
 * The CallContext of a running request. A class, not an object literal with a getter: one is made per request, and
 * V8 builds class instances with a fixed shape far faster than literals mixing spread and accessors.
 */
class RunningCall implements CallContext {
  readonly exchange: Exchange
  readonly principal: Principal
  readonly sink: MessageSink
  readonly log: FastifyBaseLogger
  readonly onSessionStarted: ((session: SessionView) => void) | undefined
  readonly authenticateAgain: (() => Principal | Promise<Principal>) | undefined
  readonly #abort: CallAbort
  readonly #calls: CallTable

  constructor(ctx: CallSetup, readonly requestId: RequestId, abort: CallAbort, calls: CallTable) {
    this.exchange = ctx.exchange
    this.principal = ctx.principal
    this.sink = ctx.sink
    this.log = ctx.log
    this.onSessionStarted = ctx.onSessionStarted
    this.authenticateAgain = ctx.authenticateAgain
    this.#abort = abort
    this.#calls = calls
  }

  get session(): SessionView | null {
    return this.exchange.session
  }

  /** Made on first use (CallAbort): most calls never look. */
  get signal(): AbortSignal {
    return this.#abort.signal
  }

  get stoppedByShutdown(): boolean {
    return this.#calls.stoppedByShutdown(this.#abort)
  }
}

export interface CallContext {
  /** The era-specific facts of the request (revision, client capabilities, log level, legacy session). */
  readonly exchange: Exchange
  /** The legacy session (`exchange.session`); null on modern requests and for initialize. */
  readonly session: SessionView | null
  principal: Principal
  requestId: RequestId
  signal: AbortSignal
  sink: MessageSink
  log: FastifyBaseLogger
  /**
   * True when the server's shutdown closed the call while it still ran (after its drain and the turns a stopped call
   * gets): its answer never reaches the client. Asked of the call table, which alone knows.
   */
  readonly stoppedByShutdown: boolean
  /** Called by a session-creating method (initialize) with the new session. */
  onSessionStarted?(session: SessionView): void
  /**
   * Authenticates the request's credential again and returns who it is now (throws, or rejects, when it is no longer
   * valid): for a call that outlives a moment (a subscriptions/listen stream) and must notice a revocation or a role
   * change. A credential the server holds in memory is answered at once; one it must look up, with a promise.
   */
  authenticateAgain?(): Principal | Promise<Principal>
}

/** What a front-end supplies to run a request; the dispatcher adds the id and the AbortSignal. */
export type CallSetup = Omit<CallContext, 'signal' | 'requestId' | 'session' | 'stoppedByShutdown'>

export interface PrecheckContext {
  exchange: Exchange
  session: SessionView | null
  principal: Principal
  /** The JSON-RPC id of the request being prechecked (confirmed tool calls are identified by it). */
  requestId: RequestId
}

/** Caching hints of a complete result on a modern request (2026-07-28 caching: `ttlMs` and `cacheScope`). */
export interface CacheHint {
  scope: 'public' | 'private'
  ttlMs(): number
}

export interface RequestMethod<P = Record<string, unknown>> {
  method: string
  /** The eras in which the method exists; in any other it is an unknown method (-32601). */
  eras: readonly Era[]
  params: ValidateFunction
  /**
   * Legacy: true for the method that runs without a session and creates one (initialize). Its front-end then takes the
   * POST as the handshake: alone (no batch), without Mcp-Session-Id, and never routed to the stateless era unless it
   * claims a 2026-07-28 revision.
   */
  sessionless?: boolean
  /** Modern: the string param the `Mcp-Name` header mirrors (`name`, `uri`, `taskId`); the front-end checks they agree. */
  mirroredName?: string
  /** Modern: the params mirrored into `Mcp-Param-{Name}` headers (a tool's `x-mcp-header`), checked against the params. */
  paramHeaders?(params: P): readonly ParamHeader[]
  /** What the call is, in messages about it (a call the shutdown stopped); the method name when absent. */
  describe?(params: P): string
  /** Modern: what the client must declare in the request's capabilities for this method (else -32021, HTTP 400). */
  requires?: ClientCapabilities
  /** Modern: the caching hints of its complete results. */
  cache?: CacheHint
  /**
   * Runs before the answer's format is chosen and may refuse the whole HTTP exchange with a status
   * (INSUFFICIENT_SCOPE → 403). Errors here are never JSON-RPC errors. A promise when it must read the database (a
   * confirmed call's record, a requestState sealed with a key this process has not seen); the intake waits for it.
   */
  precheck?(params: P, ctx: PrecheckContext): void | Promise<void>
  /**
   * A limit of its own this request counts against, beside the member's and the organization's (a tool's), or null.
   * Asked by the intake once the params are valid and before `precheck`, which the limit's refusal (429) precedes;
   * the intake counts it together with the request's other windows (one round trip when they are shared through
   * Redis). Return the same object for the same limit: counting it then allocates nothing.
   */
  limits?(params: P, principal: Principal): DeclaredLimit | null
  /** True when the answer should be an SSE stream even though the client also accepts JSON. */
  prefersStream?(params: P, ctx: PrecheckContext): boolean
  /**
   * True for a call that runs until it is stopped or for longer than a stop waits (a deployment, a listen stream): a
   * stopping server does not wait for it to end before it stops it (lib/shutdown.ts, the settle phase).
   */
  longLived?(params: P, ctx: PrecheckContext): boolean
  handle(params: P, ctx: CallContext): Promise<Record<string, unknown>> | Record<string, unknown>
}

export interface NotificationMethod<P = Record<string, unknown>> {
  method: string
  /** Notifications exist only in session (legacy) requests: 2026-07-28 defines none over Streamable HTTP. */
  params: ValidateFunction
  /** A promise when it writes to the database; the front-end waits for it before it goes on. */
  handle(params: P, ctx: NotificationContext): void | Promise<void>
}

export interface NotificationContext {
  session: SessionView
  principal: Principal
  log: FastifyBaseLogger
}

export interface PreparedRequest {
  message: JsonRpcRequest
  def: RequestMethod
  params: Record<string, unknown>
}

const validateRequest = validatorFor('jsonrpc/request')
const validateNotification = validatorFor('jsonrpc/notification')
const validateResponse = validatorFor('jsonrpc/response')

/** Validators are type guards; calling through this keeps TypeScript from narrowing the value to never on failure. */
function passes(validate: ValidateFunction, value: unknown): boolean {
  return validate(value) === true
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function readableId(value: unknown): RequestId | null {
  return typeof value === 'string' || (typeof value === 'number' && Number.isInteger(value)) ? value : null
}

/** The JSON-RPC error answer to request `id`, in the era's codes (a session's, unless `era` says otherwise). */
export function errorResponse(id: RequestId | null, err: unknown, era: Era = 'legacy'): JsonRpcResponse {
  return { jsonrpc: '2.0', id, error: toRpcError(err, era) }
}

/**
 * What a request came to: its JSON-RPC answer (null when it was cancelled: nothing is sent) and, when the answer is an
 * error rendered from a ServiceError, that error itself, with its status and headers: a front-end that answers some
 * failures at the HTTP level (a 409 on a stateless request, a 503 for a session that could not be stored) needs it.
 */
export interface Answer {
  readonly response: JsonRpcResponse | null
  readonly failure: ServiceError | null
}

/** A request refused before it ran (unknown method, invalid params): its error answer and the failure together. */
export interface Refused extends Answer {
  readonly response: JsonRpcResponse
  readonly failure: ServiceError
}

/** The answer and the failure of a request that failed with `err`. */
export function failed(id: RequestId | null, err: unknown): Answer {
  return { response: errorResponse(id, err), failure: isServiceError(err) ? err : null }
}

function refused(id: RequestId, err: ServiceError): Refused {
  return { response: errorResponse(id, err), failure: err }
}

const CANCELLED: Answer = Object.freeze({ response: null, failure: null })

export class Dispatcher {
  /** Calls in flight and questions awaiting the client's answer, both eras (calls.ts): only the dispatcher changes it. */
  readonly #calls: CallTable
  private readonly requests = new Map<string, RequestMethod>()
  private readonly notifications = new Map<string, NotificationMethod>()
  private readonly dropped = new Set<string>()
  /** What the server can do, per era: each plugin declares its own part (initialize and server/discover read it). */
  readonly capabilities = new ServerCapabilities()
  /**
   * Told of every request an intake takes (intake.ts, observer.ts); null unless metrics, traces or the access log are
   * on, and an intake then records nothing.
   */
  observer: RpcObserver | null = null

  /** `clock`: the server's (lib/clock.ts); the limit on a client's answer to a question is timed by it. */
  constructor(clock: Clock = systemClock) {
    this.#calls = new CallTable(clock)
  }

  /** Adds an observer (each observability feature adds its own). */
  addObserver(observer: RpcObserver): void {
    this.observer = this.observer === null ? observer : bothObservers(this.observer, observer)
  }

  registerRequest<P>(def: RequestMethod<P>): void {
    if (this.requests.has(def.method)) throw new Error(`JSON-RPC method ${def.method} is already registered`)
    this.requests.set(def.method, def as unknown as RequestMethod)
  }

  registerNotification<P>(def: NotificationMethod<P>): void {
    if (this.notifications.has(def.method)) throw new Error(`JSON-RPC notification ${def.method} is already registered`)
    this.notifications.set(def.method, def as unknown as NotificationMethod)
  }

  /**
   * A method of the 2025 revisions that 2026-07-28 dropped and that nothing here registers (tasks/result), or a
   * notification of the sessions sent as a request: a 2026-07-28 client that tries one is told why it is unknown.
   */
  declareDropped(method: string): void {
    this.dropped.add(method)
  }

  /** The -32601 error of a method that does not exist in `era`, saying so when it belongs to the 2025 revisions. */
  unknownMethod(method: string, era: Era): ServiceError {
    const why = era === 'modern' && this.#legacyOnly(method) ? ` (${method} belongs to the 2025 session revisions, not to 2026-07-28)` : ''
    return new ServiceError('METHOD_NOT_FOUND', { message: `Unknown method: ${method}${why}`, details: { method } })
  }

  #legacyOnly(method: string): boolean {
    if (this.dropped.has(method)) return true
    const def = this.requests.get(method)
    return def !== undefined && def.eras.includes('legacy') && !def.eras.includes('modern')
  }

  /** True when `method` is the session handshake (a legacy method declared `sessionless`: initialize). */
  opensSession(method: string): boolean {
    const def = this.requests.get(method)
    return def?.sessionless === true && def.eras.includes('legacy')
  }

  /** What a call is, in messages about it: the method's own description, or its name. */
  describe(prepared: PreparedRequest): string {
    return prepared.def.describe?.(prepared.params) ?? prepared.message.method
  }

  /** The definitions of every request method that exists in `era` (what the documentation must list). */
  methods(era: Era): RequestMethod[] {
    return [...this.requests.values()].filter((def) => def.eras.includes(era))
  }

  /** The method's definition when it exists in `era`. */
  definition(method: string, era: Era): RequestMethod | undefined {
    const def = this.requests.get(method)
    return def !== undefined && def.eras.includes(era) ? def : undefined
  }

  /** Envelope check: tells requests, notifications and responses apart, or says why the value is none of them. */
  classify(value: unknown): Classified {
    if (!isObject(value)) return { kind: 'invalid', id: null, details: { reason: 'a JSON-RPC message must be an object' } }
    if ('method' in value) {
      if ('id' in value) {
        if (passes(validateRequest, value)) return { kind: 'request', message: value as unknown as JsonRpcRequest }
        return { kind: 'invalid', id: readableId(value.id), details: validationDetails(validateRequest.errors) }
      }
      if (passes(validateNotification, value)) return { kind: 'notification', message: value as unknown as JsonRpcNotification }
      return { kind: 'invalid', id: null, details: validationDetails(validateNotification.errors) }
    }
    if ('result' in value || 'error' in value) {
      if (passes(validateResponse, value)) return { kind: 'response', message: value as unknown as JsonRpcResponse }
      return { kind: 'invalid', id: null, details: validationDetails(validateResponse.errors) }
    }
    return { kind: 'invalid', id: readableId(value.id), details: { reason: 'neither a request, a notification nor a response' } }
  }

  /** Method (in the request's era) then params. Returns the prepared call, or the refusal to answer instead. */
  prepare(message: JsonRpcRequest, era: Era): PreparedRequest | Refused {
    const def = this.definition(message.method, era)
    if (!def) return refused(message.id, new ServiceError('METHOD_NOT_FOUND', { message: `Unknown method: ${message.method}` }))
    const params = message.params ?? {}
    if (!passes(def.params, params)) {
      return refused(message.id, new ServiceError('INVALID_PARAMS', { message: `Invalid params for ${message.method}`, details: validationDetails(def.params.errors) }))
    }
    return { message, def, params }
  }

  /**
   * Runs a prepared request. Returns its answer: the response (null when it was cancelled: a cancelled request gets no
   * response) and the failure it was rendered from. Every call is in the call table while it runs: a session's by its id, so `notifications/cancelled` can
   * abort it; a front-end that cancels by other means (a modern request's closed stream) passes its own `controller`.
   */
  async run(prepared: PreparedRequest, ctx: CallSetup, controller = new CallAbort()): Promise<Answer> {
    const { message, def, params } = prepared
    const sessionId = ctx.exchange.session?.id ?? null
    if (!this.#calls.begin(sessionId, message.id, controller)) {
      return refused(message.id, new ServiceError('INVALID_REQUEST', { message: `Request id ${JSON.stringify(message.id)} is already in use by a request in progress` }))
    }
    const callCtx = new RunningCall(ctx, message.id, controller, this.#calls)
    try {
      const result = await def.handle(params, callCtx)
      if (controller.aborted) return CANCELLED
      return { response: { jsonrpc: '2.0', id: message.id, result }, failure: null }
    } catch (err) {
      if (controller.aborted) return CANCELLED
      if (!isServiceError(err)) ctx.log.error({ err, method: message.method }, 'JSON-RPC method failed')
      return failed(message.id, err)
    } finally {
      this.#calls.end(sessionId, message.id, controller)
    }
  }

  /** Cancels the session's call with this id (notifications/cancelled). False when no such call runs here. */
  cancel(sessionId: string, requestId: RequestId, reason: Error): boolean {
    return this.#calls.cancel(sessionId, requestId, reason)
  }

  /** True while the session runs a call with this id here. */
  inFlight(sessionId: string, requestId: RequestId): boolean {
    return this.#calls.inFlight(sessionId, requestId)
  }

  /** True while the session has a call in flight or a question awaiting its answer in this process. */
  holdsCalls(sessionId: string): boolean {
    return this.#calls.holds(sessionId)
  }

  /** The session ended: its calls stop (SessionEnded) and its questions are abandoned. */
  endSession(sessionId: string, reason: string): void {
    this.#calls.endSession(sessionId, reason)
  }

  /** The shutdown's finish phase: every call of either era still running is stopped (calls.ts). */
  stopAll(): Promise<void> {
    return this.#calls.stopAll()
  }

  /** The methods of the questions awaiting a client's answer, one entry per question (metrics). */
  pendingRequestMethods(): Iterable<string> {
    return this.#calls.pendingMethods()
  }

  /**
   * Appended to the ids of the requests this process sends to clients (`<n>.<suffix>`): with several processes, the id
   * names the process that awaits the answer (sessions/session-relay.ts). Null: plain numbers.
   */
  set outboundIdSuffix(suffix: string | null) {
    this.#calls.outboundIdSuffix = suffix
  }

  /**
   * Notifications get no answer; unknown or malformed ones are ignored (logged at debug). A promise when the handler
   * returns one (it writes to the database): the front-end waits for it, so it is done before the POST is answered.
   */
  notify(message: JsonRpcNotification, ctx: NotificationContext): void | Promise<void> {
    const def = this.notifications.get(message.method)
    if (!def) {
      ctx.log.debug({ method: message.method }, 'ignored unknown notification')
      return
    }
    const params = message.params ?? {}
    if (!passes(def.params, params)) {
      ctx.log.debug({ method: message.method, details: validationDetails(def.params.errors) }, 'ignored malformed notification')
      return
    }
    return def.handle(params, ctx)
  }

  /**
   * A client's answer to one of our requests. It resolves the waiting request only when it comes from the same session
   * and membership and, for a result, passes the request's `accept` check; otherwise the answer is refused (the caller
   * turns that into HTTP 400) and the wait goes on.
   */
  acceptResponse(message: JsonRpcResponse, session: { readonly id: string }, principal: Pick<Principal, 'membershipId'>): ServiceError | null {
    return this.#calls.answer(session.id, principal.membershipId, message)
  }

  /**
   * Sends a request to the client over `sink` and waits for its answer, at most `timeoutMs` (calls.ts). Rejects with
   * OutboundRequestError (local only, never sent).
   */
  request(
    session: { readonly id: string },
    principal: Pick<Principal, 'membershipId'>,
    sink: MessageSink,
    method: string,
    params: Record<string, unknown>,
    options: AskOptions,
  ): Promise<Record<string, unknown>> {
    return this.#calls.ask(session.id, principal.membershipId, sink, method, params, options)
  }
}

/**
 * Sends a `notifications/message` when `level` passes the request's threshold: the session's `logging/setLevel`
 * (legacy), or the request's own `io.modelcontextprotocol/logLevel`, without which nothing is sent (modern).
 */
export function sendLog(ctx: CallContext, level: LogLevel, logger: string, data: unknown): void {
  const threshold = ctx.exchange.logLevel
  if (threshold === null || logLevelRank(level) < logLevelRank(threshold)) return
  ctx.sink.send({ jsonrpc: '2.0', method: 'notifications/message', params: { level, logger, data } })
}

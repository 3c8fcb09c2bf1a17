import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { catalog, type ErrorSpec } from '../../errors/catalog.js'
import { ServiceError } from '../../errors/service-error.js'
import { SseStream } from '../../lib/sse.js'
import { ClientDisconnected } from '../../rpc/call-abort.js'
import { errorResponse, type CacheHint, type MessageSink, type PreparedRequest, type RequestMethod } from '../../rpc/dispatcher.js'
import { constantJson } from '../../lib/message-json.js'
import { ModernExchange, type ClientCapabilities } from '../../rpc/exchange.js'
import { Refusal, SPEC_ERROR_STATUS, type Intake, type Outcome } from '../../rpc/intake.js'
import {
  isModernProtocolVersion,
  MODERN_PROTOCOL_VERSIONS,
  type JsonRpcNotification,
  type JsonRpcRequest,
  type JsonRpcResponse,
  type LogLevel,
} from '../../rpc/types.js'
import { describeDetails, validationDetails, validatorFor } from '../../validation/index.js'
import { SERVER_INFO_META_KEY, serverInfoFor } from '../../mcp/server-info.js'
import { CLIENT_CAPABILITIES_META_KEY, metaOf, PROTOCOL_VERSION_META_KEY, type Route } from './classify.js'
import { sendJsonRpc, type Acceptance } from './headers.js'
import { headerValue, paramHeadersProblem, standardHeadersProblem } from './request-headers.js'

/**
 * The stateless era (revision 2026-07-28) of /mcp: every POST carries its revision, capabilities and client info in
 * `params._meta`, nothing is remembered between requests, and there is no session, GET stream or resumption. A
 * request goes through these steps, in the order the revision and its conformance suite expect:
 *
 *   envelope (400/-32602) → header and body revision agree (400/-32020) → Mcp-Method agrees (400/-32020)
 *   → revision served (400/-32022) → standard headers present and Mcp-Name agrees (400/-32020)
 *   → method exists in this era (404/-32601) → capabilities the method needs (400/-32021) → params (-32602)
 *   → Mcp-Param-* headers of the tool (400/-32020) → limits the method declares (429) → precheck (403 scope, 409)
 *   → run → encode → respond
 *
 * Authentication, the Origin check and the per-member and per-organization limits ran before, in the entry, exactly as
 * for sessions (limits shared through Redis are counted at the limits step instead, in the same round trip). The
 * answer is JSON unless the call sends notifications (progress, log lines) or the client accepts only SSE: the stream
 * opens with the first notification, so every refusal before it keeps its own HTTP status. The client closing the
 * connection cancels the request (ClientDisconnected); nothing more is sent for it.
 */

export type ModernRoute = Extract<Route, { era: 'modern' }>

export interface ModernFrontEnd {
  post(request: FastifyRequest, reply: FastifyReply, route: ModernRoute, accept: Acceptance, intake: Intake): FastifyReply | Promise<FastifyReply>
}

const LOG_LEVEL_META_KEY = 'io.modelcontextprotocol/logLevel'

/** A check of this front-end refused the request, with this HTTP status: the intake answers it (and observes it). */
class Refused {
  constructor(readonly status: number, readonly error: ServiceError) {}
}

/** The parts of `required` that `declared` lacks (a ClientCapabilities object), or null when nothing is missing. */
export function missingCapabilities(required: ClientCapabilities, declared: Readonly<ClientCapabilities>): ClientCapabilities | null {
  const missing: Record<string, unknown> = {}
  for (const [name, want] of Object.entries(required)) {
    const have = declared[name]
    if (typeof have !== 'object' || have === null) {
      missing[name] = want
      continue
    }
    if (name === 'extensions' && typeof want === 'object' && want !== null) {
      const lacking = Object.fromEntries(Object.entries(want).filter(([id]) => typeof (have as Record<string, unknown>)[id] !== 'object'))
      if (Object.keys(lacking).length > 0) missing.extensions = lacking
    }
  }
  return Object.keys(missing).length > 0 ? missing : null
}

/**
 * Where a modern request's notifications go. The SSE response opens with the first one (or never, for a call that
 * sends none); once the client has gone, nothing is sent.
 */
class LazyStreamSink implements MessageSink {
  #stream: SseStream | null = null
  #gone = false

  constructor(readonly streaming: boolean, private readonly openStream: () => SseStream) {}

  get stream(): SseStream | null {
    return this.#stream
  }

  send(message: JsonRpcRequest | JsonRpcNotification | JsonRpcResponse): boolean {
    if (this.#gone || !this.streaming) return false
    this.#stream ??= this.openStream()
    return this.#stream.send(message) !== null
  }

  /** Opens the stream now if it is not open yet (a client that accepts only SSE gets even a lone answer on one). */
  ensureOpen(): SseStream {
    this.#stream ??= this.openStream()
    return this.#stream
  }

  gone(): void {
    this.#gone = true
  }
}

export function modernFrontEnd(fastify: FastifyInstance): ModernFrontEnd {
  const { rpc, heartbeats } = fastify
  const validateMeta = validatorFor('mcp/request-meta')
  // The brief identity on every result; a method may put the full one in its result's `_meta` (server/discover does).
  const serverInfo = serverInfoFor(MODERN_PROTOCOL_VERSIONS[0], true)
  /** The `_meta` of results that bring none of their own: one constant, serialized once (rpc/message-json.ts). */
  const serverInfoMeta = constantJson({ [SERVER_INFO_META_KEY]: serverInfo })

  /** Step: `params._meta` holds the revision, the capabilities of this request, and optional client info and log level. */
  function envelope(meta: Record<string, unknown>): Refused | null {
    if (validateMeta(meta) === true) return null
    const details = validationDetails(validateMeta.errors).map((d) => ({ ...d, path: `/params/_meta${d.path === '/' ? '' : d.path}` }))
    return new Refused(400, new ServiceError('INVALID_PARAMS', { message: `Invalid request metadata: ${describeDetails(details)}`, details }))
  }

  /** Steps: the headers that are present agree with the body; the revision is one we serve. */
  function revision(request: FastifyRequest, message: JsonRpcRequest, version: string): Refused | null {
    const header = headerValue(request.headers, 'mcp-protocol-version')
    if (header !== undefined && header !== version) {
      return new Refused(400, new ServiceError('HEADER_MISMATCH', {
        message: `MCP-Protocol-Version (${header}) differs from params._meta["${PROTOCOL_VERSION_META_KEY}"] (${version})`,
        details: { header: 'MCP-Protocol-Version', body: `params._meta["${PROTOCOL_VERSION_META_KEY}"]` },
      }))
    }
    const method = headerValue(request.headers, 'mcp-method')
    if (method !== undefined && method !== message.method) {
      return new Refused(400, new ServiceError('HEADER_MISMATCH', { message: `Mcp-Method (${method}) differs from the body's method (${message.method})`, details: { header: 'Mcp-Method', body: 'method' } }))
    }
    if (!isModernProtocolVersion(version)) {
      return new Refused(400, new ServiceError('UNSUPPORTED_PROTOCOL_VERSION', {
        message: `Protocol revision ${version} is not served here; use one of ${MODERN_PROTOCOL_VERSIONS.join(', ')} (the 2025 revisions are reached through initialize)`,
        details: { supported: [...MODERN_PROTOCOL_VERSIONS], requested: version },
      }))
    }
    return null
  }

  /** Step: the method exists in this era, and the client declared what it needs. */
  function method(message: JsonRpcRequest, capabilities: Readonly<ClientCapabilities>): Refused | RequestMethod {
    const def = rpc.definition(message.method, 'modern')
    if (!def) return new Refused(404, rpc.unknownMethod(message.method, 'modern'))
    const missing = def.requires ? missingCapabilities(def.requires, capabilities) : null
    if (missing) {
      return new Refused(400, new ServiceError('MISSING_CLIENT_CAPABILITY', {
        message: `${message.method} needs client capabilities this request did not declare`,
        details: { requiredCapabilities: missing },
      }))
    }
    return def
  }

  /** Step: params the method mirrors into Mcp-Param-* headers (a tool's arguments) are checked against the headers. */
  function paramHeaders(request: FastifyRequest, prepared: PreparedRequest): Refused | null {
    const declared = prepared.def.paramHeaders?.(prepared.params)
    if (declared === undefined || declared.length === 0) return null
    const problem = paramHeadersProblem(request.headers, declared, prepared.params.arguments)
    return problem ? new Refused(400, problem) : null
  }

  /**
   * The 2026-07-28 result fields: `resultType`, `serverInfo` in `_meta`, and caching hints on complete results. Added
   * in place: every method answers with an object of its own, made for this answer.
   */
  function encode(result: Record<string, unknown>, cache: CacheHint | undefined): Record<string, unknown> {
    if (result.resultType === undefined) result.resultType = 'complete'
    const meta = result._meta
    if (typeof meta === 'object' && meta !== null) (meta as Record<string, unknown>)[SERVER_INFO_META_KEY] ??= serverInfo
    else result._meta = serverInfoMeta
    if (cache !== undefined && result.resultType === 'complete') {
      result.ttlMs = cache.ttlMs()
      result.cacheScope = cache.scope
    }
    return result
  }

  function openStream(reply: FastifyReply): SseStream {
    reply.hijack()
    const stream = new SseStream(reply.raw, { eventIds: false, maxBuffered: fastify.config.sseMaxBufferedBytes })
    stream.open(reply.getHeaders())
    heartbeats.add(stream)
    return stream
  }

  /** The ladder up to the precheck: the prepared call and its exchange, or the refusal that answers it. */
  function check(request: FastifyRequest, message: JsonRpcRequest): Refused | { prepared: PreparedRequest; def: RequestMethod; exchange: ModernExchange } {
    const meta = metaOf(message)! // a modern route has a claim, so `_meta` is an object
    const refusedEnvelope = envelope(meta)
    if (refusedEnvelope) return refusedEnvelope
    const version = meta[PROTOCOL_VERSION_META_KEY] as string
    const refusedRevision = revision(request, message, version)
    if (refusedRevision) return refusedRevision
    const headerProblem = standardHeadersProblem(request.headers, message.method, message.params, rpc.definition(message.method, 'modern')?.mirroredName)
    if (headerProblem) return new Refused(400, headerProblem)
    const capabilities = meta[CLIENT_CAPABILITIES_META_KEY] as ClientCapabilities
    const def = method(message, capabilities)
    if (def instanceof Refused) return def
    const prepared = rpc.prepare(message, 'modern')
    if (!('def' in prepared)) return new Refused(200, prepared.failure)
    const refusedHeaders = paramHeaders(request, prepared)
    if (refusedHeaders) return refusedHeaders
    const exchange = new ModernExchange(
      version as (typeof MODERN_PROTOCOL_VERSIONS)[number],
      capabilities,
      (meta[LOG_LEVEL_META_KEY] as LogLevel | undefined) ?? null,
    )
    return { prepared, def, exchange }
  }

  /**
   * Runs the admitted call. Closing the connection is the client's cancellation (Streamable HTTP, 2026-07-28): the
   * call's signal fires with ClientDisconnected and nothing more is sent. Stopped by the shutdown, it is answered at
   * once, whether or not the handler heeds its signal (rpc/stopping.ts). A null response when it was cancelled.
   */
  async function run(request: FastifyRequest, reply: FastifyReply, intake: Intake, prepared: PreparedRequest, exchange: ModernExchange, sink: LazyStreamSink, accept: Acceptance): Promise<Outcome> {
    const controller = intake.stoppable(prepared, ({ response, failure }) => respond(reply, prepared.def, response!, failure, sink, accept))
    let answered = false
    reply.raw.once('close', () => {
      if (answered) return
      sink.gone()
      controller.abort(new ClientDisconnected('the client closed the connection of the request'))
    })
    const authorization = request.headers.authorization
    const authenticateAgain = () => fastify.auth.authenticate(authorization)
    // A failure with no JSON-RPC code of its own, before anything was streamed (409 IDEMPOTENCY_CONFLICT), is an HTTP
    // refusal with the service body, as for sessions.
    const overHttp = (failure: ServiceError) => sink.stream === null && (catalog[failure.code] as ErrorSpec).rpc === undefined && failure.status >= 400 && failure.status < 500
    try {
      return await intake.run(prepared, { exchange, principal: request.principal!, sink, log: request.log, authenticateAgain }, controller, overHttp)
    } finally {
      answered = true
    }
  }

  /** The answer: JSON when nothing was streamed (and the client takes JSON), else the last event of the SSE stream. */
  function respond(reply: FastifyReply, def: RequestMethod, response: JsonRpcResponse, failure: ServiceError | null, sink: LazyStreamSink, accept: Acceptance): FastifyReply {
    let answer: JsonRpcResponse
    let status = 200
    if (response.error) {
      answer = failure ? errorResponse(response.id, failure, 'modern') : response
      status = SPEC_ERROR_STATUS[answer.error!.code] ?? 200
    } else {
      answer = { jsonrpc: '2.0', id: response.id, result: encode(response.result ?? {}, def.cache) }
    }
    if (sink.stream === null && accept.json) return sendJsonRpc(reply, answer, status)
    const stream = sink.ensureOpen()
    stream.send(answer)
    stream.end()
    return reply
  }

  /** A request refused before it ran: its JSON-RPC error under the refusal's HTTP status. */
  function refuse(reply: FastifyReply, refusal: Refusal): FastifyReply {
    reply.request.log.debug({ errorCode: refusal.error.code }, 'request refused')
    return sendJsonRpc(reply, refusal.response, refusal.status)
  }

  /** One request: the era's checks, then admitted, run and answered through the intake. */
  async function answer(request: FastifyRequest, reply: FastifyReply, message: JsonRpcRequest, accept: Acceptance, intake: Intake): Promise<FastifyReply> {
    const checked = check(request, message)
    if (checked instanceof Refused) return refuse(reply, intake.refuse(message, checked.status, checked.error))
    const { prepared, exchange } = checked
    intake.servedUnder(exchange.protocolVersion)
    const admission = intake.admit([prepared], exchange, request.principal!)
    const admitted = admission instanceof Promise ? await admission : admission
    if (admitted instanceof Refusal) return refuse(reply, admitted)
    // A stopping server does not wait for a call that would outlast any stop (a deployment, a listen): it is parked.
    if (admitted[0]!.longLived) fastify.shutdown.park(reply.raw)
    const sink = new LazyStreamSink(accept.sse, () => openStream(reply))
    const { response, failure, overHttp } = await run(request, reply, intake, prepared, exchange, sink, accept)
    if (overHttp) throw overHttp
    if (response === null) {
      // Cancelled: the client is gone, and nothing may be sent for the request any more.
      sink.stream?.end()
      if (!reply.sent && !reply.raw.destroyed) reply.raw.destroy()
      return reply
    }
    return respond(reply, prepared.def, response, failure, sink, accept)
  }



  return {
    // Not async: the answer's own promise is returned as it is.
    post(request, reply, route, accept, intake) {
      // 2026-07-28 defines no client notifications over Streamable HTTP (a closed stream is the cancellation): a
      // notification is accepted and has no effect.
      if (route.kind === 'notification') {
        const admitted = fastify.rateLimits.admit(request, request.principal!, 0, null)
        return admitted ? admitted.then(() => reply.code(202).send()) : reply.code(202).send()
      }
      intake.observe(route.message)
      return answer(request, reply, route.message, accept, intake)
    },
  }
}

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Principal } from '../../auth/principal.js'
import { SharedStreams } from '../../coordination/shared-streams.js'
import { fail, ServiceError } from '../../errors/service-error.js'
import { newStreamId, parseEventId, SseStream, writeStreamHead } from '../../lib/sse.js'
import { errorResponse, NULL_SINK, type MessageSink, type PreparedRequest } from '../../rpc/dispatcher.js'
import { HANDSHAKE_EXCHANGE, LegacyExchange } from '../../rpc/exchange.js'
import type { Admitted, Intake } from '../../rpc/intake.js'
import { isLegacyProtocolVersion, type Classified, type JsonRpcNotification, type JsonRpcRequest, type JsonRpcResponse, type RequestId } from '../../rpc/types.js'
import type { Session } from '../../sessions/session.js'
import { parseAccept, sendJsonRpc, sessionIdHeader, type Acceptance } from './headers.js'

/**
 * The session-based era (revisions 2025-03-26, 2025-06-18, 2025-11-25) of /mcp: `initialize` creates a session bound
 * to its credential, later requests name it with Mcp-Session-Id, GET opens the session's standalone stream (or resumes
 * a call stream with Last-Event-ID), DELETE closes it. After the shared checks of the entry: session (404),
 * MCP-Protocol-Version (400), batch rules, then dispatch with a LegacyExchange.
 */
export interface LegacyFrontEnd {
  post(request: FastifyRequest, reply: FastifyReply, body: unknown, accept: Acceptance, intake: Intake): Promise<FastifyReply>
  get(request: FastifyRequest, reply: FastifyReply): FastifyReply | Promise<FastifyReply>
  delete(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply>
}

export function legacyFrontEnd(fastify: FastifyInstance): LegacyFrontEnd {
  const { config, rpc, sessions, sessionStreams, heartbeats } = fastify
  const shared = sharedStreams(fastify)

  /**
   * The session named by Mcp-Session-Id, usable only with the credential that created it. A session in memory is
   * answered at once; one that must be read from the database (after a restart), with a promise.
   */
  function resolveSession(request: FastifyRequest, principal: Principal): Session | Promise<Session> {
    const id = sessionIdHeader(request)
    if (id === undefined) throw fail('SESSION_NOT_FOUND', { message: 'The Mcp-Session-Id header is missing or malformed' })
    const found = sessions.get(id)
    return found instanceof Promise ? found.then((session) => usable(request, principal, session)) : usable(request, principal, found)
  }

  /** The session found for the request, when its credential may use it; touched. */
  function usable(request: FastifyRequest, principal: Principal, session: Session | undefined): Session {
    if (!session || session.credential !== principal.credential || session.membershipId !== principal.membershipId) {
      throw fail('SESSION_NOT_FOUND')
    }
    const header = request.headers['mcp-protocol-version']
    if (header !== undefined && header !== session.protocolVersion) {
      throw fail('UNSUPPORTED_PROTOCOL_VERSION', { details: { received: header, session: session.protocolVersion } })
    }
    sessions.touch(session)
    return session
  }

  /**
   * Opens an SSE answer. A call's stream is resumable: it keeps its latest events, outlives a dropped connection until
   * the call ends, and stays a while after that if nobody was connected to see the end. The standalone GET stream
   * carries nothing that needs replaying and ends with its connection.
   */
  function openStream(request: FastifyRequest, reply: FastifyReply, session: Session, kind: 'call' | 'standalone', requestIds?: readonly RequestId[]): SseStream {
    reply.hijack()
    const id = newStreamId()
    // Processes sharing the database: a call's events are also kept in Redis, for a resumption that lands elsewhere.
    const mirror = shared !== null && requestIds !== undefined ? shared.mirror(session.id, id, requestIds) : undefined
    const stream = new SseStream(reply.raw, { id, replay: kind === 'call' ? config.sseReplayEvents : 0, maxBuffered: config.sseMaxBufferedBytes, ...(mirror ? { mirror } : {}) })
    stream.open({ ...reply.getHeaders(), 'mcp-session-id': session.id })
    if (kind === 'call' && session.protocolVersion === '2025-11-25') stream.prime()
    heartbeats.add(stream)
    sessionStreams.add(session.id, stream, kind === 'standalone')
    stream.onDetach(() => request.log.debug({ stream: stream.id }, 'SSE stream detached: the client may resume it'))
    stream.onClose(() => {
      const retain = stream.resumable && !stream.attached && !session.ended
      sessionStreams.closed(session.id, stream, retain ? { ms: config.sseRetainMs } : null)
      request.log.debug({ stream: stream.id }, 'SSE stream ended')
    })
    return stream
  }

  /**
   * GET with Last-Event-ID naming a stream of this session: replay what the client missed, then continue live. A stream
   * held here is attached at once; one another process holds is replayed from Redis when processes share the
   * database (a promise). False when no such stream of this session is known.
   */
  function resumeStream(request: FastifyRequest, reply: FastifyReply, session: Session): boolean | Promise<boolean> {
    const last = parseEventId(request.headers['last-event-id'])
    if (!last) return false
    const stream = sessionStreams.find(session.id, last.stream)
    const open = () => {
      reply.hijack()
      writeStreamHead(reply.raw, { ...reply.getHeaders(), 'mcp-session-id': session.id })
    }
    if (!stream || !stream.resumable) return shared === null ? false : shared.resume(reply.raw, open, session.id, last.stream, last.seq, request.log)
    open()
    const complete = stream.attach(reply.raw, last.seq)
    if (!complete) request.log.warn({ stream: stream.id, after: last.seq }, 'resumed stream: some events were no longer buffered')
    if (!stream.closed) heartbeats.add(stream)
    // An ended stream replayed to its end has done its job: it is no longer kept. A client that asks for it again (SDK
    // v1 does after an error answer, which it does not count as the call's end) gets the standalone stream instead of
    // an empty replay that ends at once, again and again until the stream's retention ends.
    else sessionStreams.forgetRetained(session.id, stream.id)
    return true
  }

  async function handleInitialize(request: FastifyRequest, reply: FastifyReply, principal: Principal, message: JsonRpcRequest, acceptsJson: boolean, intake: Intake) {
    const prepared = intake.prepare(message)
    if (!('def' in prepared)) return sendJsonRpc(reply, prepared.response)
    const admitted = intake.admit([prepared], HANDSHAKE_EXCHANGE, principal)
    if (admitted instanceof Promise) await admitted
    let session: Session | undefined
    // A session that could not be stored is refused at the HTTP level (503 with Retry-After), nothing kept.
    const { response, overHttp } = await intake.run(prepared, {
      exchange: HANDSHAKE_EXCHANGE,
      principal,
      sink: NULL_SINK,
      log: request.log,
      onSessionStarted: (s) => {
        session = sessions.inMemory(s.id)
        intake.servedUnder(s.protocolVersion)
      },
    }, undefined, (failure) => failure.code === 'SERVICE_UNAVAILABLE')
    if (overHttp) throw overHttp
    if (!session || !response) return sendJsonRpc(reply, response ?? errorResponse(message.id, new ServiceError('INTERNAL_ERROR')))
    request.log.info({ session: session.id, version: session.protocolVersion, credential: principal.kind }, 'session created')
    if (acceptsJson) return sendJsonRpc(reply.header('mcp-session-id', session.id), response)
    const sse = openStream(request, reply, session, 'call')
    sse.send(response)
    sse.end()
    return reply
  }

  /** The messages of one POST, classified: initialize, or the requests, notifications and answers of a session. */
  async function answerMessages(request: FastifyRequest, reply: FastifyReply, principal: Principal, batch: boolean, classified: Classified[], accept: Acceptance, intake: Intake): Promise<FastifyReply> {
    // initialize: creates the session, never inside a batch, never with a session id.
    const init = classified.find((c) => c.kind === 'request' && rpc.opensSession(c.message.method))
    if (init && init.kind === 'request') {
      const method = init.message.method
      if (batch) throw fail('INVALID_REQUEST', { message: `${method} must not be part of a batch` })
      if (request.headers['mcp-session-id'] !== undefined) throw fail('INVALID_REQUEST', { message: `${method} must be sent without Mcp-Session-Id` })
      const header = request.headers['mcp-protocol-version']
      if (typeof header === 'string' && !isLegacyProtocolVersion(header)) throw fail('UNSUPPORTED_PROTOCOL_VERSION', { details: { received: header } })
      return handleInitialize(request, reply, principal, init.message, accept.json, intake)
    }

    const resolved = resolveSession(request, principal)
    const session = resolved instanceof Promise ? await resolved : resolved
    intake.servedUnder(session.protocolVersion)
    if (batch && session.protocolVersion !== '2025-03-26') {
      throw fail('INVALID_REQUEST', { message: `Batches are accepted only in 2025-03-26 sessions; this session uses ${session.protocolVersion}` })
    }
    const exchange = new LegacyExchange(session)

    // Requests are prepared (method, params) first; the POST is then admitted, all or nothing: each message counts
    // for the member and organization, each request also against what its method declares (a tool's limit); answers
    // and notifications are handled in order; then each request's precheck runs.
    const answers: Array<JsonRpcResponse | PreparedRequest> = []
    for (const c of classified) {
      if (c.kind === 'invalid') answers.push(errorResponse(c.id, new ServiceError('INVALID_REQUEST', { details: c.details })))
      else if (c.kind === 'request') answers.push(prepareInSession(c.message, intake))
    }
    const calls = answers.filter((a): a is PreparedRequest => 'def' in a)
    let refusedAnswer: ServiceError | null = null
    const handleOthers = async () => {
      refusedAnswer = await handleNotificationsAndAnswers(request, principal, session, classified)
    }
    const others = classified.some((c) => c.kind === 'notification' || c.kind === 'response')
    const admission = intake.admit(calls, exchange, principal, { messages: classified.length, ...(others ? { beforePrecheck: handleOthers } : {}) })
    // A session's refusals before the run are thrown, never answered as JSON-RPC (intake.ts): this is the admitted list.
    const admitted = (admission instanceof Promise ? await admission : admission) as Admitted[]
    if (answers.length === 0) {
      if (refusedAnswer) throw refusedAnswer
      return reply.code(202).send()
    }
    // SSE at once when the client takes nothing else or a call prefers it (a confirmation, progress); JSON when the
    // client takes nothing else; otherwise JSON unless a call sends something while it runs (a log line, a question
    // to the client), which turns the answer into an SSE stream carrying everything from then on.
    const upfront = accept.sse && (!accept.json || admitted.some((a) => a.prefersStream))
    const answer = new LegacyAnswer(() => openStream(request, reply, session, 'call', calls.map((call) => call.message.id)), accept.sse)
    answers.forEach((a, position) => {
      if (!('def' in a)) answer.add(position, a)
    })
    if (upfront) answer.open()
    // A stopping server waits for the calls in flight (their answers then reach the client, lib/shutdown.ts), even one
    // whose client went away, but not for a call that would outlast any stop (a deployment): its answer is parked.
    if (admitted.length > 0 && admitted.every((a) => a.longLived)) fastify.shutdown.park(reply.raw)
    const runAt = async ({ call, longLived }: Admitted, position: number) => {
      // A call the shutdown stops is answered at once, before the session's streams end (rpc/stopping.ts).
      const stoppable = intake.stoppable(call, ({ response }) => answer.stopped(position, response!))
      const release = longLived ? undefined : fastify.shutdown.hold()
      try {
        const { response } = await intake.run(call, { exchange, principal, sink: answer, log: request.log }, stoppable)
        answer.add(position, response)
      } finally {
        release?.()
      }
    }
    // The usual POST holds one request: run it without the batch's bookkeeping.
    if (answers.length === 1 && admitted.length === 1) await runAt(admitted[0]!, 0)
    else await Promise.all(answers.map((a, position) => ('def' in a ? runAt(admitted[calls.indexOf(a)]!, position) : undefined)))
    if (answer.stream) {
      answer.stream.end()
      return reply
    }
    const sent = answer.collected
    reply.header('mcp-session-id', session.id)
    if (sent.length === 0) return reply.code(202).send()
    return sendJsonRpc(reply, batch ? sent : sent[0]!)
  }

  /**
   * A session POST's notifications and answers to the server's questions, in order. Returns the first answer refused
   * (not from the session that was asked): a POST that carries no request is refused with it (HTTP 400).
   */
  async function handleNotificationsAndAnswers(request: FastifyRequest, principal: Principal, session: Session, classified: Classified[]): Promise<ServiceError | null> {
    let firstRefused: ServiceError | null = null
    for (const c of classified) {
      if (c.kind === 'notification') {
        const handled = rpc.notify(c.message, { session, principal, log: request.log })
        if (handled) await handled
      } else if (c.kind === 'response') {
        // Answered here, or forwarded to the process that asked the question (session-relay.ts).
        const answered = fastify.sessionRelay.answer(c.message, session, principal)
        const refused = answered instanceof Promise ? await answered : answered
        firstRefused ??= refused
      }
    }
    return firstRefused
  }

  /** A request of a session, prepared (method, params), or the error that answers it. */
  function prepareInSession(message: JsonRpcRequest, intake: Intake): PreparedRequest | JsonRpcResponse {
    const prepared = intake.prepare(message)
    if (!('def' in prepared)) return prepared.response
    if (prepared.def.sessionless) return intake.refuse(message, 200, new ServiceError('INVALID_REQUEST', { message: `${message.method} is not allowed in an existing session` })).response
    return prepared
  }



  /** A POST's messages, classified by the intake (which observes the requests from then on), then answered. */
  function answerItems(request: FastifyRequest, reply: FastifyReply, principal: Principal, batch: boolean, items: unknown[], accept: Acceptance, intake: Intake): Promise<FastifyReply> {
    const classified = items.map((m) => intake.classify(m))
    if (!batch && classified[0]!.kind === 'invalid') {
      const c = classified[0] as { details: unknown }
      throw fail('INVALID_REQUEST', { details: c.details })
    }
    return answerMessages(request, reply, principal, batch, classified, accept, intake)
  }

  return {
    // Not async: what it throws reaches the entry's async handler all the same, and without an observer the answer's
    // own promise is returned as it is.
    post(request, reply, body, accept, intake) {
      const principal = request.principal!
      const batch = Array.isArray(body)
      const items: unknown[] = batch ? (body as unknown[]) : [body]
      if (batch && items.length === 0) throw fail('INVALID_REQUEST', { message: 'An empty batch is not a JSON-RPC message' })
      // A batch is bounded, and each of its messages is a request against the limits (counted where the session's
      // messages are admitted): otherwise one POST could carry thousands of calls for the price of one.
      if (batch && items.length > config.maxBatchSize) {
        throw fail('INVALID_REQUEST', { message: `A batch may hold at most ${config.maxBatchSize} messages; this one holds ${items.length}`, details: { limit: config.maxBatchSize, size: items.length } })
      }
      return answerItems(request, reply, principal, batch, items, accept, intake)
    },

    get(request, reply) {
      const principal = request.principal!
      if (!parseAccept(request.headers.accept).sse) throw fail('NOT_ACCEPTABLE', { message: 'GET /mcp opens an SSE stream: Accept must include text/event-stream' })
      // A stream ends when the server ends it (a resumed one with its call, which the stop waits for on its own).
      fastify.shutdown.park(reply.raw)
      const resolved = resolveSession(request, principal)
      return resolved instanceof Promise ? resolved.then((session) => openGet(request, reply, session)) : openGet(request, reply, resolved)
    },

    async delete(request, reply) {
      const session = await resolveSession(request, request.principal!)
      await sessions.close(session)
      return reply.code(204).send()
    },
  }

  /** GET: resumes a call stream (Last-Event-ID), or opens the session's standalone stream. */
  function openGet(request: FastifyRequest, reply: FastifyReply, session: Session): FastifyReply | Promise<FastifyReply> {
    const resumed = resumeStream(request, reply, session)
    if (resumed instanceof Promise) return resumed.then((yes) => (yes ? reply : openStandalone(request, reply, session)))
    return resumed ? reply : openStandalone(request, reply, session)
  }

  /** The session's standalone stream, for what the server sends outside any call. */
  function openStandalone(request: FastifyRequest, reply: FastifyReply, session: Session): FastifyReply {
    // One standalone stream per session: a new one replaces (and ends) the previous (SessionStreams.add).
    openStream(request, reply, session, 'standalone')
    return reply
  }
}

/**
 * Call streams replayable by every process, when several share the database (coordination/shared-streams.ts); null
 * when this process is alone: its streams resume here or nowhere. Followers end when the server closes.
 */
function sharedStreams(fastify: FastifyInstance): SharedStreams | null {
  const { coordination, config } = fastify
  if (coordination.redis === null) return null
  const shared = new SharedStreams({
    redis: coordination.redis,
    key: (name) => coordination.key(name),
    processId: coordination.processId,
    liveIds: () => fastify.processes.liveIds(),
    replayEvents: config.sseReplayEvents,
    retainMs: config.sseRetainMs,
    heartbeatMs: config.heartbeatMs,
    checkEveryMs: Math.max(1, Math.floor(config.leaseMs / 3)),
    log: fastify.log,
  })
  fastify.addHook('preClose', (done) => {
    shared.close()
    done()
  })
  return shared
}

/**
 * The answer to a session POST: JSON responses collected until something must be sent while the calls run, then an
 * SSE stream that first carries what was collected. A client that takes only JSON (`streaming` false) gets no
 * notifications, and nothing that needs a stream can be sent to it.
 */
class LegacyAnswer implements MessageSink {
  #stream: SseStream | null = null
  /** Responses not sent yet, by the position of their request in the POST (a JSON batch answers in request order). */
  readonly #collected: Array<{ position: number; response: JsonRpcResponse }> = []

  constructor(private readonly openStream: () => SseStream, readonly streaming: boolean) {}

  get stream(): SseStream | null {
    return this.#stream
  }

  /** The JSON answer's responses, in request order. */
  get collected(): JsonRpcResponse[] {
    if (this.#collected.length === 1) return [this.#collected[0]!.response]
    return [...this.#collected].sort((a, b) => a.position - b.position).map((c) => c.response)
  }

  open(): SseStream {
    if (this.#stream) return this.#stream
    const stream = this.openStream()
    this.#stream = stream
    for (const response of this.collected) stream.send(response)
    this.#collected.length = 0
    return stream
  }

  send(message: JsonRpcRequest | JsonRpcNotification | JsonRpcResponse): boolean {
    if (!this.streaming) return false
    return this.open().send(message) !== null
  }

  /**
   * The answer of a call the shutdown stopped: on the stream at once (opened now if the client takes one), since the
   * call's handler may take a while to notice, and the stream ends right after.
   */
  stopped(position: number, response: JsonRpcResponse): void {
    if (!this.#stream && this.streaming) this.open()
    this.add(position, response)
  }

  /** The response to the request at `position` (null: cancelled, nothing to send). */
  add(position: number, response: JsonRpcResponse | null): void {
    if (response === null) return
    if (this.#stream) this.#stream.send(response)
    else this.#collected.push({ position, response })
  }
}

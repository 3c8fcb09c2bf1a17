import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import type { FastifyError, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import type { Config } from '../config.js'
import { toServiceBody, toServiceError } from '../errors/render.js'
import { fail, isServiceError, ServiceError } from '../errors/service-error.js'
import { systemClock, type Clock } from '../lib/clock.js'
import { Shutdown } from '../lib/shutdown.js'
import { SERVICE_MCP_VERSION } from '../version.js'
import { PLUGIN } from './names.js'

declare module 'fastify' {
  interface FastifyInstance {
    config: Config
    /** The server's time: now and timers (lib/clock.ts). Tests pass a manual one through BuildOptions.clock. */
    clock: Clock
    /** The two phases of a clean stop (drain, then finish); features register their steps. */
    shutdown: Shutdown
    /** True from the moment the server starts to stop (before its drain phase) until it has closed. */
    readonly stopping: boolean
    /**
     * Requests that arrive before `ready` settles wait for it. A first start writes its owner and API key once it
     * listens (bootstrap.ts): a client that calls with SERVICE_BOOTSTRAP_API_KEY as soon as the port answers must not be
     * told the key is unknown.
     */
    holdRequestsUntil(ready: Promise<unknown>): void
  }
  interface FastifyContextConfig {
    /** The route still answers while the server stops (health checks); every other one answers 503. */
    servedWhileStopping?: boolean
  }
}

/** Maps Fastify's own errors (body size, media type, bad JSON) onto the catalog. */
export function fromFastifyError(err: FastifyError | Error): ServiceError {
  if (isServiceError(err)) return err
  const code = (err as FastifyError).code
  switch (code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ServiceError('PAYLOAD_TOO_LARGE')
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_TYPE':
      return new ServiceError('UNSUPPORTED_MEDIA_TYPE')
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new ServiceError('BAD_REQUEST', { message: 'The body is not valid JSON' })
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new ServiceError('BAD_REQUEST', { message: 'Content-Length does not match the body' })
    default:
      break
  }
  if (err.name === 'SyntaxError' || (err as FastifyError).statusCode === 400) return new ServiceError('BAD_REQUEST', { message: 'The request is malformed' })
  return toServiceError(err)
}

/** Logs server-side failures with their cause; client errors stay at debug level. */
export function logFailure(request: FastifyRequest, original: unknown, rendered: ServiceError): void {
  if (rendered.status >= 500) request.log.error({ err: original }, 'request failed')
  else request.log.debug({ errorCode: rendered.code }, 'request refused')
}

export function sendServiceError(request: FastifyRequest, reply: FastifyReply, err: unknown): FastifyReply {
  const e = fromFastifyError(err as Error)
  logFailure(request, err, e)
  const rendered = toServiceError(e)
  if (rendered.headers) reply.headers(rendered.headers)
  if (rendered.retryAfter !== undefined) reply.header('retry-after', String(rendered.retryAfter))
  return reply.code(rendered.status).type('application/json; charset=utf-8').send(toServiceBody(rendered))
}

/**
 * Concerns of every response: the X-Service-MCP-Version and X-Request-Id headers, the 404 body and the default error
 * body. Route plugins with another error shape (OAuth) set their own handler in their own context.
 */
const httpPlugin: FastifyPluginAsync<{ config: Config; clock?: Clock }> = async (fastify, opts) => {
  fastify.decorate('config', opts.config)
  fastify.decorate('clock', opts.clock ?? systemClock)
  const shutdown = new Shutdown(fastify.clock)
  shutdown.watch(fastify.server)
  fastify.decorate('shutdown', shutdown)
  let stopping = false
  fastify.decorate('stopping', { getter: () => stopping })
  /** What requests wait for before anything else of them runs, while the first start's bootstrap is written; else null. */
  let opening: Promise<void> | null = null
  fastify.decorate('holdRequestsUntil', (ready: Promise<unknown>) => {
    const held: Promise<void> = ready.then(() => {}, () => {}).finally(() => {
      if (opening === held) opening = null
    })
    opening = held
  })
  // The first preClose hook (this plugin is registered first): from here on new connections are refused and requests
  // that arrive on connections still open get the refusal below rather than Fastify's own 503; the requests in flight
  // end within SERVICE_STOP_SETTLE_MS before anything is stopped (lib/shutdown.ts has the phases and why).
  fastify.addHook('preClose', async () => {
    stopping = true
    const log = (err: unknown, phase: string) => fastify.log.error({ err, phase }, 'shutdown step failed')
    shutdown.beginStop(fastify.server, log)
    await shutdown.settle(opts.config.stopSettleMs)
    await shutdown.run(log)
  })
  // Hooks of every request take `done` rather than returning a promise: Fastify then goes on without a microtask hop
  // (what they throw is caught and answered all the same).
  fastify.addHook('onRequest', (request, reply, done) => {
    reply.header('x-service-mcp-version', SERVICE_MCP_VERSION)
    reply.header('x-request-id', request.id)
    // HTTP/1.1 requires Host (RFC 9112 §3.2). Node would answer 400 itself, without the contract's body and headers.
    if (request.headers.host === undefined && request.raw.httpVersion === '1.1') throw fail('BAD_REQUEST', { message: 'The Host header is required' })
    if (stopping) {
      // The first request of a connection accepted just before the stop is served like one a moment earlier.
      if (shutdown.admits(request.raw.socket)) reply.header('connection', 'close')
      else refuseWhileStopping(request, reply, opts.config)
    }
    if (opening !== null) {
      void opening.then(() => done())
      return
    }
    done()
  })
  fastify.setNotFoundHandler((request, reply) => sendServiceError(request, reply, new ServiceError('NOT_FOUND')))
  fastify.setErrorHandler((err, request, reply) => sendServiceError(request, reply, err))
}

/**
 * While the server stops, new requests (on connections used before the stop began: new connections are refused, and
 * the first request of one accepted just before is served) are refused with the catalog's 503 and the contract's
 * headers, and their connection is closed after the answer; health checks still answer (/readyz saying why it is not
 * ready). Fastify's own `return503OnClosing` answers
 * without our headers and body shape, and for every route alike, so it is off (app.ts).
 *
 * The refusal comes before any handler: nothing of the request ran, so a proxy may send it to another process, a POST
 * too (docs/deploy/nginx.conf does). Every HTTP 503 the server sends keeps that promise (docs/protocol.md, "Error codes").
 */
function refuseWhileStopping(request: FastifyRequest, reply: FastifyReply, config: Config): void {
  reply.header('connection', 'close')
  if (request.routeOptions.config.servedWhileStopping === true) return
  throw fail('SERVICE_UNAVAILABLE', {
    message: 'The server is shutting down',
    // The stop lasts at most about the settle period and the pipelines' grace period; by then another instance (or this
    // one, restarted) answers.
    retryAfter: Math.max(1, Math.ceil((config.stopSettleMs + config.pipelineGraceMs) / 1000)),
  })
}

/** A well-formed X-Request-Id from the client (or its proxy) is kept: at most 128 characters, no spaces or quotes. */
const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:@/-]{1,128}$/

/**
 * The id of a request: the client's X-Request-Id when it is well formed (a proxy's id then follows the request through
 * the logs and comes back in the response), else a fresh UUID. A malformed one is never echoed or logged.
 */
export function genReqId(req: IncomingMessage): string {
  const incoming = req.headers['x-request-id']
  return typeof incoming === 'string' && CLIENT_REQUEST_ID.test(incoming) ? incoming : randomUUID()
}

export default fp(httpPlugin, { name: PLUGIN.http, fastify: '5.x' })

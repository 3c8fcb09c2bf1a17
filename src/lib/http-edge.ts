import { randomUUID } from 'node:crypto'
import { createServer, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { Config } from '../config.js'
import type { ErrorCode } from '../errors/catalog.js'
import { toServiceBody } from '../errors/render.js'
import { ServiceError } from '../errors/service-error.js'
import { MemoryHeldOpen } from '../limits/held-open.js'
import { SERVICE_MCP_VERSION } from '../version.js'

/**
 * The edge of the HTTP server, below Fastify: how long a client may take to send a request, how many connections one
 * address may hold, and what a request Node's parser rejects gets back. Fastify never sees those requests, so without
 * this they got Node's own `{"error":"Bad Request","message":"Client Error"}` without the contract's headers.
 */

/** Keep-alive of idle connections (Fastify's default; a serverFactory must set it itself). */
const KEEP_ALIVE_MS = 72_000

/**
 * The HTTP server for Fastify's `serverFactory`: header and whole-request timeouts (answered 408 by the client-error
 * handler), checked often enough that short test values hold; requests without Host are let through to be answered in
 * the contract's shape; and at most `maxConnectionsPerAddress` open connections per client address (0: unbounded),
 * more are closed at once so that one address cannot take every file descriptor.
 */
export function serverFactory(config: Config) {
  return (handler: (req: IncomingMessage, res: ServerResponse) => void): Server => {
    const shortest = Math.min(config.headersTimeoutMs, config.requestTimeoutMs)
    const server = createServer({
      headersTimeout: config.headersTimeoutMs,
      requestTimeout: config.requestTimeoutMs,
      connectionsCheckingInterval: Math.max(25, Math.min(1000, Math.floor(shortest / 4))),
      requireHostHeader: false,
      keepAliveTimeout: KEEP_ALIVE_MS,
    }, config.lingerMs > 0 ? lingeringClose(handler, config.lingerMs) : handler)
    server.headersTimeout = config.headersTimeoutMs
    server.keepAliveTimeout = KEEP_ALIVE_MS
    if (config.maxConnectionsPerAddress > 0) limitConnectionsPerAddress(server, config.maxConnectionsPerAddress)
    return server
  }
}

const kCurrentRequest = Symbol('current request')
type LingeringSocket = Socket & { [kCurrentRequest]?: IncomingMessage; destroySoon(): void }

/**
 * A lingering close, as nginx and Apache do it. A request refused before its body was read (413 on its Content-Length,
 * 401 on its headers) is answered with `Connection: close` while the client may still be sending. Node then destroys
 * the socket as soon as the answer is written, and the bytes still arriving make the kernel send a reset, which can
 * reach the client (or a proxy such as nginx, which then answers 502) before it has read the answer. Instead, such a
 * connection sends its answer and its FIN, and keeps reading (and discarding) until the client closes its side or
 * `lingerMs` passes. Connections whose request was read to its end close at once, as before.
 */
function lingeringClose(handler: (req: IncomingMessage, res: ServerResponse) => void, lingerMs: number) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    const socket = req.socket as LingeringSocket
    if (socket[kCurrentRequest] === undefined) {
      const destroySoon = socket.destroySoon.bind(socket)
      socket.destroySoon = () => {
        if (socket[kCurrentRequest]?.complete !== false || socket.destroyed) return destroySoon()
        socket.end()
        const timer = setTimeout(() => socket.destroy(), lingerMs)
        timer.unref()
        socket.once('end', () => socket.destroy())
        socket.once('close', () => clearTimeout(timer))
      }
    }
    socket[kCurrentRequest] = req
    handler(req, res)
  }
}

/**
 * Open connections per client address, held open in this process's store (src/limits/held-open.ts): the bound
 * protects this process's file descriptors, so it is never shared through Redis (docs/decisions/limits.md).
 */
function limitConnectionsPerAddress(server: Server, max: number): void {
  const open = new MemoryHeldOpen()
  server.on('connection', (socket: Socket) => {
    const release = open.hold(socket.remoteAddress ?? 'unknown', max)
    if (release === null) {
      socket.destroy()
      return
    }
    socket.once('close', release)
  })
}

/** What a request Node's parser refused gets: the catalog code for each kind of failure. */
function codeOf(err: NodeJS.ErrnoException): ErrorCode {
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW':
      return 'HEADERS_TOO_LARGE'
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return 'REQUEST_TIMEOUT'
    default:
      return 'BAD_REQUEST'
  }
}

const DESCRIPTIONS: Partial<Record<string, string>> = {
  HPE_INVALID_METHOD: 'The request method is not a known HTTP method',
  HPE_INVALID_VERSION: 'The HTTP version is not supported',
  HPE_INVALID_CHUNK_SIZE: 'A chunk size is malformed',
  HPE_UNEXPECTED_CONTENT_LENGTH: 'The request has both Transfer-Encoding and Content-Length, or several Content-Length values',
  HPE_INVALID_CONTENT_LENGTH: 'Content-Length is malformed',
  HPE_INVALID_TRANSFER_ENCODING: 'Transfer-Encoding is not supported (send chunked alone, last)',
  HPE_INVALID_HEADER_TOKEN: 'A header holds a character HTTP does not allow',
  HPE_INVALID_CONSTANT: 'The request line is malformed',
  HPE_INVALID_URL: 'The request target is malformed',
  HPE_LF_EXPECTED: 'A line of the request does not end with CRLF',
  HPE_CR_EXPECTED: 'A line of the request does not end with CRLF',
}

/**
 * Fastify's `clientErrorHandler`: a request Node's HTTP parser refused (or one not received in time) is answered in the
 * contract's service error shape with X-Service-MCP-Version and X-Request-Id, then the connection closes (the parser
 * cannot resynchronise after a malformed request).
 */
export function clientErrorHandler(this: { log: { debug(obj: unknown, msg: string): void } }, err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy()
    return
  }
  // The request was already answered before its body was read (refused by a check on its headers): a second answer
  // would answer no request, so the connection just closes. Gracefully, as before: destroying it could reset the
  // connection before a proxy in front has read the answer (it would then report a bad gateway instead).
  if ((socket as Socket & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage?.headersSent === true) {
    socket.end()
    return
  }
  const code = codeOf(err)
  const message = code === 'BAD_REQUEST' ? DESCRIPTIONS[err.code ?? ''] ?? 'The request is malformed' : undefined
  const failure = new ServiceError(code, message === undefined ? {} : { message, details: { reason: err.code ?? 'parse error' } })
  const body = JSON.stringify(toServiceBody(failure))
  const requestId = randomUUID()
  this.log.debug({ errorCode: code, reason: err.code, requestId, address: socket.remoteAddress }, 'request refused by the HTTP parser')
  socket.end([
    `HTTP/1.1 ${failure.status} ${STATUS_CODES[failure.status] ?? 'Bad Request'}`,
    'content-type: application/json; charset=utf-8',
    `content-length: ${Buffer.byteLength(body)}`,
    `x-service-mcp-version: ${SERVICE_MCP_VERSION}`,
    `x-request-id: ${requestId}`,
    'connection: close',
    '',
    body,
  ].join('\r\n'))
}


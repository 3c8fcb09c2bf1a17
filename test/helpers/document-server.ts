import { readFileSync } from 'node:fs'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { createServer as createTlsServer, type TLSSocket } from 'node:tls'
import { ROOT } from './root.js'

/**
 * Local HTTPS servers for client metadata documents, with the committed test certificate (test/fixtures/tls: valid for
 * localhost, client.test, other.test, 127.0.0.1 and ::1). `documentServer` answers per path through node:https and
 * counts what it was asked; `rawTlsServer` hands each connection's socket to the test, to write responses no
 * well-behaved server would (a false Content-Length, a body that stalls).
 */

const TLS_DIR = join(ROOT, 'test', 'fixtures', 'tls')
export const TEST_CA = readFileSync(join(TLS_DIR, 'ca.crt'))
const KEY = readFileSync(join(TLS_DIR, 'server.key'))
const CERT = readFileSync(join(TLS_DIR, 'server.crt'))

export type Route = (req: IncomingMessage, res: ServerResponse) => void

export interface DocumentServer {
  port: number
  /** Requests per path. */
  hits: Map<string, number>
  /** TCP connections accepted (TLS handshake or not). */
  connections: number
  /** Sets what `path` answers. */
  route(path: string, handler: Route): void
  /** `path` answers `body` as JSON with `headers`. */
  serve(path: string, body: unknown, headers?: Record<string, string>): void
  close(): Promise<void>
}

export async function documentServer(): Promise<DocumentServer> {
  const routes = new Map<string, Route>()
  const hits = new Map<string, number>()
  const server = createHttpsServer({ key: KEY, cert: CERT }, (req, res) => {
    const path = req.url ?? '/'
    hits.set(path, (hits.get(path) ?? 0) + 1)
    const handler = routes.get(path)
    if (handler) handler(req, res)
    else res.writeHead(404).end()
  })
  const state = { connections: 0 }
  server.on('connection', () => void state.connections++)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    port: (server.address() as AddressInfo).port,
    hits,
    get connections() {
      return state.connections
    },
    route: (path, handler) => void routes.set(path, handler),
    serve(path, body, headers = {}) {
      routes.set(path, (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json', ...headers }).end(typeof body === 'string' ? body : JSON.stringify(body))
      })
    },
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    }),
  }
}

export interface RawTlsServer {
  port: number
  close(): Promise<void>
}

/** A TLS server that gives each connection to `onRequest` once the request's head has arrived. */
export async function rawTlsServer(onRequest: (socket: TLSSocket) => void): Promise<RawTlsServer> {
  const sockets = new Set<TLSSocket>()
  const server = createTlsServer({ key: KEY, cert: CERT }, (socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => {})
    let head = ''
    const onData = (chunk: Buffer) => {
      head += chunk.toString('latin1')
      if (!head.includes('\r\n\r\n')) return
      socket.off('data', onData)
      onRequest(socket)
    }
    socket.on('data', onData)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => {
      for (const socket of sockets) socket.destroy()
      server.close(() => resolve())
    }),
  }
}

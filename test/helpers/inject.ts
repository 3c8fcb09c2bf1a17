/**
 * The inject tier: a server built like startServer's (same settings, same database per pass, the owner bootstrapped)
 * that never listens, with a manual clock. Requests reach it through Fastify's inject: the suite's undici helpers
 * (test/helpers/mcp.ts, oauth.ts) work unchanged, because this module installs an undici dispatcher that hands every
 * request for an inject server's address to that server's app. Time moves only with `server.clock.advance(ms)`, so a
 * test of an expiry, a TTL or a sweep decides nothing by the wall clock.
 *
 * Real-socket tests (test/helpers/server.ts) stay for what needs a connection: streams that stay open, proxies, real
 * clients, crashes and browsers. A request to an address no inject server has goes to the network as before.
 */
import type { FastifyInstance } from 'fastify'
import { Dispatcher, getGlobalDispatcher, setGlobalDispatcher } from 'undici'
import { buildApp } from '../../src/app.js'
import { loadConfig, type Config } from '../../src/config.js'
import type { CreateServerOptions } from '../../src/index.js'
import { ManualClock } from './clock.js'
import { OWNER_KEY, testServerSettings, type TestServer } from './server.js'

export interface InjectServer extends TestServer {
  /** The server's clock: nothing that decides by time moves until the test advances it. */
  clock: ManualClock
}

interface Teardown {
  teardown(fn: () => unknown): void
}

/** Inject servers by origin (each has an address of its own, never listened on). */
const apps = new Map<string, FastifyInstance>()
let nextPort = 1
let installed = false

/**
 * Builds a server on a temporary database (PostgreSQL on that pass) with a manual clock, bootstrapped with OWNER_KEY,
 * that answers undici requests to `server.url` through inject. Closed at teardown.
 */
export async function injectServer(
  t: Teardown,
  options: { config?: Partial<Config>; dbPath?: string; clock?: ManualClock } & Omit<CreateServerOptions, 'config' | 'env' | 'argv' | 'onBootstrap'> = {},
): Promise<InjectServer> {
  installDispatcher()
  const { dbPath, settings } = await testServerSettings(t, options)
  // An address of its own per server (port 1, 2, …: nothing listens there): the dispatcher finds the app by it.
  const url = `http://127.0.0.1:${nextPort++}`
  const clock = options.clock ?? new ManualClock()
  const { config: overrides, dbPath: _d, clock: _c, ...rest } = options
  // Its own address as the base URL: the pages and tokens name the address the requests go to.
  const config = loadConfig({ env: {}, overrides: { ...settings, baseUrl: url, ...overrides } })

  const app = await buildApp({ logger: false, ...rest, config, clock })
  apps.set(url, app)
  let closed = false
  const close = async () => {
    if (closed) return
    closed = true
    apps.delete(url)
    await app.close()
  }
  t.teardown(close)
  return {
    app,
    config,
    clock,
    url,
    mcpUrl: `${url}/mcp`,
    apiKey: OWNER_KEY,
    dbPath,
    cliEnv: { SERVICE_DATABASE: dbPath, ...(config.envKey ? { SERVICE_ENV_KEY: config.envKey } : {}) },
    close,
    listen: () => Promise.reject(new Error('an inject server never listens: use startServer for a real socket')),
    closeOnSignals: () => {
      throw new Error('an inject server has no process to stop: use startServer')
    },
  }
}

/** Once per process: requests to an inject server's address go to its app; every other one as before. */
function installDispatcher(): void {
  if (installed) return
  installed = true
  setGlobalDispatcher(new InjectDispatcher(getGlobalDispatcher()))
}

type Headers = Record<string, string | string[]>

/** An undici dispatcher that answers through `app.inject` for the origins of inject servers. */
class InjectDispatcher extends Dispatcher {
  constructor(readonly network: Dispatcher) {
    super()
  }

  override dispatch(opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    const origin = opts.origin === undefined ? undefined : new URL(String(opts.origin)).origin
    const app = origin === undefined ? undefined : apps.get(origin)
    if (!app) return this.network.dispatch(opts, handler)
    void answer(app, opts, handler as LegacyHandler)
    return true
  }

  override close(): Promise<void> {
    return this.network.close()
  }

  override destroy(): Promise<void> {
    return this.network.destroy()
  }
}

/** The callbacks undici's request() gives a dispatcher (its legacy handler interface). */
interface LegacyHandler {
  onConnect?(abort: (err?: Error) => void, context?: unknown): void
  onHeaders?(statusCode: number, rawHeaders: Buffer[], resume: () => void, statusText: string): boolean | void
  onData?(chunk: Buffer): boolean | void
  onComplete?(trailers: Buffer[]): void
  onError?(err: Error): void
}

async function answer(app: FastifyInstance, opts: Dispatcher.DispatchOptions, handler: LegacyHandler): Promise<void> {
  let aborted: Error | undefined
  handler.onConnect?.((err) => (aborted = err ?? new Error('aborted')))
  try {
    const payload = await bodyOf(opts.body)
    const res = await app.inject({
      method: opts.method as 'GET',
      url: opts.path,
      headers: withHost(headersOf(opts.headers), opts.origin),
      ...(payload !== undefined ? { payload } : {}),
    })
    if (aborted) return handler.onError?.(aborted)
    const raw: Buffer[] = []
    for (const [name, value] of Object.entries(res.headers)) {
      if (value === undefined) continue
      for (const v of Array.isArray(value) ? value : [value]) raw.push(Buffer.from(name), Buffer.from(String(v)))
    }
    handler.onHeaders?.(res.statusCode, raw, () => {}, res.statusMessage)
    if (res.rawPayload.length > 0) handler.onData?.(res.rawPayload)
    handler.onComplete?.([])
  } catch (err) {
    handler.onError?.(err as Error)
  }
}

function headersOf(headers: Dispatcher.DispatchOptions['headers']): Headers {
  const out: Headers = {}
  if (!headers) return out
  const put = (k: string, v: unknown) => {
    if (v === undefined || v === null) return
    out[k.toLowerCase()] = Array.isArray(v) ? v.map(String) : String(v)
  }
  if (Array.isArray(headers)) for (let i = 0; i + 1 < headers.length; i += 2) put(String(headers[i]), headers[i + 1])
  else if (typeof (headers as Iterable<unknown>)[Symbol.iterator] === 'function') for (const [k, v] of headers as Iterable<[string, unknown]>) put(k, v)
  else for (const [k, v] of Object.entries(headers)) put(k, v)
  return out
}

/**
 * The Host a socket request carries: undici sends the origin's host unless the caller set one. Inject would send
 * `localhost:80`, which is not the inject server's base address (a loopback base checks Host on /mcp).
 */
function withHost(headers: Headers, origin: Dispatcher.DispatchOptions['origin']): Headers {
  if (headers.host !== undefined || origin === undefined) return headers
  return { ...headers, host: new URL(String(origin)).host }
}

async function bodyOf(body: Dispatcher.DispatchOptions['body']): Promise<string | Buffer | undefined> {
  if (body === undefined || body === null) return undefined
  if (typeof body === 'string' || Buffer.isBuffer(body)) return body
  if (body instanceof Uint8Array) return Buffer.from(body)
  const chunks: Buffer[] = []
  for await (const chunk of body as AsyncIterable<string | Uint8Array>) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk))
  return Buffer.concat(chunks)
}

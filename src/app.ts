import Fastify, { LogController, type FastifyInstance } from 'fastify'
import { bootstrap, type BootstrapResult } from './bootstrap.js'
import { clientErrorHandler, serverFactory } from './lib/http-edge.js'
import type { Config, TrustProxy } from './config.js'
import type { DatabaseHandle } from './db/sqlite/client.js'
import type { Clock } from './lib/clock.js'
import type { ClientDocumentResolver } from './oauth/client-documents/index.js'
import authPlugin from './plugins/auth.js'
import coordinationPlugin from './plugins/coordination.js'
import processesPlugin from './plugins/processes.js'
import dbPlugin from './plugins/db.js'
import discoveryPlugin from './plugins/discovery.js'
import elicitationPlugin from './plugins/elicitation/index.js'
import httpPlugin, { genReqId } from './plugins/http.js'
import healthPlugin from './plugins/health.js'
import auditChainPlugin from './plugins/audit-chain.js'
import retentionPlugin from './plugins/retention.js'
import landingPlugin from './plugins/landing.js'
import metricsPlugin from './plugins/metrics.js'
import tracingPlugin from './plugins/tracing.js'
import accessLogPlugin from './plugins/access-log.js'
import type { TracingOptions } from './observability/tracing.js'
import transportPlugin from './plugins/mcp-transport/index.js'
import oauthPlugin from './plugins/oauth/index.js'
import rateLimitsPlugin from './plugins/rate-limits.js'
import rpcPlugin from './plugins/rpc.js'
import serverDiscoverPlugin from './plugins/server-discover.js'
import sessionsPlugin from './plugins/sessions.js'
import subscriptionsPlugin from './plugins/subscriptions.js'
import tasksPlugin from './plugins/tasks/index.js'
import toolsPlugin from './plugins/tools/index.js'
import type { ToolDefinition } from './plugins/tools/define.js'
import completionsPlugin from './plugins/completions.js'
import promptsPlugin from './plugins/prompts/index.js'
import type { PromptDefinition } from './plugins/prompts/define.js'
import resourcesPlugin from './plugins/resources/index.js'
import type { ResourceDefinition } from './plugins/resources/define.js'
import { builtinResourceEvents, builtinResources } from './plugins/resources/builtin/index.js'
import { builtinPrompts } from './plugins/prompts/builtin/index.js'
import { lazyChildLoggerFactory } from './lib/lazy-logger.js'

export interface BuildOptions {
  config: Config
  /** The tool catalog; defaults to the built-in tools. */
  tools?: ToolDefinition<any, any>[]
  /** The resources served; defaults to the built-in resources. */
  resources?: ResourceDefinition[]
  /** The prompts served; defaults to the built-in prompts. */
  prompts?: PromptDefinition<any>[]
  /** Use this open database instead of opening `config.database` (tests). */
  database?: DatabaseHandle
  /** Pino options, or false to log nothing. Defaults to JSON lines on stdout at `config.logLevel`. */
  logger?: boolean | Record<string, unknown>
  /** Called once when an empty database was given its first organization, owner and key. */
  onBootstrap?(result: BootstrapResult): void
  /**
   * OpenTelemetry: span processors for the server's own tracer provider, or a tracer provider of yours (tests pass an
   * in-memory exporter). Either turns tracing on, whatever SERVICE_TRACING says.
   */
  tracing?: TracingOptions
  /**
   * `false`: the empty database is not bootstrapped here; createServer does it once it listens (bootstrap.ts), so a
   * start that cannot listen prints no credentials. Default true: buildApp, which never listens, bootstraps at build.
   */
  bootstrap?: boolean
  /** What "now" is and the timers of everything that decides by time; default the system clock (lib/clock.ts). */
  clock?: Clock
  /** Resolves Client ID Metadata Documents instead of the built-in fetcher (tests serve documents without a network). */
  clientDocuments?: ClientDocumentResolver
}

/** Secrets never reach the logs: authorization headers, cookies and token-bearing fields are redacted. */
export const REDACT = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'password',
  'token',
  'refresh_token',
  'code',
  'code_verifier',
  'client_secret',
  'csrf',
  'req.headers["set-cookie"]',
  'res.headers["set-cookie"]',
]

/**
 * SERVICE_TRUST_PROXY as Fastify's `trustProxy`. Fastify 5.12 takes a number to mean "trust nobody" (a hop count cannot
 * tell a proxy from a client that connects directly), so a hop count becomes the function proxy-addr used to build for
 * it: the first `hops` addresses from the right (the peer, then X-Forwarded-For right to left) are proxies.
 */
export function trustProxyOption(setting: TrustProxy): boolean | string[] | ((address: string, hop: number) => boolean) {
  if (typeof setting !== 'number') return setting
  return (_address, hop) => hop < setting
}

/** Builds the Fastify application; plugins are registered in dependency order. Never listens. */
export async function buildApp(options: BuildOptions): Promise<FastifyInstance> {
  const { config } = options
  const logger = options.logger === false
    ? false
    : { level: config.logLevel, redact: { paths: REDACT, censor: '[redacted]' }, ...(typeof options.logger === 'object' ? options.logger : {}) }
  const app = Fastify({
    logger,
    genReqId,
    requestIdHeader: false,
    // Per-request info lines cost throughput; failures are logged by the error handlers instead.
    logController: new LogController({ disableRequestLogging: true }),
    // Request loggers are made when a request first logs at an enabled level, not for every request.
    childLoggerFactory: lazyChildLoggerFactory,
    trustProxy: trustProxyOption(config.trustProxy),
    bodyLimit: config.maxBodyBytes,
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    // While stopping, http.ts refuses requests itself (503 in the contract's shape) and lets health checks answer.
    return503OnClosing: false,
    forceCloseConnections: true,
    // Timeouts, connections per address and parser errors in the contract's shape: lib/http-edge.ts.
    serverFactory: serverFactory(config),
    clientErrorHandler,
  })
  await app.register(httpPlugin, { config, ...(options.clock ? { clock: options.clock } : {}) })
  await app.register(coordinationPlugin)
  await app.register(rateLimitsPlugin)
  await app.register(dbPlugin, { path: config.database, ...(options.database ? { handle: options.database } : {}) })
  await app.register(processesPlugin)
  await app.register(rpcPlugin)
  // Observability before the route plugins, whose routes their hooks must see; each registers nothing when off.
  await app.register(healthPlugin)
  await app.register(metricsPlugin)
  await app.register(tracingPlugin, { ...(options.tracing ? { options: options.tracing } : {}) })
  await app.register(accessLogPlugin)
  await app.register(authPlugin)
  await app.register(oauthPlugin, { ...(options.clientDocuments ? { clientDocuments: options.clientDocuments } : {}) })
  await app.register(auditChainPlugin)
  await app.register(retentionPlugin)
  await app.register(landingPlugin)
  await app.register(discoveryPlugin)
  await app.register(sessionsPlugin)
  await app.register(serverDiscoverPlugin)
  await app.register(elicitationPlugin)
  await app.register(tasksPlugin)
  await app.register(toolsPlugin, { ...(options.tools ? { tools: options.tools } : {}) })
  await app.register(resourcesPlugin, { resources: options.resources ?? builtinResources })
  await app.register(builtinResourceEvents)
  await app.register(promptsPlugin, { prompts: options.prompts ?? builtinPrompts })
  await app.register(completionsPlugin)
  await app.register(subscriptionsPlugin)
  await app.register(transportPlugin)
  await app.ready()
  if (options.bootstrap !== false) {
    const result = await bootstrap(app.repos, config)
    if (result) options.onBootstrap?.(result)
  }
  return app
}

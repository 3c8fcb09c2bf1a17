import Fastify, { LogController, type FastifyInstance } from 'fastify'
import { bootstrap, type BootstrapResult } from './bootstrap.js'
import { clientErrorHandler, serverFactory } from './lib/http-edge.js'
import type { Config } from './config.js'
import type { DatabaseHandle } from './db/client.js'
import authPlugin from './plugins/auth.js'
import dbPlugin from './plugins/db.js'
import discoveryPlugin from './plugins/discovery.js'
import elicitationPlugin from './plugins/elicitation/index.js'
import httpPlugin, { genReqId } from './plugins/http.js'
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
    trustProxy: config.trustProxy,
    bodyLimit: config.maxBodyBytes,
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    return503OnClosing: true,
    forceCloseConnections: true,
    // Timeouts, connections per address and parser errors in the contract's shape: lib/http-edge.ts.
    serverFactory: serverFactory(config),
    clientErrorHandler,
  })
  await app.register(httpPlugin, { config })
  await app.register(rateLimitsPlugin)
  await app.register(dbPlugin, { path: config.database, ...(options.database ? { handle: options.database } : {}) })
  await app.register(rpcPlugin)
  await app.register(authPlugin)
  await app.register(oauthPlugin)
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
  const result = await bootstrap(app.repos, config)
  if (result) options.onBootstrap?.(result)
  return app
}

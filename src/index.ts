/**
 * Public API for embedding: build a server with your own tools added to (or replacing) the built-in catalog.
 *
 *   import { createServer, defineTool, builtinTools } from 'service-mcp'
 *   const server = await createServer({ tools: [...builtinTools, myTool] })
 *   await server.listen()
 *   server.closeOnSignals()
 */
import type { FastifyInstance } from 'fastify'
import { buildApp, type BuildOptions } from './app.js'
import { prepareBootstrap, printFirstStart, type BootstrapResult } from './bootstrap.js'
import { adoptListeningPort, checkPipelineFolders, ConfigError, loadConfig, type Config } from './config.js'
import { storageFailure } from './db/open.js'
import { releaseFailedStart } from './lib/failed-start.js'

export { defineTool, toolResult, ToolResult } from './plugins/tools/define.js'
export type { ToolContext, ToolDefinition, ToolAnnotations, JsonSchema } from './plugins/tools/define.js'
export { defineResource } from './plugins/resources/define.js'
export type { ResourceDefinition, StaticResourceDefinition, TemplateResourceDefinition, ResourceEntry, ReadResult } from './plugins/resources/define.js'
export { definePrompt } from './plugins/prompts/define.js'
export type { PromptDefinition, PromptArgument, PromptResult } from './plugins/prompts/define.js'
export type { Completer, Completers } from './mcp/completion.js'
export { text, image, audio, resourceLink, embeddedResource } from './mcp/content.js'
export type { ContentBlock, TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource, ResourceContents, PromptMessage, Icon, Annotations } from './mcp/content.js'
export type { RequestContext } from './rpc/handler-context.js'
export type { SessionView } from './rpc/exchange.js'
export type { InputRequest, ElicitForm, ElicitResult, CreateMessageParams, CreateMessageResult, ListRootsResult } from './mcp/input-requests.js'
export { builtinTools } from './plugins/tools/builtin/index.js'
export { builtinResources } from './plugins/resources/builtin/index.js'
export { builtinPrompts } from './plugins/prompts/builtin/index.js'
export { fail, ServiceError } from './errors/service-error.js'
export { CancelledByClient, ClientDisconnected, ServerStopping, SessionEnded, TaskCancelled } from './rpc/call-abort.js'
export type { Era, LogLevel, ProtocolVersion } from './rpc/types.js'
export type { ErrorCode } from './errors/catalog.js'
export { loadConfig, ConfigError, type Config } from './config.js'
export { buildApp } from './app.js'
export type { TracingOptions } from './observability/tracing.js'
export type { Clock, ClockTimer, TimerCallback } from './lib/clock.js'
export { firstStartMessage, type BootstrapResult } from './bootstrap.js'
// What `server.app` offers embedders (the README's `server.app.tools`, `.prompts`, `.resources`, and `.repos`): the
// FastifyInstance augmentations of those plugins, kept in the public declarations. Types only: nothing runs.
export type {} from './plugins/tools/index.js'
export type {} from './plugins/prompts/index.js'
export type {} from './plugins/resources/index.js'
export type {} from './plugins/db.js'

export interface CreateServerOptions extends Omit<BuildOptions, 'config' | 'bootstrap' | 'onBootstrap'> {
  /**
   * Called once the server listens, when an empty database was given its first organization, owner and API key.
   * Default: the first-start message on stdout, as `service-mcp serve` prints it (`firstStartMessage`); the generated
   * password and key appear nowhere else. Pass your own function to show or store them otherwise.
   */
  onBootstrap?(result: BootstrapResult): void
  /** Settings (any key of the configuration table); the environment and defaults fill in the rest. */
  config?: Partial<Config>
  /** Read SERVICE_* variables from this environment (default process.env). */
  env?: NodeJS.ProcessEnv
  /** Command-line flags of the configuration table (`--port 0`, `--database x.db`). */
  argv?: readonly string[]
}

export interface McpServer {
  app: FastifyInstance
  config: Config
  /**
   * Listens on config.host:config.port; returns the base URL (which follows the real port when port is 0). On an empty
   * database it then creates the first organization, owner and API key and calls `onBootstrap` (default: the
   * first-start message on stdout, as `service-mcp serve` prints it), so a server that cannot listen creates and shows
   * nothing. An address it cannot listen on is a ConfigError naming SERVICE_HOST and SERVICE_PORT.
   */
  listen(): Promise<string>
  close(): Promise<void>
  /**
   * Stops the server cleanly on SIGTERM and SIGINT (or `signals`), as `service-mcp serve` does: runs and calls in
   * flight are answered or interrupted, the database is closed, then the process exits with code 0 (1 when closing
   * failed). Returns a function that removes the handlers again.
   */
  closeOnSignals(signals?: readonly NodeJS.Signals[]): () => void
}

/** Why a server could not listen, as a ConfigError naming the settings when they are the cause; else the error. */
function listenFailure(config: Config, err: unknown): unknown {
  const code = (err as NodeJS.ErrnoException | null)?.code
  const where = `SERVICE_HOST ${config.host}, SERVICE_PORT ${config.port}`
  if (code === 'EADDRINUSE') return new ConfigError(`Cannot listen on ${where}: the address is in use by another process`, { cause: err })
  if (code === 'EACCES') return new ConfigError(`Cannot listen on ${where}: permission denied (ports below 1024 need privileges)`, { cause: err })
  if (code === 'EADDRNOTAVAIL') return new ConfigError(`Cannot listen on ${where}: no such address on this machine`, { cause: err })
  return err
}

export async function createServer(options: CreateServerOptions = {}): Promise<McpServer> {
  const env = options.env ?? process.env
  const argv = options.argv ?? []
  const config = loadConfig({ env, argv, overrides: options.config ?? {} })
  const explicitBaseUrl = Boolean(options.config?.baseUrl || env.SERVICE_BASE_URL || argv.some((a) => a.startsWith('--base-url')))
  // A pipeline folder that does not exist is a setting to fix before anything starts, not a failure at the first deploy.
  checkPipelineFolders(config)
  const { config: _c, env: _e, argv: _a, onBootstrap = printFirstStart, ...build } = options
  let app: FastifyInstance
  try {
    app = await buildApp({ ...build, config, bootstrap: false })
  } catch (err) {
    // A server that did not start lets go of what it opened (its database file and lock, Redis, its process entry), and
    // a storage failure on the way (a full disk at bootstrap, a read-only file at recovery) is the DatabaseError naming
    // the file and SERVICE_DATABASE.
    await releaseFailedStart(config)
    throw (options.database ? undefined : storageFailure(config.database, err)) ?? err
  }
  const close = () => app.close()
  return {
    app,
    config,
    async listen() {
      // The password is hashed before binding; the owner is written right after, in one transaction (bootstrap.ts).
      const bootstrap = await prepareBootstrap(app.repos, config)
      // Until the owner and its key are written, requests wait (a client may call as soon as the port answers).
      let opened = () => {}
      if (bootstrap) app.holdRequestsUntil(new Promise<void>((resolve) => (opened = resolve)))
      try {
        await app.listen({ host: config.host, port: config.port })
      } catch (err) {
        opened()
        throw listenFailure(config, err)
      }
      const address = app.server.address()
      if (address && typeof address === 'object') adoptListeningPort(config, address.port, explicitBaseUrl)
      let result: BootstrapResult | null | undefined
      try {
        result = await bootstrap?.commit()
      } catch (err) {
        // A listen() that fails leaves nothing listening; a full disk here is the DatabaseError naming the file.
        opened()
        await app.close().catch(() => {})
        throw (options.database ? undefined : storageFailure(config.database, err)) ?? err
      }
      opened()
      if (result) onBootstrap(result)
      return config.baseUrl
    },
    close,
    closeOnSignals(signals = ['SIGTERM', 'SIGINT']) {
      let stopping = false
      const stop = (signal: NodeJS.Signals) => {
        // A second signal while closing changes nothing: the shutdown is already bounded by its own timeouts.
        if (stopping) return
        stopping = true
        app.log.info({ signal }, 'shutting down')
        close().then(() => process.exit(0), (err: unknown) => {
          app.log.error({ err }, 'shutdown failed')
          process.exit(1)
        })
      }
      const handlers = signals.map((signal) => [signal, () => stop(signal)] as const)
      for (const [signal, handler] of handlers) process.on(signal, handler)
      return () => {
        for (const [signal, handler] of handlers) process.off(signal, handler)
      }
    },
  }
}

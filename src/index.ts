/**
 * Public API for embedding: build a server with your own tools added to (or replacing) the built-in catalog.
 *
 *   import { createServer, defineTool, builtinTools } from 'service-mcp'
 *   const server = await createServer({ tools: [...builtinTools, myTool] })
 *   await server.listen()
 */
import type { FastifyInstance } from 'fastify'
import { buildApp, type BuildOptions } from './app.js'
import { adoptListeningPort, loadConfig, type Config } from './config.js'
import { databaseFailure } from './db/client.js'
import { releaseDatabaseOf } from './plugins/db.js'

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
export type { InputRequest, ElicitForm, ElicitResult, CreateMessageParams, CreateMessageResult, ListRootsResult } from './mcp/input-requests.js'
export { builtinTools } from './plugins/tools/builtin/index.js'
export { builtinResources } from './plugins/resources/builtin/index.js'
export { builtinPrompts } from './plugins/prompts/builtin/index.js'
export { fail, ServiceError } from './errors/service-error.js'
export { CancelledByClient, ClientDisconnected, SessionEnded, TaskCancelled } from './rpc/call-abort.js'
export type { Era, LogLevel, ProtocolVersion } from './rpc/types.js'
export type { ErrorCode } from './errors/catalog.js'
export { loadConfig, ConfigError, type Config } from './config.js'
export { buildApp } from './app.js'

export interface CreateServerOptions extends Omit<BuildOptions, 'config'> {
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
  /** Listens on config.host:config.port; returns the base URL (which follows the real port when port is 0). */
  listen(): Promise<string>
  close(): Promise<void>
}

export async function createServer(options: CreateServerOptions = {}): Promise<McpServer> {
  const env = options.env ?? process.env
  const argv = options.argv ?? []
  const config = loadConfig({ env, argv, overrides: options.config ?? {} })
  const explicitBaseUrl = Boolean(options.config?.baseUrl || env.SERVICE_BASE_URL || argv.some((a) => a.startsWith('--base-url')))
  const { config: _c, env: _e, argv: _a, ...build } = options
  let app: FastifyInstance
  try {
    app = await buildApp({ ...build, config })
  } catch (err) {
    // A server that did not start lets go of its database file (and its lock), and a storage failure on the way (a
    // full disk at bootstrap, a read-only file at recovery) is the DatabaseError naming the file and SERVICE_DATABASE.
    releaseDatabaseOf(config)
    throw (options.database ? undefined : databaseFailure(config.database, err)) ?? err
  }
  return {
    app,
    config,
    async listen() {
      await app.listen({ host: config.host, port: config.port })
      const address = app.server.address()
      if (address && typeof address === 'object') adoptListeningPort(config, address.port, explicitBaseUrl)
      return config.baseUrl
    },
    close: () => app.close(),
  }
}

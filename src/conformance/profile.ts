import { randomBytes } from 'node:crypto'
import { createServer, loadConfig, type Config, type McpServer } from '../index.js'
import { parseFlags, SETTINGS } from '../config.js'
import { maskCredentials } from '../lib/mask-credentials.js'
import { conformancePrompts } from './fixtures/prompts.js'
import { conformanceResources } from './fixtures/resources.js'
import { conformanceTools, type ListChanges } from './fixtures/tools.js'

/**
 * `service-mcp serve --profile conformance` (or SERVICE_PROFILE=conformance): the server as the reference the official
 * MCP conformance suite (github:modelcontextprotocol/conformance) and MCP client authors test against. The suite sends
 * no credentials, so the profile serves without authentication, and therefore only under these guards:
 *
 * - loopback only: a host (or base URL) that is not 127.0.0.1, ::1 or localhost refuses to start (config.ts, exit 2);
 * - a throwaway database: `:memory:` whatever SERVICE_DATABASE says (the banner names what it ignored), and a random
 *   env-var key held in memory, so nothing is written to disk (no database, lock or env.key file);
 * - no authentication, through the normal machinery: the fresh database's owner gets a random API key with both scopes,
 *   and a request without an Authorization header acts with that key (verified like any other on every request; a
 *   request that sends a credential is verified as always, an invalid one refused). The owner's password is random and
 *   never shown, so nobody signs in and no OAuth client is ever given a token;
 * - a loud banner on stderr;
 * - exactly the suite's fixtures (src/conformance/fixtures): no built-in tool, resource or prompt;
 * - rate limits lifted (the suite makes many requests from one address, all as one member).
 */

export interface ConformanceOptions {
  /** Flags of the configuration table (`--port 0`); the profile's own settings win over them. */
  argv?: readonly string[]
  /** SERVICE_* variables (default process.env); likewise. */
  env?: NodeJS.ProcessEnv
  /** Pino options, or false to log nothing (default: JSON lines on stdout). */
  logger?: boolean | Record<string, unknown>
}

export interface ConformanceServer extends McpServer {
  /** What the operator configured that the profile ignored (shown in the banner). */
  readonly ignored: readonly string[]
  /** The banner, once listening (it names the URL). */
  banner(): string
}

const LIFTED = 1_000_000_000

/** The settings the profile decides, whatever the flags, the environment or the config file say. */
function profileSettings(): Partial<Config> {
  return {
    profile: 'conformance',
    database: ':memory:',
    envKey: randomBytes(32).toString('base64'),
    envKeyFile: '',
    bootstrapApiKey: `service_mcp_${randomBytes(32).toString('base64url')}`,
    bootstrapPassword: '',
    trustProxy: false,
    rateLimitOAuthMember: LIFTED,
    rateLimitApiKeyMember: LIFTED,
    rateLimitOrganization: LIFTED,
    rateLimitToolFactor: 1_000_000,
    maxConnectionsPerAddress: 0,
    listenMaxPerMember: 1000,
  }
}

const defaultOf = (key: keyof Config) => SETTINGS.find((s) => s.key === key)?.default

export async function createConformanceServer(options: ConformanceOptions = {}): Promise<ConformanceServer> {
  const env = options.env ?? process.env
  const forced = profileSettings()
  // Everything is checked as usual first (a bad value, a host that is not loopback: exit 2); profile included.
  const configured = loadConfig({ env, argv: options.argv ?? [], overrides: { profile: 'conformance' } })
  const ignored: string[] = []
  if (configured.database !== ':memory:' && configured.database !== defaultOf('database')) ignored.push(`SERVICE_DATABASE ${JSON.stringify(maskCredentials(configured.database))}`)
  if (configured.envKey) ignored.push('SERVICE_ENV_KEY')
  if (configured.envKeyFile) ignored.push(`SERVICE_ENV_KEY_FILE ${JSON.stringify(configured.envKeyFile)}`)
  if (configured.bootstrapApiKey) ignored.push('SERVICE_BOOTSTRAP_API_KEY')
  if (configured.bootstrapPassword) ignored.push('SERVICE_BOOTSTRAP_PASSWORD')
  if (configured.trustProxy) ignored.push('SERVICE_TRUST_PROXY')
  // Flags win over overrides: the profile's own settings are taken out of them.
  const flags = Object.entries(parseFlags(options.argv ?? [])).filter(([key]) => !(key in forced))
  const argv = flags.map(([key, value]) => `${SETTINGS.find((s) => s.key === key)!.flag}=${value}`)

  let live: McpServer | undefined
  const changes: ListChanges = {
    toggleTool(def) {
      const tools = live!.app.tools
      if (tools.remove(def.name)) return 'removed'
      tools.add(def)
      return 'added'
    },
    togglePrompt(def) {
      const prompts = live!.app.prompts
      if (prompts.remove(def.name)) return 'removed'
      prompts.add(def)
      return 'added'
    },
  }
  const tools = conformanceTools(changes)
  const resources = conformanceResources()
  const prompts = conformancePrompts()
  const server = await createServer({
    env,
    argv,
    config: forced,
    tools,
    resources,
    prompts,
    ...(options.logger !== undefined ? { logger: options.logger } : {}),
    // The owner's password and key are the profile's own, never shown.
    onBootstrap: () => {},
  })
  live = server
  try {
    server.app.auth.actWithoutAuthorization(forced.bootstrapApiKey!)
  } catch (err) {
    await server.close()
    throw err
  }
  const counts = `${tools.length} tools, ${resources.length} resources and templates, ${prompts.length} prompts`
  return Object.assign(server, {
    ignored,
    banner: () => banner(server.config, ignored, counts),
  })
}

function banner(config: Config, ignored: readonly string[], counts: string): string {
  const url = `${config.baseUrl}/mcp`
  const rule = '='.repeat(100)
  return [
    rule,
    ' service-mcp CONFORMANCE PROFILE: a test server for MCP clients and the official conformance suite, not a service',
    ' * NO AUTHENTICATION: a request without an Authorization header acts as the owner (both scopes) of a throwaway',
    '   organization; a credential that is sent is verified as usual',
    ` * NO PERSISTENCE: in-memory database, gone when the process ends; nothing is written to disk${ignored.length > 0 ? ` (ignored: ${ignored.join(', ')})` : ''}`,
    ` * LOOPBACK ONLY: listening on ${config.host}, port ${config.port}; rate limits lifted`,
    ` * ONLY THE SUITE'S FIXTURES: ${counts}; no built-in tool`,
    ` * MCP endpoint (give it to the suite or your client): ${url}`,
    `     npx @modelcontextprotocol/conformance server --url ${url}`,
    rule,
  ].join('\n') + '\n'
}

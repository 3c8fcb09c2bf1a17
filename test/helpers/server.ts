import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Config } from '../../src/config.js'
import { createServer, type CreateServerOptions, type McpServer } from '../../src/index.js'
import { isPostgresUrl } from '../../src/lib/database-url.js'
import { postgresDatabase } from './backends.js'

/** Fixed credentials of the bootstrapped owner in every test server. */
export const OWNER_EMAIL = 'owner@example.com'
export const OWNER_PASSWORD = 'correct horse battery staple'
/**
 * OWNER_PASSWORD's scrypt hash, made once with the server's parameters: test servers bootstrap with it
 * (SERVICE_BOOTSTRAP_PASSWORD_HASH), so none spends ~70 ms of CPU hashing the same password again.
 */
export const OWNER_PASSWORD_HASH = 'scrypt$16384$8$1$sfsNj5Ry-kj9DkOWg50twQ$bJpMiHCL75rQaV9u7Wmy6mDzBVEoi9_9zhLItxXikuQ'
export const OWNER_KEY = 'service_mcp_' + 'T'.repeat(43)

/** Rate limits raised out of reach; rate-limit tests pass their own values. */
export const UNLIMITED = {
  rateLimitOAuthMember: 1_000_000,
  rateLimitApiKeyMember: 1_000_000,
  rateLimitOrganization: 1_000_000,
  rateLimitToolFactor: 100_000,
  registerRateLimit: 1_000_000,
  // Every request of a test comes from 127.0.0.1: limits per client address, meant for one person, would trip tests
  // that authorize or sign in many times. Tests of those limits set their own.
  authorizeRateLimit: 1_000_000,
  pendingAuthorizationsPerAddress: 1_000_000,
  signInAddressFreeAttempts: 1_000_000,
} as const

export interface TestServer extends McpServer {
  url: string
  mcpUrl: string
  apiKey: string
  dbPath: string
  /**
   * What the command line needs to work on this server's database: SERVICE_DATABASE, and SERVICE_ENV_KEY when the
   * server was given its key as a setting (always on PostgreSQL, which has no folder for an env.key).
   */
  cliEnv: Record<string, string>
}

interface Teardown {
  teardown(fn: () => unknown): void
}

/**
 * SERVICE_TEST_DATABASE=postgres runs the servers of the suite on this run's PostgreSQL (test/setup/backends.ts), each
 * on a database of its own, instead of a temporary SQLite file. Tests that open the file themselves pass their own.
 */
export function onPostgres(): boolean {
  return process.env.SERVICE_TEST_DATABASE === 'postgres'
}

/** A fresh temporary database file, deleted at teardown. */
export function tempDatabase(t: Teardown): string {
  const dir = mkdtempSync(join(tmpdir(), 'service-mcp-test-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return join(dir, 'test.db')
}

/** The database of a test server (a temporary SQLite file, or a PostgreSQL database on that pass) and its settings. */
export async function testServerSettings(
  t: Teardown,
  options: { config?: Partial<Config>; dbPath?: string },
): Promise<{ dbPath: string; settings: Partial<Config> }> {
  const dbPath = options.config?.database ?? options.dbPath ?? (onPostgres() ? await postgresDatabase(t, { migrated: true }) : tempDatabase(t))
  // A PostgreSQL database has no folder for a default env.key (config.ts): the suite's pass on it names one. A SQLite
  // file passed by the test keeps its env.key beside it, as in production, whatever the pass.
  const postgresKey = isPostgresUrl(dbPath) && !options.config?.envKey && !options.config?.envKeyFile ? { envKey: Buffer.alloc(32, 0x70).toString('base64') } : {}
  const settings: Partial<Config> = {
    host: '127.0.0.1',
    port: 0,
    database: dbPath,
    logLevel: 'silent',
    bootstrapEmail: OWNER_EMAIL,
    // The hash unless the test gives a password of its own (the two cannot be set together).
    ...(options.config?.bootstrapPassword ? {} : { bootstrapPasswordHash: OWNER_PASSWORD_HASH }),
    bootstrapApiKey: OWNER_KEY,
    // Tests send far more than a person would: ceilings out of reach unless a test sets its own (rate-limit tests).
    ...UNLIMITED,
    // A test's own client keeps idle keep-alive connections for a minute: a settle period would wait for them at
    // every teardown. Tests of the stop itself set their own (rolling-restart, health).
    stopSettleMs: 0,
    ...postgresKey,
    ...options.config,
  }
  return { dbPath, settings }
}

/**
 * Starts a real server on 127.0.0.1, port 0, with a temporary SQLite file (or PostgreSQL database, onPostgres) and the
 * owner bootstrapped with OWNER_KEY.
 * The environment is not read, so settings come only from `config`.
 */
export async function startServer(
  t: Teardown,
  options: { config?: Partial<Config>; dbPath?: string } & Omit<CreateServerOptions, 'config' | 'env'> = {},
): Promise<TestServer> {
  const { dbPath, settings } = await testServerSettings(t, options)
  const { config, dbPath: _d, ...rest } = options
  const server = await createServer({
    env: {},
    logger: false,
    // The owner's credentials are the fixed ones above: nothing to print (a test may pass its own onBootstrap).
    onBootstrap: () => {},
    ...rest,
    config: settings,
  })
  const url = await server.listen()
  let closed = false
  const close = async () => {
    if (closed) return
    closed = true
    await server.close()
  }
  t.teardown(close)
  const cliEnv: Record<string, string> = { SERVICE_DATABASE: dbPath, ...(server.config.envKey ? { SERVICE_ENV_KEY: server.config.envKey } : {}) }
  return { ...server, close, url, mcpUrl: `${url}/mcp`, apiKey: OWNER_KEY, dbPath, cliEnv }
}

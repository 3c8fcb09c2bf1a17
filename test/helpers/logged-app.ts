import type { Test } from 'tap'
import { buildApp } from '../../src/app.js'
import { loadConfig, type Config } from '../../src/config.js'

/** Where Fastify's inject sends a request given by its path: the base address of an app tested through inject. */
export const INJECT_BASE_URL = 'http://localhost'

/** The bootstrapped owner's API key of a loggedApp. */
export const LOGGED_APP_KEY = 'service_mcp_' + 'T'.repeat(43)

/**
 * An in-memory app (for inject) whose pino output is kept: `log` holds every JSON line written, in order. For tests of
 * what reaches the logs (the access log, request ids).
 */
export async function loggedApp(t: Test, overrides: Partial<Config> = {}) {
  const log: string[] = []
  const config = loadConfig({
    env: {},
    // The base address inject's requests name (Host: localhost:80): a loopback base address checks Host on /mcp.
    overrides: { database: ':memory:', logLevel: 'info', baseUrl: INJECT_BASE_URL, bootstrapApiKey: LOGGED_APP_KEY, bootstrapPassword: 'correct horse battery', ...overrides },
  })
  const app = await buildApp({ config, logger: { stream: { write: (line: string) => log.push(line) } } })
  t.teardown(() => app.close())
  return { app, log }
}

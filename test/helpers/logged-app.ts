import type { Test } from 'tap'
import { buildApp } from '../../src/app.js'
import { loadConfig, type Config } from '../../src/config.js'

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
    overrides: { database: ':memory:', logLevel: 'info', bootstrapApiKey: LOGGED_APP_KEY, bootstrapPassword: 'correct horse battery', ...overrides },
  })
  const app = await buildApp({ config, logger: { stream: { write: (line: string) => log.push(line) } } })
  t.teardown(() => app.close())
  return { app, log }
}

import type { Served } from './cli.js'
import { postgresDatabase, redisPrefix, redisUrl } from './backends.js'
import { freePort } from './ports.js'
import { OWNER_KEY, OWNER_PASSWORD_HASH } from './server.js'

/**
 * Several `service-mcp serve` processes of one deployment (the cluster, confirmation-race and rolling-restart tests):
 * one fresh PostgreSQL database, coordinated through a fresh Redis prefix, the owner bootstrapped with OWNER_KEY, and
 * limits out of reach.
 */

interface Teardown {
  teardown(fn: () => unknown): void
}

/** Free ports, all different. */
export async function distinctPorts(count: number): Promise<number[]> {
  const ports: number[] = []
  while (ports.length < count) {
    const p = await freePort()
    if (!ports.includes(p)) ports.push(p)
  }
  return ports
}

/** The settings of every process of one deployment, but its port; `extra` for the test's own. */
export async function deploymentEnv(t: Teardown, extra: Record<string, string>): Promise<{ database: string; env(port: number): Record<string, string> }> {
  const database = await postgresDatabase(t)
  const prefix = redisPrefix(t)
  const env = (port: number) => ({
    SERVICE_DATABASE: database,
    SERVICE_ENV_KEY: Buffer.alloc(32, 0x2e).toString('base64'),
    SERVICE_REDIS_URL: redisUrl(),
    SERVICE_REDIS_PREFIX: prefix,
    SERVICE_HOST: '127.0.0.1',
    SERVICE_PORT: String(port),
    SERVICE_TRUST_PROXY: '127.0.0.1',
    SERVICE_MAX_CONNECTIONS_PER_ADDRESS: '0',
    SERVICE_BOOTSTRAP_API_KEY: OWNER_KEY,
    SERVICE_BOOTSTRAP_PASSWORD_HASH: OWNER_PASSWORD_HASH,
    SERVICE_RATE_LIMIT_API_KEY_MEMBER: '1000000',
    SERVICE_RATE_LIMIT_ORGANIZATION: '1000000',
    SERVICE_RATE_LIMIT_TOOL_FACTOR: '100000',
    ...extra,
  })
  return { database, env }
}

/** The requests a process answered on `path`, from its access log (SERVICE_ACCESS_LOG): all of them, and those it refused with 503. */
export function answered(served: Served, path: string): { total: number; refused: number } {
  let total = 0
  let refused = 0
  for (const line of served.stdout().split('\n')) {
    if (!line.includes('"msg":"request completed"') || !line.includes(`"path":"${path}"`)) continue
    total++
    if (line.includes('"status":503')) refused++
  }
  return { total, refused }
}

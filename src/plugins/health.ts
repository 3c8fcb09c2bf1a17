import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { PLUGIN } from './names.js'

type Check = 'ok' | 'fail'

/**
 * Liveness and readiness for load balancers and orchestrators, always on, without authentication or rate limits, and
 * cheap (no body is read, the readiness check is one prepared statement):
 *
 * - `GET /healthz`: 200 while the process serves requests, shutting down included (restarting a server that is
 *   draining would cut the calls it is finishing);
 * - `GET /readyz`: 200 when the database answers and the server is not stopping, else 503 naming the failed check,
 *   `{"status":"unavailable","checks":{"database":"fail","shutdown":"ok"}}`. From the first moment of a stop (the drain
 *   phase, while deployments are interrupted) it answers 503 on connections still open and new ones alike, until the
 *   server closes its connections and stops listening.
 *
 * Both carry the X-Service-MCP-Version and X-Request-Id headers of every response, and say nothing else about the
 * server (no versions of components, no paths, no error messages: the log has those).
 */
const healthPlugin: FastifyPluginAsync = async (fastify) => {
  const { repos } = fastify
  let databaseAnswered = true

  /** Asks the database; logs only when the answer changes, so a polling balancer does not flood the log. */
  async function database(): Promise<Check> {
    try {
      await repos.health.ping()
      if (!databaseAnswered) fastify.log.info('readiness: the database answers again')
      databaseAnswered = true
      return 'ok'
    } catch (err) {
      if (databaseAnswered) fastify.log.error({ err }, 'readiness: the database does not answer')
      databaseAnswered = false
      return 'fail'
    }
  }

  // Served while stopping (http.ts refuses every other route with 503 then).
  const config = { servedWhileStopping: true }

  fastify.get('/healthz', { config }, async (_request, reply) => {
    reply.header('cache-control', 'no-store')
    return { status: 'ok' }
  })

  fastify.get('/readyz', { config }, async (_request, reply) => {
    const checks: Record<'database' | 'shutdown', Check> = { database: await database(), shutdown: fastify.stopping ? 'fail' : 'ok' }
    const ready = checks.database === 'ok' && checks.shutdown === 'ok'
    reply.header('cache-control', 'no-store')
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ok' : 'unavailable', checks })
  })
}

export default fp(healthPlugin, { name: PLUGIN.health, fastify: '5.x', dependencies: [PLUGIN.http, PLUGIN.db] })

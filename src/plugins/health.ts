import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { PLUGIN } from './names.js'

type Check = 'ok' | 'fail'

/**
 * Liveness and readiness for load balancers and orchestrators, always on, without authentication or rate limits, and
 * cheap (no body is read, the readiness check is one prepared statement, and a PING when Redis is configured):
 *
 * - `GET /healthz`: 200 while the process serves requests, shutting down included (restarting a server that is
 *   draining would cut the calls it is finishing);
 * - `GET /readyz`: 200 when the database answers, Redis answers (with SERVICE_REDIS_URL: within
 *   SERVICE_READY_REDIS_TIMEOUT_MS) and the server is not stopping, else 503 naming the failed check,
 *   `{"status":"unavailable","checks":{"database":"fail","shutdown":"ok"}}` (a `redis` check between them when Redis is
 *   configured). From the first moment of a stop (the drain phase, while deployments are interrupted) it answers 503
 *   on connections still open and new ones alike, until the server closes its connections and stops listening.
 *
 * Both carry the X-Service-MCP-Version and X-Request-Id headers of every response, and say nothing else about the
 * server (no versions of components, no paths, no error messages: the log has those).
 */
const healthPlugin: FastifyPluginAsync = async (fastify) => {
  const { repos, coordination, config } = fastify

  /** A check that logs only when its answer changes, so a polling balancer does not flood the log. */
  function watched(what: string, answers: () => Promise<boolean>): () => Promise<Check> {
    let answered = true
    return async () => {
      let now = false
      let failure: unknown
      try {
        now = await answers()
      } catch (err) {
        failure = err
      }
      if (now && !answered) fastify.log.info(`readiness: ${what} answers again`)
      if (!now && answered) fastify.log.error(failure === undefined ? {} : { err: failure }, `readiness: ${what} does not answer`)
      answered = now
      return now ? 'ok' : 'fail'
    }
  }

  const database = watched('the database', async () => {
    await repos.health.ping()
    return true
  })
  const { redisAnswers } = coordination
  const redis = redisAnswers ? watched('Redis', () => redisAnswers(config.readyRedisTimeoutMs)) : null

  // Served while stopping (http.ts refuses every other route with 503 then).
  const routeConfig = { servedWhileStopping: true }

  fastify.get('/healthz', { config: routeConfig }, async (_request, reply) => {
    reply.header('cache-control', 'no-store')
    return { status: 'ok' }
  })

  fastify.get('/readyz', { config: routeConfig }, async (_request, reply) => {
    const [databaseCheck, redisCheck] = await Promise.all([database(), redis?.()])
    const checks: Partial<Record<'database' | 'redis' | 'shutdown', Check>> = { database: databaseCheck }
    if (redisCheck) checks.redis = redisCheck
    checks.shutdown = fastify.stopping ? 'fail' : 'ok'
    const ready = Object.values(checks).every((c) => c === 'ok')
    reply.header('cache-control', 'no-store')
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ok' : 'unavailable', checks })
  })
}

export default fp(healthPlugin, { name: PLUGIN.health, fastify: '5.x', dependencies: [PLUGIN.http, PLUGIN.coordination, PLUGIN.db] })

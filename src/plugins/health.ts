import type { FastifyInstance, FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { dirname } from 'node:path'
import { databaseTarget } from '../config.js'
import { DiskSpace } from '../observability/disk-space.js'
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
 *   On a SQLite file, a `disk` check too: free space in the database's folder under SERVICE_DISK_MIN_FREE_MB fails
 *   it (observability/disk-space.ts), checked at each call and every SERVICE_DISK_CHECK_MS so the log warns anyway.
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

  const disk = diskCheck(fastify)

  // Served while stopping (http.ts refuses every other route with 503 then).
  const routeConfig = { servedWhileStopping: true }

  fastify.get('/healthz', { config: routeConfig }, async (_request, reply) => {
    reply.header('cache-control', 'no-store')
    return { status: 'ok' }
  })

  fastify.get('/readyz', { config: routeConfig }, async (_request, reply) => {
    const [databaseCheck, redisCheck, diskCheck] = await Promise.all([database(), redis?.(), disk?.()])
    const checks: Partial<Record<'database' | 'redis' | 'disk' | 'shutdown', Check>> = { database: databaseCheck }
    if (redisCheck) checks.redis = redisCheck
    if (diskCheck) checks.disk = diskCheck
    checks.shutdown = fastify.stopping ? 'fail' : 'ok'
    const ready = Object.values(checks).every((c) => c === 'ok')
    reply.header('cache-control', 'no-store')
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ok' : 'unavailable', checks })
  })
}

/**
 * The disk check of a SQLite file database (null for PostgreSQL, the in-memory database, or a threshold of 0): run at
 * each /readyz and on a timer, so that low space is logged even when nothing polls.
 */
function diskCheck(fastify: FastifyInstance): (() => Promise<Check>) | null {
  const { config, clock } = fastify
  const target = databaseTarget(config.database)
  if (target.kind !== 'file' || config.diskMinFreeMb === 0) return null
  const space = new DiskSpace(dirname(target.file), config.diskMinFreeMb * 1024 * 1024, fastify.log)
  const timer = clock.setInterval(async () => {
    await space.enough()
  }, config.diskCheckMs).unref()
  fastify.addHook('onClose', async () => clock.clearTimer(timer))
  return async () => ((await space.enough()) ? 'ok' : 'fail')
}

export default fp(healthPlugin, { name: PLUGIN.health, fastify: '5.x', dependencies: [PLUGIN.http, PLUGIN.coordination, PLUGIN.db] })

import type { FastifyPluginAsync, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { fail, isServiceError } from '../errors/service-error.js'
import { constantTimeEqual } from '../lib/crypto.js'
import { McpMetrics } from '../observability/metrics.js'
import { PLUGIN } from './names.js'

/** `Authorization: Bearer <token>`, compared in constant time. */
function bearerMatches(request: FastifyRequest, expected: string): boolean {
  const header = request.headers.authorization
  return typeof header === 'string' && /^Bearer /i.test(header) && constantTimeEqual(header.slice(7).trim(), expected)
}

/**
 * SERVICE_METRICS: Prometheus metrics at `GET /metrics` on the main listener (observability/metrics.ts says what is
 * measured), behind `Authorization: Bearer <SERVICE_METRICS_TOKEN>` when that is set. Off by default, and then this
 * plugin registers nothing: no route, no hook, no observer, and prom-client is not even loaded.
 *
 * Registered before the route plugins, so that its hooks see every route: the response hook (HTTP latency by route
 * pattern), the error hook (rate-limit refusals, whichever limiter raised them) and the dispatcher's observer.
 */
const metricsPlugin: FastifyPluginAsync = async (fastify) => {
  const { config } = fastify
  if (!config.metrics) return
  const prom = await import('prom-client')
  const metrics = new McpMetrics(prom, fastify)
  const token = config.metricsToken === '' ? null : config.metricsToken

  fastify.rpc.addObserver(metrics)
  // Callback hooks: cheaper than async ones, and these run on every response.
  fastify.addHook('onResponse', (request, reply, done) => {
    try {
      metrics.onResponse(request, reply)
    } finally {
      done()
    }
  })
  fastify.addHook('onError', async (_request, _reply, error) => {
    if (isServiceError(error) && error.code === 'RATE_LIMITED') metrics.onRateLimited(error.limiter)
  })

  fastify.get('/metrics', async (request, reply) => {
    if (token !== null && !bearerMatches(request, token)) {
      reply.header('www-authenticate', 'Bearer realm="metrics"')
      throw fail('METRICS_TOKEN_REQUIRED')
    }
    reply.header('cache-control', 'no-store').type(metrics.registry.contentType)
    return metrics.registry.metrics()
  })
  fastify.addHook('onClose', async () => metrics.registry.clear())
}

export default fp(metricsPlugin, { name: PLUGIN.metrics, fastify: '5.x', dependencies: [PLUGIN.http, PLUGIN.rpc] })

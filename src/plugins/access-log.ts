import type { FastifyPluginAsync, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { KnownNames } from '../observability/outcome.js'
import { PLUGIN } from './names.js'

/**
 * SERVICE_ACCESS_LOG: one info line per finished response, through the request's logger (so with its `reqId`, the
 * X-Request-Id a proxy sent when it was well formed):
 *
 *   {"level":30,"reqId":"…","method":"POST","path":"/mcp","status":200,"durationMs":3.1,"address":"203.0.113.7",
 *    "userAgent":"…","rpc":"tools/call","msg":"request completed"}
 *
 * The path has no query string (OAuth redirects carry codes and states there); the address is `request.ip`, which
 * follows X-Forwarded-For only as far as SERVICE_TRUST_PROXY allows; `rpc` names the JSON-RPC methods a /mcp POST
 * carried (registered ones; anything else is `other`), learnt from the dispatcher's observer at no extra parsing. A
 * response cut off before it finished (a client that went away mid-stream) has no line. Off by default (Fastify's own
 * request logging stays off for speed), and then nothing is registered.
 */
const accessLogPlugin: FastifyPluginAsync = async (fastify) => {
  if (!fastify.config.accessLog) return
  const names = new KnownNames(fastify)
  const methods = new WeakMap<FastifyRequest, string>()

  fastify.rpc.addObserver({
    onMessageDone(done) {
      const method = names.method(done.message.method) ?? 'other'
      const earlier = methods.get(done.request)
      methods.set(done.request, earlier === undefined ? method : `${earlier},${method}`)
    },
  })

  // A callback hook: cheaper than an async one, and it runs on every response.
  fastify.addHook('onResponse', (request, reply, done) => {
    const query = request.url.indexOf('?')
    const agent = request.headers['user-agent']
    request.log.info({
      method: request.method,
      path: query === -1 ? request.url : request.url.slice(0, query),
      status: reply.statusCode,
      durationMs: Math.round(reply.elapsedTime * 10) / 10,
      address: request.ip,
      userAgent: typeof agent === 'string' ? agent.slice(0, 256) : null,
      rpc: methods.get(request) ?? null,
    }, 'request completed')
    done()
  })
}

export default fp(accessLogPlugin, { name: PLUGIN.accessLog, fastify: '5.x', dependencies: [PLUGIN.http, PLUGIN.rpc] })

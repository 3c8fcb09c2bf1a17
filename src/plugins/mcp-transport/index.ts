import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import type { Principal } from '../../auth/principal.js'
import { toServiceError, wwwAuthenticate } from '../../errors/render.js'
import { fail } from '../../errors/service-error.js'
import { errorResponse } from '../../rpc/dispatcher.js'
import { Intake } from '../../rpc/intake.js'
import { fromFastifyError, logFailure, sendServiceError } from '../http.js'
import { PLUGIN } from '../names.js'
import { classify } from './classify.js'
import { checkOriginAndHost, isJsonContentType, parseAccept, preflightHeaders, sendJsonRpc } from './headers.js'
import { legacyFrontEnd } from './legacy.js'
import { modernFrontEnd } from './modern.js'

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null
  }
}

const JSON_RPC_CODES = new Set(['PARSE_ERROR', 'INVALID_REQUEST'])

/** How many times a header appears in the raw request (names compare case-insensitively). */
function countHeader(rawHeaders: readonly string[], lowerName: string): number {
  let n = 0
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]!.length === lowerName.length && rawHeaders[i]!.toLowerCase() === lowerName) n++
  return n
}
const AUTHENTICATED_METHODS = new Set(['GET', 'POST', 'DELETE'])

/**
 * Streamable HTTP at /mcp, one endpoint for both protocol eras. The entry does what every request shares, in this
 * order: Origin and Host (403), credential (401), the per-member and per-organization limits (429) before the body is
 * read (limits shared through Redis: a POST's are checked where the intake admits its messages, together with
 * what their methods declare, in one round trip: rpc/intake.ts); body size (413) and media type (415) while it is read; then
 * Accept (406) and JSON (400/-32700). It then
 * classifies the POST by its body (classify.ts) and hands it to the era's front-end: `legacy.ts` (sessions,
 * initialize, GET, DELETE, resumption) or `modern.ts` (stateless 2026-07-28 requests). Both dispatch through the one
 * dispatcher, tool registry and error catalog.
 */
const transportPlugin: FastifyPluginAsync = async (fastify) => {
  const { config, auth, rateLimits } = fastify
  const resourceMetadata = () => `${config.baseUrl}/.well-known/oauth-protected-resource/mcp`
  const legacy = legacyFrontEnd(fastify)
  const modern = modernFrontEnd(fastify)
  const opensSession = (method: string) => fastify.rpc.opensSession(method)

  fastify.decorateRequest('principal', null)
  fastify.removeAllContentTypeParsers()
  fastify.addContentTypeParser('application/json', { parseAs: 'string', bodyLimit: config.maxBodyBytes }, (_req, body, done) => done(null, body))

  // `done` rather than a promise, as in http.ts: no microtask hop on every request.
  fastify.addHook('onRequest', (request, reply, done) => {
    checkOriginAndHost(config, request, reply)
    // Preflights carry no credentials, and an unsupported method is answered 405 whoever asks.
    if (!AUTHENTICATED_METHODS.has(request.method)) return done()
    // Node keeps the first of repeated Authorization headers and drops the rest: a request with two is ambiguous
    // (which credential acts?), so it is refused rather than served with one of them.
    if (countHeader(request.raw.rawHeaders, 'authorization') > 1) throw fail('BAD_REQUEST', { message: 'Send exactly one Authorization header' })
    const principal = auth.authenticate(request.headers.authorization, request.raw.socket)
    if (!(principal instanceof Promise)) {
      request.principal = principal
      // Counted in this process: synchronous. Shared through Redis: a promise for GET and DELETE; a POST's count waits
      // for its front-end to admit it (rate-limits.ts).
      const counted = rateLimits.enter(request, principal)
      if (!counted) return done()
      counted.then(() => done(), done)
      return
    }
    // A credential the cache did not hold: verified against the database.
    principal.then((verified) => {
      request.principal = verified
      return rateLimits.enter(request, verified)
    }).then(() => done(), done)
  })

  fastify.setErrorHandler((err, request, reply) => {
    const e = fromFastifyError(err as Error)
    const rendered = toServiceError(e)
    if (JSON_RPC_CODES.has(rendered.code)) {
      logFailure(request, err, rendered)
      return sendJsonRpc(reply, errorResponse(null, rendered), rendered.status)
    }
    if (rendered.status === 401) {
      const sent = request.headers.authorization !== undefined
      reply.header('www-authenticate', wwwAuthenticate({ resourceMetadata: resourceMetadata(), ...(sent ? { error: 'invalid_token', errorDescription: rendered.message } : {}) }))
    }
    if (rendered.code === 'INSUFFICIENT_SCOPE') {
      const scope = (rendered.details as { scope?: string } | null)?.scope
      reply.header('www-authenticate', wwwAuthenticate({ resourceMetadata: resourceMetadata(), error: 'insufficient_scope', errorDescription: rendered.message, ...(scope ? { scope } : {}) }))
    }
    return sendServiceError(request, reply, rendered)
  })

  fastify.route({
    method: 'POST',
    url: '/mcp',
    bodyLimit: config.maxBodyBytes,
    async handler(request, reply) {
      const accept = parseAccept(request.headers.accept)
      if (!accept.json && !accept.sse) throw fail('NOT_ACCEPTABLE')
      if (!isJsonContentType(request.headers['content-type'])) throw fail('UNSUPPORTED_MEDIA_TYPE')
      let body: unknown
      try {
        body = JSON.parse(request.body as string)
      } catch {
        throw fail('PARSE_ERROR')
      }
      const header = request.headers['mcp-protocol-version']
      const route = classify(body, typeof header === 'string' ? header : undefined, opensSession)
      switch (route.era) {
        case 'legacy': {
          const intake = new Intake(fastify.rpc, rateLimits, 'legacy', request)
          return intake.settle(() => legacy.post(request, reply, body, accept, intake))
        }
        case 'modern': {
          const intake = new Intake(fastify.rpc, rateLimits, 'modern', request)
          return intake.settle(() => modern.post(request, reply, route, accept, intake))
        }
        case 'reject':
          request.log.debug({ errorCode: route.error.code }, 'request refused')
          return sendJsonRpc(reply, errorResponse(route.id, route.error), 400)
      }
    },
  })

  // GET and DELETE are session operations: they exist only in the legacy era.
  fastify.route({ method: 'GET', url: '/mcp', exposeHeadRoute: false, handler: (request, reply) => legacy.get(request, reply) })
  fastify.route({ method: 'DELETE', url: '/mcp', handler: (request, reply) => legacy.delete(request, reply) })

  fastify.route({
    method: 'OPTIONS',
    url: '/mcp',
    async handler(request, reply) {
      preflightHeaders(request, reply)
      return reply.code(204).send()
    },
  })

  fastify.route({
    method: ['PUT', 'PATCH', 'HEAD'],
    url: '/mcp',
    async handler(_request, reply) {
      reply.header('allow', 'GET, POST, DELETE, OPTIONS')
      throw fail('METHOD_NOT_ALLOWED')
    },
  })
}

export default fp(transportPlugin, {
  name: PLUGIN.transport,
  fastify: '5.x',
  encapsulate: true,
  dependencies: [PLUGIN.http, PLUGIN.rpc, PLUGIN.auth, PLUGIN.sessions, PLUGIN.tools, PLUGIN.rateLimits],
})

import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { fail } from '../errors/service-error.js'
import { prefersHtml } from '../web/accept.js'
import { FAVICON_PATH, FAVICON_SVG } from '../web/favicon.js'
import { pageHeaders } from '../web/headers.js'
import { landingPage, serverLabel } from '../web/pages.js'
import { PLUGIN } from './names.js'

/** A day: the icon changes with a release at most. */
const ICON_CACHE = 'public, max-age=86400'

/**
 * What a browser finds at the server's root: `/` is a landing page for a browser (docs/decisions/pages.md) and the
 * 404 of any unknown path, in the service error body, for everyone else; `/favicon.svg` is the pages' icon and
 * `/favicon.ico`, which browsers ask for on their own, answers 204 (no icon there, and no JSON error either).
 */
const landingPlugin: FastifyPluginAsync = async (fastify) => {
  const { config } = fastify

  fastify.get('/', async (request, reply) => {
    // The answer depends on Accept: a cache must not give the page to an API client, nor the 404 to a browser.
    reply.header('vary', 'Accept')
    if (!prefersHtml(request.headers.accept)) throw fail('NOT_FOUND')
    // Rendered at each request: the base URL of a server started on port 0 is known only once it listens.
    const page = landingPage({ server: serverLabel(config.baseUrl), mcpUrl: `${config.baseUrl}/mcp` })
    return reply.code(200).headers(pageHeaders()).send(page)
  })

  fastify.get(FAVICON_PATH, async (_request, reply) => {
    // Opened on its own, the SVG is a document: it may run or load nothing (it has nothing to run or load anyway).
    return reply
      .headers({ 'content-type': 'image/svg+xml', 'cache-control': ICON_CACHE, 'x-content-type-options': 'nosniff', 'content-security-policy': "default-src 'none'" })
      .send(FAVICON_SVG)
  })

  fastify.get('/favicon.ico', async (_request, reply) => reply.code(204).header('cache-control', ICON_CACHE).send())
}

export default fp(landingPlugin, { name: PLUGIN.landing, fastify: '5.x', dependencies: [PLUGIN.http] })

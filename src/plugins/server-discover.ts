import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { SERVER_INFO_META_KEY, serverInfoFor } from '../mcp/server-info.js'
import { MODERN_PROTOCOL_VERSIONS } from '../rpc/types.js'
import { validatorFor } from '../validation/index.js'
import { SERVER_INSTRUCTIONS } from '../version.js'
import { PLUGIN } from './names.js'

/**
 * `server/discover` (2026-07-28): the revisions served statelessly, the capabilities every plugin declared for that
 * era, and instructions; the server's identity travels in `_meta` like on every modern result, in full here. The 2025
 * revisions are not listed: a client reaches them through `initialize`. The answer is the same for every caller, so
 * it may be cached publicly.
 */
const serverDiscoverPlugin: FastifyPluginAsync = async (fastify) => {
  const { rpc, config } = fastify
  rpc.registerRequest({
    method: 'server/discover',
    eras: ['modern'],
    params: validatorFor('mcp/empty.params'),
    cache: { scope: 'public', ttlMs: () => config.discoverTtlMs },
    handle: (_params, ctx) => ({
      supportedVersions: [...MODERN_PROTOCOL_VERSIONS],
      capabilities: rpc.capabilities.of('modern'),
      instructions: SERVER_INSTRUCTIONS,
      // The full identity (description, icons) here, where a client looks for it; other results carry the brief one.
      _meta: { [SERVER_INFO_META_KEY]: serverInfoFor(ctx.exchange.protocolVersion) },
    }),
  })
}

export default fp(serverDiscoverPlugin, { name: PLUGIN.serverDiscover, fastify: '5.x', dependencies: [PLUGIN.http, PLUGIN.rpc] })

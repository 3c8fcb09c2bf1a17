import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { Dispatcher } from '../rpc/dispatcher.js'
import { PLUGIN } from './names.js'

declare module 'fastify' {
  interface FastifyInstance {
    rpc: Dispatcher
  }
}

/** The shared JSON-RPC dispatcher: other plugins register their methods and capabilities on it. */
const rpcPlugin: FastifyPluginAsync = async (fastify) => {
  const rpc = new Dispatcher()
  // The dispatcher carries notifications/message for tools (sendLog), in both eras: legacy sessions set their level
  // with logging/setLevel, modern requests with io.modelcontextprotocol/logLevel.
  rpc.capabilities.declare(['legacy', 'modern'], 'logging', {})
  fastify.decorate('rpc', rpc)
}

export default fp(rpcPlugin, { name: PLUGIN.rpc, fastify: '5.x' })

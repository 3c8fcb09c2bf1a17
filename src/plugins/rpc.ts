import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { Dispatcher } from '../rpc/dispatcher.js'
import { PLUGIN } from './names.js'

declare module 'fastify' {
  interface FastifyInstance {
    rpc: Dispatcher
  }
}

/** The shared JSON-RPC dispatcher: other plugins register their methods on it. */
const rpcPlugin: FastifyPluginAsync = async (fastify) => {
  fastify.decorate('rpc', new Dispatcher())
}

export default fp(rpcPlugin, { name: PLUGIN.rpc, fastify: '5.x' })

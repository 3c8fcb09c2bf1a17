import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { EventBus } from '../lib/event-bus.js'
import { Dispatcher } from '../rpc/dispatcher.js'
import { PLUGIN } from './names.js'

declare module 'fastify' {
  interface FastifyInstance {
    rpc: Dispatcher
    /** Server events for subscriptions/listen streams (task status changes). */
    events: EventBus
  }
}

/** The shared JSON-RPC dispatcher: other plugins register their methods and capabilities on it. */
const rpcPlugin: FastifyPluginAsync = async (fastify) => {
  const rpc = new Dispatcher(fastify.clock)
  // The dispatcher carries notifications/message for tools (sendLog), in both eras: legacy sessions set their level
  // with logging/setLevel, modern requests with io.modelcontextprotocol/logLevel.
  rpc.capabilities.declare(['legacy', 'modern'], 'logging', {})
  fastify.decorate('rpc', rpc)
  // The shutdown's end phase: whatever call still runs, in either era, is stopped and answered (rpc/calls.ts). This
  // plugin is registered before the sessions plugin, so this runs before sessions end and their streams close.
  fastify.shutdown.onEnd(() => rpc.stopAll())
  const events = new EventBus()
  if (fastify.coordination.shared) {
    const stop = await events.relayThrough(fastify.coordination.bus)
    fastify.addHook('onClose', async () => stop())
  }
  fastify.decorate('events', events)
}

export default fp(rpcPlugin, { name: PLUGIN.rpc, fastify: '5.x', dependencies: [PLUGIN.coordination, PLUGIN.http] })

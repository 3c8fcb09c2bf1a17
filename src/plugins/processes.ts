import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { ProcessRegistry } from '../coordination/process-registry.js'
import { releaseOnFailedStart } from '../lib/failed-start.js'
import { PLUGIN } from './names.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** This process's entry in the database's registry of server processes, and its lease. */
    processes: ProcessRegistry
  }
}

/**
 * Registers this process in the database with a lease (coordination/process-registry.ts) before any feature recovers
 * work at start, renews it while the server runs, and removes the entry on close, after the drain recorded how this
 * process's own work ended (onClose hooks run after preClose, and before the database's, registered earlier, closes).
 */
const processesPlugin: FastifyPluginAsync = async (fastify) => {
  const { coordination, config } = fastify
  const registry = new ProcessRegistry(fastify.repos, {
    id: coordination.processId,
    exclusive: !coordination.shared,
    leaseMs: config.leaseMs,
    log: fastify.log,
  })
  await registry.start()
  registry.startTimers()
  fastify.decorate('processes', registry)
  releaseOnFailedStart(config, () => registry.stop())
  // A database that no longer answers (often why a server is stopped) must not fail the close: the entry is then left
  // behind, and its lease lapses like a crashed process's.
  fastify.addHook('onClose', () => registry.stop().catch((err: unknown) => {
    fastify.log.warn({ err }, 'this process could not remove its entry from the registry of server processes; its lease will lapse')
  }))
}

export default fp(processesPlugin, { name: PLUGIN.processes, fastify: '5.x', dependencies: [PLUGIN.db, PLUGIN.coordination] })

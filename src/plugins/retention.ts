import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { purgesHere, RetentionPurger } from '../retention/purger.js'
import { PLUGIN } from './names.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Deletes deployment output and audit entries past their retention settings (src/retention/). */
    retention: RetentionPurger
  }
}

/** Runs retention every SERVICE_RETENTION_INTERVAL_MS on the server's clock, once the server is ready. */
const retentionPlugin: FastifyPluginAsync = async (fastify) => {
  const { repos, config, clock, processes } = fastify
  const purger = new RetentionPurger({ repos, config, clock, log: fastify.log, mayPurge: () => purgesHere(processes) })
  fastify.decorate('retention', purger)
  fastify.addHook('onReady', async () => purger.start())
  fastify.addHook('onClose', async () => purger.stop())
}

export default fp(retentionPlugin, { name: PLUGIN.retention, fastify: '5.x', dependencies: [PLUGIN.db, PLUGIN.processes] })

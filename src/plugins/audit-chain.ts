import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { signHeads } from '../audit/signer.js'
import { PLUGIN } from './names.js'

/**
 * Signs the heads of the organizations' audit chains every SERVICE_AUDIT_SIGN_INTERVAL_MS, on the server's clock
 * (docs/decisions/audit-chain.md, "Checkpoints"), and once at start for what was written while no server ran (the
 * command line writes entries too). With several processes each signs; a head signed twice is kept once.
 */
const auditChainPlugin: FastifyPluginAsync = async (fastify) => {
  const { repos, clock, config } = fastify
  const sign = async () => {
    try {
      const signed = await signHeads(repos, clock.now())
      if (signed.length > 0) fastify.log.debug({ organizations: signed.length }, 'audit chain heads signed')
    } catch (err) {
      fastify.log.error({ err }, 'could not sign the audit chain heads')
    }
  }
  await sign()
  const timer = clock.setInterval(sign, config.auditSignIntervalMs).unref()
  fastify.addHook('onClose', async () => clock.clearTimer(timer))
}

export default fp(auditChainPlugin, { name: PLUGIN.auditChain, fastify: '5.x', dependencies: [PLUGIN.db, PLUGIN.oauth] })

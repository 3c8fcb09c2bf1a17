import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import type { RunEvent } from '../../../deployments/runner.js'
import type { ClockTimer } from '../../../lib/clock.js'
import { PLUGIN } from '../../names.js'
import { DEPLOYMENT_LOG_TEMPLATE, deploymentLogUri } from './uris.js'

interface Pending {
  timer: ClockTimer
  /** Lines were stored since the last announcement. */
  dirty: boolean
  organizationId: string
}

/**
 * Announces what deployments change in the built-in resources, from the pipeline runner's events (the runner knows
 * nothing of MCP):
 *
 * - a deployment's log grows: `resources.updated(service://deployments/<id>/log)`, coalesced per deployment: the first
 *   stored lines at once, then at most one announcement per SERVICE_RESOURCE_UPDATE_INTERVAL_MS while lines keep
 *   coming, and one when the deployment ends (its last lines and outcome are stored by then);
 * - a deployment is created or ends: `resources.listChanged` for its organization (the log template lists the recent
 *   deployments, with their status).
 *
 * Only while the deployment log template is served (an embedder may serve other resources instead).
 */
const builtinResourceEvents: FastifyPluginAsync = async (fastify) => {
  const { resources, pipelines, config, clock } = fastify
  const pending = new Map<string, Pending>()
  const served = () => resources.registry.template(DEPLOYMENT_LOG_TEMPLATE) !== undefined

  const announce = (deploymentId: string, organizationId: string) => resources.updated(deploymentLogUri(deploymentId), organizationId)

  /** At the end of an interval: announce what came during it, and wait another; or stop waiting. */
  const tick = (deploymentId: string) => {
    const p = pending.get(deploymentId)
    if (!p) return
    if (!p.dirty) {
      pending.delete(deploymentId)
      return
    }
    p.dirty = false
    announce(deploymentId, p.organizationId)
    p.timer = later(deploymentId)
  }
  const later = (deploymentId: string) => {
    // The server's clock (docs/decisions/clock.md): a test moves it to the end of an interval instead of waiting.
    const timer = clock.setTimeout(() => tick(deploymentId), config.resourceUpdateIntervalMs)
    timer.unref()
    return timer
  }

  const onRun = (event: RunEvent) => {
    if (!served()) return
    switch (event.type) {
      case 'created':
        resources.listChanged(event.deployment.organizationId)
        return
      case 'stored': {
        const p = pending.get(event.deploymentId)
        if (p) {
          p.dirty = true
          return
        }
        announce(event.deploymentId, event.organizationId)
        pending.set(event.deploymentId, { timer: later(event.deploymentId), dirty: false, organizationId: event.organizationId })
        return
      }
      case 'ended': {
        const p = pending.get(event.deployment.id)
        if (p) clock.clearTimer(p.timer)
        pending.delete(event.deployment.id)
        announce(event.deployment.id, event.deployment.organizationId)
        resources.listChanged(event.deployment.organizationId)
      }
    }
  }
  const stop = pipelines.observe(onRun)
  fastify.shutdown.onFinish(() => {
    stop()
    for (const p of pending.values()) clock.clearTimer(p.timer)
    pending.clear()
  })
}

export default fp(builtinResourceEvents, { fastify: '5.x', dependencies: [PLUGIN.tools, PLUGIN.resources] })

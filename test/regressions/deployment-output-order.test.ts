import t from 'tap'
import type { DeploymentLogLine } from '../../src/db/types.js'
import { defaultOrganization } from '../helpers/seed.js'
import { startServer } from '../helpers/server.js'

/**
 * Regression: a run's end was recorded, and its call answered, while an earlier batch of its output was still being
 * stored. On PostgreSQL two batches take two connections and may commit in either order: the suite's PostgreSQL pass
 * once read a failed deployment without its stderr line. Here the earlier batch is made slow on purpose.
 */
t.test('a run ends only once every line it printed is stored, whatever order the batches would commit in', async (t) => {
  const server = await startServer(t, {
    config: { pipelines: { late: { argv: [process.execPath, '-e', "console.error('boom'); setTimeout(() => process.exit(3), 150)"] } } },
  })
  const deployments = server.app.repos.deployments
  const append = deployments.appendLines.bind(deployments)
  // The batch holding 'boom' takes 600 ms to store; the run's last batch (its outcome line) goes through at once.
  deployments.appendLines = async (lines: DeploymentLogLine[]) => {
    if (lines.some((l) => l.line === 'boom')) await new Promise((r) => setTimeout(r, 600))
    return append(lines)
  }
  const organizationId = (await defaultOrganization(server)).id
  const app = await server.app.repos.apps.create({ organizationId, name: 'late-output', pipeline: 'late' })
  const run = await server.app.pipelines.start({ organizationId, appId: app.id, kind: 'deploy', createdBy: null })
  const ended = await run.done
  t.equal(ended.status, 'failed')
  const stored = await deployments.lastLines(run.deployment.id, 10)
  t.ok(stored.some((l) => l.stream === 'stderr' && l.line === 'boom'), 'the earlier batch is stored by the time the run has ended')
})

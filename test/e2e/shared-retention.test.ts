// test-backends: own (two processes on one PostgreSQL database, coordinated through Redis)
import t from 'tap'
import { postgresDatabase, redisPrefix, redisUrl } from '../helpers/backends.js'
import { injectServer } from '../helpers/inject.js'
import { defaultOrganization } from '../helpers/seed.js'

/**
 * With several processes one purges at a time (docs/decisions/retention.md, "One process purges"): the live process
 * with the smallest id in the registry; once it stops, the next one does.
 */

t.setTimeout(120_000)

const ENV_KEY = Buffer.alloc(32, 0x5a).toString('base64')

t.test('two processes on one database: only the one with the smallest id purges, and the other once it is gone', async (t) => {
  const url = await postgresDatabase(t)
  const config = { envKey: ENV_KEY, redisUrl: redisUrl(), redisPrefix: redisPrefix(t), deploymentOutputKeepRuns: 1, deploymentOutputKeepDays: 0, retentionIntervalMs: 86_400_000 }
  const a = await injectServer(t, { dbPath: url, config })
  const b = await injectServer(t, { dbPath: url, config })
  const [first, second] = a.app.processes.id < b.app.processes.id ? [a, b] : [b, a]

  // Through the process that stays: the first one's connections close with it.
  const repos = second.app.repos
  const org = await defaultOrganization(second)
  const app = await repos.apps.create({ organizationId: org.id, name: 'web', pipeline: 'default' })
  const seed = async () => {
    const d = await repos.deployments.create({ organizationId: org.id, appId: app.id, kind: 'deploy', pipeline: 'default', createdBy: null })
    await repos.deployments.appendLines([{ deploymentId: d.id, seq: 0, stream: 'stdout', line: 'built', at: Date.now() }])
    await repos.deployments.finish(d.id, 'succeeded', Date.now(), 0, 'succeeded: seeded')
    return d.id
  }
  for (let i = 0; i < 3; i++) await seed()

  const [byFirst, bySecond] = await Promise.all([first.app.retention.run(), second.app.retention.run()])
  t.equal(byFirst.ran, true, 'the live process with the smallest id purges')
  t.equal(byFirst.deploymentRuns, 2)
  t.equal(bySecond.ran, false, 'the other one does not')
  t.equal(bySecond.deploymentRuns, 0)

  await first.close()
  await seed()
  const alone = await second.app.retention.run()
  t.equal(alone.ran, true, 'once the first is gone, the other purges')
  t.equal(alone.deploymentRuns, 1, 'the run that is no longer the newest loses its output')
})

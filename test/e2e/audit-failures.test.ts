import t from 'tap'
import { callTool, openSession, post } from '../helpers/mcp.js'
import { defaultOrganization } from '../helpers/seed.js'
import { startServer } from '../helpers/server.js'

// A failed write used to be audited without saying what it acted on.
t.test('a failed write is audited with the target its arguments name', async (t) => {
  const server = await startServer(t)
  const org = await defaultOrganization(server)
  const a = await server.app.repos.apps.create({ organizationId: org.id, name: 'first' })
  await server.app.repos.apps.create({ organizationId: org.id, name: 'second' })
  const { headers } = await openSession(server.mcpUrl, server.apiKey)
  const res = await post(server.mcpUrl, callTool('service_apps_update', { app_id: a.id, name: 'second' }), headers)
  t.equal(JSON.parse(res.json.result.content[0].text).code, 'CONFLICT')
  const entry = (await server.app.repos.audit.page(org.id, 10, undefined, 'service_apps_update')).items[0]
  t.equal(entry?.outcome, 'failed')
  t.equal(entry?.targetType, 'app')
  t.equal(entry?.targetId, a.id)
  t.equal((entry?.details as { error?: string } | null)?.error, 'CONFLICT')
})

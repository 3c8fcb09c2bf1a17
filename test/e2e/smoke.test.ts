import t from 'tap'
import { callTool, openSession, post } from '../helpers/mcp.js'
import { startServer } from '../helpers/server.js'
import { visibleCatalog } from '../helpers/catalog.js'

t.test('initialize, list and call over a real socket', async (t) => {
  const server = await startServer(t)
  const { headers, init } = await openSession(server.mcpUrl, server.apiKey)
  t.equal(init.headers['x-service-mcp-version'], '2026-11-21')
  const list = await post(server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }, headers)
  t.same(list.json.result.tools.map((x: { name: string }) => x.name), visibleCatalog('owner'))
  const call = await post(server.mcpUrl, callTool('service_apps_list'), headers)
  t.same(call.json.result.structuredContent, { apps: [], next_cursor: null })
})

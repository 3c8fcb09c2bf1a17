import t from 'tap'
import { callTool, openSession, post } from '../helpers/mcp.js'
import { visibleCatalog } from '../helpers/catalog.js'
import { runReadmeExample } from '../helpers/readme-example.js'

// The README's embedding example is documented API: this test runs that very code block, unchanged except that it
// imports the package from source and exports the server it starts.
t.test('the README embedding example serves the built-in tools plus its own', async (t) => {
  const key = 'service_mcp_' + 'R'.repeat(43)
  const { mcpUrl } = await runReadmeExample(t, 'Adding your own tools', key)
  const { headers } = await openSession(mcpUrl, key)
  const list = await post(mcpUrl, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, headers)
  t.same(list.json.result.tools.map((x: { name: string }) => x.name), visibleCatalog('owner', undefined, ['team_echo']))
  const call = await post(mcpUrl, callTool('team_echo', { text: 'hi' }), headers)
  t.same(call.json.result.structuredContent, { text: 'hi' })
  const bad = await post(mcpUrl, callTool('team_echo', { text: 1 }), headers)
  t.equal(bad.json.result.isError, true)
  t.equal(JSON.parse(bad.json.result.content[0].text).code, 'INVALID_ARGUMENTS')
})

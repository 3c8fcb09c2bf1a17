import t from 'tap'
import { builtinTools, defineTool } from '../../src/index.js'
import { callTool, openSession, post } from '../helpers/mcp.js'
import { modernCall } from '../helpers/modern.js'
import { startServer, OWNER_KEY } from '../helpers/server.js'
import { okData, resultOf } from '../helpers/tools.js'

// A tool's output is serialized once and reused as its structuredContent (rpc/message-json.ts). A tool that returns
// the same object every time, changed between calls, must still get each call's own content in both places.
const shared = { count: 0, label: 'first' }
const counter = defineTool<Record<string, never>, { count: number; label: string }>({
  name: 'team_counter',
  title: 'Counter',
  description: 'Returns one shared object, changed on every call.',
  inputSchema: { type: 'object', properties: {}, additionalProperties: false },
  outputSchema: { type: 'object', properties: { count: { type: 'integer' }, label: { type: 'string' } }, required: ['count', 'label'] },
  scope: 'mcp:read',
  role: 'viewer',
  handler: () => {
    shared.count++
    shared.label = `call ${shared.count}`
    return shared
  },
})

t.test('a shared output object changed between calls: every answer carries that call\'s content', async (t) => {
  const server = await startServer(t, { tools: [...builtinTools, counter] })
  const { headers } = await openSession(server.mcpUrl, OWNER_KEY)
  for (let i = 1; i <= 3; i++) {
    const data = okData(t, resultOf(t, await post(server.mcpUrl, callTool('team_counter', {}, i), headers)))
    t.same(data, { count: i, label: `call ${i}` }, `session call ${i}`)
  }
  const modern = okData(t, resultOf(t, await modernCall(server.mcpUrl, OWNER_KEY, 'team_counter')))
  t.same(modern, { count: 4, label: 'call 4' }, 'stateless call')
})

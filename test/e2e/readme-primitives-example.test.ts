import t from 'tap'
import { callTool, openSession, post } from '../helpers/mcp.js'
import { runReadmeExample } from '../helpers/readme-example.js'

// The README's example of resources, prompts, completions and rich tool content is documented API: this test runs
// that very code block, unchanged except that it imports the package from source and exports the server it starts.
t.test('the README example of resources, prompts and completions works as written', async (t) => {
  const key = 'service_mcp_' + 'P'.repeat(43)
  const { mcpUrl } = await runReadmeExample(t, 'Adding your own resources, prompts and completions', key)
  const { headers } = await openSession(mcpUrl, key)
  let id = 1
  const rpc = async (method: string, params?: unknown) => (await post(mcpUrl, { jsonrpc: '2.0', id: id++, method, ...(params ? { params } : {}) }, headers)).json

  const listed = (await rpc('resources/list')).result.resources.map((r: { uri: string }) => r.uri)
  t.same(listed, ['team://handbook', 'team://runbooks/restart'], 'the static resource, then what the templates list (no app or deployment yet)')
  const templates = (await rpc('resources/templates/list')).result.resourceTemplates.map((r: { uriTemplate: string }) => r.uriTemplate)
  t.same(templates, ['service://apps/{app_id}', 'service://deployments/{deployment_id}/log', 'team://runbooks/{name}'], 'the built-in templates, then the example\'s')
  t.same((await rpc('resources/read', { uri: 'team://runbooks/restart' })).result.contents, [{ uri: 'team://runbooks/restart', mimeType: 'text/markdown', text: '1. Drain the node.\n2. Restart it.\n3. Check the health page.' }])
  const missing = await rpc('resources/read', { uri: 'team://runbooks/nope' })
  t.equal(missing.error.code, -32002, 'a null read is not found')
  t.same(missing.error.data.uri, 'team://runbooks/nope')

  const completion = await rpc('completion/complete', { ref: { type: 'ref/resource', uri: 'team://runbooks/{name}' }, argument: { name: 'name', value: 're' } })
  t.same(completion.result.completion, { values: ['restart'], total: 1, hasMore: false })
  const severity = await rpc('completion/complete', { ref: { type: 'ref/prompt', name: 'team_incident' }, argument: { name: 'severity', value: '' } })
  t.same(severity.result.completion.values, ['low', 'high'])

  const prompt = await rpc('prompts/get', { name: 'team_incident', arguments: { runbook: 'restart' } })
  t.equal(prompt.result.messages.length, 2)
  t.match(prompt.result.messages[0], { role: 'user', content: { type: 'text', text: 'A high-severity incident. Follow this runbook and report each step:' } })
  t.match(prompt.result.messages[1], { role: 'user', content: { type: 'resource', resource: { uri: 'team://runbooks/restart', mimeType: 'text/markdown' } } })
  const noArg = await rpc('prompts/get', { name: 'team_incident', arguments: {} })
  t.equal(noArg.error.code, -32602, 'a missing required argument')

  const reply = await post(mcpUrl, callTool('team_status', {}), headers)
  const status = reply.json?.result ?? reply.messages.at(-1)?.result
  if (!status) t.fail(reply.text)
  t.same(status.structuredContent, { healthy: true })
  t.same(status.content.map((c: { type: string }) => c.type), ['text', 'image', 'resource_link'])
  t.notOk(status.isError)
})

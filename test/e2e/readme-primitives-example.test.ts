import t from 'tap'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { callTool, openSession, post } from '../helpers/mcp.js'

// The README's example of resources, prompts, completions and rich tool content is documented API: this test runs
// that very code block, unchanged except that it imports the package from source and exports the server it starts.
t.test('the README example of resources, prompts and completions works as written', async (t) => {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8')
  const block = /### Adding your own resources, prompts and completions\s+```ts\n([\s\S]*?)```/.exec(readme)?.[1]
  if (!block) throw new Error('README has no example of resources and prompts')
  const entry = pathToFileURL(fileURLToPath(new URL('../../src/index.ts', import.meta.url))).href
  const source = block.replace("from 'service-mcp'", `from '${entry}'`) + '\nexport { server }\n'
  const dir = mkdtempSync(join(tmpdir(), 'readme-primitives-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'example.mts')
  writeFileSync(file, source)

  const key = 'service_mcp_' + 'P'.repeat(43)
  const saved = { ...process.env }
  Object.assign(process.env, { SERVICE_DATABASE: join(dir, 'db.sqlite'), SERVICE_PORT: '0', SERVICE_LOG_LEVEL: 'silent', SERVICE_BOOTSTRAP_API_KEY: key, SERVICE_BOOTSTRAP_PASSWORD: 'readme example password' })
  const { server } = (await import(pathToFileURL(file).href)) as { server: { config: { baseUrl: string }; close(): Promise<void> } }
  process.env = saved
  t.teardown(() => server.close())

  const mcpUrl = `${server.config.baseUrl}/mcp`
  const { headers } = await openSession(mcpUrl, key)
  let id = 1
  const rpc = async (method: string, params?: unknown) => (await post(mcpUrl, { jsonrpc: '2.0', id: id++, method, ...(params ? { params } : {}) }, headers)).json

  const listed = (await rpc('resources/list')).result.resources.map((r: { uri: string }) => r.uri)
  t.ok(listed.includes('team://handbook') && listed.includes('team://runbooks/restart'), 'the static resource and what the template lists')
  const templates = (await rpc('resources/templates/list')).result.resourceTemplates.map((r: { uriTemplate: string }) => r.uriTemplate)
  t.ok(templates.includes('team://runbooks/{name}'), 'the template')
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

import t from 'tap'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { callTool, openSession, post } from '../helpers/mcp.js'
import { visibleCatalog } from '../helpers/catalog.js'

// The README's embedding example is documented API: this test runs that very code block, unchanged except that it
// imports the package from source and exports the server it starts.
t.test('the README embedding example serves the built-in tools plus its own', async (t) => {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8')
  const block = /### Adding your own tools\s+```ts\n([\s\S]*?)```/.exec(readme)?.[1]
  if (!block) throw new Error('README has no embedding example')
  const entry = pathToFileURL(fileURLToPath(new URL('../../src/index.ts', import.meta.url))).href
  const source = block.replace("from 'service-mcp'", `from '${entry}'`) + '\nexport { server }\n'
  const dir = mkdtempSync(join(tmpdir(), 'readme-example-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'example.mts')
  writeFileSync(file, source)

  const key = 'service_mcp_' + 'R'.repeat(43)
  const saved = { ...process.env }
  Object.assign(process.env, { SERVICE_DATABASE: join(dir, 'db.sqlite'), SERVICE_PORT: '0', SERVICE_LOG_LEVEL: 'silent', SERVICE_BOOTSTRAP_API_KEY: key, SERVICE_BOOTSTRAP_PASSWORD: 'readme example password' })
  const { server } = (await import(pathToFileURL(file).href)) as { server: { config: { baseUrl: string }; close(): Promise<void> } }
  process.env = saved
  t.teardown(() => server.close())

  const mcpUrl = `${server.config.baseUrl}/mcp`
  const { headers } = await openSession(mcpUrl, key)
  const list = await post(mcpUrl, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, headers)
  t.same(list.json.result.tools.map((x: { name: string }) => x.name), visibleCatalog('owner', undefined, ['team_echo']))
  const call = await post(mcpUrl, callTool('team_echo', { text: 'hi' }), headers)
  t.same(call.json.result.structuredContent, { text: 'hi' })
  const bad = await post(mcpUrl, callTool('team_echo', { text: 1 }), headers)
  t.equal(bad.json.result.isError, true)
  t.equal(JSON.parse(bad.json.result.content[0].text).code, 'INVALID_ARGUMENTS')
})

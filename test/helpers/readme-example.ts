import type { Test } from 'tap'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

/**
 * Runs the README's code block under `### <heading>` as written, except that it imports the package from source and
 * exports the `server` it starts: the README's examples are documented API. The server gets a throwaway database and
 * `apiKey` as its owner's key; it is closed when the test ends.
 */
export async function runReadmeExample(t: Test, heading: string, apiKey: string): Promise<{ mcpUrl: string }> {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8')
  const escaped = heading.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
  const block = new RegExp(`### ${escaped}\\s+\`\`\`ts\\n([\\s\\S]*?)\`\`\``).exec(readme)?.[1]
  if (!block) throw new Error(`README has no ts example under "### ${heading}"`)
  const entry = pathToFileURL(fileURLToPath(new URL('../../src/index.ts', import.meta.url))).href
  const source = block.replace("from 'service-mcp'", `from '${entry}'`) + '\nexport { server }\n'
  const dir = mkdtempSync(join(tmpdir(), 'readme-example-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'example.mts')
  writeFileSync(file, source)

  const saved = { ...process.env }
  Object.assign(process.env, { SERVICE_DATABASE: join(dir, 'db.sqlite'), SERVICE_PORT: '0', SERVICE_LOG_LEVEL: 'silent', SERVICE_BOOTSTRAP_API_KEY: apiKey, SERVICE_BOOTSTRAP_PASSWORD: 'readme example password' })
  let server: { config: { baseUrl: string }; close(): Promise<void> }
  try {
    ;({ server } = (await import(pathToFileURL(file).href)) as { server: typeof server })
  } finally {
    process.env = saved
  }
  t.teardown(() => server.close())
  return { mcpUrl: `${server.config.baseUrl}/mcp` }
}

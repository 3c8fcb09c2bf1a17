import type { Test } from 'tap'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { FROM_BUILD, ROOT, SERVER_ENTRY } from './root.js'

/**
 * Runs the code block under `### <heading>` of docs/embedding.md (where the README sends embedders) as written, except that it imports the package as the suite does
 * (SERVER_ENTRY) and exports the `server` it starts: the README's examples are documented API. The server gets a
 * throwaway database and `apiKey` as its owner's key; it is closed when the test ends.
 */
export async function runReadmeExample(t: Test, heading: string, apiKey: string): Promise<{ mcpUrl: string }> {
  const readme = readFileSync(join(ROOT, 'docs', 'embedding.md'), 'utf8')
  const escaped = heading.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
  const block = new RegExp(`### ${escaped}\\s+\`\`\`ts\\n([\\s\\S]*?)\`\`\``).exec(readme)?.[1]
  if (!block) throw new Error(`docs/embedding.md has no ts example under "### ${heading}"`)
  const entry = pathToFileURL(SERVER_ENTRY).href
  const source = block.replace("from 'service-mcp'", `from '${entry}'`) + '\nexport { server }\n'
  const dir = mkdtempSync(join(tmpdir(), 'readme-example-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  // Beside the compiled suite nothing loads TypeScript: the example is compiled first, its types erased as tsc would.
  const file = join(dir, FROM_BUILD ? 'example.mjs' : 'example.mts')
  writeFileSync(file, FROM_BUILD ? await erasedTypes(source) : source)

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

async function erasedTypes(source: string): Promise<string> {
  const ts = (await import('typescript')).default
  const out = ts.transpileModule(source, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 }, reportDiagnostics: true })
  if (out.diagnostics?.length) throw new Error(`the docs/embedding.md example does not compile: ${ts.flattenDiagnosticMessageText(out.diagnostics[0]!.messageText, '\n')}`)
  return out.outputText
}

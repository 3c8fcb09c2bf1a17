/**
 * This project's server for `npm run bench -- --compare`, through the embedding API ("Embedding", "Adding your own
 * tools"): createServer({ tools: [...builtinTools, fixed tool] }) from the BUILD (dist/src/index.js, what `npm start`
 * runs; COMPARE_PROJECT_ENTRY=src imports src/index.ts instead, for the harness's test, which runs without a build).
 *
 * Everything else is the command line's: settings from the SERVICE_* environment the harness's child helper sets
 * (127.0.0.1, a free port, SQLite in a temporary directory, log level warn, NODE_ENV=production, the bootstrap API
 * key, the rate limits raised out of reach while every limiter still runs). Once it listens, 20 apps are added to
 * the bootstrapped organization through the server's repositories, for the built-in service_apps_list (one page).
 */
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import type * as ServiceMcp from '../../../src/index.js'
import { FIXED_INPUT_SCHEMA, FIXED_OUTPUT, FIXED_OUTPUT_SCHEMA, FIXED_TOOL_DESCRIPTION, FIXED_TOOL_NAME, FIXED_TOOL_TITLE, SEEDED_APPS } from './fixed.js'

const root = join(import.meta.dirname, '..', '..', '..')
const entry = process.env.COMPARE_PROJECT_ENTRY === 'src' ? join(root, 'src', 'index.ts') : join(root, 'dist', 'src', 'index.js')
const { createServer, builtinTools, defineTool } = (await import(pathToFileURL(entry).href)) as typeof ServiceMcp

const fixedTool = defineTool({
  name: FIXED_TOOL_NAME,
  title: FIXED_TOOL_TITLE,
  description: FIXED_TOOL_DESCRIPTION,
  inputSchema: FIXED_INPUT_SCHEMA,
  outputSchema: FIXED_OUTPUT_SCHEMA,
  scope: 'mcp:read',
  role: 'viewer',
  annotations: { readOnlyHint: true },
  handler: () => FIXED_OUTPUT,
})

const server = await createServer({ tools: [...builtinTools, fixedTool], onBootstrap: () => {} })
await server.listen()
const org = await server.app.repos.organizations.bySlug('default')
if (!org) throw new Error('the default organization was not bootstrapped')
for (let i = 0; i < SEEDED_APPS; i++) await server.app.repos.apps.create({ organizationId: org.id, name: `App ${i + 1}`, description: `Benchmark app number ${i + 1}` })
server.closeOnSignals()

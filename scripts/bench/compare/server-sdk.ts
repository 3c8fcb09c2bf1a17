/**
 * The official SDK's server for `npm run bench -- --compare`: @modelcontextprotocol/sdk 1.x in the shape of its
 * examples/server/simpleStreamableHttp.js, stateful, answering on SSE (the default; no enableJsonResponse).
 *
 * Kept from the example: createMcpExpressApp() (Express 5, its localhost Host-header check and express.json()), a map
 * of transports by session id filled by onsessioninitialized and emptied by onclose, a new McpServer per session
 * connected to a new StreamableHTTPServerTransport({ sessionIdGenerator: randomUUID }), POST/GET/DELETE /mcp with the
 * example's 400/404/500 answers.
 * Dropped: every console.log (one per request in the example), OAuth, the InMemoryEventStore (no resumability), the
 * task store and the demo tools, the idle sweep with its per-response tracking, and the cap of 1,000 sessions (the
 * init and memory scenarios open more; the project has no such cap either).
 *
 * Listens on 127.0.0.1:$SERVICE_PORT (the harness's child helper sets it). Started as its own process.
 */
import { randomUUID } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js'
import * as z from 'zod/v4'
import { FIXED_OUTPUT, FIXED_TOOL_DESCRIPTION, FIXED_TOOL_NAME, FIXED_TOOL_TITLE } from './fixed.js'

type Req = IncomingMessage & { body?: unknown }
type Res = ServerResponse & { status(code: number): Res; json(body: unknown): void; send(body: string): void }

/** FIXED_OUTPUT_SCHEMA in zod (what the SDK wants); the SDK derives the same JSON Schema for tools/list. */
const outputSchema = z.strictObject({
  services: z.array(
    z.strictObject({
      id: z.string(),
      name: z.string(),
      status: z.enum(['running', 'stopped', 'deploying']),
      region: z.string(),
      updatedAt: z.string(),
    }),
  ),
  total: z.number().int(),
  next_cursor: z.string().nullable(),
})

function getServer(): McpServer {
  const server = new McpServer({ name: 'sdk-bench-server', version: '1.0.0' })
  server.registerTool(
    FIXED_TOOL_NAME,
    { title: FIXED_TOOL_TITLE, description: FIXED_TOOL_DESCRIPTION, inputSchema: z.strictObject({}), outputSchema, annotations: { readOnlyHint: true } },
    // What an SDK tool with structured output returns: the output object, and its JSON as text, made per call (the
    // project's server makes the same text from the same object per call).
    () => ({ content: [{ type: 'text' as const, text: JSON.stringify(FIXED_OUTPUT) }], isError: false, structuredContent: FIXED_OUTPUT }),
  )
  return server
}

const app = createMcpExpressApp()
const transports = new Map<string, StreamableHTTPServerTransport>()

app.post('/mcp', async (req: Req, res: Res) => {
  const sessionId = req.headers['mcp-session-id']
  try {
    let transport = typeof sessionId === 'string' ? transports.get(sessionId) : undefined
    if (!transport) {
      if (sessionId) {
        res.status(404).json({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null })
        return
      }
      if (!isInitializeRequest(req.body)) {
        res.status(400).json({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: No valid session ID provided' }, id: null })
        return
      }
      const created: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          transports.set(id, created)
        },
      })
      created.onclose = () => {
        if (created.sessionId) transports.delete(created.sessionId)
      }
      await getServer().connect(created)
      transport = created
    }
    await transport.handleRequest(req, res, req.body)
  } catch {
    if (!res.headersSent) res.status(500).json({ jsonrpc: '2.0', error: { code: -32603, message: 'Internal server error' }, id: null })
  }
})

/** GET (a standalone SSE stream) and DELETE (the end of a session) go to the session's transport, as in the example. */
const bySession = async (req: Req, res: Res) => {
  const sessionId = req.headers['mcp-session-id']
  if (typeof sessionId !== 'string') {
    res.status(400).send('Missing session ID')
    return
  }
  const transport = transports.get(sessionId)
  if (!transport) {
    res.status(404).json({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null })
    return
  }
  try {
    await transport.handleRequest(req, res)
  } catch {
    if (!res.headersSent) res.status(500).send('Error processing request')
  }
}
app.get('/mcp', bySession)
app.delete('/mcp', bySession)

app.listen(Number(process.env.SERVICE_PORT ?? 3000), '127.0.0.1', (error?: Error) => {
  if (error) {
    process.stderr.write(`sdk server failed to start: ${error.message}\n`)
    process.exit(1)
  }
})
process.on('SIGTERM', () => process.exit(0))

/**
 * The floor of `npm run bench -- --compare`: a bare Fastify 5 route (the project's own Fastify) answering
 * precomputed bodies. POST /mcp, the body parsed by Fastify's default JSON parser, then:
 *   initialize                 a precomputed initialize result, with an Mcp-Session-Id header (a random UUID)
 *   tools/call                 by the tool's name (params.name), the precomputed complete answer with the request's
 *                              id spliced in (string building):
 *                                bench_services_list  the fixed tool's result (fixed.ts), about 2.7 KB
 *                                service_apps_list    only when $COMPARE_BARE_APPS_RESULT names a file: its content,
 *                                                     the project's own service_apps_list `result` as the project
 *                                                     wrote it (the harness takes it from the project's answer), so
 *                                                     the floor of the apps scenario sends the same bytes (~8.5 KB)
 *                                anything else        a precomputed -32602 error (unknown tool)
 *   notifications/initialized  202, nothing
 *   anything else              a precomputed -32601 error
 * No session is stored, nothing is checked (no auth, no Accept or version headers, no schema): the cost of HTTP, JSON
 * parsing and a write, which is what every MCP server pays at least. DELETE /mcp answers 200, like a closed session.
 *
 * Listens on 127.0.0.1:$SERVICE_PORT (the harness's child helper sets it). Started as its own process; the apps file
 * is read before it listens (the harness removes it once the server answers).
 */
import { randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import Fastify from 'fastify'
import { APPS_TOOL_NAME, BARE_APPS_RESULT_ENV, FIXED_RESULT, FIXED_TOOL_NAME } from './fixed.js'

const INITIALIZE_RESULT = JSON.stringify({
  protocolVersion: '2025-11-25',
  capabilities: { tools: { listChanged: false } },
  serverInfo: { name: 'bare-fastify', version: '1.0.0' },
})
const CALL_RESULT = JSON.stringify(FIXED_RESULT)

/** The project's service_apps_list result, byte for byte (checked to be one JSON object), or null: not served. */
const APPS_RESULT = ((file) => {
  if (!file) return null
  const text = readFileSync(file, 'utf8')
  const parsed: unknown = JSON.parse(text)
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error(`${BARE_APPS_RESULT_ENV}: ${file} does not hold a JSON object`)
  return text
})(process.env[BARE_APPS_RESULT_ENV])

/** `{"jsonrpc":"2.0","id":<id>,"result":<result>}` around a precomputed result: only the id is serialized per request. */
const answer = (id: unknown, result: string) => `{"jsonrpc":"2.0","id":${typeof id === 'number' ? id : JSON.stringify(id ?? null)},"result":${result}}`
const error = (id: unknown, rpcError: string) => `{"jsonrpc":"2.0","id":${typeof id === 'number' ? id : JSON.stringify(id ?? null)},"error":${rpcError}}`
const METHOD_NOT_FOUND = '{"code":-32601,"message":"Method not found"}'
const UNKNOWN_TOOL = '{"code":-32602,"message":"Unknown tool"}'

const app = Fastify()

app.post('/mcp', (req, reply) => {
  const body = req.body as { id?: unknown; method?: unknown; params?: { name?: unknown } } | null
  const method = body?.method
  if (method === 'tools/call') {
    const name = body!.params?.name
    const result = name === FIXED_TOOL_NAME ? CALL_RESULT : name === APPS_TOOL_NAME ? APPS_RESULT : null
    return reply.type('application/json').send(result === null ? error(body!.id, UNKNOWN_TOOL) : answer(body!.id, result))
  }
  if (method === 'initialize') return reply.header('mcp-session-id', randomUUID()).type('application/json').send(answer(body!.id, INITIALIZE_RESULT))
  if (method === 'notifications/initialized') return reply.code(202).send()
  return reply.code(typeof method === 'string' ? 200 : 400).type('application/json').send(error(body?.id, METHOD_NOT_FOUND))
})
app.delete('/mcp', (_req, reply) => reply.send())

app.listen({ host: '127.0.0.1', port: Number(process.env.SERVICE_PORT ?? 3000) }).catch((err: unknown) => {
  process.stderr.write(`bare server failed to start: ${(err as Error).message}\n`)
  process.exit(1)
})
process.on('SIGTERM', () => {
  void app.close().then(() => process.exit(0))
})

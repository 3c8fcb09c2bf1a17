import { SpanKind, SpanStatusCode } from '@opentelemetry/api'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base'
import t, { type Test } from 'tap'
import { builtinTools } from '../../src/index.js'
import { callTool, initializeMessage, post } from '../helpers/mcp.js'
import { modernCall, modernPost } from '../helpers/modern.js'
import { createKey, ownerMembership } from '../helpers/seed.js'
import { OWNER_EMAIL, startServer } from '../helpers/server.js'
import { until } from '../helpers/stream.js'
import { DISTINCTIVE, echoNoteTool } from '../helpers/echo-note.js'

/**
 * OpenTelemetry spans of /mcp, exported to memory, after real calls over real sockets: the HTTP span continues the
 * caller's traceparent header, a JSON-RPC span per request (its parent: `_meta.traceparent` when valid, linked to the
 * HTTP span; else the HTTP span), MCP attribute names, errors, and no argument value anywhere.
 */

const ECHO = echoNoteTool()

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const PARENT = '00f067aa0ba902b7'
const META_TRACE = '0af7651916cd43dd8448eb211c80319c'
const META_PARENT = 'b7ad6b7169203331'

const traceparent = (trace: string, span: string) => `00-${trace}-${span}-01`

async function serve(t: Test) {
  const exporter = new InMemorySpanExporter()
  const server = await startServer(t, { tools: [...builtinTools, ECHO], tracing: { spanProcessors: [new SimpleSpanProcessor(exporter)] } })
  /** Waits until a span matching `match` was exported (HTTP spans end when their connection's response closes). */
  const span = (match: (s: ReadableSpan) => boolean, what: string) => until(() => exporter.getFinishedSpans().find(match), 3000, what)
  return { server, exporter, span }
}

const httpSpanOf = (trace: string) => (s: ReadableSpan) => s.name === 'POST /mcp' && s.spanContext().traceId === trace

t.test('the HTTP span continues the traceparent header; each JSON-RPC request is its child, named after the semantic conventions', async (t) => {
  const { server, span } = await serve(t)
  const init = await post(server.mcpUrl, initializeMessage('2025-11-25', {}, 'init-1'), { authorization: `Bearer ${server.apiKey}`, traceparent: traceparent(TRACE, PARENT), tracestate: 'vendor=abc' })
  t.equal(init.status, 200)
  const sessionId = String(init.headers['mcp-session-id'])

  const http = await span(httpSpanOf(TRACE), 'the HTTP span')
  t.equal(http.kind, SpanKind.SERVER)
  t.equal(http.parentSpanContext?.spanId, PARENT, 'its parent is the caller\'s span')
  t.equal(http.parentSpanContext?.isRemote, true)
  t.equal(http.spanContext().traceState?.get('vendor'), 'abc', 'tracestate carried along')
  t.match(http.attributes, {
    'http.request.method': 'POST',
    'http.route': '/mcp',
    'url.path': '/mcp',
    'http.response.status_code': 200,
    'client.address': '127.0.0.1',
    'network.protocol.name': 'http',
    'network.protocol.version': '1.1',
  })
  t.equal(http.status.code, SpanStatusCode.UNSET)

  const rpc = await span((s) => s.name === 'initialize', 'the initialize span')
  t.equal(rpc.kind, SpanKind.SERVER)
  t.equal(rpc.spanContext().traceId, TRACE, 'same trace')
  t.equal(rpc.parentSpanContext?.spanId, http.spanContext().spanId, 'child of the HTTP span')
  t.strictSame(rpc.links, [])
  t.match(rpc.attributes, { 'mcp.method.name': 'initialize', 'mcp.protocol.version': '2025-11-25', 'jsonrpc.request.id': 'init-1', 'service_mcp.era': 'legacy', 'service_mcp.outcome': 'ok' })
  t.notOk('mcp.session.id' in rpc.attributes, 'no session id')
  t.ok(rpc.duration[0] * 1e9 + rpc.duration[1] >= 0, 'a duration')

  const CALL_TRACE = '11111111111111111111111111111111'
  const headers = { authorization: `Bearer ${server.apiKey}`, 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' }
  await post(server.mcpUrl, { jsonrpc: '2.0', method: 'notifications/initialized' }, headers)
  const echoed = await post(server.mcpUrl, callTool('echo_note', { note: DISTINCTIVE }, 7), { ...headers, traceparent: traceparent(CALL_TRACE, PARENT) })
  t.equal(echoed.status, 200)
  const callHttp = await span(httpSpanOf(CALL_TRACE), 'the HTTP span of the call')
  const call = await span((s) => s.name === 'tools/call echo_note', 'the tools/call span')
  t.equal(call.parentSpanContext?.spanId, callHttp.spanContext().spanId)
  t.match(call.attributes, {
    'mcp.method.name': 'tools/call',
    'gen_ai.tool.name': 'echo_note',
    'gen_ai.operation.name': 'execute_tool',
    'jsonrpc.request.id': '7',
    'mcp.protocol.version': '2025-11-25',
    'network.transport': 'tcp',
  })
  t.notOk('error.type' in call.attributes)
})

t.test('a 2026-07-28 request: _meta.traceparent parents the JSON-RPC span, linked to the HTTP span; an invalid one is ignored', async (t) => {
  const { server, span } = await serve(t)
  const reply = await modernCall(server.mcpUrl, server.apiKey, 'echo_note', { note: DISTINCTIVE }, {
    id: 'm-1',
    meta: { traceparent: traceparent(META_TRACE, META_PARENT), tracestate: 'meta=1' },
    headers: { traceparent: traceparent(TRACE, PARENT) },
  })
  t.equal(reply.status, 200)
  const http = await span(httpSpanOf(TRACE), 'the HTTP span')
  t.equal(http.parentSpanContext?.spanId, PARENT, 'the HTTP span follows the header')
  const call = await span((s) => s.name === 'tools/call echo_note', 'the tools/call span')
  t.equal(call.spanContext().traceId, META_TRACE, 'the JSON-RPC span follows _meta')
  t.equal(call.parentSpanContext?.spanId, META_PARENT)
  t.equal(call.spanContext().traceState?.get('meta'), '1')
  t.equal(call.links.length, 1, 'and links to the HTTP span')
  t.equal(call.links[0]!.context.spanId, http.spanContext().spanId)
  t.equal(call.links[0]!.context.traceId, TRACE)
  t.match(call.attributes, { 'mcp.method.name': 'tools/call', 'mcp.protocol.version': '2026-07-28', 'jsonrpc.request.id': 'm-1', 'service_mcp.era': 'modern' })

  // A malformed one (all-zero trace id) is no parent: the HTTP span is.
  const OTHER = '22222222222222222222222222222222'
  const bad = await modernPost(server.mcpUrl, server.apiKey, 'tools/list', {}, { id: 'm-2', meta: { traceparent: `00-${'0'.repeat(32)}-${META_PARENT}-01` }, headers: { traceparent: traceparent(OTHER, PARENT) } })
  t.equal(bad.status, 200)
  const badHttp = await span(httpSpanOf(OTHER), 'the second HTTP span')
  const list = await span((s) => s.name === 'tools/list', 'the tools/list span')
  t.equal(list.spanContext().traceId, OTHER)
  t.equal(list.parentSpanContext?.spanId, badHttp.spanContext().spanId)
  t.strictSame(list.links, [])

  // Without any trace context, a new trace starts at the HTTP span.
  await modernPost(server.mcpUrl, server.apiKey, 'server/discover', {}, { id: 'm-3' })
  const discover = await span((s) => s.name === 'server/discover', 'the server/discover span')
  const root = await span((s) => s.name === 'POST /mcp' && s.spanContext().traceId === discover.spanContext().traceId, 'its HTTP span')
  t.equal(root.parentSpanContext, undefined, 'a root span')
  t.equal(discover.parentSpanContext?.spanId, root.spanContext().spanId)
})

t.test('errors: JSON-RPC codes, tool errors and HTTP refusals as error.type; no argument value, token or email in any span', async (t) => {
  const { server, exporter, span } = await serve(t)
  const missing = await modernCall(server.mcpUrl, server.apiKey, 'service_apps_get', { app_id: 'app_zebraquartz773100000000000' }, { id: 'e-1' })
  t.equal(missing.json?.result?.isError, true)
  const toolError = await span((s) => s.name === 'tools/call service_apps_get', 'the tool error span')
  t.match(toolError.attributes, { 'error.type': 'tool_error', 'service_mcp.outcome': 'tool_error', 'service_mcp.error.code': 'RESOURCE_NOT_FOUND' })
  t.equal(toolError.status.code, SpanStatusCode.ERROR)
  t.equal(toolError.status.message, 'The resource does not exist', "the catalog's fixed message, not the rendered one")

  const unknown = await modernPost(server.mcpUrl, server.apiKey, `made/${DISTINCTIVE}`, {}, { id: 'e-2' })
  t.equal(unknown.status, 404)
  const other = await span((s) => s.attributes['jsonrpc.request.id'] === 'e-2', 'the unknown method span')
  t.equal(other.name, '_OTHER', 'an unknown method is not named')
  t.match(other.attributes, { 'mcp.method.name': '_OTHER', 'error.type': '-32601', 'rpc.response.status_code': '-32601', 'service_mcp.error.code': 'METHOD_NOT_FOUND' })

  const { key: readOnly } = await createKey(server, (await ownerMembership(server)).id, ['mcp:read'])
  const refused = await modernCall(server.mcpUrl, readOnly, 'service_apps_create', { name: DISTINCTIVE }, { id: 'e-3' })
  t.equal(refused.status, 403)
  const scope = await span((s) => s.name === 'tools/call service_apps_create', 'the refused call span')
  t.match(scope.attributes, { 'error.type': 'INSUFFICIENT_SCOPE', 'service_mcp.outcome': 'error' })
  t.notOk('rpc.response.status_code' in scope.attributes, 'no JSON-RPC code: the refusal was HTTP 403')
  const refusedHttp = await span((s) => s.name === 'POST /mcp' && s.attributes['http.response.status_code'] === 403, 'its HTTP span')
  t.equal(refusedHttp.status.code, SpanStatusCode.UNSET, 'a 4xx is not a server error')

  await modernCall(server.mcpUrl, server.apiKey, 'echo_note', { note: DISTINCTIVE }, { id: 'e-4', meta: { traceparent: traceparent(META_TRACE, META_PARENT) } })
  await span((s) => s.attributes['jsonrpc.request.id'] === 'e-4', 'the echo span')
  await until(() => exporter.getFinishedSpans().filter((s) => s.name === 'POST /mcp').length >= 4, 3000, 'every HTTP span')
  const everything = JSON.stringify(exporter.getFinishedSpans().map((s) => ({ name: s.name, attributes: s.attributes, events: s.events, status: s.status, links: s.links })))
  for (const secret of [DISTINCTIVE, 'zebraquartz', server.apiKey, readOnly, OWNER_EMAIL, 'arguments', '"note"']) t.notOk(everything.includes(secret), `${secret.slice(0, 16)}… appears in no span`)
})

t.test("an embedder's own tracer provider: used, never shut down by the server", async (t) => {
  const exporter = new InMemorySpanExporter()
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
  t.teardown(() => provider.shutdown())
  const server = await startServer(t, { tracing: { tracerProvider: provider } })
  await modernPost(server.mcpUrl, server.apiKey, 'tools/list', {}, { id: 'p-1' })
  await until(() => exporter.getFinishedSpans().some((s) => s.name === 'tools/list'), 3000, 'the span')
  await server.close()
  // Still alive: a span made after the server closed is exported too.
  provider.getTracer('after').startSpan('after-close').end()
  t.ok(exporter.getFinishedSpans().some((s) => s.name === 'after-close'), 'the provider was not shut down')
})

t.test('off by default: nothing observes the requests', async (t) => {
  const server = await startServer(t)
  t.equal(server.app.rpc.observer, null)
})

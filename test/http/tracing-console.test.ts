// test-backends: sqlite-only (an in-memory app whose log is read; where it stores nothing changes no span line)
import t from 'tap'
import { LOGGED_APP_KEY, loggedApp } from '../helpers/logged-app.js'
import { until } from '../helpers/stream.js'

/**
 * SERVICE_TRACING=console (src/observability/log-span-exporter.ts): each finished span is one JSON line of the server's
 * log, read here from the pino stream the `logger` option takes. OpenTelemetry's console exporter used to print
 * multi-line objects on stdout between the log's lines instead.
 */

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const CALLER_SPAN = '00f067aa0ba902b7'
const META_TRACE = '0af7651916cd43dd8448eb211c80319c'
const META_SPAN = 'b7ad6b7169203331'

t.test('each finished span is one JSON line of the log, at info whatever the log level', async (t) => {
  const { app, log } = await loggedApp(t, { tracing: 'console', logLevel: 'warn' })
  const res = await app.inject({
    method: 'POST',
    url: '/mcp',
    headers: {
      authorization: `Bearer ${LOGGED_APP_KEY}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/call',
      'mcp-name': 'service_whoami',
      traceparent: `00-${TRACE}-${CALLER_SPAN}-01`,
    },
    payload: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: {
        name: 'service_whoami',
        arguments: {},
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientCapabilities': {},
          traceparent: `00-${META_TRACE}-${META_SPAN}-01`,
        },
      },
    }),
  })
  t.equal(res.statusCode, 200, 'the call is answered')

  const parsed = () => log.map((line) => {
    try {
      return JSON.parse(line)
    } catch {
      return { unparsable: line }
    }
  })
  const spans = () => parsed().filter((l) => l.msg === 'span').map((l) => l.span)
  // The HTTP span ends when its response has been sent, after the JSON-RPC span.
  const http = await until(() => spans().find((s) => s.name === 'POST /mcp'), 3000, 'the HTTP span\'s line')
  const call = spans().find((s) => s.name === 'tools/call service_whoami')

  t.strictSame(parsed().filter((l) => 'unparsable' in l), [], 'every line of the log is JSON')
  t.strictSame(log.filter((line) => line.indexOf('\n') !== line.length - 1), [], 'every line is one line')
  t.ok(parsed().every((l) => l.msg === 'span' && l.level === 30), 'at level warn, the span lines are the only lines, at info')

  t.match(http, {
    traceId: TRACE,
    parentSpanId: CALLER_SPAN,
    kind: 'SERVER',
    status: { code: 'UNSET' },
    attributes: { 'http.request.method': 'POST', 'http.route': '/mcp', 'http.response.status_code': 200 },
    links: [],
  })
  t.match(http.spanId, /^[0-9a-f]{16}$/)
  t.match(call, {
    traceId: META_TRACE,
    parentSpanId: META_SPAN,
    kind: 'SERVER',
    status: { code: 'UNSET' },
    attributes: { 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'service_whoami', 'service_mcp.outcome': 'ok' },
  })
  t.strictSame(call?.links, [{ traceId: TRACE, spanId: http.spanId }], 'the call\'s span is linked to its HTTP span')
  for (const span of [http, call]) {
    t.equal(new Date(span.startTime).toISOString(), span.startTime, `${span.name}: startTime is ISO 8601`)
    t.ok(typeof span.durationMs === 'number' && span.durationMs >= 0, `${span.name}: durationMs`)
  }
})

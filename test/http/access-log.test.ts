import t, { type Test } from 'tap'
import type { Config } from '../../src/config.js'
import { LOGGED_APP_KEY, loggedApp } from '../helpers/logged-app.js'

/**
 * SERVICE_ACCESS_LOG: one info line per finished response, read here from the pino stream the `logger` option takes.
 */

const KEY = LOGGED_APP_KEY
const ACCEPT = 'application/json, text/event-stream'
const MODERN_META = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'test', version: '1.0.0' },
}

async function app(t: Test, overrides: Partial<Config> = {}) {
  const { app: a, log } = await loggedApp(t, overrides)
  const lines = () => log.map((l) => JSON.parse(l)).filter((l) => l.msg === 'request completed')
  return { app: a, log, lines }
}

function mcpHeaders(extra: Record<string, string> = {}) {
  return { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', accept: ACCEPT, ...extra }
}

t.test('one line per response: request id, method, path without the query, status, duration, address, user agent', async (t) => {
  const { app: a, lines, log } = await app(t, { accessLog: true })
  const res = await a.inject({ method: 'GET', url: '/healthz?token=hunter2&x=1', headers: { 'user-agent': 'probe/1.0', 'x-request-id': 'lb-1' }, remoteAddress: '198.51.100.9' })
  t.equal(res.statusCode, 200)
  const [line] = lines()
  t.match(line, { level: 30, reqId: 'lb-1', method: 'GET', path: '/healthz', status: 200, address: '198.51.100.9', userAgent: 'probe/1.0', rpc: null })
  t.type(line.durationMs, 'number')
  t.ok(line.durationMs >= 0)
  t.notOk(log.join('').includes('hunter2'), 'the query string is not logged')

  const missing = await a.inject({ method: 'GET', url: '/nope' })
  t.equal(missing.statusCode, 404)
  t.match(lines()[1], { method: 'GET', path: '/nope', status: 404, reqId: missing.headers['x-request-id'], userAgent: 'lightMyRequest' })
})

t.test('/mcp lines name the JSON-RPC method (registered ones; others are "other"), never the credential or arguments', async (t) => {
  const { app: a, lines, log } = await app(t, { accessLog: true })
  const init = await a.inject({
    method: 'POST', url: '/mcp', headers: mcpHeaders(),
    payload: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } } }),
  })
  t.equal(init.statusCode, 200)
  const call = await a.inject({
    method: 'POST', url: '/mcp', headers: mcpHeaders({ 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'service_apps_get' }),
    payload: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'service_apps_get', arguments: { app_id: 'app_distinctive_value_123' }, _meta: MODERN_META } }),
  })
  t.equal(call.statusCode, 200)
  const unknown = await a.inject({
    method: 'POST', url: '/mcp', headers: mcpHeaders({ 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'made/up' }),
    payload: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'made/up', params: { _meta: MODERN_META } }),
  })
  t.equal(unknown.statusCode, 404)
  const unauthenticated = await a.inject({ method: 'POST', url: '/mcp', headers: { 'content-type': 'application/json' }, payload: '{}' })
  t.equal(unauthenticated.statusCode, 401)
  t.match(lines(), [
    { method: 'POST', path: '/mcp', status: 200, rpc: 'initialize' },
    { method: 'POST', path: '/mcp', status: 200, rpc: 'tools/call' },
    { method: 'POST', path: '/mcp', status: 404, rpc: 'other' },
    { method: 'POST', path: '/mcp', status: 401, rpc: null },
  ])
  const text = log.join('')
  t.notOk(text.includes(KEY), 'the API key is not logged')
  t.notOk(text.includes('app_distinctive_value_123'), 'argument values are not logged')
})

t.test('the address follows X-Forwarded-For only with SERVICE_TRUST_PROXY', async (t) => {
  const forwarded = { method: 'GET' as const, url: '/healthz', headers: { 'x-forwarded-for': '203.0.113.7' }, remoteAddress: '127.0.0.1' }
  const trusted = await app(t, { accessLog: true, trustProxy: true })
  await trusted.app.inject(forwarded)
  t.equal(trusted.lines()[0].address, '203.0.113.7', 'behind a trusted proxy: the client it names')
  const direct = await app(t, { accessLog: true, trustProxy: false })
  await direct.app.inject(forwarded)
  t.equal(direct.lines()[0].address, '127.0.0.1', 'otherwise: the peer, whatever the header says')
})

t.test('off by default: no access lines at all', async (t) => {
  const { app: a, lines } = await app(t)
  await a.inject({ method: 'GET', url: '/healthz' })
  await a.inject({ method: 'GET', url: '/nope' })
  await a.inject({ method: 'POST', url: '/mcp', headers: { 'content-type': 'application/json' }, payload: '{}' })
  t.strictSame(lines(), [])
})

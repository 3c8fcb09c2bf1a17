// test-backends: sqlite-only (an app on an in-memory SQLite database of its own)
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import t, { type Test } from 'tap'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { SERVICE_MCP_VERSION } from '../../src/version.js'
import { INJECT_BASE_URL } from '../helpers/logged-app.js'

const KEY = 'service_mcp_' + 'T'.repeat(43)
const ACCEPT = 'application/json, text/event-stream'
/** Stack frames, file paths, SQL or raw JS error names must never reach a client. */
const LEAK = /\bat .+:\d+|\.ts:\d+|\.js:\d+|node:internal|node_modules|SELECT|INSERT|UPDATE \w+ SET|DELETE FROM|SQLITE|sqlite|drizzle|TypeError|SyntaxError|ReferenceError|FST_/

async function app(t: Test): Promise<FastifyInstance> {
  const config = loadConfig({
    env: {},
    // The base address inject's requests name (Host: localhost:80): a loopback base address checks Host on /mcp.
    overrides: { database: ':memory:', logLevel: 'silent', baseUrl: INJECT_BASE_URL, bootstrapApiKey: KEY, bootstrapPassword: 'correct horse battery' },
  })
  const a = await buildApp({ config, logger: false })
  t.teardown(() => a.close())
  return a
}

function commonHeaders(t: Test, res: LightMyRequestResponse): void {
  t.equal(res.headers['x-service-mcp-version'], SERVICE_MCP_VERSION, 'X-Service-MCP-Version')
  t.match(String(res.headers['x-service-mcp-version']), /^\d{4}-\d{2}-\d{2}$/)
  t.match(String(res.headers['x-request-id'] ?? ''), /^[0-9a-f-]{36}$/, 'X-Request-Id')
  t.notMatch(res.body, LEAK, 'no stack trace or SQL in the body')
}

function serviceBody(t: Test, res: LightMyRequestResponse, code: string): void {
  t.match(String(res.headers['content-type']), /^application\/json/)
  const body = res.json() as { error: Record<string, unknown> }
  t.same(Object.keys(body), ['error'], 'only the error member')
  t.same(Object.keys(body.error).sort(), ['action', 'code', 'details', 'message'])
  t.equal(body.error.code, code)
  t.type(body.error.message, 'string')
  t.type(body.error.action, 'string')
  t.ok((body.error.message as string).length > 0 && (body.error.action as string).length > 0)
}

t.test('HTTP error bodies', async (t) => {
  const a = await app(t)

  t.test('unknown route: 404 NOT_FOUND', async (t) => {
    for (const [method, url] of [['GET', '/nope'], ['POST', '/api/v1/things'], ['GET', '/mcp/extra'], ['DELETE', '/']] as const) {
      const res = await a.inject({ method, url })
      t.equal(res.statusCode, 404, `${method} ${url}`)
      serviceBody(t, res, 'NOT_FOUND')
      commonHeaders(t, res)
    }
  })

  // A well-formed client id is kept (test/http/request-id.test.ts); a malformed one is replaced.
  t.test('request ids differ per request and ignore a malformed client-sent id', async (t) => {
    const r1 = await a.inject({ method: 'GET', url: '/nope', headers: { 'x-request-id': 'client chosen' } })
    const r2 = await a.inject({ method: 'GET', url: '/nope' })
    t.not(r1.headers['x-request-id'], 'client chosen')
    t.not(r1.headers['x-request-id'], r2.headers['x-request-id'])
  })

  t.test('PUT /mcp: 405 with Allow', async (t) => {
    for (const method of ['PUT', 'PATCH'] as const) {
      const res = await a.inject({ method, url: '/mcp', headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' }, payload: '{}' })
      t.equal(res.statusCode, 405, method)
      serviceBody(t, res, 'METHOD_NOT_ALLOWED')
      commonHeaders(t, res)
      const allow = String(res.headers.allow ?? '')
      for (const m of ['GET', 'POST', 'DELETE']) t.ok(allow.split(/,\s*/).includes(m), `Allow names ${m}`)
      t.notOk(allow.split(/,\s*/).includes(method), `Allow does not name ${method}`)
      const anonymous = await a.inject({ method, url: '/mcp' })
      t.equal(anonymous.statusCode, 405, `${method} without credentials is still 405, not 401`)
    }
  })

  t.test('POST /mcp without credentials: 401 INVALID_TOKEN', async (t) => {
    const res = await a.inject({ method: 'POST', url: '/mcp', headers: { 'content-type': 'application/json', accept: ACCEPT }, payload: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }) })
    t.equal(res.statusCode, 401)
    serviceBody(t, res, 'INVALID_TOKEN')
    commonHeaders(t, res)
    const challenge = String(res.headers['www-authenticate'] ?? '')
    t.match(challenge, /^Bearer /)
    t.match(challenge, /resource_metadata="http:\/\/localhost\/\.well-known\/oauth-protected-resource\/mcp"/)
    t.notMatch(challenge, /error=/, 'no error attribute when no token was sent')
  })

  t.test('POST /mcp with a wrong key: 401 with error="invalid_token"', async (t) => {
    const res = await a.inject({ method: 'POST', url: '/mcp', headers: { authorization: `Bearer service_mcp_${'X'.repeat(43)}`, 'content-type': 'application/json', accept: ACCEPT }, payload: '{}' })
    t.equal(res.statusCode, 401)
    serviceBody(t, res, 'INVALID_TOKEN')
    commonHeaders(t, res)
    t.match(String(res.headers['www-authenticate']), /error="invalid_token"/)
    t.notMatch(res.body, /XXXXXXXX/, 'the presented credential is not echoed')
  })

  t.test('other transport refusals keep the shape and leak nothing', async (t) => {
    const auth = { authorization: `Bearer ${KEY}` }
    const cases: Array<{ name: string; status: number; code: string; headers: Record<string, string>; payload?: string }> = [
      { name: 'Accept names neither', status: 406, code: 'NOT_ACCEPTABLE', headers: { ...auth, accept: 'text/html', 'content-type': 'application/json' }, payload: '{}' },
      { name: 'Content-Type not JSON', status: 415, code: 'UNSUPPORTED_MEDIA_TYPE', headers: { ...auth, accept: ACCEPT, 'content-type': 'text/plain' }, payload: 'hello' },
      { name: 'body too large', status: 413, code: 'PAYLOAD_TOO_LARGE', headers: { ...auth, accept: ACCEPT, 'content-type': 'application/json' }, payload: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping', params: { pad: 'x'.repeat(1_100_000) } }) },
      { name: 'session missing', status: 404, code: 'SESSION_NOT_FOUND', headers: { ...auth, accept: ACCEPT, 'content-type': 'application/json' }, payload: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }) },
      { name: 'disallowed Origin', status: 403, code: 'FORBIDDEN_ORIGIN', headers: { ...auth, accept: ACCEPT, 'content-type': 'application/json', origin: 'https://evil.example' }, payload: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }) },
    ]
    for (const c of cases) {
      const res = await a.inject({ method: 'POST', url: '/mcp', headers: c.headers, ...(c.payload !== undefined ? { payload: c.payload } : {}) })
      t.equal(res.statusCode, c.status, c.name)
      serviceBody(t, res, c.code)
      commonHeaders(t, res)
    }
  })

  t.test('unparsable JSON: 400 with a JSON-RPC -32700 error, id null', async (t) => {
    const res = await a.inject({ method: 'POST', url: '/mcp', headers: { authorization: `Bearer ${KEY}`, accept: ACCEPT, 'content-type': 'application/json' }, payload: '{"jsonrpc": "2.0", "id": 1, "method": ' })
    t.equal(res.statusCode, 400)
    commonHeaders(t, res)
    const body = res.json() as { jsonrpc: string; id: unknown; error: { code: number; message: string } }
    t.equal(body.jsonrpc, '2.0')
    t.equal(body.id, null)
    t.equal(body.error.code, -32700)
    t.notMatch(res.body, /Unexpected|position|JSON\.parse/, "the parser's own message is not echoed")
  })

  t.test('not a JSON-RPC message: 400 with -32600', async (t) => {
    const res = await a.inject({ method: 'POST', url: '/mcp', headers: { authorization: `Bearer ${KEY}`, accept: ACCEPT, 'content-type': 'application/json' }, payload: JSON.stringify({ hello: 'world' }) })
    t.equal(res.statusCode, 400)
    commonHeaders(t, res)
    t.equal((res.json() as { error: { code: number } }).error.code, -32600)
  })

  t.test('a successful exchange carries the headers too', async (t) => {
    const res = await a.inject({
      method: 'POST',
      url: '/mcp',
      headers: { authorization: `Bearer ${KEY}`, accept: ACCEPT, 'content-type': 'application/json' },
      payload: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } } }),
    })
    t.equal(res.statusCode, 200)
    commonHeaders(t, res)
  })
})

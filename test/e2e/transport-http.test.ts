import t, { type Test } from 'tap'
import { request } from 'undici'
import { SERVICE_MCP_VERSION } from '../../src/version.js'
import { callTool, initializeMessage, openSession, post, readReply, type RpcReply } from '../helpers/mcp.js'
import { startServer } from '../helpers/server.js'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const DATE = /^\d{4}-\d{2}-\d{2}$/

type Headers = Record<string, string | string[] | undefined>

function commonHeaders(t: Test, headers: Headers, label: string): void {
  t.match(headers['x-service-mcp-version'], DATE, `${label}: X-Service-MCP-Version is date-shaped`)
  t.equal(headers['x-service-mcp-version'], SERVICE_MCP_VERSION, `${label}: X-Service-MCP-Version is the build date`)
  t.match(headers['x-request-id'], UUID, `${label}: X-Request-Id`)
}

function serviceError(t: Test, reply: RpcReply, status: number, code: string): void {
  t.equal(reply.status, status, `${code}: status`)
  t.match(String(reply.headers['content-type']), /^application\/json/, `${code}: JSON body`)
  t.strictSame(Object.keys(reply.json?.error ?? {}).sort(), ['action', 'code', 'details', 'message'], `${code}: service error shape`)
  t.equal(reply.json.error.code, code, `${code}: code`)
  t.type(reply.json.error.message, 'string')
  t.not(reply.json.error.message, '')
  t.type(reply.json.error.action, 'string')
  t.not(reply.json.error.action, '')
  commonHeaders(t, reply.headers, code)
}

function rpcError(t: Test, reply: RpcReply, status: number, id: unknown, code: number): void {
  t.equal(reply.status, status, `JSON-RPC ${code}: HTTP status`)
  t.match(String(reply.headers['content-type']), /^application\/json/)
  t.equal(reply.json.jsonrpc, '2.0')
  t.strictSame(reply.json.id, id, `JSON-RPC ${code}: id`)
  t.equal(reply.json.error.code, code, `JSON-RPC error code ${code}`)
  t.type(reply.json.error.message, 'string')
  t.notOk('result' in reply.json, 'no result beside the error')
}

async function raw(url: string, method: 'GET' | 'DELETE' | 'OPTIONS' | 'PUT', headers: Record<string, string> = {}): Promise<RpcReply> {
  return readReply(await request(url, { method, headers }))
}

t.test('initialize answers with a session id and the version and request-id headers', async (t) => {
  const server = await startServer(t)
  const res = await post(server.mcpUrl, initializeMessage('2025-11-25'), { authorization: `Bearer ${server.apiKey}` })
  t.equal(res.status, 200)
  t.match(String(res.headers['content-type']), /^application\/json/)
  t.match(res.headers['mcp-session-id'], UUID, 'Mcp-Session-Id is a UUID')
  commonHeaders(t, res.headers, 'initialize')
  t.equal(res.json.id, 0)
  t.equal(res.json.result.protocolVersion, '2025-11-25')
  t.equal(res.json.result.serverInfo.name, 'service-mcp')
  t.match(res.json.result.serverInfo, { title: String, description: String, icons: [{ src: /^data:image\/svg\+xml;base64,/ }] }, '2025-11-25: title, description and icon')
  t.ok(res.json.result.capabilities.tools, 'tools capability announced')
  const older = await post(server.mcpUrl, initializeMessage('2025-03-26'), { authorization: `Bearer ${server.apiKey}` })
  t.same(Object.keys(older.json.result.serverInfo).sort(), ['name', 'version'], '2025-03-26: only what that revision defines')

  const again = await post(server.mcpUrl, initializeMessage('2025-11-25'), { authorization: `Bearer ${server.apiKey}` })
  t.not(again.headers['mcp-session-id'], res.headers['mcp-session-id'], 'each initialize creates a new session')
  t.not(again.headers['x-request-id'], res.headers['x-request-id'], 'request ids are unique')

  const withSession = await post(server.mcpUrl, initializeMessage('2025-11-25'), {
    authorization: `Bearer ${server.apiKey}`,
    'mcp-session-id': String(res.headers['mcp-session-id']),
  })
  rpcError(t, withSession, 400, null, -32600)
})

t.test('protocol revision negotiation', async (t) => {
  const server = await startServer(t)
  const auth = { authorization: `Bearer ${server.apiKey}` }
  for (const version of ['2025-03-26', '2025-06-18', '2025-11-25']) {
    const res = await post(server.mcpUrl, initializeMessage(version), auth)
    t.equal(res.status, 200)
    t.equal(res.json.result.protocolVersion, version, `${version} is echoed`)
    const sessionId = String(res.headers['mcp-session-id'])
    const ping = await post(server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'ping' }, { ...auth, 'mcp-session-id': sessionId, 'mcp-protocol-version': version })
    t.equal(ping.status, 200, `${version}: the session accepts its own revision in MCP-Protocol-Version`)
  }
  for (const version of ['2024-11-05', '1999-01-01', 'not-a-date']) {
    const res = await post(server.mcpUrl, initializeMessage(version), auth)
    t.equal(res.status, 200)
    t.equal(res.json.result.protocolVersion, '2025-11-25', `${version} is answered with 2025-11-25`)
    const sessionId = String(res.headers['mcp-session-id'])
    const ok = await post(server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'ping' }, { ...auth, 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' })
    t.equal(ok.status, 200, `${version}: the session was stored as 2025-11-25`)
    const old = await post(server.mcpUrl, { jsonrpc: '2.0', id: 2, method: 'ping' }, { ...auth, 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-03-26' })
    serviceError(t, old, 400, 'UNSUPPORTED_PROTOCOL_VERSION')
  }
})

t.test('every response carries X-Service-MCP-Version and X-Request-Id', async (t) => {
  const server = await startServer(t, { config: { allowedOrigins: ['https://app.example.com'] } })
  const { headers, sessionId } = await openSession(server.mcpUrl, server.apiKey)

  const ok = await post(server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'ping' }, headers)
  t.equal(ok.status, 200)
  commonHeaders(t, ok.headers, '200 JSON')

  const sse = await post(server.mcpUrl, { jsonrpc: '2.0', id: 2, method: 'ping' }, { ...headers, accept: 'text/event-stream' })
  t.equal(sse.status, 200)
  t.match(String(sse.headers['content-type']), /^text\/event-stream/)
  commonHeaders(t, sse.headers, '200 SSE')

  const accepted = await post(server.mcpUrl, { jsonrpc: '2.0', method: 'notifications/initialized' }, headers)
  t.equal(accepted.status, 202)
  commonHeaders(t, accepted.headers, '202')

  const unknownRoute = await raw(`${server.url}/nope`, 'GET')
  serviceError(t, unknownRoute, 404, 'NOT_FOUND')

  const unauthenticated = await post(server.mcpUrl, { jsonrpc: '2.0', id: 3, method: 'ping' }, { 'mcp-session-id': sessionId })
  serviceError(t, unauthenticated, 401, 'INVALID_TOKEN')

  const badJson = await post(server.mcpUrl, '{', headers)
  t.equal(badJson.status, 400)
  commonHeaders(t, badJson.headers, '400 -32700')

  const methodNotAllowed = await raw(server.mcpUrl, 'PUT', { authorization: headers.authorization! })
  serviceError(t, methodNotAllowed, 405, 'METHOD_NOT_ALLOWED')

  const preflight = await raw(server.mcpUrl, 'OPTIONS', { origin: 'https://app.example.com', 'access-control-request-method': 'POST' })
  t.equal(preflight.status, 204)
  commonHeaders(t, preflight.headers, 'OPTIONS 204')

  const deleted = await raw(server.mcpUrl, 'DELETE', { authorization: headers.authorization!, 'mcp-session-id': sessionId })
  t.equal(deleted.status, 204)
  t.equal(deleted.text, '')
  commonHeaders(t, deleted.headers, 'DELETE 204')

  const gone = await post(server.mcpUrl, { jsonrpc: '2.0', id: 4, method: 'ping' }, headers)
  serviceError(t, gone, 404, 'SESSION_NOT_FOUND')
})

t.test('POST with only a notification is 202 with an empty body', async (t) => {
  const server = await startServer(t)
  const { headers } = await openSession(server.mcpUrl, server.apiKey)
  for (const message of [
    { jsonrpc: '2.0', method: 'notifications/initialized' },
    { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 12345 } },
    { jsonrpc: '2.0', method: 'notifications/some-unknown-thing' },
  ]) {
    const res = await post(server.mcpUrl, message, headers)
    t.equal(res.status, 202, `${message.method}: 202`)
    t.equal(res.text, '', `${message.method}: empty body`)
  }
})

t.test('401 INVALID_TOKEN', async (t) => {
  const server = await startServer(t)
  const resourceMetadata = `${server.url}/.well-known/oauth-protected-resource/mcp`

  const missing = await post(server.mcpUrl, initializeMessage())
  serviceError(t, missing, 401, 'INVALID_TOKEN')
  t.equal(missing.headers['www-authenticate'], `Bearer resource_metadata="${resourceMetadata}"`, 'no error= when no token was sent')
  t.equal(missing.headers['mcp-session-id'], undefined, 'no session is created')

  for (const authorization of ['Bearer not-a-known-token', `Bearer service_mcp_${'x'.repeat(43)}`, 'Basic dXNlcjpwYXNz']) {
    const bad = await post(server.mcpUrl, initializeMessage(), { authorization })
    serviceError(t, bad, 401, 'INVALID_TOKEN')
    const challenge = String(bad.headers['www-authenticate'])
    t.match(challenge, /^Bearer /, `${authorization}: Bearer challenge`)
    t.match(challenge, /error="invalid_token"/, `${authorization}: error="invalid_token"`)
    t.ok(challenge.includes(`resource_metadata="${resourceMetadata}"`), `${authorization}: resource_metadata`)
  }

  const getMissing = await raw(server.mcpUrl, 'GET', { accept: 'text/event-stream' })
  serviceError(t, getMissing, 401, 'INVALID_TOKEN')
  const deleteMissing = await raw(server.mcpUrl, 'DELETE')
  serviceError(t, deleteMissing, 401, 'INVALID_TOKEN')
})

t.test('413, 406 and 415', async (t) => {
  const server = await startServer(t, { config: { maxBodyBytes: 2048 } })
  const { headers } = await openSession(server.mcpUrl, server.apiKey)

  const big = await post(server.mcpUrl, callTool('service_whoami', { padding: 'x'.repeat(4096) }), headers)
  serviceError(t, big, 413, 'PAYLOAD_TOO_LARGE')

  const fits = await post(server.mcpUrl, callTool('service_whoami', {}), headers)
  t.equal(fits.status, 200, 'a body under the limit is served')

  const html = await post(server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'ping' }, { ...headers, accept: 'text/html' })
  serviceError(t, html, 406, 'NOT_ACCEPTABLE')

  const getJsonOnly = await raw(server.mcpUrl, 'GET', { ...headers, accept: 'application/json' })
  serviceError(t, getJsonOnly, 406, 'NOT_ACCEPTABLE')

  const text = await post(server.mcpUrl, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }), { ...headers, 'content-type': 'text/plain' })
  serviceError(t, text, 415, 'UNSUPPORTED_MEDIA_TYPE')

  const form = await post(server.mcpUrl, 'a=b', { ...headers, 'content-type': 'application/x-www-form-urlencoded' })
  serviceError(t, form, 415, 'UNSUPPORTED_MEDIA_TYPE')

  const charset = await post(server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'ping' }, { ...headers, 'content-type': 'application/json; charset=utf-8' })
  t.equal(charset.status, 200, 'application/json with a charset is accepted')
})

t.test('Origin checks and CORS', async (t) => {
  const allowed = 'https://app.example.com'
  const server = await startServer(t, { config: { allowedOrigins: [allowed] } })
  const auth = { authorization: `Bearer ${server.apiKey}` }

  const evil = await post(server.mcpUrl, initializeMessage(), { ...auth, origin: 'http://evil.example' })
  serviceError(t, evil, 403, 'FORBIDDEN_ORIGIN')
  t.equal(evil.headers['access-control-allow-origin'], undefined, 'no CORS grant for a refused origin')
  t.equal(evil.headers['mcp-session-id'], undefined)

  const evilNoAuth = await post(server.mcpUrl, initializeMessage(), { origin: 'http://evil.example' })
  serviceError(t, evilNoAuth, 403, 'FORBIDDEN_ORIGIN')

  const evilPreflight = await raw(server.mcpUrl, 'OPTIONS', { origin: 'http://evil.example', 'access-control-request-method': 'POST' })
  serviceError(t, evilPreflight, 403, 'FORBIDDEN_ORIGIN')

  const ok = await post(server.mcpUrl, initializeMessage(), { ...auth, origin: allowed })
  t.equal(ok.status, 200)
  t.match(ok.headers['mcp-session-id'], UUID)
  t.equal(ok.headers['access-control-allow-origin'], allowed)
  const exposed = String(ok.headers['access-control-expose-headers']).split(',').map((s) => s.trim().toLowerCase())
  t.ok(exposed.includes('mcp-session-id'), 'Mcp-Session-Id is exposed')
  t.ok(exposed.includes('www-authenticate'), 'WWW-Authenticate is exposed')

  const refusedButAllowedOrigin = await post(server.mcpUrl, initializeMessage(), { origin: allowed })
  serviceError(t, refusedButAllowedOrigin, 401, 'INVALID_TOKEN')
  t.equal(refusedButAllowedOrigin.headers['access-control-allow-origin'], allowed, 'an allowed origin can read the 401')

  const self = await post(server.mcpUrl, initializeMessage(), { ...auth, origin: new URL(server.url).origin })
  t.equal(self.status, 200, 'the base origin is allowed')

  const preflight = await raw(server.mcpUrl, 'OPTIONS', {
    origin: allowed,
    'access-control-request-method': 'POST',
    'access-control-request-headers': 'authorization, content-type, mcp-session-id',
  })
  t.equal(preflight.status, 204)
  t.equal(preflight.text, '')
  t.equal(preflight.headers['access-control-allow-origin'], allowed)
  t.match(String(preflight.headers['access-control-allow-methods']), /POST/)
  t.match(String(preflight.headers['access-control-allow-methods']), /DELETE/)
  const allowedHeaders = String(preflight.headers['access-control-allow-headers']).toLowerCase()
  for (const h of ['authorization', 'content-type', 'mcp-session-id', 'mcp-protocol-version']) t.ok(allowedHeaders.includes(h), `preflight allows ${h}`)
})

t.test('MCP-Protocol-Version header', async (t) => {
  const server = await startServer(t)
  const auth = { authorization: `Bearer ${server.apiKey}` }

  const initBad = await post(server.mcpUrl, initializeMessage('2025-11-25'), { ...auth, 'mcp-protocol-version': '1999-01-01' })
  serviceError(t, initBad, 400, 'UNSUPPORTED_PROTOCOL_VERSION')
  t.equal(initBad.headers['mcp-session-id'], undefined)

  const { headers, sessionId } = await openSession(server.mcpUrl, server.apiKey, '2025-11-25')
  const ping = { jsonrpc: '2.0', id: 1, method: 'ping' }

  const unsupported = await post(server.mcpUrl, ping, { ...headers, 'mcp-protocol-version': '1999-01-01' })
  serviceError(t, unsupported, 400, 'UNSUPPORTED_PROTOCOL_VERSION')

  const other = await post(server.mcpUrl, ping, { ...headers, 'mcp-protocol-version': '2025-06-18' })
  serviceError(t, other, 400, 'UNSUPPORTED_PROTOCOL_VERSION')

  const getOther = await raw(server.mcpUrl, 'GET', { ...headers, accept: 'text/event-stream', 'mcp-protocol-version': '2025-03-26' })
  serviceError(t, getOther, 400, 'UNSUPPORTED_PROTOCOL_VERSION')

  const missing = await post(server.mcpUrl, ping, { authorization: headers.authorization!, 'mcp-session-id': sessionId })
  t.equal(missing.status, 200, 'a missing header means the session revision')
  t.strictSame(missing.json, { jsonrpc: '2.0', id: 1, result: {} })

  const same = await post(server.mcpUrl, ping, headers)
  t.equal(same.status, 200)
})

t.test('JSON-RPC errors', async (t) => {
  const server = await startServer(t)
  const { headers } = await openSession(server.mcpUrl, server.apiKey, '2025-11-25')

  for (const body of ['{', '{"jsonrpc":"2.0","id":1,"method":"ping"', 'not json at all', '']) {
    const res = await post(server.mcpUrl, body, headers)
    rpcError(t, res, 400, null, -32700)
    t.equal(res.json.error.data.code, 'PARSE_ERROR')
  }

  for (const body of [{ foo: 1 }, { jsonrpc: '1.0', id: 3, method: 'ping' }, { jsonrpc: '2.0', id: 4 }, 42, 'text', null, []]) {
    const res = await post(server.mcpUrl, JSON.stringify(body), headers)
    rpcError(t, res, 400, null, -32600)
    t.equal(res.json.error.data.code, 'INVALID_REQUEST', `${JSON.stringify(body)}: INVALID_REQUEST`)
  }

  const unknownMethod = await post(server.mcpUrl, { jsonrpc: '2.0', id: 'm-1', method: 'does/not/exist', params: {} }, headers)
  rpcError(t, unknownMethod, 200, 'm-1', -32601)
  t.equal(unknownMethod.json.error.data.code, 'METHOD_NOT_FOUND')

  const noName = await post(server.mcpUrl, { jsonrpc: '2.0', id: 5, method: 'tools/call', params: { arguments: {} } }, headers)
  rpcError(t, noName, 200, 5, -32602)
  t.equal(noName.json.error.data.code, 'INVALID_PARAMS')

  const badLevel = await post(server.mcpUrl, { jsonrpc: '2.0', id: 6, method: 'logging/setLevel', params: { level: 'loud' } }, headers)
  rpcError(t, badLevel, 200, 6, -32602)

  const unknownTool = await post(server.mcpUrl, callTool('service_does_not_exist', {}, 7), headers)
  rpcError(t, unknownTool, 200, 7, -32602)
  t.match(unknownTool.json.error.message, /service_does_not_exist/)

  const stillUsable = await post(server.mcpUrl, callTool('service_whoami', {}, 8), headers)
  t.equal(stillUsable.status, 200)
  t.equal(stillUsable.json.result.isError, false, 'the session survives protocol errors')
})

t.test('session id errors', async (t) => {
  const server = await startServer(t)
  const auth = { authorization: `Bearer ${server.apiKey}` }
  const ping = { jsonrpc: '2.0', id: 1, method: 'ping' }
  serviceError(t, await post(server.mcpUrl, ping, auth), 404, 'SESSION_NOT_FOUND')
  serviceError(t, await post(server.mcpUrl, ping, { ...auth, 'mcp-session-id': '00000000-0000-4000-8000-000000000000' }), 404, 'SESSION_NOT_FOUND')
  serviceError(t, await raw(server.mcpUrl, 'DELETE', auth), 404, 'SESSION_NOT_FOUND')
  serviceError(t, await raw(server.mcpUrl, 'GET', { ...auth, accept: 'text/event-stream', 'mcp-session-id': 'nope' }), 404, 'SESSION_NOT_FOUND')
})

t.test('batches', async (t) => {
  const server = await startServer(t)

  t.test('a 2025-03-26 session accepts a batch and answers in order', async (t) => {
    const { headers } = await openSession(server.mcpUrl, server.apiKey, '2025-03-26')
    const res = await post(server.mcpUrl, [
      { jsonrpc: '2.0', id: 'first', method: 'tools/call', params: { name: 'service_whoami', arguments: {} } },
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { jsonrpc: '2.0', id: 2, method: 'ping' },
    ], headers)
    t.equal(res.status, 200)
    t.match(String(res.headers['content-type']), /^application\/json/)
    t.ok(Array.isArray(res.json), 'one JSON array')
    t.equal(res.json.length, 2, 'two responses: the notification gets none')
    t.strictSame(res.json.map((r: { id: unknown }) => r.id), ['first', 2], 'responses in request order')
    t.equal(res.json[0].result.isError, false)
    t.equal(JSON.parse(res.json[0].result.content[0].text).role, 'owner')
    t.strictSame(res.json[1], { jsonrpc: '2.0', id: 2, result: {} })

    const mixed = await post(server.mcpUrl, [{ jsonrpc: '2.0', id: 3, method: 'ping' }, { foo: 1 }, { jsonrpc: '2.0', id: 4, method: 'nope' }], headers)
    t.equal(mixed.status, 200)
    t.equal(mixed.json.length, 3)
    t.strictSame(mixed.json[0], { jsonrpc: '2.0', id: 3, result: {} })
    t.equal(mixed.json[1].id, null)
    t.equal(mixed.json[1].error.code, -32600)
    t.equal(mixed.json[2].id, 4)
    t.equal(mixed.json[2].error.code, -32601)

    const onlyNotifications = await post(server.mcpUrl, [{ jsonrpc: '2.0', method: 'notifications/initialized' }, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 9 } }], headers)
    t.equal(onlyNotifications.status, 202)
    t.equal(onlyNotifications.text, '')

    const empty = await post(server.mcpUrl, [], headers)
    rpcError(t, empty, 400, null, -32600)

    const withInit = await post(server.mcpUrl, [initializeMessage('2025-03-26'), { jsonrpc: '2.0', id: 5, method: 'ping' }], headers)
    rpcError(t, withInit, 400, null, -32600)
  })

  t.test('a batch is refused in a 2025-06-18 session', async (t) => {
    const { headers } = await openSession(server.mcpUrl, server.apiKey, '2025-06-18')
    const res = await post(server.mcpUrl, [{ jsonrpc: '2.0', id: 1, method: 'ping' }, { jsonrpc: '2.0', id: 2, method: 'ping' }], headers)
    rpcError(t, res, 400, null, -32600)
    const single = await post(server.mcpUrl, { jsonrpc: '2.0', id: 3, method: 'ping' }, headers)
    t.equal(single.status, 200, 'single messages still work')
  })

  t.test('a batch is refused in a 2025-11-25 session', async (t) => {
    const { headers } = await openSession(server.mcpUrl, server.apiKey, '2025-11-25')
    const res = await post(server.mcpUrl, [{ jsonrpc: '2.0', id: 1, method: 'ping' }], headers)
    rpcError(t, res, 400, null, -32600)
  })

  t.test('a batch containing initialize is refused without a session', async (t) => {
    const res = await post(server.mcpUrl, [initializeMessage('2025-03-26')], { authorization: `Bearer ${server.apiKey}` })
    rpcError(t, res, 400, null, -32600)
    t.equal(res.headers['mcp-session-id'], undefined, 'no session is created')
  })
})

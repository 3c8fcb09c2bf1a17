import { readdirSync, readFileSync } from 'node:fs'
import { connect } from 'node:net'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { request as undiciRequest } from 'undici'
import { builtinTools, createServer, defineTool } from '../../src/index.js'
import { ToolRegistry } from '../../src/plugins/tools/registry.js'
import { SERVER_INSTRUCTIONS, SERVER_NAME, SERVER_TITLE, SERVER_VERSION } from '../../src/version.js'
import { openSession, post, readReply, type RpcReply } from '../helpers/mcp.js'
import {
  CLIENT_CAPABILITIES_KEY,
  CLIENT_INFO_KEY,
  ELICITING,
  LOG_LEVEL_KEY,
  MODERN,
  modernLive,
  modernPost,
  modernRequest,
  PROTOCOL_VERSION_KEY,
  rawPost,
  SERVER_INFO_KEY,
  SUBSCRIPTION_ID_KEY,
  TASKS_EXTENSION,
  WITH_TASKS,
  type ModernOptions,
} from '../helpers/modern.js'
import { ROOT } from '../helpers/root.js'
import { messagesOf, sleep } from '../helpers/stream.js'
import { startServer, tempDatabase } from '../helpers/server.js'

/**
 * The 2026-07-28 front door over a real socket: the era routing table (classify.ts), every step of the modern
 * validation ladder (modern.ts) in its order, Mcp-Param-* headers of a tool's x-mcp-header properties, the result
 * fields, CORS and the entry checks. Every error is checked for its HTTP status, JSON-RPC code, data.code and id echo.
 */

const ORIGIN = 'https://app.example.com'
const LIST_TTL_MS = 1234
const DISCOVER_TTL_MS = 4321

// ---------------------------------------------------------------------------------------------------------------
// Tools of this file: one that mirrors arguments into Mcp-Param-* headers, a quick long-running one (tasks), and
// one that asks for a confirmation (input_required).

const PARAMS_SCHEMA = {
  type: 'object',
  properties: {
    region: { type: 'string', 'x-mcp-header': 'Region' },
    count: { type: 'integer', 'x-mcp-header': 'Count' },
    dryRun: { type: 'boolean', 'x-mcp-header': 'Dry-Run' },
    target: { type: 'object', properties: { zone: { type: 'string', 'x-mcp-header': 'Zone' } }, additionalProperties: false },
    note: { type: 'string' },
  },
  additionalProperties: false,
}

let paramsRuns = 0
const paramsTool = defineTool<Record<string, unknown>, { args: Record<string, unknown> }>({
  name: 'test_params',
  title: 'Param headers',
  description: 'Echoes its arguments; some are mirrored into Mcp-Param-* headers.',
  inputSchema: PARAMS_SCHEMA,
  scope: 'mcp:read',
  role: 'viewer',
  annotations: { readOnlyHint: true },
  handler: (args) => {
    paramsRuns++
    return { args }
  },
})

const taskTool = defineTool<Record<string, unknown>, { done: boolean }>({
  name: 'test_task',
  title: 'Quick long-running tool',
  description: 'Long-running in name only: ends after a few milliseconds.',
  inputSchema: { type: 'object', properties: { ms: { type: 'integer' } }, additionalProperties: false },
  scope: 'mcp:read',
  role: 'viewer',
  longRunning: true,
  handler: async (args, ctx) => {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, typeof args.ms === 'number' ? args.ms : 20)
      ctx.signal.addEventListener('abort', () => {
        clearTimeout(timer)
        resolve()
      }, { once: true })
    })
    return { done: true }
  },
})

const confirmTool = defineTool<Record<string, unknown>, { confirmed: boolean }>({
  name: 'test_confirm',
  title: 'Confirmed tool',
  description: 'Asks for a confirmation, then does nothing.',
  inputSchema: { type: 'object', properties: {}, additionalProperties: false },
  scope: 'mcp:write',
  role: 'viewer',
  confirm: true,
  handler: async (_args, ctx) => {
    await ctx.confirm('Do nothing at all?')
    return { confirmed: true }
  },
})

const TOOLS = [...builtinTools, paramsTool, taskTool, confirmTool]

const server = await startServer(t, {
  config: { allowedOrigins: [ORIGIN], pageSize: 5, listTtlMs: LIST_TTL_MS, discoverTtlMs: DISCOVER_TTL_MS, taskPollIntervalMs: 50 },
  tools: TOOLS,
})
const KEY = server.apiKey
const URL_ = server.mcpUrl

// ---------------------------------------------------------------------------------------------------------------
// Helpers

let counter = 0
/** Ids alternate between strings and numbers, all distinct, so an echo cannot be a coincidence. */
function nextId(): number | string {
  counter++
  return counter % 2 === 0 ? 1000 + counter : `req-${counter}`
}

async function send(method: string, params: Record<string, unknown> = {}, options: ModernOptions = {}): Promise<{ reply: RpcReply; id: number | string }> {
  const id = options.id ?? nextId()
  const reply = await modernPost(URL_, KEY, method, params, { ...options, id })
  return { reply, id }
}

/** A conforming request, then `mutate` breaks one part of its body or headers before it is sent. */
async function sendBroken(
  method: string,
  params: Record<string, unknown>,
  mutate: (body: any, headers: Record<string, string>) => void,
  options: ModernOptions = {},
): Promise<{ reply: RpcReply; id: number | string }> {
  const id = options.id ?? nextId()
  const { body, headers } = modernRequest(KEY, method, params, { ...options, id })
  mutate(body, headers)
  return { reply: await rawPost(URL_, body, headers), id }
}

function noSessionHeader(t: Test, reply: RpcReply, label: string): void {
  t.equal(reply.headers['mcp-session-id'], undefined, `${label}: no Mcp-Session-Id on a modern response`)
}

/** A JSON-RPC error answer: status, code, data.code, the id echoed, no result, no session header. */
function rpcError(t: Test, reply: RpcReply, status: number, id: unknown, code: number, dataCode: string, label: string): any {
  t.equal(reply.status, status, `${label}: HTTP ${status}`)
  t.match(String(reply.headers['content-type']), /^application\/json/, `${label}: JSON`)
  t.equal(reply.json?.jsonrpc, '2.0', `${label}: JSON-RPC 2.0`)
  t.strictSame(reply.json?.id, id, `${label}: echoes the request id`)
  t.equal(reply.json?.error?.code, code, `${label}: JSON-RPC ${code}`)
  t.equal(reply.json?.error?.data?.code, dataCode, `${label}: data.code ${dataCode}`)
  t.type(reply.json?.error?.message, 'string')
  t.notOk(reply.json && 'result' in reply.json, `${label}: no result beside the error`)
  noSessionHeader(t, reply, label)
  return reply.json?.error
}

/** A successful JSON answer; returns the result. */
function okResult(t: Test, reply: RpcReply, id: unknown, label: string): any {
  t.equal(reply.status, 200, `${label}: HTTP 200`)
  t.strictSame(reply.json?.id, id, `${label}: id echoed`)
  t.notOk(reply.json && 'error' in reply.json, `${label}: no error${reply.json?.error ? `: ${JSON.stringify(reply.json.error)}` : ''}`)
  t.type(reply.json?.result?.resultType, 'string', `${label}: resultType`)
  noSessionHeader(t, reply, label)
  return reply.json?.result
}

/** A service error body `{"error":{code,message,details,action}}`. */
function serviceError(t: Test, reply: RpcReply, status: number, code: string, label: string): void {
  t.equal(reply.status, status, `${label}: HTTP ${status}`)
  t.strictSame(Object.keys(reply.json?.error ?? {}).sort(), ['action', 'code', 'details', 'message'], `${label}: service error shape`)
  t.equal(reply.json?.error?.code, code, `${label}: ${code}`)
}

function toolData(result: any): any {
  return JSON.parse(result.content[0].text)
}

interface RawResponse {
  status: number
  headers: Record<string, string>
  body: string
}

/**
 * One HTTP/1.1 request written byte for byte on a socket (header names, spacing and casing exactly as given), for what
 * an HTTP client library would normalise.
 */
function rawHttp(url: string, headerLines: string[], body: string): Promise<RawResponse> {
  const u = new URL(url)
  return new Promise((resolve, reject) => {
    const socket = connect(Number(u.port), u.hostname)
    let data = ''
    socket.setEncoding('latin1')
    socket.setTimeout(5000, () => socket.destroy(new Error('raw request timed out')))
    socket.on('data', (chunk: string) => (data += chunk))
    socket.on('error', reject)
    socket.on('end', () => {
      const split = data.indexOf('\r\n\r\n')
      const head = data.slice(0, split).split('\r\n')
      const headers: Record<string, string> = {}
      for (const line of head.slice(1)) {
        const i = line.indexOf(':')
        headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim()
      }
      let rest = data.slice(split + 4)
      if (headers['transfer-encoding'] === 'chunked') {
        let out = ''
        for (;;) {
          const eol = rest.indexOf('\r\n')
          const size = parseInt(rest.slice(0, eol), 16)
          if (!size) break
          out += rest.slice(eol + 2, eol + 2 + size)
          rest = rest.slice(eol + 2 + size + 2)
        }
        rest = out
      }
      resolve({ status: Number(head[0]!.split(' ')[1]), headers, body: Buffer.from(rest, 'latin1').toString('utf8') })
    })
    socket.write(
      `POST ${u.pathname} HTTP/1.1\r\nHost: ${u.host}\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        headerLines.map((l) => `${l}\r\n`).join('') +
        `\r\n${body}`,
    )
  })
}

/** Every tools/list page, following nextCursor. */
async function listAll(t: Test, label: string): Promise<{ pages: any[]; tools: any[] }> {
  const pages: any[] = []
  let cursor: string | undefined
  for (let i = 0; i < 50; i++) {
    const { reply, id } = await send('tools/list', cursor === undefined ? {} : { cursor })
    const result = okResult(t, reply, id, `${label} page ${i + 1}`)
    pages.push(result)
    cursor = result?.nextCursor
    if (cursor === undefined) break
  }
  return { pages, tools: pages.flatMap((p) => p.tools ?? []) }
}

// ===============================================================================================================
// Era routing (classify.ts)

t.test('routing: a modern claim is served (server/discover 200)', async (t) => {
  const { reply, id } = await send('server/discover')
  const result = okResult(t, reply, id, 'server/discover')
  t.same(result.supportedVersions, [MODERN])
})

t.test('routing: initialize with a modern claim → 404 -32601', async (t) => {
  const { reply, id } = await send('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } })
  rpcError(t, reply, 404, id, -32601, 'METHOD_NOT_FOUND', 'initialize + claim')
})

t.test('routing: initialize without a claim but MCP-Protocol-Version 2026-07-28 → 400 -32020', async (t) => {
  const body = { jsonrpc: '2.0', id: 'init-7', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } } }
  const reply = await post(URL_, body, { authorization: `Bearer ${KEY}`, 'mcp-protocol-version': MODERN })
  const error = rpcError(t, reply, 400, 'init-7', -32020, 'HEADER_MISMATCH', 'initialize + modern header')
  t.same(error.data.details, { header: 'MCP-Protocol-Version', value: MODERN })
  // Without the header, the same body is the legacy handshake.
  const legacy = await post(URL_, body, { authorization: `Bearer ${KEY}` })
  t.equal(legacy.status, 200, 'legacy initialize')
  t.equal(legacy.json.result.protocolVersion, '2025-11-25')
  t.type(legacy.headers['mcp-session-id'], 'string', 'a legacy session was created')
})

t.test('routing: no claim + header 2026-07-28 → 400 -32602 naming the missing _meta', async (t) => {
  const headers = { authorization: `Bearer ${KEY}`, 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/list' }
  const noMeta = await post(URL_, { jsonrpc: '2.0', id: 31, method: 'tools/list', params: {} }, headers)
  const e1 = rpcError(t, noMeta, 400, 31, -32602, 'INVALID_PARAMS', 'params: {}')
  t.same(e1.data.details, { missing: ['params._meta'] }, 'names params._meta')
  const noParams = await post(URL_, { jsonrpc: '2.0', id: 'np', method: 'tools/list' }, headers)
  t.same(rpcError(t, noParams, 400, 'np', -32602, 'INVALID_PARAMS', 'no params').data.details, { missing: ['params._meta'] })
  const metaNoVersion = await post(URL_, { jsonrpc: '2.0', id: 32, method: 'tools/list', params: { _meta: { [CLIENT_CAPABILITIES_KEY]: {} } } }, headers)
  const e2 = rpcError(t, metaNoVersion, 400, 32, -32602, 'INVALID_PARAMS', '_meta without protocolVersion')
  t.same(e2.data.details, { missing: [`params._meta["${PROTOCOL_VERSION_KEY}"]`] }, 'names the protocolVersion key')
  const future = await post(URL_, { jsonrpc: '2.0', id: 33, method: 'tools/list', params: {} }, { ...headers, 'mcp-protocol-version': '2027-01-01' })
  rpcError(t, future, 400, 33, -32602, 'INVALID_PARAMS', 'future-date header')
})

t.test('routing: no claim + legacy or absent header → legacy session path', async (t) => {
  for (const header of [undefined, '2025-11-25', '2025-06-18', '2025-03-26']) {
    const reply = await post(URL_, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }, { authorization: `Bearer ${KEY}`, ...(header ? { 'mcp-protocol-version': header } : {}) })
    serviceError(t, reply, 404, 'SESSION_NOT_FOUND', `tools/list, header ${header ?? 'absent'}`)
  }
  // _meta without the claim (a legacy progressToken) stays legacy too.
  const meta = await post(URL_, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'service_whoami', _meta: { progressToken: 1 } } }, { authorization: `Bearer ${KEY}` })
  serviceError(t, meta, 404, 'SESSION_NOT_FOUND', '_meta without the claim')
})

t.test('routing: a posted JSON-RPC response is legacy, even with a modern header', async (t) => {
  for (const header of [undefined, MODERN]) {
    const reply = await post(URL_, { jsonrpc: '2.0', id: 5, result: { action: 'accept', content: { confirm: true } } }, { authorization: `Bearer ${KEY}`, ...(header ? { 'mcp-protocol-version': header } : {}) })
    serviceError(t, reply, 404, 'SESSION_NOT_FOUND', `response, header ${header ?? 'absent'}`)
  }
})

t.test('routing: batches — any modern element → 400 -32600; legacy batches stay legacy', async (t) => {
  const modernElement = modernRequest(KEY, 'tools/list', {}, { id: 2 }).body
  const mixed = await post(URL_, [{ jsonrpc: '2.0', id: 1, method: 'tools/list' }, modernElement], { authorization: `Bearer ${KEY}`, 'mcp-protocol-version': MODERN })
  rpcError(t, mixed, 400, null, -32600, 'INVALID_REQUEST', 'batch with a modern element')
  const allModern = await post(URL_, [modernElement], { authorization: `Bearer ${KEY}` })
  rpcError(t, allModern, 400, null, -32600, 'INVALID_REQUEST', 'batch of one modern element')
  const legacy = await post(URL_, [{ jsonrpc: '2.0', id: 1, method: 'tools/list' }, { jsonrpc: '2.0', id: 2, method: 'ping' }], { authorization: `Bearer ${KEY}` })
  serviceError(t, legacy, 404, 'SESSION_NOT_FOUND', 'legacy batch without a session')
  // In a 2025-03-26 session, the legacy batch is served.
  const session = await openSession(URL_, KEY, '2025-03-26')
  const served = await post(URL_, [{ jsonrpc: '2.0', id: 1, method: 'ping' }, { jsonrpc: '2.0', id: 2, method: 'tools/list' }], session.headers)
  t.equal(served.status, 200)
  const answers = served.json ?? served.messages
  t.same(answers.map((a: any) => a.id).sort(), [1, 2], 'both answered in the session')
})

t.test('routing: GET and DELETE /mcp stay legacy', async (t) => {
  const get = await readReply(await undiciRequest(URL_, { method: 'GET', headers: { authorization: `Bearer ${KEY}`, accept: 'text/event-stream', 'mcp-protocol-version': MODERN } }))
  serviceError(t, get, 404, 'SESSION_NOT_FOUND', 'GET without session (modern header)')
  const del = await readReply(await undiciRequest(URL_, { method: 'DELETE', headers: { authorization: `Bearer ${KEY}`, 'mcp-protocol-version': MODERN } }))
  serviceError(t, del, 404, 'SESSION_NOT_FOUND', 'DELETE without session')
  // With a real session, DELETE ends it: the legacy operation, untouched.
  const session = await openSession(URL_, KEY)
  const ended = await readReply(await undiciRequest(URL_, { method: 'DELETE', headers: session.headers }))
  t.ok(ended.status === 200 || ended.status === 204, `DELETE with a session: ${ended.status}`)
})

t.test('routing: a modern notification POST → 202 with an empty body', async (t) => {
  const { body, headers } = modernRequest(KEY, 'notifications/cancelled', { requestId: 1, reason: 'x' })
  delete (body as any).id
  const reply = await rawPost(URL_, body, headers)
  t.equal(reply.status, 202)
  t.equal(reply.text, '', 'empty body')
  noSessionHeader(t, reply, 'notification')
  // A notification with only the header (no claim) is modern too.
  const bare = await post(URL_, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } }, { authorization: `Bearer ${KEY}`, 'mcp-protocol-version': MODERN })
  t.equal(bare.status, 202)
  t.equal(bare.text, '')
})

t.test('routing: modern responses never carry Mcp-Session-Id, even when the request sends one', async (t) => {
  const session = await openSession(URL_, KEY)
  const sid = session.sessionId
  const ok = await send('tools/list', {}, { headers: { 'mcp-session-id': sid } })
  okResult(t, ok.reply, ok.id, 'success with a session id sent')
  const err = await send('ping', {}, { headers: { 'mcp-session-id': sid } })
  rpcError(t, err.reply, 404, err.id, -32601, 'METHOD_NOT_FOUND', 'error with a session id sent')
  const sse = await send('server/discover', {}, { headers: { 'mcp-session-id': sid, accept: 'text/event-stream' } })
  t.equal(sse.reply.status, 200)
  noSessionHeader(t, sse.reply, 'SSE answer')
  const garbage = await send('server/discover', {}, { headers: { 'mcp-session-id': 'not-a-session' } })
  okResult(t, garbage.reply, garbage.id, 'unknown session id is ignored')
  // The legacy session is unaffected by the modern requests.
  const legacy = await post(URL_, { jsonrpc: '2.0', id: 9, method: 'ping' }, session.headers)
  t.equal(legacy.status, 200, 'the session still works')
})

// ===============================================================================================================
// The modern validation ladder (modern.ts), step by step

t.test('ladder: envelope — clientCapabilities missing or not an object → 400 -32602', async (t) => {
  const missing = await sendBroken('tools/list', {}, (body) => delete body.params._meta[CLIENT_CAPABILITIES_KEY])
  const e = rpcError(t, missing.reply, 400, missing.id, -32602, 'INVALID_PARAMS', 'no clientCapabilities')
  t.match(JSON.stringify(e.data), /clientCapabilities/, 'the details name the missing key')
  for (const bad of [null, 'all', [], true]) {
    const r = await sendBroken('tools/list', {}, (body) => (body.params._meta[CLIENT_CAPABILITIES_KEY] = bad))
    rpcError(t, r.reply, 400, r.id, -32602, 'INVALID_PARAMS', `clientCapabilities ${JSON.stringify(bad)}`)
  }
  const badExt = await sendBroken('tools/list', {}, (body) => (body.params._meta[CLIENT_CAPABILITIES_KEY] = { extensions: { [TASKS_EXTENSION]: true } }))
  rpcError(t, badExt.reply, 400, badExt.id, -32602, 'INVALID_PARAMS', 'an extension declared as true')
  const badVersion = await sendBroken('tools/list', {}, (body) => (body.params._meta[PROTOCOL_VERSION_KEY] = 20260728), { headers: { 'mcp-protocol-version': undefined } })
  rpcError(t, badVersion.reply, 400, badVersion.id, -32602, 'INVALID_PARAMS', 'protocolVersion not a string')
})

t.test('ladder: clientInfo is optional (200); a malformed one is refused', async (t) => {
  const r = await sendBroken('tools/list', {}, (body) => delete body.params._meta[CLIENT_INFO_KEY])
  okResult(t, r.reply, r.id, 'no clientInfo')
  const bad = await sendBroken('tools/list', {}, (body) => (body.params._meta[CLIENT_INFO_KEY] = { name: 'x' }))
  rpcError(t, bad.reply, 400, bad.id, -32602, 'INVALID_PARAMS', 'clientInfo without version')
})

t.test('ladder: logLevel — valid accepted, unknown refused 400 -32602', async (t) => {
  const ok = await send('tools/list', {}, { meta: { [LOG_LEVEL_KEY]: 'debug' } })
  okResult(t, ok.reply, ok.id, 'logLevel debug')
  for (const bad of ['verbose', 'INFO', 3, null]) {
    const r = await send('tools/list', {}, { meta: { [LOG_LEVEL_KEY]: bad } })
    rpcError(t, r.reply, 400, r.id, -32602, 'INVALID_PARAMS', `logLevel ${JSON.stringify(bad)}`)
  }
  const token = await send('tools/list', {}, { meta: { progressToken: 1.5 } })
  rpcError(t, token.reply, 400, token.id, -32602, 'INVALID_PARAMS', 'fractional progressToken')
})

t.test('ladder: header 2026-07-28 with _meta version v999.0.0 → 400 -32020 (mismatch wins over unsupported)', async (t) => {
  const r = await send('tools/list', {}, { meta: { [PROTOCOL_VERSION_KEY]: 'v999.0.0' } })
  const e = rpcError(t, r.reply, 400, r.id, -32020, 'HEADER_MISMATCH', 'v999 under a 2026-07-28 header')
  t.match(e.message, /v999\.0\.0/)
  const legacyMeta = await send('tools/list', {}, { meta: { [PROTOCOL_VERSION_KEY]: '2025-11-25' } })
  rpcError(t, legacyMeta.reply, 400, legacyMeta.id, -32020, 'HEADER_MISMATCH', '2025-11-25 in _meta under a 2026-07-28 header')
})

t.test('ladder: both v999.0.0 → 400 -32022 with data.supported ⊆ discover and data.requested', async (t) => {
  const discover = await send('server/discover')
  const supportedVersions: string[] = okResult(t, discover.reply, discover.id, 'discover').supportedVersions
  const r = await send('tools/list', {}, { meta: { [PROTOCOL_VERSION_KEY]: 'v999.0.0' }, headers: { 'mcp-protocol-version': 'v999.0.0' } })
  const e = rpcError(t, r.reply, 400, r.id, -32022, 'UNSUPPORTED_PROTOCOL_VERSION', 'v999 both')
  t.same(e.data.supported, [MODERN], 'data.supported')
  t.ok(Array.isArray(e.data.supported) && e.data.supported.length > 0 && e.data.supported.every((v: string) => supportedVersions.includes(v)), 'data.supported ⊆ supportedVersions')
  t.equal(e.data.requested, 'v999.0.0', 'data.requested')
  // A future date the server does not serve yet.
  const future = await send('tools/list', {}, { meta: { [PROTOCOL_VERSION_KEY]: '2027-01-01' }, headers: { 'mcp-protocol-version': '2027-01-01' } })
  t.equal(rpcError(t, future.reply, 400, future.id, -32022, 'UNSUPPORTED_PROTOCOL_VERSION', 'future date').data.requested, '2027-01-01')
})

t.test('ladder: a legacy revision in _meta (2025-11-25) → 400 -32022', async (t) => {
  const r = await send('tools/list', {}, { meta: { [PROTOCOL_VERSION_KEY]: '2025-11-25' }, headers: { 'mcp-protocol-version': '2025-11-25' } })
  const e = rpcError(t, r.reply, 400, r.id, -32022, 'UNSUPPORTED_PROTOCOL_VERSION', '2025-11-25 claim')
  t.same(e.data.supported, [MODERN], 'legacy revisions are not listed: they are reached through initialize')
  t.equal(e.data.requested, '2025-11-25')
  const noHeader = await send('tools/list', {}, { meta: { [PROTOCOL_VERSION_KEY]: '2025-06-18' }, headers: { 'mcp-protocol-version': undefined } })
  rpcError(t, noHeader.reply, 400, noHeader.id, -32022, 'UNSUPPORTED_PROTOCOL_VERSION', '2025-06-18 claim, no header')
})

t.test('ladder: MCP-Protocol-Version or Mcp-Method missing → 400 -32020', async (t) => {
  const noVersion = await send('tools/list', {}, { headers: { 'mcp-protocol-version': undefined } })
  t.same(rpcError(t, noVersion.reply, 400, noVersion.id, -32020, 'HEADER_MISMATCH', 'no MCP-Protocol-Version').data.details, { header: 'MCP-Protocol-Version' })
  const noMethod = await send('tools/list', {}, { headers: { 'mcp-method': undefined } })
  t.same(rpcError(t, noMethod.reply, 400, noMethod.id, -32020, 'HEADER_MISMATCH', 'no Mcp-Method').data.details, { header: 'Mcp-Method' })
  const discoverNoMethod = await send('server/discover', {}, { headers: { 'mcp-method': undefined } })
  rpcError(t, discoverNoMethod.reply, 400, discoverNoMethod.id, -32020, 'HEADER_MISMATCH', 'server/discover without Mcp-Method')
})

t.test('ladder: Mcp-Method values are case-sensitive, names are not', async (t) => {
  const upper = await send('tools/list', {}, { headers: { 'mcp-method': 'TOOLS/LIST' } })
  const e = rpcError(t, upper.reply, 400, upper.id, -32020, 'HEADER_MISMATCH', 'Mcp-Method TOOLS/LIST')
  t.same(e.data.details, { header: 'Mcp-Method', body: 'method' })
  const other = await send('tools/list', {}, { headers: { 'mcp-method': 'server/discover' } })
  rpcError(t, other.reply, 400, other.id, -32020, 'HEADER_MISMATCH', 'Mcp-Method of another method')
  // Header names in any case, over undici and byte for byte on a socket.
  for (const name of ['mcp-method', 'MCP-METHOD', 'Mcp-Method', 'mCp-MeThOd']) {
    const { body, headers } = modernRequest(KEY, 'tools/list', {}, { id: `case-${name}` })
    delete headers['mcp-method']
    const reply = await rawPost(URL_, body, { ...headers, [name]: 'tools/list' })
    okResult(t, reply, `case-${name}`, `header name ${name}`)
  }
  const { body } = modernRequest(KEY, 'tools/list', {}, { id: 'raw-case' })
  const raw = await rawHttp(URL_, [
    `AUTHORIZATION: Bearer ${KEY}`,
    'CONTENT-TYPE: application/json',
    'ACCEPT: application/json, text/event-stream',
    `MCP-PROTOCOL-VERSION: ${MODERN}`,
    'MCP-METHOD: tools/list',
  ], JSON.stringify(body))
  t.equal(raw.status, 200, 'upper-case names on the wire')
  t.equal(JSON.parse(raw.body).id, 'raw-case')
  t.equal(JSON.parse(raw.body).result.resultType, 'complete')
})

t.test('ladder: Mcp-Name for tools/call — missing, wrong, OWS, base64, literal prefix', async (t) => {
  const missing = await send('tools/call', { name: 'service_whoami', arguments: {} }, { headers: { 'mcp-name': undefined } })
  t.same(rpcError(t, missing.reply, 400, missing.id, -32020, 'HEADER_MISMATCH', 'no Mcp-Name').data.details, { header: 'Mcp-Name' })
  const wrong = await send('tools/call', { name: 'service_whoami', arguments: {} }, { headers: { 'mcp-name': 'service_apps_list' } })
  t.same(rpcError(t, wrong.reply, 400, wrong.id, -32020, 'HEADER_MISMATCH', 'wrong Mcp-Name').data.details, { header: 'Mcp-Name', body: 'params.name' })
  const upper = await send('tools/call', { name: 'service_whoami', arguments: {} }, { headers: { 'mcp-name': 'SERVICE_WHOAMI' } })
  rpcError(t, upper.reply, 400, upper.id, -32020, 'HEADER_MISMATCH', 'Mcp-Name in another case')

  // Surrounding whitespace (OWS) is not part of the value: written raw on the socket, Node trims it.
  const { body } = modernRequest(KEY, 'tools/call', { name: 'service_whoami', arguments: {} }, { id: 'ows' })
  const common = [`Authorization: Bearer ${KEY}`, 'Content-Type: application/json', 'Accept: application/json, text/event-stream', `MCP-Protocol-Version: ${MODERN}`, 'Mcp-Method: tools/call']
  for (const [label, line] of [['spaces', 'Mcp-Name:   service_whoami   '], ['tabs', 'Mcp-Name:\tservice_whoami\t'], ['no space', 'Mcp-Name:service_whoami']] as const) {
    const raw = await rawHttp(URL_, [...common, line], JSON.stringify(body))
    t.equal(raw.status, 200, `Mcp-Name with ${label} around the value: ${raw.body}`)
    const json = JSON.parse(raw.body)
    t.equal(json.id, 'ows')
    t.equal(json.result?.resultType, 'complete', `${label}: served`)
    t.equal(json.result?.isError, false)
  }
  const inner = await rawHttp(URL_, [...common, 'Mcp-Name: service _whoami'], JSON.stringify(body))
  t.equal(inner.status, 400, 'inner whitespace is part of the value')
  t.equal(JSON.parse(inner.body).error.code, -32020)

  const b64 = Buffer.from('service_whoami').toString('base64')
  t.match(b64, /=$/, 'the test value needs padding')
  const sentinel = await send('tools/call', { name: 'service_whoami', arguments: {} }, { headers: { 'mcp-name': `=?base64?${b64}?=` } })
  t.equal(okResult(t, sentinel.reply, sentinel.id, 'padded base64 sentinel').isError, false)
  const unpadded = await send('tools/call', { name: 'service_whoami', arguments: {} }, { headers: { 'mcp-name': `=?base64?${b64.replace(/=+$/, '')}?=` } })
  rpcError(t, unpadded.reply, 400, unpadded.id, -32020, 'HEADER_MISMATCH', 'unpadded base64')
  const alphabet = await send('tools/call', { name: 'service_whoami', arguments: {} }, { headers: { 'mcp-name': '=?base64?c2Vyd!!!mljZV93aG9hbWk=?=' } })
  rpcError(t, alphabet.reply, 400, alphabet.id, -32020, 'HEADER_MISMATCH', 'non-alphabet base64')
  // Only the prefix: taken literally, so it must equal the body literally (an unknown tool, then: -32602 in-band).
  const literalName = `=?base64?${b64}`
  const literal = await send('tools/call', { name: 'x', arguments: {} }, { headers: { 'mcp-name': literalName } })
  rpcError(t, literal.reply, 400, literal.id, -32020, 'HEADER_MISMATCH', 'prefix-only header is not decoded')
  const literalSame = await send('tools/call', { name: literalName, arguments: {} }, { headers: { 'mcp-name': literalName } })
  const e = rpcError(t, literalSame.reply, 200, literalSame.id, -32602, 'INVALID_PARAMS', 'prefix-only header equal to the body literally: past the headers, to the handler')
  t.match(e.message, /Unknown tool/, 'refused by the handler (unknown tool), not by the header check')
})

t.test('ladder: Mcp-Name for tasks/get mirrors params.taskId', async (t) => {
  const missing = await send('tasks/get', { taskId: 'task-1' }, { capabilities: WITH_TASKS, headers: { 'mcp-name': undefined } })
  rpcError(t, missing.reply, 400, missing.id, -32020, 'HEADER_MISMATCH', 'tasks/get without Mcp-Name')
  const wrong = await send('tasks/get', { taskId: 'task-1' }, { capabilities: WITH_TASKS, headers: { 'mcp-name': 'task-2' } })
  t.same(rpcError(t, wrong.reply, 400, wrong.id, -32020, 'HEADER_MISMATCH', 'tasks/get wrong Mcp-Name').data.details, { header: 'Mcp-Name', body: 'params.taskId' })
  const unknown = await send('tasks/get', { taskId: 'task-1' }, { capabilities: WITH_TASKS })
  rpcError(t, unknown.reply, 200, unknown.id, -32602, 'INVALID_PARAMS', 'unknown task id')
})

// The README says which requests carry Mcp-Name; the method declarations (`mirroredName`) decide. It once named
// tools/call and tasks/* only, while resources/read and prompts/get required it too.
t.test('the documentation names exactly the methods whose Mcp-Name the server requires', async (t) => {
  const required = server.app.rpc.methods('modern').filter((def) => def.mirroredName !== undefined).map((def) => def.method)
  t.ok(required.includes('tools/call'), `the declarations were read (${required.join(', ')})`)
  const pages = ['README.md', ...readdirSync(join(ROOT, 'docs'), { recursive: true, encoding: 'utf8' }).filter((p) => p.endsWith('.md')).map((p) => join('docs', p))]
  // The paragraph (or numbered item) saying `Mcp-Name` (= …): the methods it names are its backticked `a/b` words.
  const paragraphs = pages.flatMap((page) => readFileSync(join(ROOT, page), 'utf8').split(/\n\s*\n|\n(?=\d+\. )/))
  const sentence = paragraphs.filter((p) => p.includes('`Mcp-Name` (='))
  t.equal(sentence.length, 1, 'one paragraph of the README or docs/ says which requests carry Mcp-Name')
  const documented = [...(sentence[0] ?? '').matchAll(/`([a-z]+(?:\/[a-zA-Z]+)+)`/g)].map((m) => m[1]!)
  t.strictSame([...documented].sort(), [...required].sort(), 'the methods it names are those declaring the mirrored name')
})

t.test('ladder: unknown and removed methods → 404 -32601', async (t) => {
  const removed: Array<[string, Record<string, unknown>]> = [
    ['initialize', { protocolVersion: MODERN, capabilities: {}, clientInfo: { name: 'x', version: '1' } }],
    ['ping', {}],
    ['logging/setLevel', { level: 'info' }],
    ['resources/subscribe', { uri: 'x://y' }],
    ['resources/unsubscribe', { uri: 'x://y' }],
    ['tasks/result', { taskId: 'x' }],
    ['tasks/list', {}],
    ['no/such/method', {}],
    ['Tools/List', {}],
  ]
  for (const [method, params] of removed) {
    const r = await send(method, params, { capabilities: WITH_TASKS })
    const e = rpcError(t, r.reply, 404, r.id, -32601, 'METHOD_NOT_FOUND', method)
    t.same(e.data.details, { method }, `${method}: details name the method`)
  }
})

t.test('ladder: tasks/* without the tasks extension → 400 -32021 with requiredCapabilities', async (t) => {
  for (const method of ['tasks/get', 'tasks/cancel']) {
    for (const capabilities of [{}, ELICITING, { extensions: {} }, { extensions: { 'io.modelcontextprotocol/other': {} } }, { experimental: { [TASKS_EXTENSION]: {} } }]) {
      const r = await send(method, { taskId: 'abc' }, { capabilities })
      const e = rpcError(t, r.reply, 400, r.id, -32021, 'MISSING_CLIENT_CAPABILITY', `${method} with ${JSON.stringify(capabilities)}`)
      t.same(e.data.requiredCapabilities, { extensions: { [TASKS_EXTENSION]: {} } }, 'requiredCapabilities is a ClientCapabilities object')
    }
  }
  const update = await send('tasks/update', { taskId: 'abc', inputResponses: {} })
  rpcError(t, update.reply, 400, update.id, -32021, 'MISSING_CLIENT_CAPABILITY', 'tasks/update')
})

t.test('ladder: bad params → 200 -32602; unknown tool → 200 -32602', async (t) => {
  const noName = await send('tools/call', { arguments: {} })
  rpcError(t, noName.reply, 200, noName.id, -32602, 'INVALID_PARAMS', 'tools/call without name')
  const badArgs = await send('tools/call', { name: 'service_whoami', arguments: [] })
  rpcError(t, badArgs.reply, 200, badArgs.id, -32602, 'INVALID_PARAMS', 'arguments as an array')
  const badCursor = await send('tools/list', { cursor: 42 })
  rpcError(t, badCursor.reply, 200, badCursor.id, -32602, 'INVALID_PARAMS', 'cursor not a string')
  const updateNoResponses = await send('tasks/update', { taskId: 'abc' }, { capabilities: WITH_TASKS })
  rpcError(t, updateNoResponses.reply, 200, updateNoResponses.id, -32602, 'INVALID_PARAMS', 'tasks/update without inputResponses')
  const unknown = await send('tools/call', { name: 'no_such_tool', arguments: {} })
  const e = rpcError(t, unknown.reply, 200, unknown.id, -32602, 'INVALID_PARAMS', 'unknown tool')
  t.match(e.message, /no_such_tool/)
  const noTaskId = await send('tasks/get', {}, { capabilities: WITH_TASKS })
  rpcError(t, noTaskId.reply, 200, noTaskId.id, -32602, 'INVALID_PARAMS', 'tasks/get without taskId')
})

t.test('ladder order when a request fails two steps', async (t) => {
  // Mcp-Method mismatch (step 3) before the method's existence (step 6).
  const a = await send('no/such/method', {}, { headers: { 'mcp-method': 'tools/list' } })
  rpcError(t, a.reply, 400, a.id, -32020, 'HEADER_MISMATCH', 'wrong Mcp-Method + unknown method')
  // A missing Mcp-Method (step 5) before the method's existence (step 6).
  const b = await send('no/such/method', {}, { headers: { 'mcp-method': undefined } })
  rpcError(t, b.reply, 400, b.id, -32020, 'HEADER_MISMATCH', 'no Mcp-Method + unknown method')
  // The envelope (step 1) before everything else.
  const c = await sendBroken('no/such/method', {}, (body) => delete body.params._meta[CLIENT_CAPABILITIES_KEY], { headers: { 'mcp-method': 'tools/list' } })
  rpcError(t, c.reply, 400, c.id, -32602, 'INVALID_PARAMS', 'bad envelope + wrong Mcp-Method + unknown method')
  // Unsupported version (step 4) before missing standard headers (step 5).
  const d = await send('tools/list', {}, { meta: { [PROTOCOL_VERSION_KEY]: 'v999.0.0' }, headers: { 'mcp-protocol-version': 'v999.0.0', 'mcp-method': undefined } })
  rpcError(t, d.reply, 400, d.id, -32022, 'UNSUPPORTED_PROTOCOL_VERSION', 'unsupported version + no Mcp-Method')
  // Mcp-Name (step 5) before capabilities (step 7).
  const e = await send('tasks/get', { taskId: 'abc' }, { headers: { 'mcp-name': 'zzz' } })
  rpcError(t, e.reply, 400, e.id, -32020, 'HEADER_MISMATCH', 'wrong Mcp-Name + tasks extension missing')
  // Capabilities (step 7) before params (step 8).
  const f = await send('tasks/get', {})
  rpcError(t, f.reply, 400, f.id, -32021, 'MISSING_CLIENT_CAPABILITY', 'tasks extension missing + no taskId')
  // Mcp-Name (step 5) before the handler's unknown tool (-32602).
  const g = await send('tools/call', { name: 'no_such_tool', arguments: {} }, { headers: { 'mcp-name': undefined } })
  rpcError(t, g.reply, 400, g.id, -32020, 'HEADER_MISMATCH', 'no Mcp-Name + unknown tool')
  // Method existence (step 6) before params (step 8).
  const h = await send('ping', { bogus: [1, 2, 3] })
  rpcError(t, h.reply, 404, h.id, -32601, 'METHOD_NOT_FOUND', 'removed method with odd params')
  // Params (step 8) before Mcp-Param-* (step 9): a bad params object is -32602 even when a param header is wrong.
  const i = await send('tools/call', { name: 'test_params', arguments: { region: 'eu' }, requestState: 5 }, { headers: { 'mcp-param-region': 'us' } })
  rpcError(t, i.reply, 200, i.id, -32602, 'INVALID_PARAMS', 'bad params + wrong Mcp-Param-Region')
  // Mcp-Param-* (step 9) before the run (the tool's own argument validation never happens).
  const runs = paramsRuns
  const j = await send('tools/call', { name: 'test_params', arguments: { region: 'eu', count: 'not-an-integer' } }, { headers: { 'mcp-param-region': 'us', 'mcp-param-count': 'not-an-integer' } })
  rpcError(t, j.reply, 400, j.id, -32020, 'HEADER_MISMATCH', 'wrong Mcp-Param-Region + invalid arguments')
  t.equal(paramsRuns, runs, 'the tool did not run')
})

// ===============================================================================================================
// Mcp-Param-* headers of a tool's x-mcp-header properties

function callParams(args: Record<string, unknown>, headers: Record<string, string | undefined>) {
  return send('tools/call', { name: 'test_params', arguments: args }, { headers })
}

t.test('Mcp-Param-*: headers present and equal → the tool runs', async (t) => {
  const before = paramsRuns
  const args = { region: 'eu-west-1', count: 42, dryRun: true, target: { zone: 'b' }, note: 'n' }
  const r = await callParams(args, { 'mcp-param-region': 'eu-west-1', 'mcp-param-count': '42', 'mcp-param-dry-run': 'true', 'mcp-param-zone': 'b' })
  const result = okResult(t, r.reply, r.id, 'all four headers')
  t.equal(result.resultType, 'complete')
  t.equal(result.isError, false)
  t.same(toolData(result), { args }, 'the tool saw the arguments')
  t.equal(paramsRuns, before + 1, 'ran once')
  // Header names in any case.
  const upper = await rawPost(URL_, modernRequest(KEY, 'tools/call', { name: 'test_params', arguments: { region: 'eu' } }, { id: 'pcase' }).body, {
    ...modernRequest(KEY, 'tools/call', { name: 'test_params', arguments: { region: 'eu' } }).headers,
    'MCP-PARAM-REGION': 'eu',
  })
  okResult(t, upper, 'pcase', 'MCP-PARAM-REGION')
})

t.test('Mcp-Param-*: missing while the body has the value → 400 -32020', async (t) => {
  const cases: Array<[string, Record<string, unknown>, Record<string, string>, string]> = [
    ['string', { region: 'eu' }, {}, 'Mcp-Param-Region'],
    ['integer', { count: 7 }, {}, 'Mcp-Param-Count'],
    ['integer zero', { count: 0 }, {}, 'Mcp-Param-Count'],
    ['boolean false', { dryRun: false }, {}, 'Mcp-Param-Dry-Run'],
    ['nested', { target: { zone: 'a' } }, {}, 'Mcp-Param-Zone'],
    ['one of several', { region: 'eu', count: 1 }, { 'mcp-param-region': 'eu' }, 'Mcp-Param-Count'],
  ]
  const before = paramsRuns
  for (const [what, args, headers, header] of cases) {
    const r = await callParams(args, headers)
    const e = rpcError(t, r.reply, 400, r.id, -32020, 'HEADER_MISMATCH', `missing (${what})`)
    t.equal(e.data.details.header, header, `${what}: names ${header}`)
  }
  t.equal(paramsRuns, before, 'nothing ran')
})

t.test('Mcp-Param-*: body value null or absent → no header expected', async (t) => {
  const absent = await callParams({ note: 'only a note' }, {})
  const result = okResult(t, absent.reply, absent.id, 'all absent')
  t.equal(result.isError, false, 'ran')
  t.same(toolData(result), { args: { note: 'only a note' } })
  const noArgs = await send('tools/call', { name: 'test_params' })
  t.equal(okResult(t, noArgs.reply, noArgs.id, 'no arguments at all').isError, false)
  const emptyTarget = await callParams({ target: {} }, {})
  t.equal(okResult(t, emptyTarget.reply, emptyTarget.id, 'nested parent without the value').isError, false)
  // null: the header check lets it through; the tool's schema then refuses null (a tool result, not -32020).
  const nul = await callParams({ region: null }, {})
  const nullResult = okResult(t, nul.reply, nul.id, 'region null')
  t.equal(nullResult.isError, true)
  t.equal(toolData(nullResult).code, 'INVALID_ARGUMENTS', 'refused by argument validation, not by the headers')
  // A header for an absent argument disagrees with the body (a conforming client omits it): refused, nothing runs.
  const extra = await callParams({}, { 'mcp-param-region': 'eu' })
  t.equal(extra.reply.status, 400, 'header without the argument: 400')
  t.equal(extra.reply.json?.error?.code, -32020)
  t.equal(extra.reply.json?.error?.data?.details?.header, 'Mcp-Param-Region')
})

t.test('Mcp-Param-*: header differs → 400 -32020', async (t) => {
  const cases: Array<[string, Record<string, unknown>, Record<string, string>, string]> = [
    ['string', { region: 'eu' }, { 'mcp-param-region': 'us' }, 'Mcp-Param-Region'],
    ['string case', { region: 'eu' }, { 'mcp-param-region': 'EU' }, 'Mcp-Param-Region'],
    ['integer', { count: 42 }, { 'mcp-param-count': '43' }, 'Mcp-Param-Count'],
    ['integer fraction', { count: 42 }, { 'mcp-param-count': '42.5' }, 'Mcp-Param-Count'],
    ['integer word', { count: 42 }, { 'mcp-param-count': 'forty-two' }, 'Mcp-Param-Count'],
    ['boolean', { dryRun: true }, { 'mcp-param-dry-run': 'false' }, 'Mcp-Param-Dry-Run'],
    ['boolean case', { dryRun: true }, { 'mcp-param-dry-run': 'TRUE' }, 'Mcp-Param-Dry-Run'],
    ['nested', { target: { zone: 'a' } }, { 'mcp-param-zone': 'b' }, 'Mcp-Param-Zone'],
  ]
  for (const [what, args, headers, header] of cases) {
    const r = await callParams(args, headers)
    const e = rpcError(t, r.reply, 400, r.id, -32020, 'HEADER_MISMATCH', `differs (${what})`)
    t.equal(e.data.details.header, header)
  }
})

t.test('Mcp-Param-*: integers compare numerically, booleans as true/false', async (t) => {
  for (const value of ['42.0', '42', '042', '42.000']) {
    const r = await callParams({ count: 42 }, { 'mcp-param-count': value })
    const result = okResult(t, r.reply, r.id, `Mcp-Param-Count: ${value}`)
    t.equal(result.isError, false, `${value} matches 42`)
  }
  const neg = await callParams({ count: -3 }, { 'mcp-param-count': '-3' })
  t.equal(okResult(t, neg.reply, neg.id, 'negative').isError, false)
  const f = await callParams({ dryRun: false }, { 'mcp-param-dry-run': 'false' })
  t.equal(okResult(t, f.reply, f.id, 'false').isError, false)
})

t.test('Mcp-Param-*: base64 sentinel decoded, malformed refused, prefix-only literal', async (t) => {
  const hello = await callParams({ region: 'Hello' }, { 'mcp-param-region': '=?base64?SGVsbG8=?=' })
  const result = okResult(t, hello.reply, hello.id, '=?base64?SGVsbG8=?=')
  t.equal(result.isError, false)
  t.same(toolData(result), { args: { region: 'Hello' } })
  const utf8 = await callParams({ region: 'Zürich, 世界' }, { 'mcp-param-region': `=?base64?${Buffer.from('Zürich, 世界').toString('base64')}?=` })
  t.equal(okResult(t, utf8.reply, utf8.id, 'UTF-8 through base64').isError, false)
  const unpadded = await callParams({ region: 'Hello' }, { 'mcp-param-region': '=?base64?SGVsbG8?=' })
  rpcError(t, unpadded.reply, 400, unpadded.id, -32020, 'HEADER_MISMATCH', 'unpadded =?base64?SGVsbG8?=')
  const alphabet = await callParams({ region: 'Hello' }, { 'mcp-param-region': '=?base64?SGVs!!!bG8=?=' })
  rpcError(t, alphabet.reply, 400, alphabet.id, -32020, 'HEADER_MISMATCH', 'non-alphabet =?base64?SGVs!!!bG8=?=')
  const literal = await callParams({ region: '=?base64?SGVsbG8=' }, { 'mcp-param-region': '=?base64?SGVsbG8=' })
  const lit = okResult(t, literal.reply, literal.id, 'literal =?base64?SGVsbG8=')
  t.equal(lit.isError, false)
  t.same(toolData(lit), { args: { region: '=?base64?SGVsbG8=' } })
  const notDecoded = await callParams({ region: 'Hello' }, { 'mcp-param-region': '=?base64?SGVsbG8=' })
  rpcError(t, notDecoded.reply, 400, notDecoded.id, -32020, 'HEADER_MISMATCH', 'prefix-only value is not decoded')
  const integer = await callParams({ count: 42 }, { 'mcp-param-count': `=?base64?${Buffer.from('42').toString('base64')}?=` })
  t.equal(okResult(t, integer.reply, integer.id, 'integer through base64').isError, false)
})

t.test('Mcp-Param-*: a recognized header with invalid characters is refused', async (t) => {
  // With the argument present (what the conformance scenario sends): refused.
  const { body, headers } = modernRequest(KEY, 'tools/call', { name: 'test_params', arguments: { region: 'Zürich' } }, { id: 'chars-1' })
  const lines = [
    `Authorization: ${headers.authorization}`, 'Content-Type: application/json', `Accept: ${headers.accept}`,
    `MCP-Protocol-Version: ${MODERN}`, 'Mcp-Method: tools/call', 'Mcp-Name: test_params',
  ]
  const raw = await rawHttp(URL_, [...lines, 'Mcp-Param-Region: Zürich'], JSON.stringify(body))
  t.equal(raw.status, 400, 'raw non-ASCII value, argument present: 400')
  t.equal(JSON.parse(raw.body).error?.code, -32020)
  t.equal(JSON.parse(raw.body).id, 'chars-1')
  // The spec (streamable-http.mdx, "Server Behavior for Custom Headers"): "Servers MUST reject requests with a
  // recognized Mcp-Param-{Name} header that contains invalid characters" — whether or not the body has the value.
  const absentBody = modernRequest(KEY, 'tools/call', { name: 'test_params', arguments: {} }, { id: 'chars-2' }).body
  const absent = await rawHttp(URL_, [...lines, 'Mcp-Param-Region: Zürich'], JSON.stringify(absentBody))
  t.equal(absent.status, 400, 'raw non-ASCII value, argument absent: 400')
  t.equal(JSON.parse(absent.body).error?.code, -32020)
  const malformed = await callParams({}, { 'mcp-param-region': '=?base64?SGVsbG8?=' })
  t.equal(malformed.reply.status, 400, 'malformed base64, argument absent: 400')
  // A well-formed header for an argument the body does not have disagrees with the body too.
  const orphan = await callParams({}, { 'mcp-param-region': 'eu-west' })
  t.equal(orphan.reply.status, 400, 'a header without its argument: 400')
  t.equal(orphan.reply.json?.error?.code, -32020)
})

t.test('Mcp-Param-*: the descriptor in tools/list keeps its x-mcp-header annotations', async (t) => {
  const { tools } = await listAll(t, 'tools/list')
  const descriptor = tools.find((d) => d.name === 'test_params')
  t.ok(descriptor, 'listed')
  t.same(descriptor.inputSchema, PARAMS_SCHEMA, 'the input schema as declared')
  t.equal(descriptor.inputSchema.properties.region['x-mcp-header'], 'Region')
  t.equal(descriptor.inputSchema.properties.count['x-mcp-header'], 'Count')
  t.equal(descriptor.inputSchema.properties.dryRun['x-mcp-header'], 'Dry-Run')
  t.equal(descriptor.inputSchema.properties.target.properties.zone['x-mcp-header'], 'Zone')
})

t.test('createServer / ToolRegistry refuse an invalid x-mcp-header declaration, naming the tool', async (t) => {
  const cases: Array<[string, Record<string, unknown>, RegExp]> = [
    ['type number', { price: { type: 'number', 'x-mcp-header': 'Price' } }, /only string, integer and boolean/],
    ['under items', { list: { type: 'array', items: { type: 'string', 'x-mcp-header': 'Item' } } }, /only properties reached through "properties"/],
    ['under anyOf', { v: { anyOf: [{ type: 'string', 'x-mcp-header': 'V' }, { type: 'integer' }] } }, /only properties reached through "properties"/],
    ['names differing only in case', { a: { type: 'string', 'x-mcp-header': 'Region' }, b: { type: 'string', 'x-mcp-header': 'region' } }, /declared twice/],
    ['a name with a space', { a: { type: 'string', 'x-mcp-header': 'My Region' } }, /HTTP header token/],
  ]
  for (const [what, properties, reason] of cases) {
    const name = `bad_${what.replace(/\W+/g, '_')}`
    const bad = defineTool({ name, title: what, description: what, inputSchema: { type: 'object', properties }, scope: 'mcp:read', role: 'viewer', handler: () => ({}) })
    const registry = new ToolRegistry()
    t.throws(() => registry.add(bad), new RegExp(`^Tool ${name}: x-mcp-header`), `${what}: ToolRegistry names the tool`)
    t.throws(() => new ToolRegistry().add(bad), reason, `${what}: with the reason`)
    t.equal(registry.get(name), undefined, `${what}: not registered`)
    await t.rejects(
      createServer({ env: {}, logger: false, config: { host: '127.0.0.1', port: 0, database: tempDatabase(t), logLevel: 'silent' }, tools: [...builtinTools, bad] }),
      { message: new RegExp(`Tool ${name}: .*${reason.source}`) },
      `${what}: createServer refuses it`,
    )
  }
  // A valid declaration registers.
  const registry = new ToolRegistry()
  registry.add(paramsTool)
  t.same(registry.get('test_params')?.paramHeaders.map((p) => p.name), ['Region', 'Count', 'Dry-Run', 'Zone'])
})

// ===============================================================================================================
// Results

t.test('results: server/discover', async (t) => {
  const { reply, id } = await send('server/discover')
  const result = okResult(t, reply, id, 'server/discover')
  t.match(String(reply.headers['content-type']), /^application\/json/)
  t.same(result.supportedVersions, [MODERN], 'supportedVersions: the modern revision only')
  t.same(result.capabilities, { logging: {}, tools: { listChanged: true }, resources: { subscribe: true, listChanged: true }, prompts: { listChanged: true }, completions: {}, extensions: { [TASKS_EXTENSION]: {} } }, 'capabilities')
  t.equal(result.instructions, SERVER_INSTRUCTIONS)
  t.equal(result.resultType, 'complete')
  t.ok(Number.isInteger(result.ttlMs) && result.ttlMs >= 0, 'ttlMs is an integer ≥ 0')
  t.equal(result.ttlMs, DISCOVER_TTL_MS, 'ttlMs from config discoverTtlMs')
  t.equal(result.cacheScope, 'public')
  const { description, icons, ...identity } = result._meta?.[SERVER_INFO_KEY] ?? {}
  t.same(identity, { name: SERVER_NAME, title: SERVER_TITLE, version: SERVER_VERSION }, '_meta serverInfo')
  t.match(description, /organization/, 'the full identity on server/discover: a description')
  t.match(icons, [{ src: /^data:image\/svg\+xml;base64,/, mimeType: 'image/svg+xml', sizes: ['any'] }], 'and an icon')
  t.equal(result._meta[SERVER_INFO_KEY].name, 'service-mcp')
  t.notOk('serverInfo' in result, 'serverInfo is no longer a body field')
  t.notOk('protocolVersion' in result)
  // Capabilities do not depend on what the client declared.
  const other = await send('server/discover', {}, { capabilities: WITH_TASKS })
  t.same(okResult(t, other.reply, other.id, 'discover with tasks declared').capabilities, result.capabilities)
})

t.test('results: tools/list — fields, pages, order, cursor', async (t) => {
  const runs = await Promise.all([listAll(t, 'run 1'), listAll(t, 'run 2'), listAll(t, 'run 3')])
  const names = runs.map((r) => r.tools.map((d) => d.name))
  t.equal(names[0]!.length, TOOLS.length, 'the owner sees every tool')
  t.equal(new Set(names[0]).size, names[0]!.length, 'no tool twice across pages')
  t.same(names[1], names[0], 'same order, second call')
  t.same(names[2], names[0], 'same order, third call')
  t.same(names[0], TOOLS.map((d) => d.name), 'registration order')
  const pages = runs[0]!.pages
  t.equal(pages.length, Math.ceil(TOOLS.length / 5), 'pages of pageSize 5')
  pages.forEach((page, i) => {
    t.equal(page.resultType, 'complete', `page ${i + 1}: resultType`)
    t.equal(page.ttlMs, LIST_TTL_MS, `page ${i + 1}: ttlMs from config listTtlMs`)
    t.equal(page.cacheScope, 'private', `page ${i + 1}: cacheScope private`)
    t.ok(page.tools.length <= 5 && page.tools.length > 0, `page ${i + 1}: 1-5 tools`)
    t.same(page._meta?.[SERVER_INFO_KEY]?.name, 'service-mcp', `page ${i + 1}: serverInfo`)
    if (i < pages.length - 1) t.type(page.nextCursor, 'string', `page ${i + 1}: nextCursor`)
    else t.notOk('nextCursor' in page, 'the last page has no nextCursor')
  })
  const whoami = runs[0]!.tools.find((d) => d.name === 'service_whoami')
  t.ok(whoami.title && whoami.inputSchema, '2026-07-28 descriptors carry title and inputSchema')
  for (const cursor of ['garbage', '', 'dG9vbHM6OTk5', pages[0]!.nextCursor + 'x']) {
    const r = await send('tools/list', { cursor })
    rpcError(t, r.reply, 200, r.id, -32602, 'INVALID_PARAMS', `bad cursor ${JSON.stringify(cursor)}`)
  }
})

t.test('results: every successful result of every method has resultType', async (t) => {
  const seen = new Map<string, string>()
  const record = (label: string, result: any) => {
    t.type(result?.resultType, 'string', `${label}: resultType present`)
    t.ok(['complete', 'input_required', 'task'].includes(result?.resultType), `${label}: resultType ${result?.resultType} is a known value`)
    // server/discover carries the full identity (description, icons; checked above); every other result the brief one.
    const { description: _d, icons: _i, ...identity } = result?._meta?.[SERVER_INFO_KEY] ?? {}
    t.same(label === 'server/discover' ? identity : result?._meta?.[SERVER_INFO_KEY], { name: SERVER_NAME, title: SERVER_TITLE, version: SERVER_VERSION }, `${label}: serverInfo in _meta`)
    seen.set(label, result?.resultType)
  }
  const discover = await send('server/discover')
  record('server/discover', okResult(t, discover.reply, discover.id, 'server/discover'))
  const list = await send('tools/list')
  record('tools/list', okResult(t, list.reply, list.id, 'tools/list'))
  const call = await send('tools/call', { name: 'service_whoami', arguments: {} })
  record('tools/call', okResult(t, call.reply, call.id, 'tools/call'))
  const failed = await send('tools/call', { name: 'service_apps_get', arguments: { app: 'no-such-app' } })
  const failedResult = okResult(t, failed.reply, failed.id, 'tools/call failing')
  t.equal(failedResult.isError, true, 'a tool failure is a tool result')
  record('tools/call (tool error)', failedResult)

  const ask = await send('tools/call', { name: 'test_confirm', arguments: {} }, { capabilities: ELICITING })
  const askResult = okResult(t, ask.reply, ask.id, 'input_required')
  t.equal(askResult.resultType, 'input_required')
  t.type(askResult.requestState, 'string')
  t.notOk('ttlMs' in askResult, 'interim results carry no caching hints')
  record('tools/call (input_required)', askResult)
  const retry = await send('tools/call', { name: 'test_confirm', arguments: {}, requestState: askResult.requestState, inputResponses: { confirm: { action: 'accept', content: { confirm: true } } } }, { capabilities: ELICITING })
  const retryResult = okResult(t, retry.reply, retry.id, 'confirmed retry')
  t.same(toolData(retryResult), { confirmed: true })
  record('tools/call (confirmed)', retryResult)

  const task = await send('tools/call', { name: 'test_task', arguments: { ms: 20 } }, { capabilities: WITH_TASKS })
  const taskResult = okResult(t, task.reply, task.id, 'task')
  t.equal(taskResult.resultType, 'task')
  t.type(taskResult.taskId, 'string')
  record('tools/call (task)', taskResult)
  const taskId: string = taskResult.taskId
  let done = await send('tasks/get', { taskId }, { capabilities: WITH_TASKS })
  for (const deadline = Date.now() + 5000; done.reply.json?.result?.status === 'working' && Date.now() < deadline;) {
    await sleep(20)
    done = await send('tasks/get', { taskId }, { capabilities: WITH_TASKS })
  }
  t.equal(done.reply.json?.result?.status, 'completed', 'the task completed')
  const got = okResult(t, done.reply, done.id, 'tasks/get')
  t.equal(got.taskId, taskId)
  t.same(toolData(got.result), { done: true }, 'the tool result')
  record('tasks/get', got)
  const update = await send('tasks/update', { taskId, inputResponses: {} }, { capabilities: WITH_TASKS })
  record('tasks/update', okResult(t, update.reply, update.id, 'tasks/update'))
  const cancel = await send('tasks/cancel', { taskId }, { capabilities: WITH_TASKS })
  record('tasks/cancel', okResult(t, cancel.reply, cancel.id, 'tasks/cancel'))
  t.equal(seen.get('tasks/cancel'), 'complete')
  t.equal(seen.size, 10, 'ten kinds of result seen')
})

t.test('results: subscriptions/listen ends with a result carrying resultType (server shutdown)', async (t) => {
  const own = await startServer(t)
  const live = await modernLive(own.mcpUrl, own.apiKey, 'subscriptions/listen', { notifications: { toolsListChanged: true } }, { id: 'listen-1' })
  t.equal(live.status, 200)
  t.match(String(live.headers['content-type']), /^text\/event-stream/)
  t.equal(live.headers['mcp-session-id'], undefined, 'no session header')
  await live.waitFor((text) => text.includes('notifications/subscriptions/acknowledged'), 3000, 'the acknowledgement')
  await own.close()
  await live.ended(3000)
  const messages = messagesOf(live)
  const final = messages.find((m) => m.id === 'listen-1')
  t.ok(final, 'the listen request is answered')
  t.equal(final?.result?.resultType, 'complete')
  t.equal(final?.result?._meta?.[SUBSCRIPTION_ID_KEY], 'listen-1')
  t.notMatch(live.text(), /^id:/m, 'no id: lines')
})

// ===============================================================================================================
// CORS

t.test('CORS: allowed Origin, preflight, disallowed Origin', async (t) => {
  const allowed = await send('server/discover', {}, { headers: { origin: ORIGIN } })
  okResult(t, allowed.reply, allowed.id, 'allowed Origin')
  t.equal(allowed.reply.headers['access-control-allow-origin'], ORIGIN)
  t.match(String(allowed.reply.headers['access-control-expose-headers']), /WWW-Authenticate/)
  const base = await send('server/discover', {}, { headers: { origin: new URL(server.url).origin } })
  okResult(t, base.reply, base.id, 'the base origin')

  const preflight = await readReply(await undiciRequest(URL_, {
    method: 'OPTIONS',
    headers: { origin: ORIGIN, 'access-control-request-method': 'POST', 'access-control-request-headers': 'mcp-method, mcp-name, mcp-param-region, authorization' },
  }))
  t.equal(preflight.status, 204, 'preflight answered without credentials')
  t.equal(preflight.headers['access-control-allow-origin'], ORIGIN)
  const allowHeaders = String(preflight.headers['access-control-allow-headers']).split(',').map((h) => h.trim().toLowerCase())
  for (const h of ['mcp-method', 'mcp-name', 'mcp-param-region', 'authorization', 'mcp-protocol-version', 'content-type']) {
    t.ok(allowHeaders.includes(h), `Access-Control-Allow-Headers has ${h}`)
  }
  t.match(String(preflight.headers['access-control-allow-methods']), /POST/)

  const denied = await send('server/discover', {}, { headers: { origin: 'https://evil.example' } })
  serviceError(t, denied.reply, 403, 'FORBIDDEN_ORIGIN', 'disallowed Origin')
  t.equal(denied.reply.headers['access-control-allow-origin'], undefined, 'no CORS grant')
  const deniedPreflight = await readReply(await undiciRequest(URL_, { method: 'OPTIONS', headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' } }))
  serviceError(t, deniedPreflight, 403, 'FORBIDDEN_ORIGIN', 'disallowed preflight')
})

// ===============================================================================================================
// Entry checks on the modern path

t.test('entry: no or bad token → 401 with WWW-Authenticate resource_metadata', async (t) => {
  const { body, headers } = modernRequest(KEY, 'server/discover', {}, { id: 'auth-1' })
  delete headers.authorization
  const none = await rawPost(URL_, body, headers)
  serviceError(t, none, 401, 'INVALID_TOKEN', 'no token')
  const challenge = String(none.headers['www-authenticate'])
  t.match(challenge, /^Bearer /)
  t.match(challenge, /resource_metadata="[^"]*\/\.well-known\/oauth-protected-resource\/mcp"/)
  t.notMatch(challenge, /error=/, 'no error attribute when no token was sent')
  const bad = await rawPost(URL_, body, { ...headers, authorization: 'Bearer service_mcp_' + 'x'.repeat(43) })
  serviceError(t, bad, 401, 'INVALID_TOKEN', 'bad token')
  t.match(String(bad.headers['www-authenticate']), /error="invalid_token"/)
  t.match(String(bad.headers['www-authenticate']), /resource_metadata=/)
})

t.test('entry: Accept text/html → 406; Content-Type text/plain → 415; bad JSON → 400 -32700', async (t) => {
  const html = await send('server/discover', {}, { headers: { accept: 'text/html' } })
  serviceError(t, html.reply, 406, 'NOT_ACCEPTABLE', 'Accept text/html')
  const { body, headers } = modernRequest(KEY, 'server/discover', {})
  const plain = await rawPost(URL_, body, { ...headers, 'content-type': 'text/plain' })
  serviceError(t, plain, 415, 'UNSUPPORTED_MEDIA_TYPE', 'Content-Type text/plain')
  const junk = await rawPost(URL_, '{"jsonrpc":"2.0",', headers)
  t.equal(junk.status, 400)
  t.equal(junk.json?.error?.code, -32700)
  t.equal(junk.json?.id, null)
  const jsonOnly = await send('server/discover', {}, { headers: { accept: 'application/json' } })
  okResult(t, jsonOnly.reply, jsonOnly.id, 'Accept application/json only')
})

t.test('entry: a client accepting only text/event-stream gets server/discover as SSE, one response, no id: lines', async (t) => {
  const { reply, id } = await send('server/discover', {}, { headers: { accept: 'text/event-stream' } })
  t.equal(reply.status, 200)
  t.match(String(reply.headers['content-type']), /^text\/event-stream/)
  noSessionHeader(t, reply, 'SSE')
  t.equal(reply.messages.length, 1, 'one event')
  const answer = reply.messages[0]
  t.equal(answer.id, id, 'the response to the request')
  t.equal(answer.result?.resultType, 'complete')
  t.same(answer.result?.supportedVersions, [MODERN])
  t.equal(answer.result?.cacheScope, 'public')
  t.notMatch(reply.text, /^id:/m, 'no id: lines (nothing to resume)')
  // Errors before the answer keep their own status and JSON, even for an SSE-only client.
  const err = await send('ping', {}, { headers: { accept: 'text/event-stream' } })
  t.equal(err.reply.status, 404, 'a ladder refusal keeps its status')
  t.equal(err.reply.json?.error?.code, -32601)
  // An in-band error on the SSE-only path is one response event.
  const unknown = await send('tools/call', { name: 'no_such_tool', arguments: {} }, { headers: { accept: 'text/event-stream' } })
  t.equal(unknown.reply.status, 200)
  const inBand = unknown.reply.json ?? unknown.reply.messages.find((m) => m.id === unknown.id)
  t.equal(inBand?.error?.code, -32602, 'unknown tool in-band')
})

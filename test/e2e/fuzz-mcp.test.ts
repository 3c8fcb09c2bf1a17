/**
 * Fuzzing /mcp (issue 10): thousands of generated malformed inputs — JSON-RPC messages with wrong or missing fields,
 * mixed-era claims, junk headers, broken JSON, odd methods and HTTP verbs, oversized batches, and malformed HTTP on raw
 * sockets — from a fixed seed, so a failure replays. Every answer must keep the contract: no 5xx, both headers, and a
 * body in one of the contract's shapes (service error, JSON-RPC response or batch, SSE of JSON-RPC messages, or empty
 * for 202/204). The server must serve normally afterwards.
 */
import { connect } from 'node:net'
import t from 'tap'
import { Pool } from 'undici'
import { builtinTools } from '../../src/index.js'
import { ACCEPT_BOTH, initializeMessage, openSession, parseSse, post } from '../helpers/mcp.js'
import { modernCall } from '../helpers/modern.js'
import { startServer } from '../helpers/server.js'

const SEED = 20261123
const HTTP_CASES = 3000
const RAW_CASES = 300

/** mulberry32: a small seeded PRNG, so every run generates the same inputs. */
function prng(seed: number) {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let x = Math.imul(a ^ (a >>> 15), 1 | a)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
  const int = (n: number) => Math.floor(next() * n)
  const pick = <T>(list: readonly T[]): T => list[int(list.length)]!
  const chance = (p: number) => next() < p
  return { next, int, pick, chance }
}

type Rng = ReturnType<typeof prng>

const METHODS = ['initialize', 'notifications/initialized', 'ping', 'tools/list', 'tools/call', 'logging/setLevel', 'notifications/cancelled',
  'server/discover', 'subscriptions/listen', 'tasks/get', 'tasks/cancel', 'tasks/update', 'tasks/result', 'prompts/list', 'resources/read',
  'unknown/method', '', 'TOOLS/LIST', 'tools/list\u0000', '$/x', 'elicitation/create']
const TOOLS = [...builtinTools.map((tool) => tool.name), 'nope', '', 'x'.repeat(200)]
const VERSIONS = ['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05', 'v999', '2027-01-01', '', 'garbage\u00e9']

function randomString(r: Rng): string {
  const kind = r.int(6)
  if (kind === 0) return ''
  if (kind === 1) return 'x'.repeat(r.int(3000))
  if (kind === 2) return String.fromCharCode(...Array.from({ length: r.int(20) }, () => r.int(0xffff)))
  if (kind === 3) return r.pick(METHODS)
  if (kind === 4) return '=?base64?' + Buffer.from(r.pick(TOOLS)).toString('base64').slice(0, r.int(30)) + '?='
  return r.next().toString(36).slice(2, 2 + r.int(10))
}

function randomValue(r: Rng, depth = 0): unknown {
  const kind = r.int(depth > 3 ? 5 : 8)
  switch (kind) {
    case 0: return null
    case 1: return r.chance(0.5)
    case 2: return r.pick([0, -1, 1.5, 2 ** 53, -(2 ** 63), 1e308, Number.MAX_SAFE_INTEGER])
    case 3: return randomString(r)
    case 4: return r.int(1000)
    case 5: return Array.from({ length: r.int(5) }, () => randomValue(r, depth + 1))
    default: {
      const o: Record<string, unknown> = {}
      for (let i = r.int(5); i > 0; i--) o[r.chance(0.3) ? r.pick(['_meta', 'name', 'arguments', 'cursor', 'requestState', 'inputResponses', 'taskId', 'notifications', 'protocolVersion', 'capabilities', '__proto__', 'constructor']) : randomString(r).slice(0, 20)] = randomValue(r, depth + 1)
      return o
    }
  }
}

function randomMeta(r: Rng): Record<string, unknown> | undefined {
  if (r.chance(0.4)) return undefined
  const meta: Record<string, unknown> = {}
  if (r.chance(0.8)) meta['io.modelcontextprotocol/protocolVersion'] = r.chance(0.7) ? '2026-07-28' : r.chance(0.5) ? r.pick(VERSIONS) : randomValue(r)
  if (r.chance(0.8)) meta['io.modelcontextprotocol/clientCapabilities'] = r.chance(0.6) ? r.pick([{}, { elicitation: {} }, { extensions: { 'io.modelcontextprotocol/tasks': {} } }]) : randomValue(r)
  if (r.chance(0.5)) meta['io.modelcontextprotocol/clientInfo'] = r.chance(0.7) ? { name: 'fuzz', version: '1' } : randomValue(r)
  if (r.chance(0.2)) meta['io.modelcontextprotocol/logLevel'] = r.pick(['info', 'debug', 'nope', 5])
  if (r.chance(0.2)) meta.progressToken = randomValue(r)
  return meta
}

/** A well-formed envelope (a valid claim, a real method) around junk params: what reaches the handlers. */
function nearValid(r: Rng): unknown {
  const method = r.pick(['tools/list', 'tools/call', 'server/discover', 'tasks/get', 'subscriptions/listen', 'tools/call'])
  const junk = randomValue(r)
  const params: Record<string, unknown> = method === 'tools/call'
    ? { name: r.pick(TOOLS.slice(0, builtinTools.length)), arguments: r.chance(0.5) ? randomValue(r) : {} }
    : r.chance(0.5) || typeof junk !== 'object' || junk === null || Array.isArray(junk) ? {} : { ...(junk as Record<string, unknown>) }
  if (r.chance(0.3)) params.requestState = r.chance(0.5) ? randomString(r) : 'v1.abc.' + 'A'.repeat(16) + '.' + 'B'.repeat(40)
  if (r.chance(0.3)) params.inputResponses = randomValue(r)
  const modern = r.chance(0.7)
  return {
    jsonrpc: '2.0',
    id: r.int(1_000_000),
    method,
    params: { ...(typeof params === 'object' && params !== null && !Array.isArray(params) ? params : {}), ...(modern ? { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': r.pick([{}, { elicitation: {} }, { extensions: { 'io.modelcontextprotocol/tasks': {} } }]) } } : {}) },
  }
}

function randomMessage(r: Rng): unknown {
  if (r.chance(0.35)) return nearValid(r)
  if (r.chance(0.1)) return randomValue(r)
  const method = r.pick(METHODS)
  const message: Record<string, unknown> = {}
  if (r.chance(0.95)) message.jsonrpc = r.chance(0.9) ? '2.0' : r.pick(['1.0', 2, null])
  if (r.chance(0.8)) message.id = r.chance(0.8) ? r.int(1_000_000) : randomValue(r)
  if (r.chance(0.95)) message.method = r.chance(0.95) ? method : randomValue(r)
  let params: Record<string, unknown> | undefined
  if (method === 'tools/call') params = { name: r.chance(0.8) ? r.pick(TOOLS) : randomValue(r), arguments: r.chance(0.7) ? randomValue(r) : {} }
  else if (method === 'initialize') params = r.chance(0.7) ? initializeMessage(r.pick(VERSIONS), r.chance(0.5) ? {} : (randomValue(r) as Record<string, unknown>)).params : (randomValue(r) as Record<string, unknown>)
  else if (r.chance(0.6)) params = randomValue(r) as Record<string, unknown>
  const meta = randomMeta(r)
  if (meta !== undefined) params = { ...(typeof params === 'object' && params !== null && !Array.isArray(params) ? params : {}), _meta: meta }
  if (params !== undefined && r.chance(0.95)) message.params = params
  if (r.chance(0.05)) message.result = randomValue(r)
  if (r.chance(0.05)) message.error = randomValue(r)
  return message
}

/** A body, and the single message it holds when it holds one (so headers can mirror it). */
function randomBody(r: Rng): { text: string; message?: unknown } {
  const kind = r.int(10)
  if (kind === 0) return { text: JSON.stringify(randomMessage(r)).slice(0, r.int(200)) } // truncated JSON
  if (kind === 1) return { text: String.fromCharCode(...Array.from({ length: r.int(100) }, () => r.int(256))) }
  if (kind === 2) return { text: JSON.stringify(Array.from({ length: r.chance(0.5) ? r.int(25) : r.int(60) }, () => randomMessage(r))) }
  if (kind === 3) return { text: '' }
  const message = randomMessage(r)
  return { text: JSON.stringify(message), message }
}

/** Often, the 2026-07-28 headers mirror the message as a conforming client's would (so inputs reach the handlers). */
function mirroredHeaders(r: Rng, message: unknown): Record<string, string> {
  if (!r.chance(0.6) || typeof message !== 'object' || message === null) return {}
  const m = message as { method?: unknown; params?: { name?: unknown; taskId?: unknown; _meta?: Record<string, unknown> } }
  const h: Record<string, string> = {}
  const version = m.params?._meta?.['io.modelcontextprotocol/protocolVersion']
  if (typeof version === 'string' && /^[\x20-\x7e]*$/.test(version)) h['mcp-protocol-version'] = version
  if (typeof m.method === 'string' && /^[\x21-\x7e]+$/.test(m.method)) h['mcp-method'] = m.method
  const name = m.params?.name ?? m.params?.taskId
  if (typeof name === 'string') h['mcp-name'] = /^[\x21-\x7e]+$/.test(name) ? name : `=?base64?${Buffer.from(name).toString('base64')}?=`
  return h
}

function randomHeaders(r: Rng, keys: string[], session: string): Record<string, string> {
  const h: Record<string, string> = {}
  // Mostly well-formed envelopes, so that most inputs get past the edge and exercise the layers behind it.
  if (r.chance(0.95)) h.authorization = r.chance(0.9) ? `Bearer ${keys[0]}` : r.pick(['Bearer', 'Basic abc', `Bearer ${r.pick(keys)}`, `Bearer ${randomString(r).replace(/[^\x21-\x7e]/g, '')}`, 'bearer service_mcp_x'])
  if (r.chance(0.95)) h['content-type'] = r.chance(0.85) ? 'application/json' : r.pick(['application/json; charset=utf-8', 'text/plain', 'application/x-www-form-urlencoded', 'application/JSON'])
  if (r.chance(0.95)) h.accept = r.chance(0.8) ? ACCEPT_BOTH : r.pick(['application/json', 'text/event-stream', 'text/html', '*/*', 'application/json;q=0, text/event-stream'])
  if (r.chance(0.5)) h['mcp-protocol-version'] = r.pick(VERSIONS).replace(/[^\x20-\x7e]/g, '?')
  if (r.chance(0.4)) h['mcp-method'] = r.pick(METHODS).replace(/[^\x20-\x7e]/g, '?')
  if (r.chance(0.3)) h['mcp-name'] = r.chance(0.5) ? r.pick(TOOLS).slice(0, 100) : `=?base64?${Buffer.from(r.pick(TOOLS)).toString('base64').slice(0, r.int(40))}?=`
  if (r.chance(0.3)) h['mcp-session-id'] = r.chance(0.5) ? session : randomString(r).replace(/[^\x21-\x7e]/g, '').slice(0, 40) || 'x'
  if (r.chance(0.1)) h['mcp-param-region'] = randomString(r).replace(/[^\x20-\x7e]/g, '').slice(0, 40)
  if (r.chance(0.05)) h.origin = r.pick(['http://evil.example', 'null'])
  if (r.chance(0.05)) h['last-event-id'] = r.pick(['abc:1', 'x', '9'.repeat(40)])
  return h
}

/** Why an answer breaks the contract, or null. */
function contractProblem(status: number, headers: Record<string, string | string[] | undefined>, text: string): string | null {
  if (status >= 500) return `HTTP ${status}`
  if (typeof headers['x-service-mcp-version'] !== 'string') return 'no X-Service-MCP-Version'
  if (typeof headers['x-request-id'] !== 'string') return 'no X-Request-Id'
  if (status === 202 || status === 204) return text === '' ? null : `${status} with a body`
  const type = String(headers['content-type'] ?? '')
  const isRpc = (m: any) => m && m.jsonrpc === '2.0' && ('result' in m || ('error' in m && Number.isInteger(m.error?.code) && typeof m.error?.message === 'string')) || (m && m.jsonrpc === '2.0' && typeof m.method === 'string')
  if (type.startsWith('text/event-stream')) {
    for (const e of parseSse(text).events) {
      if (e.data === '') continue
      let m: unknown
      try {
        m = JSON.parse(e.data)
      } catch {
        return 'an SSE event that is not JSON'
      }
      if (!isRpc(m)) return `an SSE event that is not a JSON-RPC message: ${e.data.slice(0, 100)}`
    }
    return null
  }
  if (!type.startsWith('application/json')) return `content-type ${type}`
  let body: any
  try {
    body = JSON.parse(text)
  } catch {
    return 'a JSON body that does not parse'
  }
  const service = body?.error && typeof body.error.code === 'string' && typeof body.error.message === 'string' && typeof body.error.action === 'string' && 'details' in body.error
  if (service) return null
  if (Array.isArray(body) ? body.length > 0 && body.every(isRpc) : isRpc(body)) return null
  return `a body in no contract shape: ${text.slice(0, 200)}`
}

t.test(`fuzzing /mcp with ${HTTP_CASES} generated requests and ${RAW_CASES} malformed raw ones (seed ${SEED})`, async (t) => {
  const server = await startServer(t, { tools: builtinTools, config: { headersTimeoutMs: 1000, requestTimeoutMs: 2000 } })
  const { sessionId } = await openSession(server.mcpUrl, server.apiKey, '2025-03-26', { elicitation: {} })
  const keys = [server.apiKey, 'service_mcp_' + 'x'.repeat(43), 'eyJhbGciOiJFUzI1NiJ9.e30.sig']
  const r = prng(SEED)
  const pool = new Pool(server.url, { connections: 8, pipelining: 1 })
  t.teardown(() => pool.close())
  const problems: string[] = []
  const statuses = new Map<number, number>()
  const cases = Array.from({ length: HTTP_CASES }, (_, i) => {
    const method = r.chance(0.9) ? 'POST' : r.pick(['GET', 'DELETE', 'PUT', 'OPTIONS', 'PATCH'])
    const body = method === 'POST' || r.chance(0.2) ? randomBody(r) : undefined
    return { i, method, headers: { ...randomHeaders(r, keys, sessionId), ...(body ? mirroredHeaders(r, body.message) : {}) }, body: body?.text }
  })
  const started = Date.now()
  let next = 0
  await Promise.all(Array.from({ length: 8 }, async () => {
    while (next < cases.length) {
      const c = cases[next++]!
      try {
        const res = await pool.request({
          path: '/mcp',
          method: c.method as 'POST',
          headers: c.headers,
          ...(c.body !== undefined ? { body: c.body } : {}),
          headersTimeout: 10_000,
          bodyTimeout: 10_000,
        })
        // SSE answers of long calls (subscriptions/listen) stay open: read what came, then let go.
        const type = String(res.headers['content-type'] ?? '')
        let text = ''
        if (type.startsWith('text/event-stream')) {
          const timer = setTimeout(() => res.body.destroy(), 300)
          try {
            for await (const chunk of res.body) text += chunk
          } catch {
            // cut by us after 300 ms
          }
          clearTimeout(timer)
          text = text.slice(0, text.lastIndexOf('\n\n') + 2)
        } else text = await res.body.text()
        statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1)
        const problem = contractProblem(res.statusCode, res.headers, text)
        if (problem) problems.push(`case ${c.i} (${c.method} ${JSON.stringify(c.headers).slice(0, 200)} ${String(c.body).slice(0, 200)}): ${problem}`)
      } catch (err) {
        problems.push(`case ${c.i}: ${(err as Error).message}`)
      }
    }
  }))
  t.comment(`${HTTP_CASES} requests in ${Date.now() - started} ms; statuses ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}`)
  // The generator reaches every layer: refusals at the edge, JSON-RPC errors, and requests served.
  for (const status of [200, 202, 400, 401, 404, 406, 415]) t.ok((statuses.get(status) ?? 0) > 0, `some requests were answered ${status}`)
  t.strictSame(problems.slice(0, 10), [], `every answer keeps the contract (${problems.length} problems)`)

  // Malformed HTTP on raw sockets: byte-level mutations of a valid request.
  const port = Number(new URL(server.url).port)
  const valid = Buffer.from(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nAuthorization: Bearer ${server.apiKey}\r\nContent-Length: 2\r\n\r\n{}`)
  const rawProblems: string[] = []
  for (let i = 0; i < RAW_CASES; i++) {
    const bytes = Buffer.from(valid)
    for (let m = 1 + r.int(4); m > 0; m--) {
      const at = r.int(bytes.length)
      const op = r.int(3)
      if (op === 0) bytes[at] = r.int(256)
      else if (op === 1) bytes[at] = r.pick([0, 10, 13, 32, 58])
      else bytes.writeUInt8(r.pick([0x7f, 0x80, 0xff]), at)
    }
    const text = await new Promise<string>((resolve) => {
      let out = ''
      const s = connect(port, '127.0.0.1', () => s.end(bytes))
      s.setEncoding('latin1')
      s.on('data', (d: string) => (out += d))
      s.on('error', () => resolve(out))
      s.on('close', () => resolve(out))
      setTimeout(() => s.destroy(), 3000)
    })
    if (text === '') continue // the mutation made a request that never completes (e.g. a larger Content-Length): the timeout closed it
    const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1])
    const head = text.split('\r\n\r\n')[0]!.toLowerCase()
    if (!(status < 500)) rawProblems.push(`raw case ${i}: ${JSON.stringify(text.slice(0, 80))}`)
    else if (!head.includes('x-service-mcp-version:') || !head.includes('x-request-id:')) rawProblems.push(`raw case ${i}: headers missing in ${JSON.stringify(head.slice(0, 200))}`)
  }
  t.strictSame(rawProblems.slice(0, 10), [], `every raw answer keeps the contract (${rawProblems.length} problems)`)

  // Alive and well afterwards, in both eras.
  const init = await post(server.mcpUrl, initializeMessage(), { authorization: `Bearer ${server.apiKey}` })
  t.equal(init.status, 200, 'a session can be initialized')
  const modern = await modernCall(server.mcpUrl, server.apiKey, 'service_whoami')
  t.equal(modern.status, 200, 'a stateless call works')
  t.equal(modern.json?.result?.isError, false)
})

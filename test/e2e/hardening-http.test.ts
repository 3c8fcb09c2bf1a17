// test-process: own (it measures its own process's memory while a deployment prints 60 MB)
/**
 * Hardening of the HTTP edge and /mcp (issue 10), each test written as the attack: the batch amplification, oversized
 * and deep initialize, sessions that cannot be stored, slow headers and bodies, connection hoarding, malformed request
 * lines, ambiguous Authorization headers and a client that stops reading. Each asserts the contract's answer and, where
 * the attack aims at others, that an unrelated client keeps being served (whileServed).
 */
import { connect, type Socket } from 'node:net'
import t, { type Test } from 'tap'
import { builtinTools } from '../../src/index.js'
import { whileServed } from '../helpers/attack.js'
import { databaseRows } from '../helpers/database.js'
import { ACCEPT_BOTH, initializeMessage, openSession, post } from '../helpers/mcp.js'
import { poll } from '../helpers/modern-runs.js'
import { createMember, defaultOrganization } from '../helpers/seed.js'
import { startServer, type TestServer } from '../helpers/server.js'
import { sleep, until } from '../helpers/stream.js'

const HEADERS = ['x-service-mcp-version', 'x-request-id']

/** One raw HTTP exchange on its own socket: what the server wrote before it closed (or `ms` passed). */
function rawExchange(port: number, request: string | Buffer, options: { ms?: number; keepOpen?: boolean } = {}): Promise<{ text: string; closedByServer: boolean; socket: Socket }> {
  return new Promise((resolve) => {
    let text = ''
    let closedByServer = false
    const socket = connect(port, '127.0.0.1', () => socket.write(request))
    socket.setEncoding('utf8')
    socket.on('data', (d: string) => (text += d))
    socket.on('end', () => (closedByServer = true))
    socket.on('error', () => {})
    const timer = setTimeout(() => {
      if (!options.keepOpen) socket.destroy()
      resolve({ text, closedByServer, socket })
    }, options.ms ?? 3000)
    socket.on('close', () => {
      clearTimeout(timer)
      resolve({ text, closedByServer: true, socket })
    })
  })
}

/** Status, headers and parsed JSON body of a raw HTTP answer. */
function parseRaw(text: string): { status: number; headers: Record<string, string>; body: any } {
  const [head = '', body = ''] = text.split('\r\n\r\n')
  const [statusLine = '', ...lines] = head.split('\r\n')
  const headers: Record<string, string> = {}
  for (const l of lines) {
    const i = l.indexOf(':')
    if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim()
  }
  let parsed: any
  try {
    parsed = JSON.parse(body)
  } catch {
    parsed = undefined
  }
  return { status: Number(statusLine.split(' ')[1]), headers, body: parsed }
}

function serviceBody(t: Test, raw: { status: number; headers: Record<string, string>; body: any }, status: number, code: string, label: string): void {
  t.equal(raw.status, status, `${label}: HTTP ${status}`)
  for (const h of HEADERS) t.type(raw.headers[h], 'string', `${label}: ${h}`)
  t.equal(raw.body?.error?.code, code, `${label}: ${code}`)
  t.type(raw.body?.error?.message, 'string')
  t.type(raw.body?.error?.action, 'string')
  t.ok('details' in (raw.body?.error ?? {}), `${label}: the service error body`)
}

function portOf(server: TestServer): number {
  return Number(new URL(server.url).port)
}

t.test('a huge batch is refused at once; a batch counts each message against the limits', async (t) => {
  const server = await startServer(t, { config: { rateLimitApiKeyMember: 30 } })
  const viewer = await createMember(server, { role: 'viewer', scopes: ['mcp:read'] })
  const { headers } = await openSession(server.mcpUrl, viewer.key, '2025-03-26')
  const list = (id: number) => ({ jsonrpc: '2.0', id, method: 'tools/list' })

  // The attack: one POST of 10,000 tools/list (about 500 KB) in a 2025-03-26 session, by a read-only viewer.
  const huge = await whileServed(t, server.url, async () => {
    const started = Date.now()
    const reply = await post(server.mcpUrl, Array.from({ length: 10_000 }, (_, i) => list(i)), headers)
    return { reply, ms: Date.now() - started }
  }, { label: 'the 10,000-message batch' })
  t.equal(huge.reply.status, 400, 'refused')
  t.equal(huge.reply.json?.error?.code, -32600)
  t.equal(huge.reply.json?.error?.data?.details?.limit, 20, 'naming the limit (SERVICE_MAX_BATCH_SIZE)')
  t.ok(huge.reply.text.length < 2000, 'a short answer, not 10,000 answers')

  // The largest allowed batch counts 20 requests: the member's 30 per window leave room for one such batch.
  const ok = await post(server.mcpUrl, Array.from({ length: 20 }, (_, i) => list(i)), headers)
  t.equal(ok.status, 200)
  t.equal(ok.json.length, 20, 'twenty answers')
  const over = await post(server.mcpUrl, Array.from({ length: 20 }, (_, i) => list(100 + i)), headers)
  t.equal(over.status, 429, 'the next batch of 20 does not fit in the remaining budget')
  t.equal(over.json?.error?.code, 'RATE_LIMITED')
  t.ok(Number(over.headers['retry-after']) >= 1)
  const single = await post(server.mcpUrl, list(500), headers)
  t.equal(single.status, 200, 'a refused batch consumed nothing: single requests still fit')
})

t.test('initialize keeps only the shape of the client capabilities, whatever their size or depth', async (t) => {
  const server = await startServer(t)
  const db = await databaseRows(t, server)
  // As text on both backends (a json column on PostgreSQL): what is stored, byte for byte.
  const stored = async (id: string) => (await db.get<{ capabilities: string }>('select cast(client_capabilities as text) as capabilities from sessions where id = ?', id))?.capabilities

  // 1 MB under capabilities.experimental: accepted, nothing of it stored.
  const big = initializeMessage('2025-11-25', { experimental: { blob: { data: 'x'.repeat(900_000) } }, elicitation: { form: { extra: 'y'.repeat(1000) } }, roots: { listChanged: true }, unknown: { a: 1 } })
  const bigReply = await post(server.mcpUrl, big, { authorization: `Bearer ${server.apiKey}` })
  t.equal(bigReply.status, 200)
  const bigId = String(bigReply.headers['mcp-session-id'])
  const row = await stored(bigId)
  t.strictSame(JSON.parse(row!), { elicitation: { form: {} }, roots: { listChanged: true } }, 'only the shape is stored')
  t.ok(row!.length < 100, 'a tiny row')
})

t.test('a 100,000-deep initialize beside another member\'s twenty loses nobody\'s session', async (t) => {
  const server = await startServer(t)
  const other = await createMember(server, { role: 'developer' })
  const depth = 100_000
  const deep = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","clientInfo":{"name":"x","version":"1"},"capabilities":{"experimental":{"d":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}}}}`
  const replies = await whileServed(t, server.url, () => Promise.all([
    post(server.mcpUrl, deep, { authorization: `Bearer ${server.apiKey}` }),
    ...Array.from({ length: 20 }, () => post(server.mcpUrl, initializeMessage(), { authorization: `Bearer ${other.key}` })),
  ]), { label: 'the deep initialize' })
  const [hostile, ...theirs] = replies
  t.equal(hostile!.status, 200, 'the deep initialize is served (its payload is not kept)')
  t.ok(theirs.every((r) => r.status === 200), 'the other member\'s twenty initialize answered 200')
  const db = await databaseRows(t, server)
  const ids = [hostile!, ...theirs].map((r) => String(r.headers['mcp-session-id']))
  const rows = await db.all(`select id from sessions where id in (${ids.map(() => '?').join(',')})`, ...ids)
  t.equal(rows.length, 21, 'every session answered 200 is in the database (a restart keeps them all)')
})

t.test('an initialize whose session cannot be stored fails with 503; the others of its batch are stored', async (t) => {
  const server = await startServer(t)
  const doomed = await createMember(server, { role: 'viewer' })
  const fine = await createMember(server, { role: 'viewer' })
  // What a full disk or a row that cannot be written does to one insert: refuse the doomed member's row only.
  const sessions = server.app.repos.sessions
  const insertMany = sessions.insertMany.bind(sessions)
  sessions.insertMany = async (rows) => {
    const list = [...rows]
    if (list.some((r) => r.membershipId === doomed.membership.id)) throw new Error('SQLITE_FULL: database or disk is full')
    await insertMany(list)
  }
  const [bad, ...good] = await Promise.all([
    post(server.mcpUrl, initializeMessage(), { authorization: `Bearer ${doomed.key}` }),
    ...Array.from({ length: 5 }, () => post(server.mcpUrl, initializeMessage(), { authorization: `Bearer ${fine.key}` })),
  ])
  t.equal(bad!.status, 503, 'the session that could not be stored: 503')
  t.equal(bad!.json?.error?.code, 'SERVICE_UNAVAILABLE')
  t.ok(Number(bad!.headers['retry-after']) >= 1, 'with Retry-After')
  t.equal(bad!.headers['mcp-session-id'], undefined, 'and no session id')
  t.ok(good.every((r) => r.status === 200), 'the others of the same turn are answered 200')
  const ids = good.map((r) => String(r.headers['mcp-session-id']))
  const stored = await Promise.all(ids.map((id) => sessions.byId(id)))
  t.ok(stored.every((row) => row !== undefined), 'and stored, one by one when the batch failed')
  sessions.insertMany = insertMany
  const again = await post(server.mcpUrl, initializeMessage(), { authorization: `Bearer ${doomed.key}` })
  t.equal(again.status, 200, 'once storage works again, initialize works')
})

t.test('slow headers and slow bodies are cut off with 408, on every route', async (t) => {
  const server = await startServer(t, { config: { headersTimeoutMs: 300, requestTimeoutMs: 600 } })
  const port = portOf(server)
  await whileServed(t, server.url, async () => {
    // Headers never finished.
    const slowHeaders = await rawExchange(port, `GET /.well-known/oauth-protected-resource HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nX-Slow: `, { ms: 3000 })
    t.ok(slowHeaders.closedByServer, 'slow headers: the server closed the connection')
    serviceBody(t, parseRaw(slowHeaders.text), 408, 'REQUEST_TIMEOUT', 'slow headers')
    // A body announced and never sent, without credentials, on the OAuth and sign-in routes, and with them on /mcp.
    const partial = (path: string, type: string, extra = '') =>
      `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: ${type}\r\nContent-Length: 1000\r\n${extra}\r\nabc`
    for (const [path, type, extra] of [
      ['/oauth/token', 'application/x-www-form-urlencoded', ''],
      ['/oauth/register', 'application/json', ''],
      ['/account/signin', 'application/x-www-form-urlencoded', ''],
      ['/mcp', 'application/json', `Authorization: Bearer ${server.apiKey}\r\nAccept: ${ACCEPT_BOTH}\r\n`],
    ] as const) {
      const started = Date.now()
      const r = await rawExchange(port, partial(path, type, extra), { ms: 3000 })
      t.ok(r.closedByServer, `${path}: the server closed the connection after ${Date.now() - started} ms`)
      serviceBody(t, parseRaw(r.text), 408, 'REQUEST_TIMEOUT', `partial body on ${path}`)
    }
  }, { label: 'slow requests', localAddress: '127.0.0.2' })
})

t.test('one address cannot hold every connection', async (t) => {
  const server = await startServer(t, { config: { maxConnectionsPerAddress: 20, headersTimeoutMs: 5000, requestTimeoutMs: 5000 } })
  const port = portOf(server)
  const sockets: Socket[] = []
  t.teardown(() => sockets.forEach((s) => s.destroy()))
  const closedAtOnce = await whileServed(t, server.url, async () => {
    const closed: boolean[] = []
    await Promise.all(Array.from({ length: 60 }, (_, i) => new Promise<void>((resolve) => {
      const s = connect(port, '127.0.0.1', () => s.write(`GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n`)) // headers never end
      s.on('error', () => {})
      sockets.push(s)
      closed[i] = false
      s.on('close', () => (closed[i] = true))
      setTimeout(resolve, 300)
    })))
    return closed.filter(Boolean).length
  }, { label: '60 slow connections from one address', localAddress: '127.0.0.2' })
  t.equal(closedAtOnce, 40, 'the connections beyond 20 of one address are closed at once; 20 are held')
})

t.test('requests Node\'s parser refuses get the contract\'s body and both headers', async (t) => {
  const server = await startServer(t)
  const port = portOf(server)
  // A credential and a JSON type, so that the request waits for its body (one refused on its headers is answered before: see below).
  const auth = `Authorization: Bearer ${server.apiKey}\r\nContent-Type: application/json\r\n`
  const cases: Array<[string, string, number, string]> = [
    ['a bad chunk size', `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${auth}Transfer-Encoding: chunked\r\n\r\nZZ\r\nabc\r\n0\r\n\r\n`, 400, 'BAD_REQUEST'],
    ['Transfer-Encoding and Content-Length', `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n`, 400, 'BAD_REQUEST'],
    ['two Content-Length', `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello`, 400, 'BAD_REQUEST'],
    ['a negative Content-Length', `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Length: -1\r\n\r\n`, 400, 'BAD_REQUEST'],
    ['a NUL in a header', `GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nX-A: a\u0000b\r\n\r\n`, 400, 'BAD_REQUEST'],
    ['no Host', 'GET /.well-known/oauth-protected-resource HTTP/1.1\r\n\r\n', 400, 'BAD_REQUEST'],
    ['method FOO', `FOO / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`, 400, 'BAD_REQUEST'],
    ['HTTP/9.9', `GET / HTTP/9.9\r\nHost: 127.0.0.1:${port}\r\n\r\n`, 400, 'BAD_REQUEST'],
    ['a garbage request line', 'garbage\r\n\r\n', 400, 'BAD_REQUEST'],
    ['headers too large', `GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431, 'HEADERS_TOO_LARGE'],
  ]
  for (const [label, request, status, code] of cases) {
    const r = await rawExchange(port, request, { ms: 2000 })
    serviceBody(t, parseRaw(r.text), status, code, label)
  }
  // TE: gzip, chunked with an empty body reaches the routes, which answer in the contract's shape too (no token: 401).
  const te = parseRaw((await rawExchange(port, `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nTE: gzip, chunked\r\nContent-Length: 0\r\n\r\n`, { ms: 2000 })).text)
  serviceBody(t, te, 401, 'INVALID_TOKEN', 'TE: gzip, chunked')
  const after = await post(server.mcpUrl, initializeMessage(), { authorization: `Bearer ${server.apiKey}` })
  t.equal(after.status, 200, 'the server serves on')
})

// Regression: a request refused on its headers (no credential) is answered at once; its malformed body, parsed after
// that answer, used to get a second answer on the same connection (a response to no request).
t.test('a request answered before its malformed body is read gets exactly one answer', async (t) => {
  const server = await startServer(t)
  const port = portOf(server)
  const r = await rawExchange(port, `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nabc\r\n0\r\n\r\n`, { ms: 2000 })
  t.equal(r.text.match(/^HTTP\/1\.1 /gm)?.length, 1, 'one status line')
  serviceBody(t, parseRaw(r.text), 401, 'INVALID_TOKEN', 'no credential')
  t.ok(r.closedByServer, 'and the connection closes (the parser cannot go on after a malformed body)')
})

t.test('Authorization: the scheme is case-insensitive; two headers are refused', async (t) => {
  const server = await startServer(t)
  for (const scheme of ['bearer', 'BEARER', 'BeArEr']) {
    const r = await post(server.mcpUrl, initializeMessage(), { authorization: `${scheme} ${server.apiKey}` })
    t.equal(r.status, 200, `${scheme} is accepted (RFC 9110: scheme names are case-insensitive)`)
  }
  const other = await createMember(server, { role: 'viewer' })
  const port = portOf(server)
  const body = JSON.stringify(initializeMessage())
  const both = `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nAccept: ${ACCEPT_BOTH}\r\nAuthorization: Bearer ${other.key}\r\nAuthorization: Bearer ${server.apiKey}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  const r = parseRaw((await rawExchange(port, both, { ms: 2000 })).text)
  serviceBody(t, r, 400, 'BAD_REQUEST', 'two Authorization headers')
  t.match(r.body.error.message, /exactly one Authorization header/)
  t.notOk(r.headers['mcp-session-id'], 'no session was created')
})

t.test('a client that stops reading a verbose deployment is cut off; the run goes on and its log stays readable', async (t) => {
  const lines = 200_000
  const server = await startServer(t, {
    tools: builtinTools,
    config: {
      sseMaxBufferedBytes: 256 * 1024,
      pipelines: { loud: { argv: [process.execPath, '-e', `const l='x'.repeat(290); for (let i = 0; i < ${lines}; i++) process.stdout.write(i + ' ' + l + '\\n')`] } },
    },
  })
  const org = await defaultOrganization(server)
  const app = await server.app.repos.apps.create({ organizationId: org.id, name: 'loud', pipeline: 'loud' })
  const { headers } = await openSession(server.mcpUrl, server.apiKey, '2025-11-25', { elicitation: {} })
  const rssBefore = process.memoryUsage().rss
  // The attack: confirm a deployment printing about 60 MB, then never read the stream again.
  const port = portOf(server)
  const body = JSON.stringify({ jsonrpc: '2.0', id: 'loud-1', method: 'tools/call', params: { name: 'service_deployments_create', arguments: { app_id: app.id }, _meta: { progressToken: 'p' } } })
  const request = `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nAccept: ${ACCEPT_BOTH}\r\nAuthorization: ${headers.authorization}\r\nMcp-Session-Id: ${headers['mcp-session-id']}\r\nMCP-Protocol-Version: 2025-11-25\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  const socket = connect(port, '127.0.0.1')
  socket.on('error', () => {})
  let received = ''
  const onData = (d: Buffer) => (received += d.toString('utf8'))
  socket.on('data', onData)
  socket.write(request)
  const elicitation = await until(() => /"method":"elicitation\/create","params"/.test(received) && /"id":(\d+),"method":"elicitation\/create"/.exec(received), 5000, 'the confirmation')
  const answer = await post(server.mcpUrl, { jsonrpc: '2.0', id: Number(elicitation![1]), result: { action: 'accept', content: { confirm: true } } }, headers)
  t.equal(answer.status, 202, 'confirmed')
  socket.pause() // from here on the client reads nothing
  // poll, not until: the probe reads the repositories, which answer with a promise (poll awaits it).
  const deploymentId = await poll(async () => (await server.app.repos.deployments.list(org.id, { appId: app.id, limit: 1, offset: 0 })).items[0]?.id, 5000, 'the run to start')
  const done = await whileServed(t, server.url, () => poll(async () => {
    const d = await server.app.repos.deployments.byId(org.id, deploymentId)
    return d && d.status !== 'running' && d.status !== 'queued' ? d : undefined
  }, 60_000, 'the end of the run'), { label: 'the verbose deployment', localAddress: '127.0.0.2' })
  t.equal(done.status, 'succeeded', 'the run went on to its end without the client reading')
  const grown = process.memoryUsage().rss - rssBefore
  t.ok(grown < 200 * 1024 * 1024, `the server did not keep the unread output (RSS grew ${Math.round(grown / 1048576)} MB for about 60 MB printed, 150 MB of events)`)
  const stored = await server.app.repos.deployments.lines(deploymentId, 1, lines - 2)
  t.equal(stored.items.length, 1, 'its last lines are stored, readable through service_deployments_logs')
  // Reading again: what the client gets ends long before the run did, because the server cut it off.
  let closed = false
  socket.on('close', () => (closed = true))
  socket.resume()
  await until(() => closed, 10_000, 'the end of the connection the server closed')
  t.notOk(received.includes('"id":"loud-1","result"'), 'the cut-off client never got the final answer on that connection')
  t.ok(received.length < 40 * 1024 * 1024, `it got ${Math.round(received.length / 1048576)} MB of the output, not all of it`)
  // The stream is resumable (a session stream): the client could come back for the latest events with Last-Event-ID.
})

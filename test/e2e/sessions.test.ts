import t, { type Test } from 'tap'
import { request } from 'undici'
import { callTool, initializeMessage, openSession, post, readReply, type RpcReply } from '../helpers/mcp.js'
import { createKey, createMember, ownerMembership } from '../helpers/seed.js'
import { startServer, tempDatabase } from '../helpers/server.js'
import { openLive, sleep, type LiveStream } from '../helpers/stream.js'

const PING = { jsonrpc: '2.0', id: 1, method: 'ping' }

function sessionNotFound(t: Test, reply: RpcReply, label: string): void {
  t.equal(reply.status, 404, `${label}: 404`)
  t.match(String(reply.headers['content-type']), /^application\/json/, `${label}: JSON`)
  t.strictSame(Object.keys(reply.json?.error ?? {}).sort(), ['action', 'code', 'details', 'message'], `${label}: service error shape`)
  t.equal(reply.json.error.code, 'SESSION_NOT_FOUND', `${label}: SESSION_NOT_FOUND`)
  t.match(reply.json.error.message, /expired or (is )?invalid/, `${label}: message says expired or invalid`)
  t.match(reply.json.error.action, /[Ii]nitialize a new session/, `${label}: action says to initialize`)
  t.equal(reply.json.error.details, null, `${label}: details null`)
}

async function del(url: string, headers: Record<string, string>): Promise<RpcReply> {
  return readReply(await request(url, { method: 'DELETE', headers }))
}

async function get(url: string, headers: Record<string, string>): Promise<RpcReply> {
  return readReply(await request(url, { method: 'GET', headers: { ...headers, accept: 'text/event-stream' } }))
}

async function openGet(t: Test, url: string, headers: Record<string, string>): Promise<LiveStream> {
  const live = await openLive(url, { method: 'GET', headers: { ...headers, accept: 'text/event-stream' } })
  t.teardown(() => live.close())
  t.equal(live.status, 200, 'GET stream opened')
  t.match(String(live.headers['content-type']), /^text\/event-stream/)
  return live
}

t.test('DELETE closes the session', async (t) => {
  const server = await startServer(t)
  const { headers, sessionId } = await openSession(server.mcpUrl, server.apiKey)
  const other = await openSession(server.mcpUrl, server.apiKey)
  const live = await openGet(t, server.mcpUrl, headers)

  const res = await request(server.mcpUrl, { method: 'DELETE', headers: { authorization: headers.authorization!, 'mcp-session-id': sessionId } })
  const body = await res.body.text()
  t.equal(res.statusCode, 204)
  t.equal(body, '', 'no body')
  t.equal(res.headers['content-type'], undefined, 'no content type')

  await live.ended(1000)
  t.ok(live.endedByServer, 'the open GET stream of the session ends')

  sessionNotFound(t, await post(server.mcpUrl, PING, headers), 'POST after DELETE')
  sessionNotFound(t, await post(server.mcpUrl, callTool('service_whoami'), headers), 'tools/call after DELETE')
  sessionNotFound(t, await del(server.mcpUrl, headers), 'second DELETE')
  sessionNotFound(t, await get(server.mcpUrl, headers), 'GET after DELETE')

  const untouched = await post(server.mcpUrl, PING, other.headers)
  t.equal(untouched.status, 200, 'other sessions are not affected')
})

t.test('idle sessions expire; used ones do not', async (t) => {
  const idleMs = 250
  const server = await startServer(t, { config: { sessionIdleMs: idleMs, sessionSweepMs: 50 } })
  const unused = await openSession(server.mcpUrl, server.apiKey)
  const used = await openSession(server.mcpUrl, server.apiKey)
  const streaming = await openSession(server.mcpUrl, server.apiKey)
  const openedAt = Date.now()
  const live = await openGet(t, server.mcpUrl, streaming.headers)
  let streamEndedAt = 0
  void live.ended(3000).then(() => { streamEndedAt = Date.now() }, () => {})

  // Each ping restarts the idle timer somewhere between its start and its end, so two consecutive touches are at most
  // (end of this ping - start of the previous one) apart. Only when every such bound is under the idle time does the
  // run prove anything; on a machine too loaded for that the liveness checks are skipped rather than flaky.
  const pings: Array<{ start: number; end: number; status: number }> = []
  while (Date.now() - openedAt < 3 * idleMs) {
    await sleep(30)
    const start = Date.now()
    const { status } = await post(server.mcpUrl, PING, used.headers)
    pings.push({ start, end: Date.now(), status })
  }
  const last = { start: Date.now(), end: 0, status: 0 }
  last.status = (await post(server.mcpUrl, PING, used.headers)).status
  last.end = Date.now()
  pings.push(last)
  const maxGap = Math.max(...pings.map((p, i) => p.end - (i === 0 ? p.start : pings[i - 1]!.start)))
  const statuses = pings.map((p) => p.status).join(',')
  if (maxGap < idleMs) {
    t.ok(pings.length >= 6, 'the used session was used several times')
    t.ok(pings.every((p) => p.status === 200), `a session used more often than the idle time stays alive past it (${statuses})`)
    t.ok(last.end - openedAt > 2 * idleMs, 'well past the idle time')
  } else {
    t.pass('liveness of a used session', { skip: `machine too loaded to keep the session busy: ${maxGap} ms between touches (${statuses})` })
  }

  await live.ended(2000)
  t.ok(live.endedByServer, 'the open GET stream was ended by the server when its session expired')
  t.ok(streamEndedAt - openedAt >= idleMs, `the stream lived until the idle time (${streamEndedAt - openedAt} ms)`)

  sessionNotFound(t, await post(server.mcpUrl, PING, unused.headers), 'unused session')
  sessionNotFound(t, await post(server.mcpUrl, PING, streaming.headers), 'session whose only activity was an open stream')
  sessionNotFound(t, await get(server.mcpUrl, unused.headers), 'GET on an expired session')

  const fresh = await post(server.mcpUrl, initializeMessage(), { authorization: `Bearer ${server.apiKey}` })
  t.equal(fresh.status, 200, 'a new session can be initialized after expiry')
  t.not(fresh.headers['mcp-session-id'], unused.sessionId, 'with a new id')
})

t.test('an idle session is refused even before the sweeper runs', async (t) => {
  const server = await startServer(t, { config: { sessionIdleMs: 300, sessionSweepMs: 600_000 } })
  const { headers } = await openSession(server.mcpUrl, server.apiKey)
  t.equal((await post(server.mcpUrl, PING, headers)).status, 200)
  await sleep(400)
  sessionNotFound(t, await post(server.mcpUrl, PING, headers), 'idle session without a sweep')
})

t.test('a session is usable only with the credential that created it', async (t) => {
  const server = await startServer(t)
  const { headers, sessionId } = await openSession(server.mcpUrl, server.apiKey)
  const sameMember = (await createKey(server, (await ownerMembership(server)).id)).key
  const otherMember = (await createMember(server, { role: 'owner' })).key

  for (const [label, key] of [['another key of the same member', sameMember], ['a key of another member', otherMember]] as const) {
    const foreign = { ...headers, authorization: `Bearer ${key}` }
    sessionNotFound(t, await post(server.mcpUrl, PING, foreign), `${label}: POST`)
    sessionNotFound(t, await post(server.mcpUrl, callTool('service_whoami'), foreign), `${label}: tools/call`)
    sessionNotFound(t, await get(server.mcpUrl, foreign), `${label}: GET`)
    sessionNotFound(t, await del(server.mcpUrl, foreign), `${label}: DELETE`)
    t.equal((await post(server.mcpUrl, { jsonrpc: '2.0', id: 2, method: 'ping' }, { ...foreign, 'mcp-session-id': 'x' })).status, 404)
  }

  const still = await post(server.mcpUrl, callTool('service_whoami'), headers)
  t.equal(still.status, 200, 'the session survives attempts with other keys (a foreign DELETE did not close it)')
  t.equal(still.json.result.isError, false)
  t.equal(JSON.parse(still.json.result.content[0].text).user.email, 'owner@example.com')
  t.equal((await server.app.sessions.get(sessionId))?.id, sessionId)
})

t.test('a revoked key is refused and its sessions end', async (t) => {
  const server = await startServer(t)
  const member = await createMember(server, { role: 'developer' })
  const first = await openSession(server.mcpUrl, member.key)
  const second = await openSession(server.mcpUrl, member.key)
  const owner = await openSession(server.mcpUrl, server.apiKey)
  const live = await openGet(t, server.mcpUrl, first.headers)
  t.equal((await post(server.mcpUrl, callTool('service_whoami'), first.headers)).status, 200)

  t.ok(await server.app.repos.apiKeys.revoke(member.keyId), 'key revoked in the database')

  const refused = await post(server.mcpUrl, PING, first.headers)
  t.equal(refused.status, 401)
  t.equal(refused.json.error.code, 'TOKEN_REVOKED')
  t.match(refused.json.error.action, /[Aa]uthorize again/)
  t.match(String(refused.headers['www-authenticate']), /error="invalid_token"/)
  t.match(String(refused.headers['www-authenticate']), /resource_metadata="/)

  await live.ended(1000)
  t.ok(live.endedByServer, 'the open GET stream of the revoked credential ends')
  t.equal(await server.app.sessions.get(first.sessionId), undefined, 'the first session ended')
  t.equal(await server.app.sessions.get(second.sessionId), undefined, 'every session bound to the key ended')
  t.not((await server.app.repos.sessions.byId(first.sessionId))?.endedAt ?? null, null, 'the end is recorded in the database')

  const initialize = await post(server.mcpUrl, initializeMessage(), { authorization: `Bearer ${member.key}` })
  t.equal(initialize.status, 401)
  t.equal(initialize.json.error.code, 'TOKEN_REVOKED')

  const replacement = (await createKey(server, member.membership.id)).key
  for (const s of [first, second]) {
    sessionNotFound(t, await post(server.mcpUrl, PING, { ...s.headers, authorization: `Bearer ${replacement}` }), 'old session with a new valid key')
  }
  const renewed = await openSession(server.mcpUrl, replacement)
  t.equal((await post(server.mcpUrl, PING, renewed.headers)).status, 200, 'the new key opens a new session')
  t.equal((await post(server.mcpUrl, PING, owner.headers)).status, 200, 'sessions of other credentials are unaffected')
})

t.test('sessions survive a restart', async (t) => {
  const dbPath = tempDatabase(t)
  const first = await startServer(t, { dbPath })
  const kept = await openSession(first.mcpUrl, first.apiKey, '2025-06-18')
  const closed = await openSession(first.mcpUrl, first.apiKey, '2025-06-18')
  const before = await post(first.mcpUrl, callTool('service_whoami'), kept.headers)
  t.equal(before.status, 200)
  t.equal((await del(first.mcpUrl, closed.headers)).status, 204)
  await first.close()

  const second = await startServer(t, { dbPath })
  t.not(second.mcpUrl, '', 'restarted')
  const headers = { ...kept.headers }
  const after = await post(second.mcpUrl, callTool('service_whoami', {}, 2), headers)
  t.equal(after.status, 200, 'the same session id and key work after the restart')
  t.equal(after.json.id, 2)
  t.equal(after.json.result.isError, false)
  t.strictSame(after.json.result.structuredContent, before.json.result.structuredContent, 'same member, same answer')
  t.ok(after.json.result.structuredContent, 'the negotiated 2025-06-18 revision was kept (structuredContent)')

  const wrongVersion = await post(second.mcpUrl, PING, { ...headers, 'mcp-protocol-version': '2025-11-25' })
  t.equal(wrongVersion.status, 400)
  t.equal(wrongVersion.json.error.code, 'UNSUPPORTED_PROTOCOL_VERSION')

  sessionNotFound(t, await post(second.mcpUrl, PING, closed.headers), 'a session closed before the restart stays closed')
})

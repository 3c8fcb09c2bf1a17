import t, { type Test } from 'tap'
import { request } from 'undici'
import { callTool, initializeMessage, openSession, post, readReply, type RpcReply } from '../helpers/mcp.js'
import { createKey, createMember, ownerMembership } from '../helpers/seed.js'
import { startServer, tempDatabase } from '../helpers/server.js'
import { ManualClock } from '../helpers/clock.js'
import { openLive, type LiveStream } from '../helpers/stream.js'

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

// When sessions expire is decided by the server's clock: test/inject/sessions-idle.test.ts. Here, what needs a socket:
// an open GET stream is no activity, and it ends (cleanly, by the server) when its session expires.
t.test('the open GET stream of an idle session ends when the session expires', async (t) => {
  const idleMs = 60_000
  const clock = new ManualClock()
  const server = await startServer(t, { clock, config: { sessionIdleMs: idleMs, sessionSweepMs: idleMs / 4 } })
  const streaming = await openSession(server.mcpUrl, server.apiKey)
  const live = await openGet(t, server.mcpUrl, streaming.headers)

  await clock.advance(idleMs - 1)
  t.ok(server.app.sessionStreams.holds(streaming.sessionId), '1 ms before the idle time, the session still holds its stream')
  await clock.advance(1)
  // The bound only says how long a failing run waits: the sweep at the idle time has ended the stream already.
  await live.ended(5000)
  t.ok(live.endedByServer, 'the open GET stream was ended by the server when its session expired')
  sessionNotFound(t, await post(server.mcpUrl, PING, streaming.headers), 'session whose only activity was an open stream')
  sessionNotFound(t, await get(server.mcpUrl, streaming.headers), 'GET on an expired session')
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

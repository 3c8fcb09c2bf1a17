import t, { type Test } from 'tap'
import { initializeMessage, openSession, post, type RpcReply } from '../helpers/mcp.js'
import { injectServer } from '../helpers/inject.js'

// A session's idle time (SERVICE_SESSION_IDLE_MS) and its sweep (SERVICE_SESSION_SWEEP_MS), in the inject tier
// (test/helpers/inject.ts): the server's manual clock moves only when the test says so, so each check is made at the
// exact instant before or at the limit, whatever the machine's load. That an open GET stream ends with its session is
// a socket's matter: test/e2e/sessions.test.ts.

const PING = { jsonrpc: '2.0', id: 1, method: 'ping' }
const IDLE_MS = 60_000

function sessionNotFound(t: Test, reply: RpcReply, label: string): void {
  t.equal(reply.status, 404, `${label}: 404`)
  t.equal(reply.json?.error?.code, 'SESSION_NOT_FOUND', `${label}: SESSION_NOT_FOUND`)
}

t.test('an idle session expires at its idle time; one used more often does not', async (t) => {
  const server = await injectServer(t, { config: { sessionIdleMs: IDLE_MS, sessionSweepMs: IDLE_MS / 4 } })
  const unused = await openSession(server.mcpUrl, server.apiKey)
  const used = await openSession(server.mcpUrl, server.apiKey)

  await server.clock.advance(IDLE_MS - 1)
  t.ok(server.app.sessions.inMemory(unused.sessionId), '1 ms before its idle time, the unused session is still held')
  t.equal((await post(server.mcpUrl, PING, used.headers)).status, 200, 'the used session is used')
  await server.clock.advance(1)
  t.equal(server.app.sessions.inMemory(unused.sessionId), undefined, 'at its idle time, the sweep dropped the unused session')
  sessionNotFound(t, await post(server.mcpUrl, PING, unused.headers), 'the unused session')
  t.equal((await post(server.mcpUrl, PING, used.headers)).status, 200, 'the used session, used 1 ms ago, lives on')

  // Used every (idle time - 1 ms), for three idle times: never idle for the whole of it.
  for (let i = 0; i < 3; i++) {
    await server.clock.advance(IDLE_MS - 1)
    t.equal((await post(server.mcpUrl, PING, used.headers)).status, 200, `the used session, use ${i + 3}`)
  }
  await server.clock.advance(IDLE_MS)
  sessionNotFound(t, await post(server.mcpUrl, PING, used.headers), 'the used session, once left idle for its idle time')

  const fresh = await post(server.mcpUrl, initializeMessage(), { authorization: `Bearer ${server.apiKey}` })
  t.equal(fresh.status, 200, 'a new session can be initialized after expiry')
  t.not(fresh.headers['mcp-session-id'], unused.sessionId, 'with a new id')
})

t.test('an idle session is refused even before the sweeper runs', async (t) => {
  const server = await injectServer(t, { config: { sessionIdleMs: IDLE_MS, sessionSweepMs: 100 * IDLE_MS } })
  const { headers } = await openSession(server.mcpUrl, server.apiKey)
  await server.clock.advance(IDLE_MS - 1)
  t.equal((await post(server.mcpUrl, PING, headers)).status, 200, '1 ms before its idle time: usable (and used again)')
  await server.clock.advance(IDLE_MS)
  sessionNotFound(t, await post(server.mcpUrl, PING, headers), 'idle for its idle time, without a sweep')
})

import t from 'tap'
import { callTool, openSession, post } from '../helpers/mcp.js'
import { createMember } from '../helpers/seed.js'
import { ManualClock } from '../helpers/clock.js'
import { startServer } from '../helpers/server.js'
import { openLive } from '../helpers/stream.js'

// A key revoked by another process (the CLI writes straight to the database) used to end its sessions only when the
// revoked key was presented again; an open stream kept receiving heartbeats until it idled out.
t.test('a key revoked outside the server ends its sessions and streams without being presented again', async (t) => {
  // The revocation watch runs at each sweep interval of the server's clock, which the test moves (docs/decisions/clock.md).
  const SWEEP_MS = 60_000
  const clock = new ManualClock()
  const server = await startServer(t, { clock, config: { sessionSweepMs: SWEEP_MS } })
  const member = await createMember(server, { role: 'viewer' })
  const { sessionId, headers } = await openSession(server.mcpUrl, member.key)
  t.equal((await post(server.mcpUrl, callTool('service_whoami'), headers)).status, 200)
  const live = await openLive(server.mcpUrl, { method: 'GET', headers: { ...headers, accept: 'text/event-stream' } })
  t.teardown(() => live.close())
  t.equal(live.status, 200)

  t.ok(await server.app.repos.apiKeys.revoke(member.keyId), 'revoked in the database, as the CLI does')
  await clock.advance(SWEEP_MS - 1)
  t.ok(server.app.sessions.inMemory(sessionId), 'not noticed before the watch runs')
  await clock.advance(1)
  // The bound only limits a failing run: the watch at the sweep interval has ended the stream already.
  await live.ended(5000)
  t.ok(live.endedByServer, 'the stream was ended by the server')
  t.equal(await server.app.sessions.get(sessionId), undefined, 'the session ended')
  const row = await server.app.repos.sessions.byId(sessionId)
  t.ok(row === undefined || row.endedAt !== null, 'and its end is recorded (or the ended row already purged)')
})

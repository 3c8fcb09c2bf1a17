import t from 'tap'
import { callTool, openSession, post } from '../helpers/mcp.js'
import { createMember } from '../helpers/seed.js'
import { cli } from '../helpers/cli.js'
import { otherRepos } from '../helpers/database.js'
import { startServer } from '../helpers/server.js'

// Verified credentials are cached in memory. A change made by another process must still count on the very next
// request, long before the revocation watcher's next sweep.
t.test('changes made by another process reach the next request despite the credential cache', async (t) => {
  const server = await startServer(t, { config: { sessionSweepMs: 3_600_000 } })
  const member = await createMember(server, { role: 'viewer' })
  const { headers } = await openSession(server.mcpUrl, member.key)
  const whoami = async () => (await post(server.mcpUrl, callTool('service_whoami'), headers))
  t.equal((await whoami()).json.result.structuredContent.role, 'viewer')

  // The repositories of another connection to the same database, as the CLI has them.
  const other = await otherRepos(t, server)
  await other.memberships.upsert({ userId: member.user.id, organizationId: member.membership.organizationId, role: 'developer' })
  t.equal((await whoami()).json.result.structuredContent.role, 'developer', 'a role changed by the CLI applies at once')

  t.ok(await other.apiKeys.revoke(member.keyId))
  const revoked = await whoami()
  t.equal(revoked.status, 401)
  t.equal(revoked.json.error.code, 'TOKEN_REVOKED', 'a key revoked by the CLI is refused at once')
})

t.test('a key revoked in this process is refused on the next request', async (t) => {
  const server = await startServer(t)
  const member = await createMember(server, { role: 'viewer' })
  const { headers } = await openSession(server.mcpUrl, member.key)
  t.equal((await post(server.mcpUrl, callTool('service_whoami'), headers)).status, 200)
  await server.app.repos.apiKeys.revoke(member.keyId)
  const res = await post(server.mcpUrl, callTool('service_whoami'), headers)
  t.equal(res.status, 401)
  t.equal(res.json.error.code, 'TOKEN_REVOKED')
})

// The cache skips asking SQLite while the wal-index header has not moved (db/sqlite/commit-watch.ts). Another process maps
// that header through its own connection: its commits must show through before its command returns.
t.test('a key revoked by the CLI process is refused on the very next request', async (t) => {
  const server = await startServer(t, { config: { sessionSweepMs: 3_600_000 } })
  const member = await createMember(server, { role: 'viewer' })
  const { headers } = await openSession(server.mcpUrl, member.key)
  const whoami = async () => (await post(server.mcpUrl, callTool('service_whoami'), headers))
  t.equal((await whoami()).status, 200)
  t.equal((await whoami()).status, 200, 'served from the credential cache')

  const changed = await cli(['members', 'set', member.user.email, 'default', 'developer'], server.cliEnv)
  t.equal(changed.code, 0, changed.stderr)
  t.equal((await whoami()).json.result.structuredContent.role, 'developer', 'a role set by the CLI applies at once')

  const revoked = await cli(['keys', 'revoke', member.keyId], server.cliEnv)
  t.equal(revoked.code, 0, revoked.stderr)
  const res = await whoami()
  t.equal(res.status, 401)
  t.equal(res.json.error.code, 'TOKEN_REVOKED')
})

import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { callTool, openSession, post } from '../helpers/mcp.js'
import { oauthTokens } from '../helpers/oauth.js'
import { createMember } from '../helpers/seed.js'
import { startServer } from '../helpers/server.js'

// The account page shows when a key or an authorized application was last used; requests record it behind.
t.test('API keys and OAuth grants record their last use', async (t) => {
  const server = await startServer(t, { config: { sessionTouchFlushMs: 20 } })
  const member = await createMember(server, { role: 'viewer' })
  t.equal((await server.app.repos.apiKeys.byId(member.keyId))?.lastUsedAt, null, 'never used yet')
  const before = Date.now()
  const { headers } = await openSession(server.mcpUrl, member.key)
  t.equal((await post(server.mcpUrl, callTool('service_whoami'), headers)).status, 200)
  await sleep(80)
  const used = (await server.app.repos.apiKeys.byId(member.keyId))?.lastUsedAt ?? 0
  t.ok(used >= before, 'the key records its last use')

  const { tokens } = await oauthTokens(server)
  const owner = (await server.app.repos.users.byEmail('owner@example.com'))!
  const listed = async () => (await server.app.repos.oauthGrants.authorizedClients(owner.id, Date.now()))[0]
  t.equal((await listed())?.lastUsedAt, null, 'a fresh grant was never used on /mcp')
  await openSession(server.mcpUrl, tokens.access_token)
  await sleep(80)
  t.ok(((await listed())?.lastUsedAt ?? 0) >= before, 'the grant records the use of its access token')
})

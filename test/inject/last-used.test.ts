import t from 'tap'
import { callTool, openSession, post } from '../helpers/mcp.js'
import { oauthTokens } from '../helpers/oauth.js'
import { createMember } from '../helpers/seed.js'
import { injectServer } from '../helpers/inject.js'

// The account page shows when a key or an authorized application was last used; requests record it behind, at each
// SERVICE_SESSION_TOUCH_FLUSH_MS. The inject tier (test/helpers/inject.ts): the flush runs when the test moves the clock.
t.test('API keys and OAuth grants record their last use', async (t) => {
  const FLUSH_MS = 1_000
  const server = await injectServer(t, { config: { sessionTouchFlushMs: FLUSH_MS } })
  const member = await createMember(server, { role: 'viewer' })
  t.equal((await server.app.repos.apiKeys.byId(member.keyId))?.lastUsedAt, null, 'never used yet')
  const usedAt = server.clock.now()
  const { headers } = await openSession(server.mcpUrl, member.key)
  t.equal((await post(server.mcpUrl, callTool('service_whoami'), headers)).status, 200)
  t.equal((await server.app.repos.apiKeys.byId(member.keyId))?.lastUsedAt, null, 'written behind: not before the flush')
  await server.clock.advance(FLUSH_MS)
  t.equal((await server.app.repos.apiKeys.byId(member.keyId))?.lastUsedAt, usedAt, 'the key records its last use, at the flush')

  const { tokens } = await oauthTokens(server)
  const owner = (await server.app.repos.users.byEmail('owner@example.com'))!
  const listed = async () => (await server.app.repos.oauthGrants.authorizedClients(owner.id, server.clock.now()))[0]
  t.equal((await listed())?.lastUsedAt, null, 'a fresh grant was never used on /mcp')
  await server.clock.advance(5)
  const grantUsedAt = server.clock.now()
  await openSession(server.mcpUrl, tokens.access_token)
  await server.clock.advance(FLUSH_MS)
  t.equal((await listed())?.lastUsedAt, grantUsedAt, 'the grant records the use of its access token')
})

import t from 'tap'
import { Client } from 'undici'
import { readReply } from '../helpers/mcp.js'
import { modernRequest } from '../helpers/modern.js'
import { createMember } from '../helpers/seed.js'
import { OWNER_KEY, startServer } from '../helpers/server.js'

// A keep-alive connection remembers the hash of the Authorization value it last sent (plugins/auth.ts), so that the
// same key is not hashed again on every request. The memo must never stand in for another credential, or for a
// credential that has since been revoked.
t.test('one connection, several credentials: each request acts as the credential it sends', async (t) => {
  const server = await startServer(t)
  const member = await createMember(server, { role: 'viewer' })
  const client = new Client(new URL(server.mcpUrl).origin, { pipelining: 1 })
  t.teardown(() => client.close())
  let sockets = 0
  client.on('connect', () => sockets++)
  const whoami = async (key: string) => {
    const { body, headers } = modernRequest(key, 'tools/call', { name: 'service_whoami', arguments: {} })
    const res = await client.request({ path: '/mcp', method: 'POST', headers, body: JSON.stringify(body) })
    return readReply(res)
  }
  const roleOf = async (key: string) => (await whoami(key)).json?.result?.structuredContent?.role

  t.equal(await roleOf(OWNER_KEY), 'owner')
  t.equal(await roleOf(OWNER_KEY), 'owner', 'the same key again')
  t.equal(await roleOf(member.key), 'viewer', 'another key on the same connection acts as that member')
  t.equal(await roleOf(OWNER_KEY), 'owner', 'and back')
  const wrong = await whoami(OWNER_KEY.slice(0, -1) + 'x')
  t.equal(wrong.status, 401, 'a key differing in its last character is refused')

  t.equal(await roleOf(member.key), 'viewer')
  await server.app.repos.apiKeys.revoke(member.keyId)
  const revoked = await whoami(member.key)
  t.equal(revoked.status, 401)
  t.equal(revoked.json.error.code, 'TOKEN_REVOKED', 'a revoked key sent again on its connection is refused')
  t.equal(sockets, 1, 'all of it on one connection')
})

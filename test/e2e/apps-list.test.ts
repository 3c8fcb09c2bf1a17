import t, { type Test } from 'tap'
import { callTool, openSession, post, type RpcReply } from '../helpers/mcp.js'
import { createMember, defaultOrganization } from '../helpers/seed.js'
import { startServer, type TestServer } from '../helpers/server.js'
import { visibleCatalog } from '../helpers/catalog.js'

async function seeded(t: Test) {
  const server = await startServer(t)
  const repos = server.app.repos
  const org = await defaultOrganization(server)
  const other = await repos.organizations.create({ slug: 'other', name: 'Other organization' })
  // One after another, in this order (as before): the listing pages by creation.
  const mine = []
  for (let i = 0; i < 25; i++) mine.push(await repos.apps.create({ organizationId: org.id, name: `app-${String(i).padStart(2, '0')}` }))
  const theirs = []
  for (let i = 0; i < 3; i++) theirs.push(await repos.apps.create({ organizationId: other.id, name: `foreign-${i}` }))
  return { server, org, other, mine, theirs }
}

function toolPayload(t: Test, reply: RpcReply): any {
  t.equal(reply.status, 200)
  t.equal(reply.json.result.isError, false, 'not a tool failure')
  const fromText = JSON.parse(reply.json.result.content[0].text)
  t.strictSame(reply.json.result.structuredContent, fromText, 'structuredContent equals the text content')
  return fromText
}

async function listAll(t: Test, server: TestServer, headers: Record<string, string>, limit: number): Promise<{ sizes: number[]; ids: string[]; cursors: Array<string | null>; created: string[] }> {
  const sizes: number[] = []
  const ids: string[] = []
  const created: string[] = []
  const cursors: Array<string | null> = []
  let cursor: string | null = null
  for (let page = 0; page < 10; page++) {
    const args: Record<string, unknown> = { limit }
    if (cursor !== null) args.cursor = cursor
    const data = toolPayload(t, await post(server.mcpUrl, callTool('service_apps_list', args, page + 1), headers))
    sizes.push(data.apps.length)
    for (const app of data.apps) {
      ids.push(app.id)
      created.push(app.created_at)
      t.strictSame(Object.keys(app).sort(), ['created_at', 'description', 'id', 'name', 'pipeline', 'updated_at'])
    }
    cursors.push(data.next_cursor)
    cursor = data.next_cursor
    if (cursor === null) break
  }
  return { sizes, ids, cursors, created }
}

t.test('paging through the apps of the organization', async (t) => {
  const { server, mine, theirs } = await seeded(t)
  const { headers } = await openSession(server.mcpUrl, server.apiKey, '2025-11-25')

  const { sizes, ids, cursors, created } = await listAll(t, server, headers, 10)
  t.strictSame(sizes, [10, 10, 5], 'pages of 10, 10 and 5')
  t.type(cursors[0], 'string', 'first page has a next_cursor')
  t.type(cursors[1], 'string', 'second page has a next_cursor')
  t.not(cursors[0], cursors[1])
  t.equal(cursors[2], null, 'last page has next_cursor null')
  t.equal(new Set(ids).size, 25, 'all 25 distinct')
  t.strictSame([...ids].sort(), mine.map((a) => a.id).sort(), 'exactly the apps of the organization')
  t.strictSame(created, [...created].sort(), 'oldest first')
  t.strictSame(ids, [...ids].sort(), 'in id order across pages (keyset)')
  for (const foreign of theirs) t.notOk(ids.includes(foreign.id), `${foreign.name} of the other organization is not listed`)

  const defaults = toolPayload(t, await post(server.mcpUrl, callTool('service_apps_list', {}, 'd'), headers))
  t.equal(defaults.apps.length, 20, 'the default limit is 20')
  t.type(defaults.next_cursor, 'string')

  const all = toolPayload(t, await post(server.mcpUrl, callTool('service_apps_list', { limit: 100 }, 'all'), headers))
  t.equal(all.apps.length, 25)
  t.equal(all.next_cursor, null)
})

t.test('a member of the other organization sees only its apps', async (t) => {
  const { server, other, theirs } = await seeded(t)
  const member = await createMember(server, { role: 'viewer', scopes: ['mcp:read'], organizationId: other.id })
  const { headers } = await openSession(server.mcpUrl, member.key, '2025-11-25')
  const data = toolPayload(t, await post(server.mcpUrl, callTool('service_apps_list', {}), headers))
  t.strictSame(data.apps.map((a: { id: string }) => a.id), theirs.map((a) => a.id).sort())
  t.equal(data.next_cursor, null)
})

t.test('an invalid cursor', async (t) => {
  const { server } = await seeded(t)
  const badCursors = ['not-a-cursor', Buffer.from('tools:10').toString('base64url'), 'a'.repeat(256), '!!!']

  t.test('2025-11-25: a tool result with INVALID_ARGUMENTS', async (t) => {
    const { headers } = await openSession(server.mcpUrl, server.apiKey, '2025-11-25')
    for (const cursor of badCursors) {
      const res = await post(server.mcpUrl, callTool('service_apps_list', { cursor }, 'c'), headers)
      t.equal(res.status, 200)
      t.equal(res.json.id, 'c')
      t.notOk('error' in res.json, 'not a JSON-RPC error')
      t.equal(res.json.result.isError, true, `${cursor}: isError`)
      t.equal(res.json.result.content[0].type, 'text')
      const err = JSON.parse(res.json.result.content[0].text)
      t.equal(err.code, 'INVALID_ARGUMENTS', `${cursor}: INVALID_ARGUMENTS`)
      t.type(err.message, 'string')
      t.notOk('structuredContent' in res.json.result, 'a failure carries no structuredContent')
    }
    for (const args of [{ limit: 0 }, { limit: 101 }, { limit: 'ten' }, { cursor: '' }, { unknown: true }]) {
      const res = await post(server.mcpUrl, callTool('service_apps_list', args, 'a'), headers)
      t.equal(res.json.result.isError, true, `${JSON.stringify(args)}: isError`)
      t.equal(JSON.parse(res.json.result.content[0].text).code, 'INVALID_ARGUMENTS')
    }
  })

  for (const version of ['2025-06-18', '2025-03-26']) {
    t.test(`${version}: a JSON-RPC -32602 error`, async (t) => {
      const { headers } = await openSession(server.mcpUrl, server.apiKey, version)
      for (const args of [{ cursor: 'not-a-cursor' }, { cursor: badCursors[1] }, { limit: 0 }]) {
        const res = await post(server.mcpUrl, callTool('service_apps_list', args, 9), headers)
        t.equal(res.status, 200)
        t.equal(res.json.id, 9)
        t.notOk('result' in res.json, 'no result')
        t.equal(res.json.error.code, -32602, `${JSON.stringify(args)}: -32602`)
        t.equal(res.json.error.data.code, 'INVALID_ARGUMENTS')
      }
    })
  }
})

t.test('roles and scopes', async (t) => {
  const { server, mine } = await seeded(t)

  t.test('a viewer can list', async (t) => {
    const viewer = await createMember(server, { role: 'viewer' })
    const { headers } = await openSession(server.mcpUrl, viewer.key, '2025-11-25')
    const list = await post(server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }, headers)
    t.strictSame(list.json.result.tools.map((x: { name: string }) => x.name), visibleCatalog('viewer'))
    const data = toolPayload(t, await post(server.mcpUrl, callTool('service_apps_list', { limit: 100 }), headers))
    t.equal(data.apps.length, 25)
    t.strictSame(data.apps.map((a: { id: string }) => a.id), mine.map((a) => a.id).sort())
    const who = toolPayload(t, await post(server.mcpUrl, callTool('service_whoami', {}, 2), headers))
    t.equal(who.role, 'viewer')
  })

  t.test('a key with only mcp:write does not see or call the read tools', async (t) => {
    const writer = await createMember(server, { role: 'owner', scopes: ['mcp:write'] })
    const { headers } = await openSession(server.mcpUrl, writer.key, '2025-11-25')
    const list = await post(server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }, headers)
    t.equal(list.status, 200)
    const names = list.json.result.tools.map((x: { name: string }) => x.name)
    t.notOk(names.includes('service_apps_list'), 'service_apps_list is not listed')
    t.notOk(names.includes('service_whoami'), 'service_whoami is not listed')

    for (const accept of ['application/json, text/event-stream', 'text/event-stream', 'application/json']) {
      const res = await post(server.mcpUrl, callTool('service_apps_list', {}, 2), { ...headers, accept })
      t.equal(res.status, 403, `${accept}: HTTP 403`)
      t.match(String(res.headers['content-type']), /^application\/json/)
      t.equal(res.json.error.code, 'INSUFFICIENT_SCOPE')
      t.strictSame(Object.keys(res.json.error).sort(), ['action', 'code', 'details', 'message'])
      const challenge = String(res.headers['www-authenticate'])
      t.match(challenge, /^Bearer /)
      t.match(challenge, /error="insufficient_scope"/)
      t.match(challenge, /scope="[^"]*mcp:read[^"]*"/, 'scope= names the missing scope')
      t.match(challenge, /resource_metadata="http:\/\/127\.0\.0\.1:\d+\/\.well-known\/oauth-protected-resource\/mcp"/)
      t.match(res.headers['x-request-id'], /^[0-9a-f-]{36}$/)
    }

    const ping = await post(server.mcpUrl, { jsonrpc: '2.0', id: 3, method: 'ping' }, headers)
    t.equal(ping.status, 200, 'the session is still usable')
  })

  t.test('a key with only mcp:read can list', async (t) => {
    const reader = await createMember(server, { role: 'developer', scopes: ['mcp:read'] })
    const { headers } = await openSession(server.mcpUrl, reader.key, '2025-06-18')
    const data = toolPayload(t, await post(server.mcpUrl, callTool('service_apps_list', { limit: 5 }), headers))
    t.equal(data.apps.length, 5)
    t.type(data.next_cursor, 'string')
  })
})

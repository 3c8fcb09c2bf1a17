/**
 * Effective permission = token scope ∩ the member's current role, over HTTP with OAuth access tokens: the scope
 * refusal is HTTP 403 with an insufficient_scope challenge, the role refusal a PERMISSION_DENIED tool result, and role
 * changes apply to the very next request made with the same token.
 */
import t, { type Test } from 'tap'
import { builtinTools, defineTool } from '../../src/index.js'
import { hashPassword } from '../../src/lib/crypto.js'
import { callTool, openSession, post, type RpcReply } from '../helpers/mcp.js'
import { authorizeUrl, browserAuthorize, FormBrowser, pkce, registerClient, tokenRequest } from '../helpers/oauth.js'
import { createKey, createMember, defaultOrganization } from '../helpers/seed.js'
import { startServer, type TestServer } from '../helpers/server.js'

const writes: string[] = []

const teamWrite = defineTool<{ note: string }, { stored: string }>({
  name: 'team_note_write',
  title: 'Write a note',
  description: 'Stores a note (test tool needing mcp:write and developer).',
  inputSchema: { type: 'object', properties: { note: { type: 'string' } }, required: ['note'], additionalProperties: false },
  outputSchema: { type: 'object', properties: { stored: { type: 'string' } }, required: ['stored'], additionalProperties: false },
  scope: 'mcp:write',
  role: 'developer',
  handler: (args) => {
    writes.push(args.note)
    return { stored: args.note }
  },
})

async function tokenFor(server: TestServer, options: { scope: string; email?: string; password?: string }): Promise<string> {
  const client = await registerClient(server)
  const p = pkce()
  const { redirect } = await browserAuthorize(server, authorizeUrl(server, client, p, { scope: options.scope }), {
    browser: new FormBrowser(server.url),
    ...(options.email ? { email: options.email } : {}),
    ...(options.password ? { password: options.password } : {}),
  })
  const res = await tokenRequest(server, { grant_type: 'authorization_code', code: redirect.searchParams.get('code') ?? '', redirect_uri: client.redirect_uris[0]!, client_id: client.client_id, code_verifier: p.verifier })
  if (res.status !== 200) throw new Error(`exchange failed: ${res.status} ${JSON.stringify(res.json)}`)
  if (res.json.scope !== options.scope) throw new Error(`granted ${res.json.scope}, asked ${options.scope}`)
  return res.json.access_token as string
}

function names(reply: RpcReply): string[] {
  return (reply.json?.result?.tools ?? []).map((x: { name: string }) => x.name)
}

function toolError(reply: RpcReply): { code: string; message: string } | undefined {
  const result = reply.json?.result
  if (!result?.isError) return undefined
  return JSON.parse(result.content[0].text)
}

function insufficientScope(t: Test, server: TestServer, reply: RpcReply, label: string): void {
  t.equal(reply.status, 403, `${label}: HTTP 403`)
  t.equal(reply.json?.error?.code, 'INSUFFICIENT_SCOPE', `${label}: INSUFFICIENT_SCOPE`)
  const challenge = String(reply.headers['www-authenticate'] ?? '')
  t.match(challenge, /^Bearer /, `${label}: a Bearer challenge`)
  t.match(challenge, /error="insufficient_scope"/, `${label}: error="insufficient_scope"`)
  const scope = /scope="([^"]*)"/.exec(challenge)?.[1]
  t.ok(scope?.split(' ').includes('mcp:write'), `${label}: scope="…" names the missing mcp:write (${scope})`)
  t.match(challenge, `resource_metadata="${server.url}/.well-known/oauth-protected-resource/mcp"`, `${label}: resource_metadata`)
}

t.test('an mcp:read token: the write tool is hidden and refused with 403 insufficient_scope', async (t) => {
  const server = await startServer(t, { tools: [...builtinTools, teamWrite] })
  const read = await tokenFor(server, { scope: 'mcp:read' })
  const { headers } = await openSession(server.mcpUrl, read)

  const list = await post(server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, headers)
  t.equal(list.status, 200)
  t.notOk(names(list).includes('team_note_write'), 'tools/list hides the write tool')
  t.ok(names(list).includes('service_whoami'), 'read tools are listed')

  const before = writes.length
  insufficientScope(t, server, await post(server.mcpUrl, callTool('team_note_write', { note: 'read token' }, 2), headers), 'owner with mcp:read')
  t.equal(writes.length, before, 'the handler did not run')

  const who = await post(server.mcpUrl, callTool('service_whoami', {}, 3), headers)
  t.equal(who.json.result.isError, false)
  t.strictSame(who.json.result.structuredContent.scopes, ['mcp:read'], 'whoami reports the token scope')
  t.equal(who.json.result.structuredContent.credential.kind, 'oauth')
  t.equal(who.json.result.structuredContent.role, 'owner')

  // Control: the same owner with mcp:write sees and calls it.
  const write = await tokenFor(server, { scope: 'mcp:read mcp:write' })
  const w = await openSession(server.mcpUrl, write)
  t.ok(names(await post(server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, w.headers)).includes('team_note_write'), 'listed with mcp:write')
  const call = await post(server.mcpUrl, callTool('team_note_write', { note: 'write token' }, 2), w.headers)
  t.equal(call.status, 200)
  t.equal(call.json.result.isError, false, 'callable with mcp:write and the owner role')
  t.strictSame(call.json.result.structuredContent, { stored: 'write token' })

  // An API key carrying only mcp:read is held to the same rule.
  const owner = (await server.app.repos.memberships.find((await server.app.repos.users.byEmail('owner@example.com'))!.id, (await defaultOrganization(server)).id))!
  const readKey = (await createKey(server, owner.id, ['mcp:read'])).key
  const k = await openSession(server.mcpUrl, readKey)
  insufficientScope(t, server, await post(server.mcpUrl, callTool('team_note_write', { note: 'key' }, 2), k.headers), 'API key with mcp:read')
})

// A viewer's grant is narrowed to mcp:read at consent (test/e2e/hardening-oauth.test.ts); an mcp:write token of a
// member demoted to viewer afterwards is what a viewer holding write scope looks like now.
t.test('an mcp:write token of a member demoted to viewer: the role decides, and role changes apply to the next request', async (t) => {
  const server = await startServer(t, { tools: [...builtinTools, teamWrite] })
  const repos = server.app.repos
  const member = await createMember(server, { role: 'developer' })
  await repos.users.setPasswordHash(member.user.id, await hashPassword('viewer password 1'))
  const token = await tokenFor(server, { scope: 'mcp:read mcp:write', email: member.user.email, password: 'viewer password 1' })
  await repos.memberships.upsert({ userId: member.user.id, organizationId: member.membership.organizationId, role: 'viewer' })
  const { headers } = await openSession(server.mcpUrl, token)
  const list = () => post(server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, headers)
  let id = 10
  const call = () => post(server.mcpUrl, callTool('team_note_write', { note: `viewer ${id}` }, ++id), headers)

  t.notOk(names(await list()).includes('team_note_write'), 'a viewer does not see the write tool, whatever the token scope')
  const before = writes.length
  const denied = await call()
  t.equal(denied.status, 200, 'a role refusal is not an HTTP error')
  t.equal(denied.json.result.isError, true)
  t.equal(toolError(denied)?.code, 'PERMISSION_DENIED', 'PERMISSION_DENIED as a tool result')
  t.equal(writes.length, before, 'the handler did not run')

  await repos.memberships.upsert({ userId: member.user.id, organizationId: member.membership.organizationId, role: 'developer' })
  t.ok(names(await list()).includes('team_note_write'), 'promoted to developer: listed on the next request, same token and session')
  const allowed = await call()
  t.equal(allowed.json.result.isError, false, 'and callable')
  t.equal(writes.length, before + 1, 'the handler ran once')
  const who = await post(server.mcpUrl, callTool('service_whoami', {}, 99), headers)
  t.equal(who.json.result.structuredContent.role, 'developer', 'whoami sees the current role')

  await repos.memberships.upsert({ userId: member.user.id, organizationId: member.membership.organizationId, role: 'viewer' })
  t.equal(toolError(await call())?.code, 'PERMISSION_DENIED', 'demoted again: refused on the next request')
  t.notOk(names(await list()).includes('team_note_write'), 'and hidden again')

  t.ok(await repos.memberships.remove(member.user.id, member.membership.organizationId), 'membership removed')
  const gone = await list()
  t.equal(gone.status, 401, 'the token of a removed membership: 401 on the next request')
  t.match(String(gone.headers['www-authenticate']), /error="invalid_token"/)
  const init = await post(server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } } }, { authorization: `Bearer ${token}` })
  t.equal(init.status, 401, 'and it cannot open a new session either')
})

import t, { type Test } from 'tap'
import { defineTool } from '../../src/index.js'
import { builtinTools } from '../../src/plugins/tools/builtin/index.js'
import { orgTools } from '../../src/plugins/tools/builtin/org.js'
import type { ToolDefinition } from '../../src/plugins/tools/define.js'
import { callTool, openSession, post, type RpcReply } from '../helpers/mcp.js'
import { oauthTokens } from '../helpers/oauth.js'
import { createMember, defaultOrganization, ownerMembership } from '../helpers/seed.js'
import { startServer, type TestServer } from '../helpers/server.js'

/** A write tool of this test: every call of an mcp:write tool is written to the audit log, with its target. */
const notesCreate = defineTool<{ text: string }, { id: string }>({
  name: 'test_notes_create',
  title: 'Create a note',
  description: 'Test write tool.',
  inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'], additionalProperties: false },
  outputSchema: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] },
  scope: 'mcp:write',
  role: 'developer',
  handler: (args) => ({ id: `note_${args.text}` }),
  auditTarget: (_args, output) => ({ targetType: 'note', targetId: output.id }),
})

/** The built-in catalog plus the organization tools (once, whether or not the wiring has added them yet). */
function catalog(extra: ToolDefinition<any, any>[] = []): ToolDefinition<any, any>[] {
  const byName = new Map<string, ToolDefinition<any, any>>()
  for (const def of [...builtinTools, ...orgTools, ...extra]) if (!byName.has(def.name)) byName.set(def.name, def)
  return [...byName.values()]
}

function payload(t: Test, reply: RpcReply): any {
  t.equal(reply.status, 200)
  t.equal(reply.json?.result?.isError, false, 'not a tool failure')
  const data = JSON.parse(reply.json.result.content[0].text)
  t.strictSame(reply.json.result.structuredContent, data, 'structuredContent equals the text content')
  return data
}

function failure(reply: RpcReply): { code: string; message: string } {
  if (reply.status !== 200 || reply.json?.result?.isError !== true) throw new Error(`expected a tool failure, got ${reply.status} ${reply.text}`)
  return JSON.parse(reply.json.result.content[0].text)
}

let ids = 0
const call = (server: TestServer, headers: Record<string, string>, name: string, args: Record<string, unknown> = {}) =>
  post(server.mcpUrl, callTool(name, args, ++ids), headers)

async function listAll(t: Test, server: TestServer, headers: Record<string, string>, tool: string, key: string, args: Record<string, unknown>) {
  const items: any[] = []
  const sizes: number[] = []
  let cursor: string | null = null
  for (let page = 0; page < 50; page++) {
    const data: any = payload(t, await call(server, headers, tool, cursor === null ? args : { ...args, cursor }))
    items.push(...data[key])
    sizes.push(data[key].length)
    cursor = data.next_cursor
    if (cursor === null) break
    t.type(cursor, 'string')
  }
  return { items, sizes }
}

async function seeded(t: Test) {
  const server = await startServer(t, { tools: catalog([notesCreate]) })
  const repos = server.app.repos
  const org = await defaultOrganization(server)
  const other = await repos.organizations.create({ slug: 'other', name: 'Other organization' })
  const admin = await createMember(server, { role: 'admin', scopes: ['mcp:read', 'mcp:write'] })
  const developer = await createMember(server, { role: 'developer', scopes: ['mcp:read', 'mcp:write'] })
  const viewer = await createMember(server, { role: 'viewer', scopes: ['mcp:read'] })
  const extra = []
  for (let i = 0; i < 4; i++) extra.push(await createMember(server, { role: 'viewer' }))
  const otherAdmin = await createMember(server, { role: 'admin', organizationId: other.id })
  const otherDev = await createMember(server, { role: 'developer', organizationId: other.id })
  // A user of the other organization who is also a member here, with another role.
  const both = await repos.memberships.upsert({ userId: otherDev.user.id, organizationId: org.id, role: 'viewer' })
  const adminSession = await openSession(server.mcpUrl, admin.key)
  return { server, repos, org, other, admin, developer, viewer, extra, otherAdmin, otherDev, both, adminHeaders: adminSession.headers }
}

t.test('service_members_list', async (t) => {
  const s = await seeded(t)
  const { server, repos, org, other, adminHeaders } = s

  t.test('lists exactly the members of the organization, by email', async (t) => {
    const data = payload(t, await call(server, adminHeaders, 'service_members_list', { limit: 100 }))
    t.equal(data.next_cursor, null)
    const expected = await repos.memberships.forOrganization(org.id)
    t.equal(data.members.length, 9, 'owner, admin, developer, viewer, four viewers and the member of both organizations')
    t.strictSame(data.members.map((m: any) => m.membership_id).sort(), expected.map((m) => m.id).sort())
    const emails = data.members.map((m: any) => m.email)
    t.strictSame(emails, [...emails].sort(), 'sorted by email')
    for (const m of data.members) {
      t.strictSame(Object.keys(m).sort(), ['email', 'joined_at', 'membership_id', 'name', 'role', 'user_id'])
      const row = expected.find((e) => e.id === m.membership_id)!
      t.strictSame(m, { membership_id: row.id, user_id: row.userId, email: row.email, name: row.userName, role: row.role, joined_at: new Date(row.createdAt).toISOString() })
    }
    const byUser = new Map(data.members.map((m: any) => [m.user_id, m]))
    t.equal((byUser.get((await ownerMembership(server)).userId) as any).role, 'owner')
    t.equal((byUser.get(s.admin.user.id) as any).role, 'admin')
    t.equal((byUser.get(s.otherDev.user.id) as any).role, 'viewer', 'the role held in this organization')
    t.equal((byUser.get(s.otherDev.user.id) as any).membership_id, s.both.id)
    t.notOk(byUser.has(s.otherAdmin.user.id), 'a member of only the other organization is not listed')

    const defaults = payload(t, await call(server, adminHeaders, 'service_members_list'))
    t.equal(defaults.members.length, 9, 'the default limit (20) covers all')
  })

  t.test('pages with an opaque cursor', async (t) => {
    const all = payload(t, await call(server, adminHeaders, 'service_members_list', { limit: 100 })).members
    const { items, sizes } = await listAll(t, server, adminHeaders, 'service_members_list', 'members', { limit: 2 })
    t.strictSame(sizes, [2, 2, 2, 2, 1])
    t.strictSame(items, all, 'the pages join into the whole list, in order, without repeats')

    const first = payload(t, await call(server, adminHeaders, 'service_members_list', { limit: 4 }))
    t.notMatch(first.next_cursor, /usr_|@/, 'the cursor is opaque')
    const exact = payload(t, await call(server, adminHeaders, 'service_members_list', { limit: 9 }))
    t.equal(exact.next_cursor, null, 'no cursor when the page ends the list exactly')

    // Members removed between two pages (the one the cursor names, and the next) shift nothing.
    const removable = new Set([s.developer, s.viewer, ...s.extra].map((m) => m.user.id))
    const i = all.findIndex((m: any, k: number) => k >= 1 && removable.has(m.user_id) && removable.has(all[k - 1].user_id))
    t.ok(i >= 1, 'two neighbours that may be removed')
    const before = payload(t, await call(server, adminHeaders, 'service_members_list', { limit: i }))
    t.strictSame(before.members, all.slice(0, i))
    for (const m of [all[i - 1], all[i]]) {
      await repos.memberships.remove(m.user_id, org.id)
      t.teardown(async () => { await repos.memberships.upsert({ userId: m.user_id, organizationId: org.id, role: m.role }) })
    }
    const after = payload(t, await call(server, adminHeaders, 'service_members_list', { limit: 100, cursor: before.next_cursor }))
    t.strictSame(after.members, all.slice(i + 1))
  })

  t.test('an invalid cursor is INVALID_ARGUMENTS', async (t) => {
    const foreign = Buffer.from('apps:app_0000000000').toString('base64url')
    const unknownUser = Buffer.from('members:usr_nobody').toString('base64url')
    for (const cursor of ['not-a-cursor', foreign, unknownUser, '!!!']) {
      t.equal(failure(await call(server, adminHeaders, 'service_members_list', { cursor })).code, 'INVALID_ARGUMENTS', cursor)
    }
    for (const args of [{ limit: 0 }, { limit: 101 }, { cursor: '' }, { role: 'admin' }]) {
      t.equal(failure(await call(server, adminHeaders, 'service_members_list', args)).code, 'INVALID_ARGUMENTS', JSON.stringify(args))
    }
  })

  t.test('an admin of the other organization sees only its members', async (t) => {
    const { headers } = await openSession(server.mcpUrl, s.otherAdmin.key)
    const data = payload(t, await call(server, headers, 'service_members_list'))
    t.strictSame(data.members.map((m: any) => m.membership_id).sort(), (await repos.memberships.forOrganization(other.id)).map((m) => m.id).sort())
    t.strictSame(data.members.map((m: any) => m.user_id).sort(), [s.otherAdmin.user.id, s.otherDev.user.id].sort())
    // A cursor made in one organization only positions the list of the caller's own organization.
    const mine = payload(t, await call(server, adminHeaders, 'service_members_list', { limit: 1 }))
    const theirs = payload(t, await call(server, headers, 'service_members_list', { cursor: mine.next_cursor }))
    for (const m of theirs.members) t.ok((await repos.memberships.forOrganization(other.id)).some((x) => x.id === m.membership_id))
  })
})

t.test('service_audit_list', async (t) => {
  const s = await seeded(t)
  const { server, repos, org, other, adminHeaders } = s
  const owner = await ownerMembership(server)

  // Entries written by tool calls: three successful writes by the admin, one by the owner over OAuth, and a denial.
  for (const text of ['a', 'b', 'c']) payload(t, await call(server, adminHeaders, 'test_notes_create', { text }))
  const { tokens, client } = await oauthTokens(server)
  const ownerOAuth = await openSession(server.mcpUrl, tokens.access_token)
  payload(t, await call(server, ownerOAuth.headers, 'test_notes_create', { text: 'oauth' }))
  const devSession = await openSession(server.mcpUrl, s.developer.key)
  t.equal(failure(await call(server, devSession.headers, 'service_audit_list')).code, 'PERMISSION_DENIED')
  let appCreated = false
  if (builtinTools.some((d) => d.name === 'service_apps_create')) {
    const res = await call(server, adminHeaders, 'service_apps_create', { name: 'audited-app' })
    appCreated = res.json?.result?.isError === false
  }
  // Entries of the other organization, by tool and directly.
  const otherSession = await openSession(server.mcpUrl, s.otherDev.key)
  payload(t, await call(server, otherSession.headers, 'test_notes_create', { text: 'foreign' }))
  const foreign = await repos.audit.add({ organizationId: other.id, userId: s.otherAdmin.user.id, membershipId: s.otherAdmin.membership.id, credentialKind: 'api_key', credentialId: s.otherAdmin.keyId, clientId: null, action: 'test_notes_create', targetType: 'note', targetId: 'note_x', outcome: 'succeeded', details: null })

  t.test('shows the entries of tool calls, newest first, with who did it', async (t) => {
    const data = payload(t, await call(server, adminHeaders, 'service_audit_list', { limit: 100 }))
    t.equal(data.next_cursor, null)
    const ids = data.entries.map((e: any) => e.id)
    t.strictSame(ids, [...ids].sort().reverse(), 'newest first (ids descend)')
    const times = data.entries.map((e: any) => Date.parse(e.at))
    t.strictSame(times, [...times].sort((a, b) => b - a), 'times never increase')
    t.equal(data.entries.length, await repos.audit.count(org.id), 'every entry of the organization')
    for (const e of data.entries) {
      t.strictSame(Object.keys(e).sort(), ['action', 'actor', 'at', 'details', 'id', 'outcome', 'target_id', 'target_type'])
      t.strictSame(Object.keys(e.actor).sort(), ['client_id', 'credential_id', 'credential_kind', 'membership_id', 'user_id'])
      t.match(e.at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
      t.not(e.id, foreign.id, 'never an entry of the other organization')
      t.not(e.actor.membership_id, s.otherDev.membership.id, 'never the other organization\'s calls')
    }
    const notes = data.entries.filter((e: any) => e.action === 'test_notes_create')
    t.strictSame(notes.map((e: any) => e.target_id), ['note_oauth', 'note_c', 'note_b', 'note_a'])
    t.strictSame(notes[1], {
      id: notes[1].id,
      at: notes[1].at,
      actor: { user_id: s.admin.user.id, membership_id: s.admin.membership.id, credential_kind: 'api_key', credential_id: s.admin.keyId, client_id: null },
      action: 'test_notes_create',
      target_type: 'note',
      target_id: 'note_c',
      outcome: 'succeeded',
      details: notes[1].details,
    })
    t.match(notes[0].actor, { user_id: owner.userId, membership_id: owner.id, credential_kind: 'oauth', client_id: client.client_id })
    t.type(notes[0].actor.credential_id, 'string')
    const denied = data.entries.find((e: any) => e.action === 'service_audit_list')
    t.match(denied, { outcome: 'denied', actor: { membership_id: s.developer.membership.id } }, 'the refused call is recorded')
    if (appCreated) t.ok(data.entries.some((e: any) => e.action === 'service_apps_create' && e.outcome === 'succeeded'), 'the app created through a tool')
  })

  t.test('pages with an opaque cursor', async (t) => {
    const all = payload(t, await call(server, adminHeaders, 'service_audit_list', { limit: 100 })).entries
    const { items, sizes } = await listAll(t, server, adminHeaders, 'service_audit_list', 'entries', { limit: 2 })
    t.equal(sizes.reduce((a, b) => a + b, 0), all.length)
    t.ok(sizes.slice(0, -1).every((n) => n === 2))
    t.strictSame(items, all, 'the pages join into the whole log, newest first, without repeats')
    const first = payload(t, await call(server, adminHeaders, 'service_audit_list', { limit: 1 }))
    // Entries written after the first page do not appear on the next pages.
    await repos.audit.add({ organizationId: org.id, userId: null, membershipId: null, credentialKind: 'api_key', credentialId: null, clientId: null, action: 'test_later', targetType: null, targetId: null, outcome: 'succeeded', details: null })
    const next = payload(t, await call(server, adminHeaders, 'service_audit_list', { limit: 100, cursor: first.next_cursor }))
    t.strictSame(next.entries, all.slice(1))
    for (const cursor of ['nope', Buffer.from('members:usr_x').toString('base64url')]) {
      t.equal(failure(await call(server, adminHeaders, 'service_audit_list', { cursor })).code, 'INVALID_ARGUMENTS', cursor)
    }
    for (const args of [{ limit: 0 }, { limit: 101 }, { action: '' }, { actor: 'x' }]) {
      t.equal(failure(await call(server, adminHeaders, 'service_audit_list', args)).code, 'INVALID_ARGUMENTS', JSON.stringify(args))
    }
  })

  t.test('the action filter', async (t) => {
    const notes = payload(t, await call(server, adminHeaders, 'service_audit_list', { action: 'test_notes_create' }))
    t.strictSame(notes.entries.map((e: any) => e.target_id), ['note_oauth', 'note_c', 'note_b', 'note_a'], 'only this action, of this organization')
    t.equal(notes.next_cursor, null)
    const { items, sizes } = await listAll(t, server, adminHeaders, 'service_audit_list', 'entries', { action: 'test_notes_create', limit: 3 })
    t.strictSame(sizes, [3, 1])
    t.strictSame(items, notes.entries)
    const none = payload(t, await call(server, adminHeaders, 'service_audit_list', { action: 'no_such_action' }))
    t.strictSame(none, { entries: [], next_cursor: null })

    // Matches scattered through a long log (more than one read of the repository).
    const add = async (action: string) => repos.audit.add({ organizationId: org.id, userId: null, membershipId: null, credentialKind: 'api_key', credentialId: null, clientId: null, action, targetType: null, targetId: null, outcome: 'succeeded', details: { n: 1 } })
    const rare: string[] = []
    for (let i = 0; i < 1300; i++) {
      if (i % 400 === 7) rare.push((await add('test_rare')).id)
      await add('test_noise')
    }
    const rareAll = await listAll(t, server, adminHeaders, 'service_audit_list', 'entries', { action: 'test_rare', limit: 2 })
    t.strictSame(rareAll.sizes, [2, 2])
    t.strictSame(rareAll.items.map((e: any) => e.id), [...rare].reverse())
    const page = payload(t, await call(server, adminHeaders, 'service_audit_list', { action: 'test_rare', limit: 4 }))
    t.equal(page.next_cursor, null, 'exactly a page: no cursor')
  })

  t.test('an admin of the other organization sees only its entries', async (t) => {
    const { headers } = await openSession(server.mcpUrl, s.otherAdmin.key)
    const data = payload(t, await call(server, headers, 'service_audit_list', { limit: 100 }))
    t.strictSame(data.entries.map((e: any) => e.id).sort(), (await repos.audit.page(other.id, 100)).items.map((e) => e.id).sort())
    t.ok(data.entries.some((e: any) => e.id === foreign.id))
    t.ok(data.entries.some((e: any) => e.target_id === 'note_foreign'))
    t.notOk(data.entries.some((e: any) => ['note_a', 'note_b', 'note_c', 'note_oauth'].includes(e.target_id)))
    const filtered = payload(t, await call(server, headers, 'service_audit_list', { action: 'test_notes_create' }))
    t.strictSame(filtered.entries.map((e: any) => e.target_id).sort(), ['note_foreign', 'note_x'])
  })
})

t.test('below admin: PERMISSION_DENIED for both tools', async (t) => {
  const s = await seeded(t)
  for (const member of [s.developer, s.viewer]) {
    const { headers } = await openSession(s.server.mcpUrl, member.key)
    const list = await post(s.server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }, headers)
    const names = list.json.result.tools.map((x: { name: string }) => x.name)
    for (const name of ['service_members_list', 'service_audit_list']) {
      t.notOk(names.includes(name), `${member.membership.role}: ${name} is not listed`)
      const res = await call(s.server, headers, name, { limit: 5 })
      t.equal(res.status, 200)
      const err = failure(res)
      t.equal(err.code, 'PERMISSION_DENIED', `${member.membership.role}: ${name}`)
      t.notOk('structuredContent' in res.json.result)
    }
  }
  const list = await post(s.server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }, s.adminHeaders)
  const tools = list.json.result.tools.filter((x: { name: string }) => x.name === 'service_members_list' || x.name === 'service_audit_list')
  t.equal(tools.length, 2, 'an admin sees both')
  for (const tool of tools) {
    t.match(tool._meta, { 'service/scope': 'mcp:read', 'service/role': 'admin', 'service/rate_limit': { limit: 60, window_seconds: 60 } })
    t.equal(tool.annotations.readOnlyHint, true)
    t.equal(tool.inputSchema.properties.limit.maximum, 100)
    t.equal(tool.inputSchema.properties.limit.default, 20)
    t.type(tool.outputSchema, 'object')
  }
})

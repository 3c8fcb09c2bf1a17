import t, { type Test } from 'tap'
import type { Role } from '../../src/lib/roles.js'
import { builtinTools } from '../../src/plugins/tools/builtin/index.js'
import { orgTools } from '../../src/plugins/tools/builtin/org.js'
import type { ToolDefinition } from '../../src/plugins/tools/define.js'
import { callTool, openSession, post, type RpcReply } from '../helpers/mcp.js'
import { createMember } from '../helpers/seed.js'
import { startServer, type TestServer } from '../helpers/server.js'

/**
 * Every tool × every role × every scope set: listed iff the scope covers it AND the role allows it
 * (docs/decisions/identity-and-roles.md); a missing scope is HTTP 403 INSUFFICIENT_SCOPE, a role too low is the tool
 * result PERMISSION_DENIED, and an allowed call is neither (its dummy `{}` arguments may fail for other reasons).
 * Written over the catalog, not over names.
 */

const ROLES: Role[] = ['viewer', 'developer', 'admin', 'owner']
const RANK: Record<Role, number> = { viewer: 0, developer: 1, admin: 2, owner: 3 }
const SCOPE_SETS: string[][] = [['mcp:read'], ['mcp:write'], ['mcp:read', 'mcp:write']]
const REFUSALS = ['PERMISSION_DENIED', 'INSUFFICIENT_SCOPE']
/** Dummy arguments may fail, but never as a crash. */
const NEVER_ALLOWED = [...REFUSALS, 'INTERNAL_ERROR']
const GROUP = 8

interface Member {
  role: Role
  scopes: string[]
  label: string
  headers: Record<string, string>
}

function unique(defs: ToolDefinition<any, any>[]): ToolDefinition<any, any>[] {
  const byName = new Map<string, ToolDefinition<any, any>>()
  for (const def of defs) if (!byName.has(def.name)) byName.set(def.name, def)
  return [...byName.values()]
}

async function inGroups<T>(items: T[], fn: (item: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += GROUP) await Promise.all(items.slice(i, i + GROUP).map(fn))
}

async function listNames(server: TestServer, headers: Record<string, string>): Promise<string[]> {
  const names: string[] = []
  let cursor: string | undefined
  for (let page = 0; page < 100; page++) {
    const res = await post(server.mcpUrl, { jsonrpc: '2.0', id: `list-${page}`, method: 'tools/list', params: cursor ? { cursor } : {} }, headers)
    if (res.status !== 200 || !res.json?.result) throw new Error(`tools/list failed: ${res.status} ${res.text}`)
    names.push(...res.json.result.tools.map((x: { name: string }) => x.name))
    cursor = res.json.result.nextCursor
    if (cursor === undefined) break
  }
  return names
}

/** The JSON-RPC answer to request `id`, whether it came as JSON or on an SSE stream. */
function answer(reply: RpcReply, id: string): any {
  if (reply.json !== undefined) return reply.json
  return reply.messages.find((m) => m.id === id && ('result' in m || 'error' in m))
}

/** The catalog code a tools/call ended with, if any (tool failure or JSON-RPC error). */
function codeOf(reply: RpcReply, id: string): string | undefined {
  const msg = answer(reply, id)
  if (msg?.result?.isError === true) return JSON.parse(msg.result.content[0].text).code
  if (msg?.error) return msg.error.data?.code ?? `jsonrpc ${msg.error.code}`
  return undefined
}

async function matrix(t: Test, catalog: ToolDefinition<any, any>[], tools?: ToolDefinition<any, any>[]) {
  const server = await startServer(t, tools ? { tools } : {})
  const members: Member[] = []
  for (const role of ROLES) {
    for (const scopes of SCOPE_SETS) {
      const m = await createMember(server, { role, scopes })
      members.push({ role, scopes, label: `${role} [${scopes.join(' ')}]`, headers: {} })
      members.at(-1)!.headers = (await openSession(server.mcpUrl, m.key)).headers
    }
  }
  t.equal(members.length, 12)

  const served = await listNames(server, members.find((m) => m.role === 'owner' && m.scopes.length === 2)!.headers)
  t.strictSame([...served].sort(), catalog.map((d) => d.name).sort(), 'an owner with both scopes sees the whole catalog')

  await inGroups(members, async (member) => {
    const names = await listNames(server, member.headers)
    const expected = catalog.filter((d) => member.scopes.includes(d.scope) && RANK[member.role] >= RANK[d.role]).map((d) => d.name)
    t.strictSame([...names].sort(), [...expected].sort(), `${member.label}: tools/list is exactly scope ∩ role`)
  })

  const cells = members.flatMap((member) => catalog.map((def) => ({ member, def })))
  let n = 0
  await inGroups(cells, async ({ member, def }) => {
    const id = `c${++n}`
    const what = `${member.label} → ${def.name} (${def.scope}, ${def.role})`
    const res = await post(server.mcpUrl, callTool(def.name, {}, id), member.headers)
    if (!member.scopes.includes(def.scope)) {
      t.equal(res.status, 403, `${what}: HTTP 403`)
      t.equal(res.json?.error?.code, 'INSUFFICIENT_SCOPE', `${what}: INSUFFICIENT_SCOPE`)
      t.match(String(res.headers['www-authenticate']), /^Bearer .*error="insufficient_scope"/, `${what}: WWW-Authenticate insufficient_scope`)
      t.match(String(res.headers['www-authenticate']), new RegExp(`scope="[^"]*${def.scope}`), `${what}: the challenge names ${def.scope}`)
      return
    }
    t.equal(res.status, 200, `${what}: HTTP 200`)
    const code = codeOf(res, id)
    if (RANK[member.role] < RANK[def.role]) {
      t.equal(code, 'PERMISSION_DENIED', `${what}: PERMISSION_DENIED`)
      t.equal(answer(res, id)?.result?.isError, true, `${what}: a tool result with isError`)
    } else {
      t.ok(answer(res, id), `${what}: answered`)
      t.notOk(code !== undefined && NEVER_ALLOWED.includes(code), `${what}: allowed (${code ?? 'succeeded'})`)
    }
  })
  t.equal(n, 12 * catalog.length, 'every cell was called')
}

t.test('the built-in catalog', async (t) => {
  t.ok(builtinTools.length >= 2)
  await matrix(t, builtinTools)
})

t.test('the built-in catalog with the organization tools', async (t) => {
  const catalog = unique([...builtinTools, ...orgTools])
  t.ok(catalog.some((d) => d.name === 'service_members_list') && catalog.some((d) => d.name === 'service_audit_list'))
  t.ok(catalog.some((d) => d.role === 'admin'), 'a tool needing admin is covered')
  await matrix(t, catalog, catalog)
})

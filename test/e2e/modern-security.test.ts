/**
 * The same security on the stateless 2026-07-28 path as on the sessions (docs/decisions/stateless-revision.md):
 * authentication (401 with WWW-Authenticate), scopes ∩ roles on tools/list and tools/call for every built-in tool,
 * organization isolation, the rate limits (shared with the sessions of the same member), the audit log, and the Origin
 * check, over real sockets.
 */
import t, { type Test } from 'tap'
import type { Config } from '../../src/config.js'
import type { Role } from '../../src/lib/roles.js'
import { defineTool } from '../../src/index.js'
import { builtinTools } from '../../src/plugins/tools/builtin/index.js'
import type { ToolDefinition } from '../../src/plugins/tools/define.js'
import { databaseRows } from '../helpers/database.js'
import { callTool, initializeMessage, openSession, post, type RpcReply } from '../helpers/mcp.js'
import { answerOf, ELICITING, modernCall, modernPost, modernRequest, rawPost } from '../helpers/modern.js'
import { oauthTokens, revokeRequest } from '../helpers/oauth.js'
import { createMember, defaultOrganization, ownerMembership } from '../helpers/seed.js'
import { startServer, type TestServer } from '../helpers/server.js'
import { sleep } from '../helpers/stream.js'

const ROLES: Role[] = ['viewer', 'developer', 'admin', 'owner']
const RANK: Record<Role, number> = { viewer: 0, developer: 1, admin: 2, owner: 3 }
const SCOPE_SETS: string[][] = [['mcp:read'], ['mcp:read', 'mcp:write'], ['mcp:write']]
const PIPELINES = { default: { argv: [process.execPath, '-e', 'process.exit(0)'] } }
/** Window of the rate-limit tests: a burst must fit in one window, and recovery waits about this long. */
const WINDOW_MS = 1500
const ROOMY: Partial<Config> = { rateLimitWindowMs: WINDOW_MS, rateLimitOAuthMember: 1000, rateLimitApiKeyMember: 1000, rateLimitOrganization: 1000, rateLimitToolFactor: 1 }

let nextId = 1
const rid = () => ++nextId

function serve(t: Test, config: Partial<Config> = {}, tools: ToolDefinition<any, any>[] = builtinTools): Promise<TestServer> {
  return startServer(t, { tools, config: { pipelines: PIPELINES, ...config } })
}

const resourceMetadata = (server: TestServer) => `${server.url}/.well-known/oauth-protected-resource/mcp`

/** The service error body `{"error":{code,message,details,action}}` with `code`, and its HTTP status. */
function serviceError(t: Test, reply: RpcReply, status: number, code: string, what: string): any {
  t.equal(reply.status, status, `${what}: HTTP ${status}`)
  t.match(String(reply.headers['content-type']), /^application\/json/, `${what}: JSON`)
  t.equal(reply.json?.error?.code, code, `${what}: ${code}`)
  t.strictSame(Object.keys(reply.json?.error ?? {}).sort(), ['action', 'code', 'details', 'message'], `${what}: the service error body`)
  t.notOk('jsonrpc' in (reply.json ?? {}), `${what}: not a JSON-RPC body`)
  t.equal(reply.headers['mcp-session-id'], undefined, `${what}: no Mcp-Session-Id`)
  return reply.json?.error
}

/** The parameters of a `Bearer k="v", …` challenge. */
function challenge(header: unknown): Record<string, string> {
  const value = String(header ?? '')
  const params: Record<string, string> = {}
  if (!value.startsWith('Bearer ')) return params
  for (const m of value.slice(7).matchAll(/([a-z_]+)="([^"]*)"/g)) params[m[1]!] = m[2]!
  return params
}

/** A tool result's catalog code (tool failures), or undefined for a success. */
function toolCode(result: any): string | undefined {
  return result?.isError ? JSON.parse(result.content[0].text).code : undefined
}

/** Modern tools/list, every page. */
async function modernNames(server: TestServer, token: string): Promise<string[]> {
  const names: string[] = []
  let cursor: string | undefined
  for (let page = 0; page < 50; page++) {
    const reply = await modernPost(server.mcpUrl, token, 'tools/list', cursor ? { cursor } : {}, { id: `list-${page}` })
    const result = answerOf(reply, `list-${page}`)?.result
    if (reply.status !== 200 || !result) throw new Error(`modern tools/list failed: ${reply.status} ${reply.text}`)
    if (result.resultType !== 'complete' || result.cacheScope !== 'private') throw new Error(`modern tools/list result: ${reply.text}`)
    names.push(...result.tools.map((x: { name: string }) => x.name))
    cursor = result.nextCursor
    if (cursor === undefined) break
  }
  return names
}

/** Legacy tools/list in a 2025-11-25 session of the same credential, every page. */
async function legacyNames(server: TestServer, token: string): Promise<string[]> {
  const { headers } = await openSession(server.mcpUrl, token)
  const names: string[] = []
  let cursor: string | undefined
  for (let page = 0; page < 50; page++) {
    const reply = await post(server.mcpUrl, { jsonrpc: '2.0', id: page + 1, method: 'tools/list', params: cursor ? { cursor } : {} }, headers)
    if (reply.status !== 200 || !reply.json?.result) throw new Error(`legacy tools/list failed: ${reply.status} ${reply.text}`)
    names.push(...reply.json.result.tools.map((x: { name: string }) => x.name))
    cursor = reply.json.result.nextCursor
    if (cursor === undefined) break
  }
  return names
}

/** HTTP 429 RATE_LIMITED with the service body and the rate-limit headers. */
function rateLimited(t: Test, reply: RpcReply, limit: number, what: string): void {
  serviceError(t, reply, 429, 'RATE_LIMITED', what)
  const retryAfter = String(reply.headers['retry-after'])
  t.match(retryAfter, /^\d+$/, `${what}: Retry-After in seconds`)
  t.ok(Number(retryAfter) >= 1 && Number(retryAfter) <= Math.ceil(WINDOW_MS / 1000), `${what}: Retry-After ${retryAfter} within the window`)
  t.equal(reply.headers['x-ratelimit-limit'], String(limit), `${what}: X-RateLimit-Limit ${limit}`)
  t.equal(reply.headers['x-ratelimit-remaining'], '0', `${what}: X-RateLimit-Remaining 0`)
}

function modernOk(t: Test, reply: RpcReply, what: string): void {
  t.equal(reply.status, 200, `${what}: HTTP 200`)
  t.ok(reply.json?.result && reply.json.result.resultType === 'complete', `${what}: answered`)
}

const whoami = (server: TestServer, token: string) => modernCall(server.mcpUrl, token, 'service_whoami', {}, { id: rid() })

t.test('authentication: the same 401s as the sessions, before anything runs', async (t) => {
  const server = await serve(t)
  const repos = server.app.repos
  const revoked = await createMember(server, { role: 'owner' })
  const expired = await repos.apiKeys.create({ membershipId: (await ownerMembership(server)).id, name: 'expired', scopes: ['mcp:read', 'mcp:write'], expiresAt: Date.now() - 1000 })
  t.equal((await modernCall(server.mcpUrl, revoked.key, 'service_whoami')).status, 200, 'the key works before it is revoked')
  t.ok(await repos.apiKeys.revoke(revoked.keyId), 'revoked')

  const create = (token: string | undefined, name: string) => {
    const { body, headers } = modernRequest(token ?? 'unused', 'tools/call', { name: 'service_apps_create', arguments: { name } })
    if (token === undefined) delete headers.authorization
    return { body, headers }
  }
  const cases: Array<{ what: string; authorization: string | undefined; code: string; error?: string }> = [
    { what: 'no Authorization', authorization: undefined, code: 'INVALID_TOKEN' },
    { what: 'not a Bearer credential', authorization: 'Basic b3duZXI6cGFzcw==', code: 'INVALID_TOKEN', error: 'invalid_token' },
    { what: 'a Bearer value with spaces', authorization: 'Bearer not a token', code: 'INVALID_TOKEN', error: 'invalid_token' },
    { what: 'an unknown API key', authorization: `Bearer service_mcp_${'x'.repeat(43)}`, code: 'INVALID_TOKEN', error: 'invalid_token' },
    { what: 'a JWT-shaped forgery', authorization: 'Bearer eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln', code: 'INVALID_TOKEN', error: 'invalid_token' },
    { what: 'a revoked API key', authorization: `Bearer ${revoked.key}`, code: 'TOKEN_REVOKED', error: 'invalid_token' },
    { what: 'an expired API key', authorization: `Bearer ${expired.key}`, code: 'TOKEN_EXPIRED', error: 'invalid_token' },
  ]
  for (const [i, c] of cases.entries()) {
    const { body, headers } = create(undefined, `app-${i}`)
    if (c.authorization !== undefined) headers.authorization = c.authorization
    const reply = await rawPost(server.mcpUrl, body, headers)
    serviceError(t, reply, 401, c.code, `modern, ${c.what}`)
    const params = challenge(reply.headers['www-authenticate'])
    t.equal(params.resource_metadata, resourceMetadata(server), `${c.what}: WWW-Authenticate names the resource metadata`)
    t.equal(params.error, c.error, `${c.what}: error=${c.error ?? '(none when no token was sent)'}`)
    // The same credential on a session request gets the same answer.
    const legacyHeaders: Record<string, string> = c.authorization === undefined ? {} : { authorization: c.authorization }
    const legacy = await post(server.mcpUrl, initializeMessage(), legacyHeaders)
    t.equal(legacy.status, 401, `legacy, ${c.what}: 401`)
    t.equal(legacy.json?.error?.code, c.code, `legacy, ${c.what}: ${c.code}`)
    t.equal(legacy.headers['www-authenticate'], reply.headers['www-authenticate'], `${c.what}: the same challenge in both eras`)
  }
  t.equal((await repos.apps.page((await defaultOrganization(server)).id, 100)).items.length, 0, 'no app was created')

  // An OAuth access token revoked at /oauth/revoke (RFC 7009).
  const { tokens, client } = await oauthTokens(server)
  modernOk(t, await whoami(server, tokens.access_token), 'an OAuth token works')
  t.equal((await revokeRequest(server, { token: tokens.access_token, client_id: client.client_id })).status, 200, 'revoked at /oauth/revoke')
  const revokedToken = await whoami(server, tokens.access_token)
  serviceError(t, revokedToken, 401, 'TOKEN_REVOKED', 'modern, a revoked OAuth token')
  t.equal(challenge(revokedToken.headers['www-authenticate']).error, 'invalid_token')
})

t.test('authentication: an expired OAuth access token → 401 TOKEN_EXPIRED', async (t) => {
  // exp is whole seconds: with 2000 ms a token lives between 1 and 2 s.
  const server = await serve(t, { accessTokenTtlMs: 2000 })
  const { tokens } = await oauthTokens(server)
  let reply = await whoami(server, tokens.access_token)
  modernOk(t, reply, 'a short-lived OAuth token works at first')
  const deadline = Date.now() + 4000
  while (reply.status === 200 && Date.now() < deadline) {
    await sleep(100)
    reply = await whoami(server, tokens.access_token)
  }
  serviceError(t, reply, 401, 'TOKEN_EXPIRED', 'modern, an expired OAuth token')
  const params = challenge(reply.headers['www-authenticate'])
  t.equal(params.error, 'invalid_token')
  t.equal(params.resource_metadata, resourceMetadata(server))
})

t.test('scope ∩ role: modern tools/list equals the legacy list; tools/call refuses by scope (403) and by role (PERMISSION_DENIED)', async (t) => {
  const server = await serve(t)
  const repos = server.app.repos
  const catalog = builtinTools
  const members = []
  for (const role of ROLES) {
    for (const scopes of SCOPE_SETS) members.push({ role, scopes, label: `${role} [${scopes.join(' ')}]`, ...(await createMember(server, { role, scopes })) })
  }

  await Promise.all(members.map(async (m) => {
    const expected = catalog.filter((d) => m.scopes.includes(d.scope) && RANK[m.role] >= RANK[d.role]).map((d) => d.name)
    const [modern, legacy] = await Promise.all([modernNames(server, m.key), legacyNames(server, m.key)])
    t.strictSame(modern, legacy, `${m.label}: the modern list is the legacy list`)
    t.strictSame(modern, expected, `${m.label}: exactly the tools scope and role allow`)

    const results = await Promise.all(catalog.map(async (def) => {
      const id = `${def.name}-${m.keyId}`
      const reply = await modernCall(server.mcpUrl, m.key, def.name, {}, { id })
      return { def, reply, answer: answerOf(reply, id) }
    }))
    for (const { def, reply, answer } of results) {
      const what = `${m.label} → ${def.name}`
      if (!m.scopes.includes(def.scope)) {
        const error = serviceError(t, reply, 403, 'INSUFFICIENT_SCOPE', what)
        t.equal(error?.details?.required_scope, def.scope, `${what}: names the scope`)
        const params = challenge(reply.headers['www-authenticate'])
        t.equal(params.error, 'insufficient_scope', `${what}: error="insufficient_scope"`)
        t.strictSame((params.scope ?? '').split(' ').sort(), [...new Set([...m.scopes, def.scope])].sort(), `${what}: scope= what the token has plus what the tool needs`)
        t.equal(params.resource_metadata, resourceMetadata(server), `${what}: resource_metadata`)
      } else if (RANK[m.role] < RANK[def.role]) {
        t.equal(reply.status, 200, `${what}: HTTP 200`)
        t.equal(answer?.result?.resultType, 'complete', `${what}: a complete result`)
        t.equal(toolCode(answer?.result), 'PERMISSION_DENIED', `${what}: PERMISSION_DENIED`)
      } else {
        t.equal(reply.status, 200, `${what}: HTTP 200`)
        t.ok(answer?.result, `${what}: a result`)
        t.notOk(['PERMISSION_DENIED', 'INSUFFICIENT_SCOPE', 'INTERNAL_ERROR'].includes(toolCode(answer?.result) ?? ''), `${what}: allowed (${toolCode(answer?.result) ?? 'ok'})`)
      }
    }
    const denied = (await repos.audit.page((await defaultOrganization(server)).id, 1000)).items
      .filter((e) => e.membershipId === m.membership.id && e.outcome === 'denied')
    const expectedDenied = catalog.filter((d) => m.scopes.includes(d.scope) && RANK[m.role] < RANK[d.role]).map((d) => d.name)
    t.strictSame(denied.map((e) => e.action).sort(), expectedDenied.sort(), `${m.label}: every role denial audited, nothing else denied`)
    for (const e of denied) {
      t.equal(e.details?.reason, 'role', `${m.label} ${e.action}: denied for the role`)
      t.equal(e.credentialKind, 'api_key')
      t.equal(e.credentialId, m.keyId)
    }
  }))
})

t.test('organization isolation: another organization\'s app is RESOURCE_NOT_FOUND, exactly like an absent id', async (t) => {
  const server = await serve(t)
  const repos = server.app.repos
  const org2 = await repos.organizations.create({ slug: 'elsewhere', name: 'Elsewhere' })
  const foreign = await repos.apps.create({ organizationId: org2.id, name: 'foreign' })
  await repos.envVars.set({ organizationId: org2.id, appId: foreign.id, name: 'TOKEN', ciphertext: 'opaque', userId: null })
  const d = await repos.deployments.create({ organizationId: org2.id, appId: foreign.id, kind: 'deploy', pipeline: 'default', createdBy: null })
  await repos.deployments.finish(d.id, 'succeeded', Date.now(), 0, 'exit 0')
  const absent = `app_${'z'.repeat(26)}`

  const calls: Array<[string, (appId: string) => Record<string, unknown>]> = [
    ['service_apps_get', (appId) => ({ app_id: appId })],
    ['service_apps_delete', (appId) => ({ app_id: appId })],
    ['service_deployments_create', (appId) => ({ app_id: appId })],
    ['service_apps_update', (appId) => ({ app_id: appId, name: 'taken-over' })],
    ['service_env_set', (appId) => ({ app_id: appId, name: 'TOKEN', value: 'x' })],
    ['service_env_unset', (appId) => ({ app_id: appId, name: 'TOKEN' })],
  ]
  for (const [name, args] of calls) {
    const answers = []
    for (const appId of [foreign.id, absent]) {
      const id = rid()
      const reply = await modernCall(server.mcpUrl, server.apiKey, name, args(appId), { capabilities: ELICITING, id })
      t.equal(reply.status, 200, `${name} ${appId}: HTTP 200`)
      const answer = answerOf(reply, id)
      t.equal(answer?.result?.resultType, 'complete', `${name} ${appId}: complete, not input_required`)
      t.equal(toolCode(answer?.result), 'RESOURCE_NOT_FOUND', `${name} ${appId === absent ? 'absent id' : 'another organization'}: RESOURCE_NOT_FOUND`)
      answers.push(answer?.result)
    }
    t.strictSame(answers[0], answers[1], `${name}: another organization's id is indistinguishable from an absent one`)
  }
  const kept = await repos.apps.byId(org2.id, foreign.id)
  t.equal(kept?.name, 'foreign', 'the foreign app is untouched')
  t.ok(await repos.envVars.exists(org2.id, foreign.id, 'TOKEN'), 'with its env var')
  t.equal((await repos.deployments.list(org2.id, { appId: foreign.id, limit: 10, offset: 0 })).total, 1, 'and only its own deployment')
  t.equal(await repos.audit.count(org2.id), 0, 'nothing was audited in the other organization')
})

t.test('rate limit per API-key member: modern and legacy requests share one budget; recovery after the window', async (t) => {
  const server = await serve(t, { ...ROOMY, rateLimitApiKeyMember: 6 })
  const colleague = await createMember(server, { role: 'viewer' })
  const { headers } = await openSession(server.mcpUrl, server.apiKey) // 2 requests: initialize, notifications/initialized
  t.equal((await post(server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }, headers)).status, 200, 'legacy request 3')
  for (let i = 4; i <= 6; i++) modernOk(t, await whoami(server, server.apiKey), `modern request ${i}`)
  rateLimited(t, await whoami(server, server.apiKey), 6, 'modern request 7')
  rateLimited(t, await post(server.mcpUrl, { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} }, headers), 6, 'legacy request 8')
  modernOk(t, await whoami(server, colleague.key), 'another member keeps its own budget')
  await sleep(WINDOW_MS + 100)
  modernOk(t, await whoami(server, server.apiKey), 'after the window: modern works again')
  t.equal((await post(server.mcpUrl, { jsonrpc: '2.0', id: 3, method: 'tools/list', params: {} }, headers)).status, 200, 'after the window: legacy works again')
})

t.test('rate limit per OAuth member: modern and legacy share the budget', async (t) => {
  const server = await serve(t, { ...ROOMY, rateLimitOAuthMember: 4 })
  const { tokens } = await oauthTokens(server)
  const token = tokens.access_token
  modernOk(t, await whoami(server, token), 'modern request 1')
  const { headers } = await openSession(server.mcpUrl, token) // requests 2 and 3
  modernOk(t, await whoami(server, token), 'modern request 4')
  rateLimited(t, await whoami(server, token), 4, 'modern request 5')
  rateLimited(t, await post(server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }, headers), 4, 'legacy request 6')
  await sleep(WINDOW_MS + 100)
  modernOk(t, await whoami(server, token), 'after the window')
})

t.test('rate limit per organization: members of one organization share it, another organization does not', async (t) => {
  const server = await serve(t, { ...ROOMY, rateLimitOrganization: 4 })
  const dev = await createMember(server, { role: 'developer' })
  const org2 = await server.app.repos.organizations.create({ slug: 'elsewhere' })
  const outsider = await createMember(server, { role: 'viewer', organizationId: org2.id })
  modernOk(t, await whoami(server, server.apiKey), 'owner 1')
  modernOk(t, await whoami(server, dev.key), 'developer 1')
  modernOk(t, await whoami(server, server.apiKey), 'owner 2')
  modernOk(t, await whoami(server, dev.key), 'developer 2')
  const refused = await whoami(server, server.apiKey)
  rateLimited(t, refused, 4, 'owner 3: the organization is over its limit')
  t.match(refused.json?.error?.message, /organization/, 'the message names the organization limit')
  rateLimited(t, await whoami(server, dev.key), 4, 'developer 3')
  modernOk(t, await whoami(server, outsider.key), 'a member of another organization')
  await sleep(WINDOW_MS + 100)
  modernOk(t, await whoami(server, dev.key), 'after the window')
})

t.test('per-tool limit: the declared limit times rateLimitToolFactor, per member and tool, shared with sessions', async (t) => {
  const limited = defineTool<Record<string, never>, { ok: boolean }>({
    name: 'test_limited',
    title: 'Limited',
    description: 'Declares 2 calls per window.',
    inputSchema: { type: 'object', properties: {}, additionalProperties: false },
    scope: 'mcp:read',
    role: 'viewer',
    rateLimitPerMinute: 2,
    handler: () => ({ ok: true }),
  })
  const server = await serve(t, { ...ROOMY, rateLimitToolFactor: 2 }, [...builtinTools, limited])
  const app = await server.app.repos.apps.create({ organizationId: (await defaultOrganization(server)).id, name: 'web' })
  const colleague = await createMember(server, { role: 'viewer' })
  const call = (token: string) => modernCall(server.mcpUrl, token, 'test_limited', {}, { id: rid() })

  for (let i = 1; i <= 3; i++) modernOk(t, await call(server.apiKey), `test_limited ${i} (modern)`)
  const { headers } = await openSession(server.mcpUrl, server.apiKey)
  const legacy = await post(server.mcpUrl, callTool('test_limited', {}, 1), headers)
  t.equal(legacy.json?.result?.isError, false, 'test_limited 4 (legacy)')
  const refused = await call(server.apiKey)
  rateLimited(t, refused, 4, 'test_limited 5: 2 × factor 2')
  t.match(refused.json?.error?.message, /test_limited/, 'the message names the tool')
  t.equal((await post(server.mcpUrl, callTool('test_limited', {}, 2), headers)).status, 429, 'legacy call 6: 429 as well')
  modernOk(t, await call(colleague.key), 'another member has its own budget')
  modernOk(t, await whoami(server, server.apiKey), 'another tool is not affected')

  // A built-in write tool: declared 10, factor 2 → 20 per window.
  const set = (i: number) => modernCall(server.mcpUrl, server.apiKey, 'service_env_set', { app_id: app.id, name: 'N', value: String(i) }, { id: rid() })
  const burst = await Promise.all(Array.from({ length: 20 }, (_, i) => set(i)))
  t.ok(burst.every((r) => r.status === 200 && r.json?.result?.isError === false), '20 service_env_set calls')
  rateLimited(t, await set(21), 20, 'service_env_set 21')

  await sleep(WINDOW_MS + 100)
  modernOk(t, await call(server.apiKey), 'after the window: test_limited works again')
  modernOk(t, await set(22), 'after the window: service_env_set works again')
})

t.test('audit on the modern path: writes with member, credential and request id; failures; never argument values', async (t) => {
  const server = await serve(t)
  const repos = server.app.repos
  const orgId = (await defaultOrganization(server)).id
  const owner = await ownerMembership(server)
  const ownerKeyId = (await repos.apiKeys.listForMembership(owner.id))[0]!.id
  const secret = `hunter2-${Math.random().toString(36).slice(2)}`

  const created = await modernCall(server.mcpUrl, server.apiKey, 'service_apps_create', { name: 'web' }, { id: 'create-1' })
  const appId = created.json?.result?.structuredContent?.app?.id as string
  t.match(appId, /^app_/, 'created')
  const set = await modernCall(server.mcpUrl, server.apiKey, 'service_env_set', { app_id: appId, name: 'API_TOKEN', value: secret }, { id: 77 })
  t.equal(set.json?.result?.isError, false, 'env var set')
  const dup = await modernCall(server.mcpUrl, server.apiKey, 'service_apps_create', { name: 'web' }, { id: 'create-2' })
  t.equal(dup.status, 200)
  t.equal(toolCode(dup.json?.result), 'CONFLICT', 'a duplicate name is CONFLICT')
  const { tokens, client } = await oauthTokens(server)
  const viaOauth = await modernCall(server.mcpUrl, tokens.access_token, 'service_env_set', { app_id: appId, name: 'OTHER', value: secret }, { id: 'oauth-1' })
  t.equal(viaOauth.json?.result?.isError, false, 'env var set with OAuth')

  const creates = (await repos.audit.page(orgId, 100, undefined, 'service_apps_create')).items.reverse()
  t.strictSame(creates.map((e) => e.outcome), ['succeeded', 'failed'], 'the create succeeded, the duplicate failed')
  const [ok, failed] = creates
  t.equal(ok?.membershipId, owner.id, 'the member')
  t.equal(ok?.userId, owner.userId)
  t.equal(ok?.credentialKind, 'api_key', 'the credential kind')
  t.equal(ok?.credentialId, ownerKeyId, 'the API key')
  t.equal(ok?.details?.request_id, 'create-1', 'the JSON-RPC request id')
  t.equal(ok?.targetType, 'app')
  t.equal(ok?.targetId, appId)
  t.equal(failed?.details?.request_id, 'create-2')
  t.equal(failed?.details?.error, 'CONFLICT', 'the failure names its code')
  t.equal(failed?.membershipId, owner.id)

  const sets = (await repos.audit.page(orgId, 100, undefined, 'service_env_set')).items.reverse()
  t.equal(sets.length, 2)
  t.equal(sets[0]?.outcome, 'succeeded')
  t.equal(sets[0]?.details?.request_id, 77, 'a numeric request id stays a number')
  t.equal(sets[0]?.targetId, `${appId}/API_TOKEN`)
  t.equal(sets[0]?.credentialKind, 'api_key')
  t.equal(sets[1]?.outcome, 'succeeded')
  t.equal(sets[1]?.credentialKind, 'oauth', 'an OAuth write names its kind')
  t.equal(sets[1]?.clientId, client.client_id, 'and its client')
  t.equal(sets[1]?.membershipId, owner.id)
  t.equal(sets[1]?.details?.request_id, 'oauth-1')

  const rows = await (await databaseRows(t, server)).all('SELECT * FROM audit_log')
  t.ok(rows.length >= 4)
  t.notOk(JSON.stringify(rows).includes(secret), 'the env var value never appears in the audit log')
  t.notOk(JSON.stringify(rows).includes('hunter2'), 'not even in part')
})

t.test('Origin: a disallowed Origin → 403 FORBIDDEN_ORIGIN before authentication', async (t) => {
  const server = await serve(t)
  const evil = 'https://evil.example'
  for (const [what, token] of [['a valid key', server.apiKey], ['an invalid key', 'service_mcp_nope'], ['no credential', undefined]] as const) {
    const { body, headers } = modernRequest(token ?? 'x', 'tools/call', { name: 'service_apps_create', arguments: { name: `from-${what.replace(/ /g, '-')}` } }, { headers: { origin: evil } })
    if (token === undefined) delete headers.authorization
    const reply = await rawPost(server.mcpUrl, body, headers)
    serviceError(t, reply, 403, 'FORBIDDEN_ORIGIN', `modern, ${what}`)
    t.equal(reply.headers['www-authenticate'], undefined, `${what}: no authentication challenge`)
    t.equal(reply.headers['access-control-allow-origin'], undefined, `${what}: no CORS grant`)
  }
  const legacy = await post(server.mcpUrl, initializeMessage(), { origin: evil })
  t.equal(legacy.status, 403, 'legacy: 403 too')
  t.equal(legacy.json?.error?.code, 'FORBIDDEN_ORIGIN')
  t.equal((await server.app.repos.apps.page((await defaultOrganization(server)).id, 100)).items.length, 0, 'nothing ran')

  const allowed = await modernCall(server.mcpUrl, server.apiKey, 'service_whoami', {}, { headers: { origin: server.url } })
  t.equal(allowed.status, 200, 'the server\'s own origin is allowed')
  t.equal(allowed.headers['access-control-allow-origin'], server.url)
})

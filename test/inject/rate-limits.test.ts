import t, { type Test } from 'tap'
import { request } from 'undici'
import { hashPassword } from '../../src/lib/crypto.js'
import { defineTool, loadConfig, type Config } from '../../src/index.js'
import { builtinTools } from '../../src/plugins/tools/builtin/index.js'
import { orgTools } from '../../src/plugins/tools/builtin/org.js'
import { rateLimitOf } from '../../src/plugins/tools/registry.js'
import { callTool, initializeMessage, openSession, post, type RpcReply } from '../helpers/mcp.js'
import { authorizeUrl, browserAuthorize, oauthTokens, pkce, registerClient, tokenRequest } from '../helpers/oauth.js'
import { createMember } from '../helpers/seed.js'
import { injectServer, type InjectServer } from '../helpers/inject.js'
import type { TestServer } from '../helpers/server.js'

/**
 * Every row of the contract's Limits table (interface.md): the request past the limit is HTTP 429 RATE_LIMITED (service
 * error body) with Retry-After, X-RateLimit-Limit and X-RateLimit-Remaining: 0, still refused the instant before its
 * window ends, and works again at the instant it ends. The inject tier (test/helpers/inject.ts): the windows are
 * decided by the server's manual clock, which moves only when a test says so, never by how long the requests took.
 */

/** Window of the /mcp and per-tool limits: the contract's minute (fixed windows start at the first hit). */
const WINDOW_MS = 60_000

/**
 * Moves the server's clock to the instant before the window that started at the test's first request ends, checks
 * that `stillRefused` is refused then, and moves on to the instant it ends.
 */
async function untilTheWindowEnds(t: Test, server: InjectServer, windowMs: number, stillRefused: () => Promise<{ status: number }>): Promise<void> {
  await server.clock.advance(windowMs - 1)
  t.equal((await stillRefused()).status, 429, 'still refused 1 ms before the window ends')
  await server.clock.advance(1)
}

/** Generous everywhere but the limit under test. */
const ROOMY: Partial<Config> = { rateLimitWindowMs: WINDOW_MS, rateLimitOAuthMember: 1000, rateLimitApiKeyMember: 1000, rateLimitOrganization: 1000, rateLimitToolFactor: 1 }

const list = (id: number | string = 'l') => ({ jsonrpc: '2.0', id, method: 'tools/list', params: {} })
const initialized = { jsonrpc: '2.0', method: 'notifications/initialized' }

function isRateLimited(t: Test, res: { status: number; headers: Record<string, string | string[] | undefined>; json: any }, limit: number, windowMs: number, what: string) {
  t.equal(res.status, 429, `${what}: HTTP 429`)
  t.match(String(res.headers['content-type']), /^application\/json/, `${what}: a JSON body, not a stream`)
  t.equal(res.json?.error?.code, 'RATE_LIMITED', `${what}: RATE_LIMITED`)
  t.strictSame(Object.keys(res.json?.error ?? {}).sort(), ['action', 'code', 'details', 'message'], `${what}: the service error body`)
  t.type(res.json?.error?.message, 'string')
  t.type(res.json?.error?.action, 'string')
  const retryAfter = String(res.headers['retry-after'])
  t.match(retryAfter, /^\d+$/, `${what}: Retry-After in seconds`)
  t.ok(Number(retryAfter) >= 1 && Number(retryAfter) <= Math.ceil(windowMs / 1000), `${what}: Retry-After ${retryAfter} within the window`)
  t.equal(res.headers['x-ratelimit-limit'], String(limit), `${what}: X-RateLimit-Limit ${limit}`)
  t.equal(res.headers['x-ratelimit-remaining'], '0', `${what}: X-RateLimit-Remaining 0`)
  t.match(res.headers['x-request-id'], /^[0-9a-f-]{36}$/, `${what}: X-Request-Id`)
  t.match(res.headers['x-service-mcp-version'], /^\d{4}-\d\d-\d\d$/, `${what}: X-Service-MCP-Version`)
}

function toolOk(t: Test, res: RpcReply, what: string) {
  t.equal(res.status, 200, `${what}: HTTP 200`)
  t.equal(res.json?.result?.isError, false, `${what}: the tool ran`)
}

/** Another user of the server, with a password, through the whole OAuth flow. */
async function oauthTokensFor(server: TestServer, role: 'viewer' | 'developer' | 'admin' | 'owner', organizationId?: string) {
  const member = await createMember(server, { role, ...(organizationId ? { organizationId } : {}) })
  const password = 'another correct horse battery'
  await server.app.repos.users.setPasswordHash(member.user.id, await hashPassword(password))
  const client = await registerClient(server)
  const p = pkce()
  const { redirect } = await browserAuthorize(server, authorizeUrl(server, client, p), { email: member.user.email, password })
  const code = redirect.searchParams.get('code')
  if (!code) throw new Error(`no code in ${redirect.href}`)
  const res = await tokenRequest(server, { grant_type: 'authorization_code', code, redirect_uri: client.redirect_uris[0]!, client_id: client.client_id, code_verifier: p.verifier, resource: server.url })
  if (res.status !== 200) throw new Error(`token exchange failed: ${res.status} ${JSON.stringify(res.json)}`)
  return { member, accessToken: res.json.access_token as string }
}

t.test('the defaults are the contract\'s', async (t) => {
  const config = loadConfig({ env: {} })
  t.equal(config.rateLimitOAuthMember, 60, '/mcp, OAuth member: 60')
  t.equal(config.rateLimitApiKeyMember, 30, '/mcp, API-key member: 30')
  t.equal(config.rateLimitOrganization, 500, '/mcp, organization: 500')
  t.equal(config.rateLimitWindowMs, 60_000, 'per minute')
  t.equal(config.rateLimitToolFactor, 1, 'tools get exactly their declared limit')
  t.equal(config.registerRateLimit, 10, '/oauth/register: 10')
  t.equal(config.registerRateLimitWindowMs, 3_600_000, 'per hour')
  // docs/decisions/tool-catalog.md: read tools 60 per minute, write tools 10.
  const catalog = new Map([...builtinTools, ...orgTools].map((d) => [d.name, d]))
  for (const def of catalog.values()) t.equal(rateLimitOf(def), def.scope === 'mcp:write' ? 10 : 60, `${def.name} declares ${rateLimitOf(def)} per minute`)
})

t.test('/mcp per API-key member', async (t) => {
  const server = await injectServer(t, { config: { ...ROOMY, rateLimitApiKeyMember: 3, rateLimitOAuthMember: 100 } })
  const limited = await createMember(server, { role: 'viewer' })
  const other = await createMember(server, { role: 'viewer' })
  const auth = { authorization: `Bearer ${limited.key}` }

  // Every /mcp request counts: initialize (1), the initialized notification (2), tools/list (3).
  const init = await post(server.mcpUrl, initializeMessage(), auth)
  t.equal(init.status, 200, 'initialize')
  const headers = { ...auth, 'mcp-session-id': String(init.headers['mcp-session-id']), 'mcp-protocol-version': '2025-11-25' }
  t.equal((await post(server.mcpUrl, initialized, headers)).status, 202, 'notifications/initialized')
  t.equal((await post(server.mcpUrl, list(), headers)).status, 200, 'tools/list')
  const fourth = await post(server.mcpUrl, callTool('service_whoami'), headers)
  isRateLimited(t, fourth, 3, WINDOW_MS, 'the 4th request')
  t.match(fourth.json.error.details, { limit: 3 })
  isRateLimited(t, await post(server.mcpUrl, initializeMessage(), auth), 3, WINDOW_MS, 'a new initialize')
  t.equal((await post(server.mcpUrl, { jsonrpc: '2.0', method: 'notifications/initialized' }, headers)).status, 429, 'a notification')

  // Other members (API key or not) are not affected.
  const otherSession = await openSession(server.mcpUrl, other.key)
  toolOk(t, await post(server.mcpUrl, callTool('service_whoami'), otherSession.headers), 'another member')
  const owner = await openSession(server.mcpUrl, server.apiKey)
  toolOk(t, await post(server.mcpUrl, callTool('service_whoami'), owner.headers), 'the owner')

  await untilTheWindowEnds(t, server, WINDOW_MS, () => post(server.mcpUrl, list('late'), headers))
  const again = await post(server.mcpUrl, callTool('service_whoami'), headers)
  toolOk(t, again, 'after the window, on the same session')
})

t.test('/mcp per OAuth member', async (t) => {
  const server = await injectServer(t, { config: { ...ROOMY, rateLimitOAuthMember: 3, rateLimitApiKeyMember: 100 } })
  const { tokens } = await oauthTokens(server)
  const other = await oauthTokensFor(server, 'developer')
  const auth = { authorization: `Bearer ${tokens.access_token}` }

  const init = await post(server.mcpUrl, initializeMessage(), auth)
  t.equal(init.status, 200, 'initialize')
  const headers = { ...auth, 'mcp-session-id': String(init.headers['mcp-session-id']), 'mcp-protocol-version': '2025-11-25' }
  t.equal((await post(server.mcpUrl, initialized, headers)).status, 202, 'notifications/initialized')
  toolOk(t, await post(server.mcpUrl, callTool('service_whoami'), headers), 'the 3rd request')
  const fourth = await post(server.mcpUrl, callTool('service_whoami'), headers)
  isRateLimited(t, fourth, 3, WINDOW_MS, 'the 4th request')
  isRateLimited(t, await post(server.mcpUrl, list(), headers), 3, WINDOW_MS, 'the 5th request')

  const otherSession = await openSession(server.mcpUrl, other.accessToken)
  const who = await post(server.mcpUrl, callTool('service_whoami'), otherSession.headers)
  toolOk(t, who, 'another OAuth member')
  t.equal(JSON.parse(who.json.result.content[0].text).credential.kind, 'oauth')

  await untilTheWindowEnds(t, server, WINDOW_MS, () => post(server.mcpUrl, list('late'), headers))
  toolOk(t, await post(server.mcpUrl, callTool('service_whoami'), headers), 'after the window, on the same session')
})

t.test('/mcp per organization', async (t) => {
  const server = await injectServer(t, { config: { ...ROOMY, rateLimitOrganization: 4 } })
  const repos = server.app.repos
  const elsewhere = await repos.organizations.create({ slug: 'elsewhere', name: 'Elsewhere' })
  const a = await createMember(server, { role: 'viewer' })
  const b = await createMember(server, { role: 'developer' })
  const c = await createMember(server, { role: 'viewer', organizationId: elsewhere.id })

  // Two members of one organization share its 4 requests.
  const sa = await openSession(server.mcpUrl, a.key) // 2 requests
  const sb = await openSession(server.mcpUrl, b.key) // 2 requests
  const fifth = await post(server.mcpUrl, list(), sa.headers)
  isRateLimited(t, fifth, 4, WINDOW_MS, 'the 5th request of the organization (member a)')
  t.match(fifth.json.error.details, { limit: 4 })
  isRateLimited(t, await post(server.mcpUrl, list(), sb.headers), 4, WINDOW_MS, 'member b')
  isRateLimited(t, await post(server.mcpUrl, initializeMessage(), { authorization: `Bearer ${server.apiKey}` }), 4, WINDOW_MS, 'the owner')

  // A member of another organization is not affected.
  const sc = await openSession(server.mcpUrl, c.key)
  toolOk(t, await post(server.mcpUrl, callTool('service_whoami'), sc.headers), 'a member of another organization')

  await untilTheWindowEnds(t, server, WINDOW_MS, () => post(server.mcpUrl, list('late'), sa.headers))
  toolOk(t, await post(server.mcpUrl, callTool('service_whoami'), sa.headers), 'member a after the window')
  toolOk(t, await post(server.mcpUrl, callTool('service_whoami'), sb.headers), 'member b after the window')
})

const limitedTool = defineTool<Record<string, never>, { ok: boolean }>({
  name: 'test_limited',
  title: 'Limited',
  description: 'Declares 2 calls per minute.',
  inputSchema: { type: 'object', properties: {}, additionalProperties: false },
  outputSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
  scope: 'mcp:read',
  role: 'viewer',
  rateLimitPerMinute: 2,
  handler: () => ({ ok: true }),
})

const withProgress = (id: string) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'test_limited', arguments: {}, _meta: { progressToken: id } } })

t.test('tool calls: the limit each tool declares', async (t) => {
  const server = await injectServer(t, { tools: [...builtinTools, limitedTool], config: ROOMY })
  const member = await createMember(server, { role: 'viewer' })
  const other = await createMember(server, { role: 'viewer' })
  const { headers } = await openSession(server.mcpUrl, member.key)

  const listed = await post(server.mcpUrl, list(), headers)
  const descriptor = listed.json.result.tools.find((x: { name: string }) => x.name === 'test_limited')
  t.strictSame(descriptor?._meta?.['service/rate_limit'], { limit: 2, window_seconds: 60 }, 'tools/list shows the declared limit')

  toolOk(t, await post(server.mcpUrl, callTool('test_limited', {}, 1), headers), '1st call')
  toolOk(t, await post(server.mcpUrl, callTool('test_limited', {}, 2), headers), '2nd call')
  // A progress token would make the answer a stream: the refusal comes before any.
  const third = await post(server.mcpUrl, withProgress('p3'), headers)
  isRateLimited(t, third, 2, WINDOW_MS, 'the 3rd call')
  t.equal(third.messages.length, 0, 'no SSE message')
  t.match(third.json.error.details, { limit: 2 })
  isRateLimited(t, await post(server.mcpUrl, callTool('test_limited', {}, 4), headers), 2, WINDOW_MS, 'the 4th call')

  // Other tools, and the same tool for another member, are not affected.
  toolOk(t, await post(server.mcpUrl, callTool('service_whoami', {}, 5), headers), 'another tool')
  t.equal((await post(server.mcpUrl, list(6), headers)).status, 200, 'tools/list')
  const otherSession = await openSession(server.mcpUrl, other.key)
  toolOk(t, await post(server.mcpUrl, callTool('test_limited', {}, 7), otherSession.headers), 'another member')

  await untilTheWindowEnds(t, server, WINDOW_MS, () => post(server.mcpUrl, callTool('test_limited', {}, 'late'), headers))
  const again = await post(server.mcpUrl, withProgress('p8'), headers)
  t.equal(again.status, 200, 'after the window')
  const result = again.messages.find((m) => m.id === 'p8')
  t.equal(result?.result?.isError, false, 'after the window: the tool ran (on a stream)')
})

t.test('rateLimitToolFactor multiplies every declared limit', async (t) => {
  const server = await injectServer(t, { tools: [...builtinTools, limitedTool], config: { ...ROOMY, rateLimitToolFactor: 3 } })
  const member = await createMember(server, { role: 'viewer' })
  const { headers } = await openSession(server.mcpUrl, member.key)
  const listed = await post(server.mcpUrl, list(), headers)
  const descriptor = listed.json.result.tools.find((x: { name: string }) => x.name === 'test_limited')
  t.strictSame(descriptor?._meta?.['service/rate_limit'], { limit: 2, window_seconds: 60 }, 'tools/list still shows the declared limit')
  for (let i = 1; i <= 6; i++) toolOk(t, await post(server.mcpUrl, callTool('test_limited', {}, i), headers), `call ${i} of 2 × 3`)
  isRateLimited(t, await post(server.mcpUrl, callTool('test_limited', {}, 7), headers), 6, WINDOW_MS, 'the 7th call')
  await untilTheWindowEnds(t, server, WINDOW_MS, () => post(server.mcpUrl, callTool('test_limited', {}, 'late'), headers))
  toolOk(t, await post(server.mcpUrl, callTool('test_limited', {}, 8), headers), 'after the window')
})

t.test('/oauth/register per IP', async (t) => {
  const windowMs = 60_000
  const server = await injectServer(t, { config: { registerRateLimit: 2, registerRateLimitWindowMs: windowMs } })
  const register = async () => {
    const res = await request(`${server.url}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'Rate test', redirect_uris: ['http://127.0.0.1:9999/callback'] }),
    })
    const text = await res.body.text()
    return { status: res.statusCode, headers: res.headers, json: text ? JSON.parse(text) : undefined }
  }
  t.equal((await register()).status, 201, '1st registration')
  t.equal((await register()).status, 201, '2nd registration')
  const third = await register()
  // An OAuth endpoint answers in the OAuth error shape, a 429 too (docs/decisions/http-errors.md), with the rate-limit
  // headers.
  t.equal(third.status, 429, 'the 3rd registration: HTTP 429')
  t.strictSame(Object.keys(third.json ?? {}).sort(), ['error', 'error_description'], 'the 3rd registration: the OAuth error body')
  t.equal(third.json?.error, 'temporarily_unavailable', 'the 3rd registration: temporarily_unavailable')
  const retryAfter = String(third.headers['retry-after'])
  t.match(retryAfter, /^\d+$/, 'Retry-After in seconds')
  t.ok(Number(retryAfter) >= 1 && Number(retryAfter) <= Math.ceil(windowMs / 1000), `Retry-After ${retryAfter} within the window`)
  t.equal(third.headers['x-ratelimit-limit'], '2', 'X-RateLimit-Limit 2')
  t.equal(third.headers['x-ratelimit-remaining'], '0', 'X-RateLimit-Remaining 0')

  // The token endpoint has no limiter of its own.
  for (let i = 0; i < 4; i++) {
    const res = await tokenRequest(server, { grant_type: 'authorization_code', code: 'nope', redirect_uri: 'http://127.0.0.1:9999/callback', client_id: 'mcp_unknown', code_verifier: 'x'.repeat(43) })
    t.not(res.status, 429, `/oauth/token request ${i + 1} is not limited`)
  }

  await untilTheWindowEnds(t, server, windowMs, register)
  const again = await register()
  t.equal(again.status, 201, 'after the window')
  t.match(again.json, { client_id: /^mcp_/ })
})

/**
 * Resources, prompts, completions and rich tool content on stateless 2026-07-28 requests, built through the embedding
 * API (test/helpers/primitives-defs.ts, not the built-in catalog), over real sockets: caching fields and resultType,
 * not-found as -32602 with data.uri, questions as `input_required` with a sealed requestState (elicitation, sampling,
 * roots), and subscriptions/listen with the prompts, resources and tools filters. Every result, error and notification
 * is validated against the official 2026-07-28 schema (test/helpers/spec-schema.ts), closed: a field the revision does
 * not define fails too.
 */
import t, { type Test } from 'tap'
import type { Config } from '../../src/config.js'
import { definePrompt, defineResource, defineTool, text, toolResult } from '../../src/index.js'
import {
  answerOf,
  MODERN,
  modernLive,
  modernPost,
  modernRequest,
  rawPost,
  SERVER_INFO_KEY,
  SUBSCRIPTION_ID_KEY,
  type ModernOptions,
} from '../helpers/modern.js'
import type { RpcReply } from '../helpers/mcp.js'
import {
  ELICIT_COLOR,
  ELICIT_NAME,
  ICON,
  ITEMS_TEMPLATE,
  LAST_MODIFIED,
  MANY,
  MEMBERS_TEMPLATE,
  PNG,
  VAULT_TEMPLATE,
  primitives,
  URI,
  WAV,
  type Records,
} from '../helpers/primitives-defs.js'
import { createMember, defaultOrganization } from '../helpers/seed.js'
import { startServer, type TestServer } from '../helpers/server.js'
import { assertNotification, assertResponse } from '../helpers/spec-schema.js'
import { ManualClock } from '../helpers/clock.js'
import { messagesOf, sleep, type LiveStream } from '../helpers/stream.js'

const REV = '2026-07-28' as const
const LIST_TTL = 1234
const READ_TTL = 77
let nextId = 1
const rid = () => ++nextId

interface Served {
  server: TestServer
  records: Records
  orgId: string
}

async function serve(t: Test, config: Partial<Config> = {}, clock?: ManualClock): Promise<Served> {
  const defs = primitives()
  const server = await startServer(t, {
    ...(clock ? { clock } : {}),
    tools: defs.tools,
    resources: defs.resources,
    prompts: defs.prompts,
    config: { pageSize: 3, listTtlMs: LIST_TTL, readTtlMs: READ_TTL, ...config },
  })
  const orgId = (await defaultOrganization(server)).id
  defs.records.items.set(orgId, ['a1', 'a2'])
  return { server, records: defs.records, orgId }
}

/** A conforming stateless request; its answer checked against the 2026-07-28 schema. */
async function call(t: Test, served: Served, method: string, params: Record<string, unknown> = {}, options: ModernOptions & { key?: string } = {}): Promise<{ reply: RpcReply; response: any }> {
  const id = options.id ?? rid()
  const reply = await modernPost(served.server.mcpUrl, options.key ?? served.server.apiKey, method, params, { ...options, id })
  const response = answerOf(reply, id)
  t.equal(response?.id, id, `${method}: the answer echoes the request id`)
  t.equal(reply.headers['mcp-session-id'], undefined, `${method}: no Mcp-Session-Id`)
  assertResponse(t, REV, method, response, { what: `${REV} ${method}` })
  return { reply, response }
}

/** A complete result (HTTP 200), with serverInfo in `_meta`. */
async function result(t: Test, served: Served, method: string, params: Record<string, unknown> = {}, options: ModernOptions & { key?: string } = {}): Promise<any> {
  const { reply, response } = await call(t, served, method, params, options)
  t.equal(reply.status, 200, `${method}: HTTP 200`)
  t.notOk(response?.error, `${method}: no error ${response?.error ? JSON.stringify(response.error) : ''}`)
  t.match(response?.result?._meta?.[SERVER_INFO_KEY], { name: 'service-mcp' }, `${method}: serverInfo in _meta`)
  return response?.result
}

/** The result without the fields every 2026-07-28 result carries (resultType, `_meta` with serverInfo, caching hints). */
function bare(r: any): any {
  const { resultType: _r, _meta, ttlMs: _t, cacheScope: _c, ...rest } = r
  const { [SERVER_INFO_KEY]: _s, ...meta } = _meta ?? {}
  return Object.keys(meta).length > 0 ? { ...rest, _meta: meta } : rest
}

async function error(t: Test, served: Served, method: string, params: Record<string, unknown> = {}, options: ModernOptions & { key?: string; status?: number } = {}): Promise<any> {
  const { reply, response } = await call(t, served, method, params, options)
  t.equal(reply.status, options.status ?? 200, `${method}: HTTP ${options.status ?? 200}`)
  t.ok(response?.error, `${method}: a JSON-RPC error`)
  return response?.error
}

function cached(t: Test, r: any, ttlMs: number, what: string): void {
  t.equal(r?.resultType, 'complete', `${what}: resultType complete`)
  t.equal(r?.ttlMs, ttlMs, `${what}: ttlMs`)
  t.equal(r?.cacheScope, 'private', `${what}: cacheScope private (what a caller sees depends on it)`)
}

async function allPages(t: Test, served: Served, method: string, key: string, options: { key?: string } = {}): Promise<any[][]> {
  const pages: any[][] = []
  let cursor: string | undefined
  for (let i = 0; i < 20; i++) {
    const r = await result(t, served, method, cursor === undefined ? {} : { cursor }, options)
    cached(t, r, LIST_TTL, `${method} page ${i + 1}`)
    pages.push(r[key])
    if (r.nextCursor === undefined) return pages
    cursor = r.nextCursor
  }
  throw new Error(`${method} did not end`)
}

const NOT_FOUND_ACTION = 'List the resources to find a valid id'
function notFound(uri: string) {
  return { code: -32602, message: `Resource not found: ${uri}`, data: { uri, code: 'RESOURCE_NOT_FOUND', action: NOT_FOUND_ACTION } }
}

function invalidParams(t: Test, err: any, message: string | RegExp, details: unknown, what: string): void {
  t.equal(err?.code, -32602, `${what}: -32602`)
  if (typeof message === 'string') t.equal(err?.message, message, `${what}: message`)
  else t.match(err?.message, message, `${what}: message`)
  t.equal(err?.data?.code, 'INVALID_PARAMS', `${what}: data.code`)
  t.strictSame(err?.data?.details, details, `${what}: data.details`)
}

function internal(t: Test, err: any, what: string): void {
  t.equal(err?.code, -32603, `${what}: -32603`)
  t.equal(err?.message, 'Internal error', `${what}: a generic message`)
  t.equal(err?.data?.code, 'INTERNAL_ERROR', `${what}: data.code`)
  t.notMatch(JSON.stringify(err), /SQLITE|password|secret\.db|at .*\.ts/, `${what}: nothing of the failure leaks`)
}

const RICH = [
  { type: 'text', text: 'plain text', annotations: { audience: ['assistant'], priority: 0.2, lastModified: LAST_MODIFIED } },
  { type: 'image', data: PNG, mimeType: 'image/png' },
  { type: 'audio', data: WAV, mimeType: 'audio/wav' },
  { type: 'resource', resource: { uri: URI.text, mimeType: 'text/plain', text: 'hello', _meta: { 'example.com/embedded': true } } },
  { type: 'resource', resource: { uri: URI.blob, mimeType: 'image/png', blob: PNG } },
  { type: 'resource_link', uri: URI.item('a1'), name: 'item_a1', title: 'Item a1', description: 'an item', mimeType: 'application/json', icons: [ICON] },
  { type: 'text', text: 'with meta', _meta: { 'example.com/block': 1 } },
]

// ---- Discovery and lists ---------------------------------------------------------------------------------------------

t.test('server/discover declares resources, prompts and completions', async (t) => {
  const served = await serve(t)
  const r = await result(t, served, 'server/discover')
  t.strictSame(r.supportedVersions, [MODERN])
  t.strictSame(r.capabilities.resources, { subscribe: true, listChanged: true }, 'resources: updates through resourceSubscriptions, list changes')
  t.strictSame(r.capabilities.prompts, { listChanged: true })
  t.strictSame(r.capabilities.completions, {})
  t.equal(r.cacheScope, 'public')
})

t.test('resources/list and resources/templates/list: pages, caching hints, visibility', async (t) => {
  const served = await serve(t)
  const { server } = served
  const EVERYTHING = [URI.text, URI.blob, URI.admin, URI.write, URI.nullReader, URI.throwing, URI.garbage, URI.asking, URI.sampling, URI.page(1), URI.page(2), URI.page(3), URI.item('a1'), URI.item('a2')]
  const pages = await allPages(t, served, 'resources/list', 'resources')
  t.strictSame(pages.map((p) => p.length), [3, 3, 3, 3, 2])
  t.strictSame(pages.flat().map((r) => r.uri), EVERYTHING, 'a stable order')
  t.strictSame(pages.flat()[0], {
    uri: URI.text,
    name: 'static_text',
    title: 'Static text',
    icons: [ICON],
    description: 'A text resource',
    mimeType: 'text/plain',
    size: 5,
    annotations: { audience: ['user'], priority: 0.5, lastModified: LAST_MODIFIED },
  }, 'the entry with its title, icons and annotations')

  const forged = Buffer.from('resources/list:99').toString('base64url')
  invalidParams(t, await error(t, served, 'resources/list', { cursor: forged }), 'Invalid cursor for resources/list', { param: 'cursor' }, 'a past-the-end cursor')
  invalidParams(t, await error(t, served, 'resources/list', { cursor: '%%%' }), 'Invalid cursor for resources/list', { param: 'cursor' }, 'a forged cursor')

  const viewer = await createMember(server, { role: 'viewer' })
  t.strictSame((await allPages(t, served, 'resources/list', 'resources', { key: viewer.key })).flat().map((r) => r.uri), EVERYTHING.filter((u) => u !== URI.admin), 'a viewer does not list the admin resource')
  const reader = await createMember(server, { role: 'owner', scopes: ['mcp:read'] })
  t.strictSame((await allPages(t, served, 'resources/list', 'resources', { key: reader.key })).flat().map((r) => r.uri), EVERYTHING.filter((u) => u !== URI.write), 'a read-only token does not list the write resource')

  const acme = await server.app.repos.organizations.create({ slug: 'acme' })
  served.records.items.set(acme.id, ['z9'])
  const foreign = await createMember(server, { role: 'owner', organizationId: acme.id })
  const theirs = (await allPages(t, served, 'resources/list', 'resources', { key: foreign.key })).flat().map((r) => r.uri)
  t.ok(theirs.includes(URI.item('z9')) && !theirs.includes(URI.item('a1')), 'each organization lists its own items')

  const templates = await result(t, served, 'resources/templates/list')
  cached(t, templates, LIST_TTL, 'resources/templates/list')
  t.strictSame(templates.resourceTemplates, [
    { uriTemplate: ITEMS_TEMPLATE, name: 'items', title: 'Items', icons: [ICON], description: 'The items of the caller\'s organization', mimeType: 'application/json', annotations: { priority: 1, lastModified: LAST_MODIFIED } },
    { uriTemplate: MEMBERS_TEMPLATE, name: 'team_members' },
    { uriTemplate: VAULT_TEMPLATE, name: 'vault' },
  ])
  const forViewer = await result(t, served, 'resources/templates/list', {}, { key: viewer.key })
  t.strictSame(forViewer.resourceTemplates.map((x: any) => x.uriTemplate), [ITEMS_TEMPLATE, MEMBERS_TEMPLATE], 'a viewer does not list the admin template')
})

t.test('resources/read: contents with caching hints; not found is -32602 with data.uri for every reason', async (t) => {
  const served = await serve(t)
  const { server } = served
  const textRead = await result(t, served, 'resources/read', { uri: URI.text })
  cached(t, textRead, READ_TTL, 'resources/read')
  t.strictSame(bare(textRead), { contents: [{ uri: URI.text, mimeType: 'text/plain', text: 'hello', _meta: { 'example.com/source': 'test' } }] }, 'text contents')
  t.strictSame(bare(await result(t, served, 'resources/read', { uri: URI.blob })), { contents: [{ uri: URI.blob, mimeType: 'image/png', blob: PNG }] }, 'blob contents')
  t.strictSame(bare(await result(t, served, 'resources/read', { uri: URI.item('a2') })), { contents: [{ uri: URI.item('a2'), mimeType: 'application/json', text: '{"id":"a2"}' }] }, 'a templated resource')

  const viewer = await createMember(server, { role: 'viewer' })
  const reader = await createMember(server, { role: 'owner', scopes: ['mcp:read'] })
  const acme = await server.app.repos.organizations.create({ slug: 'acme' })
  served.records.items.set(acme.id, ['z9'])
  const cases: Array<[string, string, string]> = [
    [server.apiKey, 'test://nothing/here', 'a URI nothing serves'],
    [server.apiKey, URI.item('zz'), 'an absent id of a template'],
    [server.apiKey, URI.item('z9'), 'another organization\'s id'],
    [server.apiKey, URI.nullReader, 'a reader that returns null (never empty contents)'],
    [viewer.key, URI.admin, 'a resource the role may not read'],
    [reader.key, URI.write, 'a resource the scope does not cover'],
  ]
  for (const [key, uri, what] of cases) {
    t.strictSame(await error(t, served, 'resources/read', { uri }, { key }), notFound(uri), `${what}: -32602 with data.uri, HTTP 200`)
  }
  internal(t, await error(t, served, 'resources/read', { uri: URI.throwing }), 'a reader that throws')
  internal(t, await error(t, served, 'resources/read', { uri: URI.garbage }), 'a reader returning something else than contents')

  // Mcp-Name mirrors the URI.
  const missing = modernRequest(server.apiKey, 'resources/read', { uri: URI.text }, { id: 'mn', headers: { 'mcp-name': undefined } })
  const noName = await rawPost(server.mcpUrl, missing.body, missing.headers)
  t.equal(noName.status, 400, 'Mcp-Name missing: 400')
  t.equal(noName.json?.error?.code, -32020)
  assertResponse(t, REV, 'resources/read', noName.json)
  const other = modernRequest(server.apiKey, 'resources/read', { uri: URI.text }, { id: 'mn2', headers: { 'mcp-name': URI.blob } })
  const wrongName = await rawPost(server.mcpUrl, other.body, other.headers)
  t.equal(wrongName.status, 400, 'Mcp-Name of another URI: 400')
  t.equal(wrongName.json?.error?.code, -32020)
  const encoded = modernRequest(server.apiKey, 'resources/read', { uri: URI.text }, { id: 'mn3', headers: { 'mcp-name': `=?base64?${Buffer.from(URI.text).toString('base64')}?=` } })
  const viaSentinel = await rawPost(server.mcpUrl, encoded.body, encoded.headers)
  t.equal(viaSentinel.status, 200, 'Mcp-Name as a base64 sentinel')
  t.equal(viaSentinel.json?.result?.contents?.[0]?.text, 'hello')
})

t.test('prompts: list (titles, icons, visibility), get (arguments checked first, every content kind)', async (t) => {
  const served = await serve(t)
  const { server } = served
  const ALL = ['greet', 'rich', 'team_prompt', 'many_values', 'admin_prompt', 'write_prompt', 'ask_name', 'sampled', 'rooted', 'two_rounds', 'at_once', 'asking_completer', 'broken_prompt', 'throwing_prompt']
  const pages = await allPages(t, served, 'prompts/list', 'prompts')
  t.strictSame(pages.flat().map((p) => p.name), ALL)
  t.strictSame(pages[0]![0], {
    name: 'greet',
    title: 'Greeting',
    icons: [ICON],
    description: 'Greets someone',
    arguments: [{ name: 'name', title: 'Name', description: 'Who to greet', required: true }, { name: 'style', description: 'How', required: false }],
  })
  const viewer = await createMember(server, { role: 'viewer' })
  t.strictSame((await allPages(t, served, 'prompts/list', 'prompts', { key: viewer.key })).flat().map((p) => p.name), ALL.filter((n) => n !== 'admin_prompt'))
  const reader = await createMember(server, { role: 'owner', scopes: ['mcp:read'] })
  t.strictSame((await allPages(t, served, 'prompts/list', 'prompts', { key: reader.key })).flat().map((p) => p.name), ALL.filter((n) => n !== 'write_prompt'))

  const greeted = await result(t, served, 'prompts/get', { name: 'greet', arguments: { name: 'Ann' } })
  t.equal(greeted.resultType, 'complete')
  t.notOk('ttlMs' in greeted, 'prompts/get carries no caching hints')
  t.strictSame(bare(greeted), { description: 'A greeting', messages: [{ role: 'user', content: { type: 'text', text: 'Hello Ann' } }] })
  const rich = await result(t, served, 'prompts/get', { name: 'rich' })
  t.strictSame(bare(rich).messages, RICH.map((content, i) => ({ role: i === RICH.length - 1 ? 'user' : 'assistant', content })), 'every content kind, as 2026-07-28 has it')

  const runs = served.records.runs.get('greet')
  invalidParams(t, await error(t, served, 'prompts/get', { name: 'greet' }), 'Prompt greet needs name', { missing: ['name'] }, 'a missing required argument')
  invalidParams(t, await error(t, served, 'prompts/get', { name: 'greet', arguments: { name: 'A', mood: 'x' } }), 'Prompt greet has no argument mood', { unknown: ['mood'] }, 'an unknown argument')
  invalidParams(t, await error(t, served, 'prompts/get', { name: 'nope' }), 'Unknown prompt: nope', { name: 'nope' }, 'an unknown prompt')
  invalidParams(t, await error(t, served, 'prompts/get', { name: 'admin_prompt' }, { key: viewer.key }), 'Unknown prompt: admin_prompt', { name: 'admin_prompt' }, 'a hidden prompt')
  t.equal(served.records.runs.get('greet'), runs, 'the prompt did not run for any of them')
  const wrong = modernRequest(server.apiKey, 'prompts/get', { name: 'greet', arguments: { name: 'A' } }, { id: 'pn', headers: { 'mcp-name': 'rich' } })
  const wrongName = await rawPost(server.mcpUrl, wrong.body, wrong.headers)
  t.equal(wrongName.status, 400, 'prompts/get with Mcp-Name of another prompt: 400')
  t.equal(wrongName.json?.error?.code, -32020)
  assertResponse(t, REV, 'prompts/get', wrongName.json)
  internal(t, await error(t, served, 'prompts/get', { name: 'broken_prompt' }), 'a prompt returning an image without mimeType')
  internal(t, await error(t, served, 'prompts/get', { name: 'throwing_prompt' }), 'a prompt that throws')
})

t.test('completion/complete: values, context, limits and errors', async (t) => {
  const served = await serve(t)
  const complete = (ref: Record<string, unknown>, name: string, value: string, context?: Record<string, string>) => ({ ref, argument: { name, value }, ...(context ? { context: { arguments: context } } : {}) })
  const expect = async (params: Record<string, unknown>, completion: unknown, what: string) => {
    const r = await result(t, served, 'completion/complete', params)
    t.equal(r.resultType, 'complete')
    t.strictSame(bare(r), { completion }, what)
  }
  await expect(complete({ type: 'ref/prompt', name: 'greet' }, 'style', 'f'), { values: ['formal', 'friendly', 'funny'], total: 3, hasMore: false }, 'a prompt argument')
  await expect(complete({ type: 'ref/resource', uri: ITEMS_TEMPLATE }, 'item_id', ''), { values: ['a1', 'a2'], total: 2, hasMore: false }, 'a template variable')
  await expect(complete({ type: 'ref/resource', uri: MEMBERS_TEMPLATE }, 'member', 'b', { team: 'blue' }), { values: ['bea', 'bo'], total: 2, hasMore: false }, 'with context')
  await expect(complete({ type: 'ref/prompt', name: 'many_values' }, 'n', ''), { values: MANY.slice(0, 100), total: 150, hasMore: true }, 'at most 100 values')
  invalidParams(t, await error(t, served, 'completion/complete', complete({ type: 'ref/prompt', name: 'nope' }, 'x', '')), 'Unknown prompt: nope', { name: 'nope' }, 'an unknown prompt')
  invalidParams(t, await error(t, served, 'completion/complete', complete({ type: 'ref/resource', uri: 'test://x/{y}' }, 'y', '')), 'Unknown resource template: test://x/{y}', { uri: 'test://x/{y}' }, 'an unknown template')
  const viewer = await createMember(served.server, { role: 'viewer' })
  await expect(complete({ type: 'ref/resource', uri: VAULT_TEMPLATE }, 'key', ''), { values: ['k1', 'k2'], total: 2, hasMore: false }, 'the admin template, for an admin')
  invalidParams(t, await error(t, served, 'completion/complete', complete({ type: 'ref/resource', uri: VAULT_TEMPLATE }, 'key', ''), { key: viewer.key }), `Unknown resource template: ${VAULT_TEMPLATE}`, { uri: VAULT_TEMPLATE }, 'the admin template, for a viewer')

  // completion/complete may not answer input_required (only tools/call, prompts/get and resources/read may).
  const { reply, response } = await call(t, served, 'completion/complete', complete({ type: 'ref/prompt', name: 'asking_completer' }, 'x', ''), { capabilities: { elicitation: {} } })
  t.notOk(response?.result?.resultType === 'input_required', 'a completer that asks does not turn completion/complete into input_required')
  t.equal(reply.status, 200)
  internal(t, response?.error, 'a completer that asks')
})

t.test('tools/call: every content block kind, structuredContent, icons; a broken result is an internal error', async (t) => {
  const served = await serve(t, { pageSize: 50 })
  const list = await result(t, served, 'tools/list')
  cached(t, list, LIST_TTL, 'tools/list')
  const icon = list.tools.find((x: any) => x.name === 'icon_tool')
  t.strictSame(icon.icons, [ICON, { src: 'data:image/png;base64,' + PNG, mimeType: 'image/png', theme: 'dark' }])
  t.equal(icon.title, 'Tool with an icon')

  const toolCall = (name: string) => result(t, served, 'tools/call', { name, arguments: {} })
  t.strictSame(bare(await toolCall('rich_tool')), { content: RICH, isError: false }, 'every block kind')
  t.strictSame(bare(await toolCall('structured_tool')), { content: [{ type: 'text', text: '3 items' }, { type: 'image', data: PNG, mimeType: 'image/png' }], isError: false, structuredContent: { count: 3 } })
  t.strictSame(bare(await toolCall('plain_tool')), { content: [{ type: 'text', text: '{"ok":true}' }], isError: false, structuredContent: { ok: true } })
  t.strictSame(bare(await toolCall('tool_error')), { content: [{ type: 'text', text: 'it went wrong' }, { type: 'resource_link', uri: URI.text, name: 'static_text' }], isError: true })
  for (const name of ['broken_block', 'broken_structure']) {
    const r = await toolCall(name)
    t.equal(r.isError, true, `${name}: a failure`)
    t.strictSame(JSON.parse(r.content[0].text), { code: 'INTERNAL_ERROR', message: 'Internal error' }, `${name}: INTERNAL_ERROR`)
  }
})

// ---- Questions: input_required with a sealed requestState ------------------------------------------------------------

/** A round that asks: input_required with the expected inputRequests; returns the requestState. */
async function asked(t: Test, served: Served, method: string, params: Record<string, unknown>, capabilities: Record<string, unknown>, inputRequests: unknown, key?: string): Promise<string> {
  const r = await result(t, served, method, params, { capabilities, ...(key ? { key } : {}) })
  t.equal(r.resultType, 'input_required', `${method}: input_required`)
  t.strictSame(r.inputRequests, inputRequests, `${method}: the inputRequests`)
  t.type(r.requestState, 'string', `${method}: a requestState`)
  t.notOk('ttlMs' in r || 'cacheScope' in r, `${method}: no caching hints on an input_required result`)
  return r.requestState as string
}

function tamper(state: string): string {
  const i = Math.floor(state.length / 2)
  return state.slice(0, i) + (state[i] === 'A' ? 'B' : 'A') + state.slice(i + 1)
}

t.test('resources/read and prompts/get that ask: input_required, then the retry with inputResponses completes', async (t) => {
  const served = await serve(t)
  const { server, records } = served
  const ELICITING = { elicitation: {} }
  const colorRequest = { elicit: { method: 'elicitation/create', params: { mode: 'form', message: 'Which color?', requestedSchema: ELICIT_COLOR } } }
  const state = await asked(t, served, 'resources/read', { uri: URI.asking }, ELICITING, colorRequest)

  const runs = records.runs.get('asking_reader')!
  invalidParams(t, await error(t, served, 'resources/read', { uri: URI.asking, requestState: tamper(state), inputResponses: { elicit: { action: 'accept', content: { color: 'red' } } } }, { capabilities: ELICITING }),
    /requestState is not one this server issued/, { param: 'requestState' }, 'a tampered requestState')
  invalidParams(t, await error(t, served, 'resources/read', { uri: URI.asking, requestState: 'forged', inputResponses: {} }, { capabilities: ELICITING }),
    /requestState is not one this server issued/, { param: 'requestState' }, 'a forged requestState')
  invalidParams(t, await error(t, served, 'prompts/get', { name: 'ask_name', arguments: { topic: 'x' }, requestState: state, inputResponses: {} }, { capabilities: ELICITING }),
    /requestState belongs to another request/, { param: 'requestState' }, 'the state of another request')
  const colleague = await createMember(server, { role: 'owner' })
  invalidParams(t, await error(t, served, 'resources/read', { uri: URI.asking, requestState: state, inputResponses: { elicit: { action: 'accept', content: { color: 'red' } } } }, { capabilities: ELICITING, key: colleague.key }),
    /requestState belongs to another request/, { param: 'requestState' }, 'another member\'s retry')
  t.equal(records.runs.get('asking_reader'), runs, 'the reader did not run for any of them')

  invalidParams(t, await error(t, served, 'resources/read', { uri: URI.asking, requestState: state, inputResponses: { elicit: { action: 'accept', content: { color: 'blue' } } } }, { capabilities: ELICITING }),
    /inputResponses\.elicit does not answer/, { param: 'inputResponses.elicit' }, 'an answer outside the form')
  const again = await asked(t, served, 'resources/read', { uri: URI.asking, requestState: state, inputResponses: { other: 1 } }, ELICITING, colorRequest)
  t.type(again, 'string', 'a retry without the answer is asked again (unknown keys ignored)')

  const done = await result(t, served, 'resources/read', { uri: URI.asking, requestState: state, inputResponses: { elicit: { action: 'accept', content: { color: 'green' } } } }, { capabilities: ELICITING })
  cached(t, done, READ_TTL, 'the completed read')
  t.strictSame(bare(done), { contents: [{ uri: URI.asking, text: 'color=green' }] }, 'the answer completes the read')

  const without = await error(t, served, 'resources/read', { uri: URI.asking }, { status: 400 })
  t.equal(without.code, -32021, 'a request that did not declare elicitation: -32021')
  t.strictSame(without.data?.requiredCapabilities, { elicitation: {} })

  const nameRequest = { elicit: { method: 'elicitation/create', params: { mode: 'form', message: 'Your name?', requestedSchema: ELICIT_NAME } } }
  const promptState = await asked(t, served, 'prompts/get', { name: 'ask_name', arguments: { topic: 'tea' } }, ELICITING, nameRequest)
  invalidParams(t, await error(t, served, 'prompts/get', { name: 'ask_name', arguments: { topic: 'coffee' }, requestState: promptState, inputResponses: { elicit: { action: 'accept', content: { name: 'Al' } } } }, { capabilities: ELICITING }),
    /requestState belongs to another request/, { param: 'requestState' }, 'other arguments')
  const got = await result(t, served, 'prompts/get', { name: 'ask_name', arguments: { topic: 'tea' }, requestState: promptState, inputResponses: { elicit: { action: 'accept', content: { name: 'Al' } } } }, { capabilities: ELICITING })
  t.strictSame(bare(got), { messages: [{ role: 'user', content: { type: 'text', text: 'Al asks about tea' } }] })
  const declined = await result(t, served, 'prompts/get', { name: 'ask_name', arguments: { topic: 'tea' }, requestState: promptState, inputResponses: { elicit: { action: 'cancel' } } }, { capabilities: ELICITING })
  t.strictSame(bare(declined), { messages: [{ role: 'user', content: { type: 'text', text: '(cancel) asks about tea' } }] }, 'a cancel reaches the prompt')
})

t.test('sampling and roots as input requests, for requests that declare them', async (t) => {
  const served = await serve(t)
  const sampleRequest = {
    sample: {
      method: 'sampling/createMessage',
      params: { messages: [{ role: 'user', content: { type: 'text', text: 'Say hi' } }], maxTokens: 50, systemPrompt: 'Be brief', modelPreferences: { hints: [{ name: 'small' }], speedPriority: 1 } },
    },
  }
  const state = await asked(t, served, 'prompts/get', { name: 'sampled' }, { sampling: {} }, sampleRequest)
  const bad = await error(t, served, 'prompts/get', { name: 'sampled', requestState: state, inputResponses: { sample: { role: 'assistant', content: { type: 'text', text: 'x' } } } }, { capabilities: { sampling: {} } })
  t.equal(bad.code, -32602, 'a sampling answer without model: -32602')
  const got = await result(t, served, 'prompts/get', { name: 'sampled', requestState: state, inputResponses: { sample: { role: 'assistant', content: { type: 'text', text: 'hello' }, model: 'm-9' } } }, { capabilities: { sampling: {} } })
  t.strictSame(bare(got), { messages: [{ role: 'assistant', content: { type: 'text', text: 'm-9 said hello' } }] })
  const noSampling = await error(t, served, 'prompts/get', { name: 'sampled' }, { capabilities: { elicitation: {} }, status: 400 })
  t.equal(noSampling.code, -32021)
  t.strictSame(noSampling.data?.requiredCapabilities, { sampling: {} })

  const rootsState = await asked(t, served, 'prompts/get', { name: 'rooted' }, { roots: {} }, { roots: { method: 'roots/list' } })
  const rooted = await result(t, served, 'prompts/get', { name: 'rooted', requestState: rootsState, inputResponses: { roots: { roots: [{ uri: 'file:///w', name: 'W' }] } } }, { capabilities: { roots: {} } })
  t.strictSame(bare(rooted), { messages: [{ role: 'user', content: { type: 'text', text: 'roots: file:///w (W)' } }] })
  const noRoots = await error(t, served, 'prompts/get', { name: 'rooted' }, { status: 400 })
  t.strictSame(noRoots.data?.requiredCapabilities, { roots: {} })
})

t.test('questions over several rounds, and several at once', async (t) => {
  const served = await serve(t)
  const ELICITING = { elicitation: {} }
  const first = { elicit: { method: 'elicitation/create', params: { mode: 'form', message: 'First: a color?', requestedSchema: ELICIT_COLOR } } }
  const state1 = await asked(t, served, 'prompts/get', { name: 'two_rounds' }, ELICITING, first)
  const red = { elicit: { action: 'accept', content: { color: 'red' } } }
  const second = { elicit_2: { method: 'elicitation/create', params: { mode: 'form', message: 'Second: a name?', requestedSchema: ELICIT_NAME } } }
  const state2 = await asked(t, served, 'prompts/get', { name: 'two_rounds', requestState: state1, inputResponses: red }, ELICITING, second)
  t.not(state2, state1, 'the second round has a state of its own')
  const done = await result(t, served, 'prompts/get', { name: 'two_rounds', requestState: state2, inputResponses: { elicit_2: { action: 'accept', content: { name: 'Al' } } } }, { capabilities: ELICITING })
  t.strictSame(bare(done), { messages: [{ role: 'user', content: { type: 'text', text: 'red/Al' } }] }, 'the first answer was carried in the state')

  const BOTH = { elicitation: {}, roots: {} }
  const atOnce = {
    color: { method: 'elicitation/create', params: { mode: 'form', message: 'A color?', requestedSchema: ELICIT_COLOR } },
    where: { method: 'roots/list' },
  }
  const missing = await error(t, served, 'prompts/get', { name: 'at_once' }, { capabilities: ELICITING, status: 400 })
  t.strictSame(missing.data?.requiredCapabilities, { roots: {} }, 'only what the request lacks')
  const state = await asked(t, served, 'prompts/get', { name: 'at_once' }, BOTH, atOnce)
  await asked(t, served, 'prompts/get', { name: 'at_once', requestState: state, inputResponses: { color: { action: 'accept', content: { color: 'green' } } } }, BOTH, atOnce)
  const got = await result(t, served, 'prompts/get', { name: 'at_once', requestState: state, inputResponses: { color: { action: 'accept', content: { color: 'green' } }, where: { roots: [{ uri: 'file:///x' }] } } }, { capabilities: BOTH })
  t.strictSame(bare(got), { messages: [{ role: 'user', content: { type: 'text', text: 'green in file:///x' } }] }, 'both answers, in one retry')
})

t.test('resources/subscribe and resources/unsubscribe do not exist in 2026-07-28', async (t) => {
  const served = await serve(t)
  for (const method of ['resources/subscribe', 'resources/unsubscribe']) {
    const err = await error(t, served, method, { uri: URI.text }, { status: 404 })
    t.equal(err.code, -32601, `${method}: -32601`)
  }
})

// The deadline sealed into the state is the server's clock's (docs/decisions/clock.md): the answer is given 1 ms
// before it, then at it.
t.test('an answer after the question expired: INPUT_TIMEOUT', async (t) => {
  const ELICIT_MS = 600_000
  const clock = new ManualClock()
  const served = await serve(t, { elicitationTimeoutMs: ELICIT_MS }, clock)
  const ELICITING = { elicitation: {} }
  const state = await asked(t, served, 'resources/read', { uri: URI.asking }, ELICITING, { elicit: { method: 'elicitation/create', params: { mode: 'form', message: 'Which color?', requestedSchema: ELICIT_COLOR } } })
  const answer = { uri: URI.asking, requestState: state, inputResponses: { elicit: { action: 'accept', content: { color: 'red' } } } }
  await clock.advance(ELICIT_MS - 1)
  const inTime = await result(t, served, 'resources/read', answer, { capabilities: ELICITING })
  t.not(inTime?.resultType, 'input_required', '1 ms before the deadline, the answer is taken (not asked for again)')
  t.ok(Array.isArray(inTime?.contents), 'and the resource is read')
  await clock.advance(1)
  const err = await error(t, served, 'resources/read', answer, { capabilities: ELICITING })
  t.equal(err.code, -31000, 'a code of its own outside the reserved range')
  t.equal(err.data?.code, 'INPUT_TIMEOUT')
})

// ---- subscriptions/listen --------------------------------------------------------------------------------------------

async function listen(t: Test, served: Served, notifications: Record<string, unknown>, id: string, key?: string): Promise<LiveStream> {
  const live = await modernLive(served.server.mcpUrl, key ?? served.server.apiKey, 'subscriptions/listen', { notifications }, { id })
  t.teardown(() => live.close())
  t.equal(live.status, 200)
  await live.waitFor(() => messagesOf(live).length >= 1, 3000, 'the acknowledgement')
  return live
}

function checkAll(t: Test, live: LiveStream, id: string): void {
  for (const m of messagesOf(live)) {
    if ('method' in m) assertNotification(t, REV, m)
    else assertResponse(t, REV, 'subscriptions/listen', m)
    t.equal((m.params ?? m.result)?._meta?.[SUBSCRIPTION_ID_KEY], id, `${m.method ?? 'result'}: tagged with the subscription id`)
  }
}

t.test('subscriptions/listen: resource updates, prompt, resource and tool list changes, as filtered', async (t) => {
  const served = await serve(t, { listenCheckMs: 50 })
  const { server, orgId } = served
  const viewer = await createMember(server, { role: 'viewer' })
  const all = await listen(t, served, {
    resourceSubscriptions: [URI.text, URI.item('a1'), URI.admin, 'test://nothing'],
    resourcesListChanged: true,
    promptsListChanged: true,
    toolsListChanged: true,
  }, 'all')
  const ack = messagesOf(all)[0]
  t.equal(ack.method, 'notifications/subscriptions/acknowledged')
  t.strictSame(ack.params.notifications, {
    toolsListChanged: true,
    promptsListChanged: true,
    resourcesListChanged: true,
    resourceSubscriptions: [URI.text, URI.item('a1'), URI.admin],
  }, 'the honoured subset: URIs nothing serves are left out')
  const viewerLive = await listen(t, served, { resourceSubscriptions: [URI.text, URI.admin] }, 'viewer', viewer.key)
  t.strictSame(messagesOf(viewerLive)[0].params.notifications, { resourceSubscriptions: [URI.text] }, 'a resource the caller may not read is left out')
  const toolsOnly = await listen(t, served, { toolsListChanged: true }, 'tools-only')

  const acme = await server.app.repos.organizations.create({ slug: 'acme' })
  server.app.resources.updated(URI.text, acme.id)
  server.app.resources.updated(URI.blob, orgId)
  server.app.resources.updated(URI.text, orgId)
  server.app.resources.updated(URI.admin, orgId)
  await all.waitFor(() => messagesOf(all).filter((m) => m.method === 'notifications/resources/updated').length === 2, 3000, 'two updates')
  t.strictSame(messagesOf(all).filter((m) => m.method === 'notifications/resources/updated').map((m) => m.params.uri), [URI.text, URI.admin], 'only subscribed URIs of the caller\'s organization')
  await viewerLive.waitFor(() => messagesOf(viewerLive).length >= 2, 3000, 'the viewer\'s update')
  t.strictSame(messagesOf(viewerLive).slice(1).map((m) => [m.method, m.params.uri]), [['notifications/resources/updated', URI.text]], 'the viewer hears only what it may read')

  server.app.resources.listChanged(acme.id) // another organization's list
  server.app.prompts.add(definePrompt({ name: 'late_prompt', get: () => ({ messages: [{ role: 'user', content: text('late') }] }) }))
  server.app.resources.registry.add(defineResource({ name: 'late_resource', uri: 'test://late', read: () => ({ uri: 'test://late', text: 'late' }) }))
  server.app.tools.add(defineTool({ name: 'late_tool', title: 'Late', description: 'Added later', inputSchema: { type: 'object' }, scope: 'mcp:read', role: 'viewer', handler: () => toolResult([text('late')]) }))
  const methods = ['notifications/prompts/list_changed', 'notifications/resources/list_changed', 'notifications/tools/list_changed']
  await all.waitFor(() => methods.every((method) => messagesOf(all).some((m) => m.method === method)), 3000, 'the three list changes')
  await toolsOnly.waitFor(() => messagesOf(toolsOnly).some((m) => m.method === 'notifications/tools/list_changed'), 3000, 'tools/list_changed')
  await sleep(150)
  t.strictSame(messagesOf(all).slice(3).map((m) => m.method), methods, 'each list change once, in order')
  t.strictSame(messagesOf(toolsOnly).map((m) => m.method), ['notifications/subscriptions/acknowledged', 'notifications/tools/list_changed'], 'only what was asked for')
  t.strictSame(messagesOf(viewerLive).map((m) => m.method), ['notifications/subscriptions/acknowledged', 'notifications/resources/updated'], 'nothing unrequested')
  t.ok((await allPages(t, served, 'prompts/list', 'prompts')).flat().some((p: any) => p.name === 'late_prompt'), 'prompts/list shows the added prompt')

  t.ok(server.app.prompts.remove('late_prompt') && server.app.resources.registry.remove('late_resource') && server.app.tools.remove('late_tool'), 'removed')
  await all.waitFor(() => messagesOf(all).length === 9, 3000, 'the three removals')
  t.strictSame(messagesOf(all).slice(6).map((m) => m.method), methods, 'each removal announced once')
  t.notOk((await allPages(t, served, 'prompts/list', 'prompts')).flat().some((p: any) => p.name === 'late_prompt'), 'prompts/list no longer shows it')

  checkAll(t, all, 'all')
  checkAll(t, viewerLive, 'viewer')
  checkAll(t, toolsOnly, 'tools-only')

  // A graceful end: the server stops, each stream gets the listen result.
  await server.close()
  for (const [live, id] of [[all, 'all'], [toolsOnly, 'tools-only']] as const) {
    await live.ended(3000)
    const last = messagesOf(live).at(-1)
    t.equal(last?.id, id, 'the listen result ends the stream')
    t.equal(last?.result?._meta?.[SUBSCRIPTION_ID_KEY], id)
    assertResponse(t, REV, 'subscriptions/listen', last, { what: 'the listen result' })
  }
})

t.test('subscriptions/listen: a member who may no longer read a resource stops hearing of its updates', async (t) => {
  // The stream's checks run at the server's clock's intervals (docs/decisions/clock.md): the test moves it to the next.
  const CHECK_MS = 30_000
  const clock = new ManualClock()
  const served = await serve(t, { listenCheckMs: CHECK_MS }, clock)
  const { server, orgId } = served
  const admin = await createMember(server, { role: 'admin' })
  const live = await listen(t, served, { resourceSubscriptions: [URI.admin, URI.text], toolsListChanged: true }, 'demoted', admin.key)
  t.strictSame(messagesOf(live)[0].params.notifications, { toolsListChanged: true, resourceSubscriptions: [URI.admin, URI.text] }, 'an admin may follow the admin resource')
  server.app.resources.updated(URI.admin, orgId)
  await live.waitFor(() => messagesOf(live).some((m) => m.params?.uri === URI.admin), 3000, 'the update while an admin')

  // Demoted to viewer: the stream's next check notices (its tools change), and the admin resource is no longer its to follow.
  server.app.tools.add(defineTool({ name: 'admins_only', title: 'Admins', description: 'For admins', inputSchema: { type: 'object' }, scope: 'mcp:read', role: 'admin', handler: () => toolResult([text('a')]) }))
  await live.waitFor(() => messagesOf(live).some((m) => m.method === 'notifications/tools/list_changed'), 3000, 'the tool change')
  await server.app.repos.memberships.upsert({ userId: admin.user.id, organizationId: orgId, role: 'viewer' })
  await clock.advance(CHECK_MS)
  await live.waitFor(() => messagesOf(live).filter((m) => m.method === 'notifications/tools/list_changed').length === 2, 3000, 'the demotion seen by the stream at its next check')
  server.app.resources.updated(URI.admin, orgId)
  server.app.resources.updated(URI.text, orgId)
  await live.waitFor(() => messagesOf(live).some((m) => m.params?.uri === URI.text), 3000, 'the readable update')
  t.equal(messagesOf(live).filter((m) => m.params?.uri === URI.admin).length, 1, 'no update of the admin resource after the demotion')
  checkAll(t, live, 'demoted')
})

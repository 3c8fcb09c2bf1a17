/**
 * Resources, prompts, completions and rich tool content in the session revisions (2025-03-26, 2025-06-18, 2025-11-25),
 * built through the embedding API (test/helpers/primitives-defs.ts, not the built-in catalog), over real sockets. Every
 * result, error, notification and server request is validated against the official schema of the session's revision
 * (test/helpers/spec-schema.ts), closed: a field that revision does not define (a newer revision's `title`, `icons`,
 * `annotations.lastModified`, `structuredContent`, `resultType`) fails too.
 */
import t, { type Test } from 'tap'
import type { Config } from '../../src/config.js'
import { definePrompt, defineResource, defineTool, text, toolResult } from '../../src/index.js'
import { answerRequest, openLiveCall, readToEnd } from '../helpers/confirm.js'
import { openSession, post, type RpcReply } from '../helpers/mcp.js'
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
  SECRET_FAILURE,
  URI,
  WAV,
  type Records,
} from '../helpers/primitives-defs.js'
import { createMember, defaultOrganization } from '../helpers/seed.js'
import { ManualClock } from '../helpers/clock.js'
import { startServer, type TestServer } from '../helpers/server.js'
import { assertNotification, assertResponse, assertServerRequest, assertValid, definitionsOf, LEGACY_REVISIONS, REVISIONS, schemaErrors, type LegacyRevision } from '../helpers/spec-schema.js'
import { messagesOf, openLive, sleep, type LiveStream } from '../helpers/stream.js'

let nextId = 1000
const rid = () => ++nextId

interface Served {
  server: TestServer
  records: Records
  orgId: string
}

interface Session {
  revision: LegacyRevision
  headers: Record<string, string>
  sessionId: string
}

async function serve(t: Test, config: Partial<Config> = {}, clock?: ManualClock): Promise<Served> {
  const defs = primitives()
  const server = await startServer(t, { tools: defs.tools, resources: defs.resources, prompts: defs.prompts, config: { pageSize: 3, ...config }, ...(clock ? { clock } : {}) })
  const orgId = (await defaultOrganization(server)).id
  defs.records.items.set(orgId, ['a1', 'a2'])
  return { server, records: defs.records, orgId }
}

/** A session of `revision`, its initialize result checked against the revision's schema. */
async function session(t: Test, served: Served, revision: LegacyRevision, key = served.server.apiKey, capabilities: Record<string, unknown> = {}): Promise<Session> {
  const s = await openSession(served.server.mcpUrl, key, revision, capabilities)
  assertResponse(t, revision, 'initialize', s.init.json, { what: `${revision} initialize` })
  return { revision, headers: s.headers, sessionId: s.sessionId }
}

/** One request of a session, read to its end (JSON or SSE); its response is checked against the revision's schema. */
async function request(t: Test, served: Served, s: Session, method: string, params: Record<string, unknown> = {}): Promise<any> {
  const id = rid()
  const reply = await post(served.server.mcpUrl, { jsonrpc: '2.0', id, method, params }, s.headers)
  t.equal(reply.status, 200, `${method}: HTTP 200`)
  const response = reply.json ?? reply.messages.find((m) => m.id === id && ('result' in m || 'error' in m))
  t.equal(response?.id, id, `${method}: the response answers the request`)
  assertResponse(t, s.revision, method, response, { what: `${s.revision} ${method}` })
  return response
}

async function result(t: Test, served: Served, s: Session, method: string, params: Record<string, unknown> = {}): Promise<any> {
  const response = await request(t, served, s, method, params)
  t.notOk(response?.error, `${method}: no error ${response?.error ? JSON.stringify(response.error) : ''}`)
  return response?.result
}

async function error(t: Test, served: Served, s: Session, method: string, params: Record<string, unknown> = {}): Promise<any> {
  const response = await request(t, served, s, method, params)
  t.ok(response?.error, `${method}: a JSON-RPC error`)
  return response?.error
}

/** Every page of a list method: the items of each page, and the cursors handed out. */
async function allPages(t: Test, served: Served, s: Session, method: string, key: string): Promise<{ pages: any[][]; cursors: string[] }> {
  const pages: any[][] = []
  const cursors: string[] = []
  let cursor: string | undefined
  for (let i = 0; i < 20; i++) {
    const r = await result(t, served, s, method, cursor === undefined ? {} : { cursor })
    pages.push(r[key])
    if (r.nextCursor === undefined) return { pages, cursors }
    t.type(r.nextCursor, 'string')
    cursors.push(r.nextCursor)
    cursor = r.nextCursor
  }
  throw new Error(`${method} did not end`)
}

const atLeast = (revision: LegacyRevision, since: LegacyRevision) => revision >= since
const NOT_FOUND_ACTION = 'List the resources to find a valid id'

/** The one answer to a URI the caller may not read, whatever the reason (session revisions: -32002). */
function notFound(uri: string) {
  return { code: -32002, message: `Resource not found: ${uri}`, data: { uri, code: 'RESOURCE_NOT_FOUND', action: NOT_FOUND_ACTION } }
}

function internal(t: Test, err: any, what: string): void {
  t.equal(err?.code, -32603, `${what}: -32603`)
  t.equal(err?.message, 'Internal error', `${what}: a generic message`)
  t.equal(err?.data?.code, 'INTERNAL_ERROR', `${what}: data.code`)
  t.notMatch(JSON.stringify(err), /SQLITE|password|secret\.db|at .*\.ts/, `${what}: nothing of the failure leaks`)
}

function invalidParams(t: Test, err: any, message: string, details: unknown, what: string): void {
  t.equal(err?.code, -32602, `${what}: -32602`)
  t.equal(err?.message, message, `${what}: message`)
  t.equal(err?.data?.code, 'INVALID_PARAMS', `${what}: data.code`)
  t.strictSame(err?.data?.details, details, `${what}: data.details`)
}

// ---- Expected shapes per revision -------------------------------------------------------------------------------------

function annotationsFor(revision: LegacyRevision, annotations: Record<string, unknown>) {
  if (atLeast(revision, '2025-06-18')) return annotations
  const { lastModified: _l, ...rest } = annotations
  return rest
}

function staticTextEntry(revision: LegacyRevision) {
  return {
    uri: URI.text,
    name: 'static_text',
    ...(atLeast(revision, '2025-06-18') ? { title: 'Static text' } : {}),
    ...(atLeast(revision, '2025-11-25') ? { icons: [ICON] } : {}),
    description: 'A text resource',
    mimeType: 'text/plain',
    size: 5,
    annotations: annotationsFor(revision, { audience: ['user'], priority: 0.5, lastModified: LAST_MODIFIED }),
  }
}

/** The blocks of `rich` (primitives-defs) and the `_meta` text, as `revision` shows them. */
function richBlocks(revision: LegacyRevision): any[] {
  const meta06 = atLeast(revision, '2025-06-18')
  const link = meta06
    ? { type: 'resource_link', uri: URI.item('a1'), name: 'item_a1', title: 'Item a1', description: 'an item', mimeType: 'application/json', ...(atLeast(revision, '2025-11-25') ? { icons: [ICON] } : {}) }
    : { type: 'text', text: `Resource link: item_a1 (an item) <${URI.item('a1')}>` }
  return [
    { type: 'text', text: 'plain text', annotations: annotationsFor(revision, { audience: ['assistant'], priority: 0.2, lastModified: LAST_MODIFIED }) },
    { type: 'image', data: PNG, mimeType: 'image/png' },
    { type: 'audio', data: WAV, mimeType: 'audio/wav' },
    { type: 'resource', resource: { uri: URI.text, mimeType: 'text/plain', text: 'hello', ...(meta06 ? { _meta: { 'example.com/embedded': true } } : {}) } },
    { type: 'resource', resource: { uri: URI.blob, mimeType: 'image/png', blob: PNG } },
    link,
    { type: 'text', text: 'with meta', ...(meta06 ? { _meta: { 'example.com/block': 1 } } : {}) },
  ]
}

// ---- Tests -----------------------------------------------------------------------------------------------------------

t.test('the vendored schemas compile and refuse what they should (the checks below can fail)', async (t) => {
  for (const revision of REVISIONS) {
    t.ok(definitionsOf(revision).length > 80, `${revision}: the definitions are there`)
    const result = revision === '2026-07-28' ? { resultType: 'complete' } : {}
    t.equal(schemaErrors(revision, 'CallToolResult', { ...result, content: [{ type: 'text', text: 'ok' }] }), null, `${revision}: a good result passes`)
    t.match(schemaErrors(revision, 'CallToolResult', { ...result, content: [{ type: 'image', data: PNG }] }), /mimeType/, `${revision}: an image without mimeType fails`)
    t.match(schemaErrors(revision, 'ReadResourceResult', { ...result, contents: [{ uri: 'not a uri', text: 'x' }] }), /format/, `${revision}: a contents URI that is no URI fails`)
    t.match(schemaErrors(revision, 'CompleteResult', { ...result, completion: { values: [1] } }), /string/, `${revision}: a completion value that is no string fails`)
  }
  t.match(schemaErrors('2026-07-28', 'CallToolResult', { content: [] }), /resultType/, '2026-07-28: a result without resultType fails')
  t.equal(schemaErrors('2025-06-18', 'CallToolResult', { content: [], resultType: 'complete' }), null, 'the official 2025-06-18 schema tolerates unknown fields')
  t.match(schemaErrors('2025-06-18', 'CallToolResult', { content: [], resultType: 'complete' }, { closed: true }), /resultType/, '… the closed check does not')
  t.match(schemaErrors('2025-06-18', 'Prompt', { name: 'p', icons: [ICON] }, { closed: true }), /icons/, 'icons are not a 2025-06-18 Prompt field')
  t.match(schemaErrors('2025-03-26', 'Resource', { uri: 'test://x', name: 'x', title: 'X' }, { closed: true }), /title/, 'title is not a 2025-03-26 Resource field')
  t.equal(schemaErrors('2025-03-26', 'Resource', { uri: 'test://x', name: 'x', _meta: { a: 1 } }, { closed: true }), null, '_meta is allowed everywhere')
})

t.test('initialize declares resources (subscribe, listChanged), prompts (listChanged) and completions', async (t) => {
  const served = await serve(t)
  for (const revision of LEGACY_REVISIONS) {
    const s = await openSession(served.server.mcpUrl, served.server.apiKey, revision)
    assertResponse(t, revision, 'initialize', s.init.json, { what: `${revision} initialize` })
    const caps = s.init.json.result.capabilities
    t.strictSame(caps.resources, { subscribe: true, listChanged: true }, `${revision}: resources`)
    t.strictSame(caps.prompts, { listChanged: true }, `${revision}: prompts`)
    t.strictSame(caps.completions, {}, `${revision}: completions`)
    t.strictSame(caps.tools, { listChanged: true }, `${revision}: tools`)
  }
})

t.test('resources/list: pages, cursors, and what each caller may see', async (t) => {
  const served = await serve(t)
  const { server } = served
  const STATICS = [URI.text, URI.blob, URI.admin, URI.write, URI.nullReader, URI.throwing, URI.garbage, URI.asking, URI.sampling, URI.page(1), URI.page(2), URI.page(3)]
  const EVERYTHING = [...STATICS, URI.item('a1'), URI.item('a2')]
  const viewer = await createMember(server, { role: 'viewer' })
  const readOnlyAdmin = await createMember(server, { role: 'admin', scopes: ['mcp:read'] })

  for (const revision of LEGACY_REVISIONS) {
    await t.test(revision, async (t) => {
      const owner = await session(t, served, revision)
      const { pages, cursors } = await allPages(t, served, owner, 'resources/list', 'resources')
      t.strictSame(pages.map((p) => p.length), [3, 3, 3, 3, 2], 'pages of pageSize 3, the last one short')
      t.strictSame(pages.flat().map((r) => r.uri), EVERYTHING, 'static resources, then what the template lists, in a stable order')
      t.strictSame(pages.flat()[0], staticTextEntry(revision), 'the static entry as the revision defines it (title from 2025-06-18, icons from 2025-11-25, no annotations.lastModified before 2025-06-18)')
      t.strictSame(pages.flat().at(-1), { uri: URI.item('a2'), name: 'item_a2', mimeType: 'application/json', ...(atLeast(revision, '2025-06-18') ? { title: 'Item a2' } : {}) }, 'a listed template entry')
      t.equal(new Set(cursors).size, cursors.length, 'every cursor differs')

      // The same cursor gives the same page again.
      const again = await result(t, served, owner, 'resources/list', { cursor: cursors[1]! })
      t.strictSame(again.resources, pages[2], 'a cursor round-trips')

      // Forged, foreign, truncated and past-the-end cursors.
      const promptsCursor = (await result(t, served, owner, 'prompts/list', {})).nextCursor as string
      const forged = [
        ['not base64 at all!', 'garbage'],
        [Buffer.from('resources/list:9999').toString('base64url'), 'past the end'],
        [Buffer.from('resources/list:-1').toString('base64url'), 'negative'],
        [promptsCursor, 'a prompts/list cursor'],
        [cursors[0]!.slice(0, -1), 'truncated'],
      ] as const
      for (const [cursor, what] of forged) {
        const err = await error(t, served, owner, 'resources/list', { cursor })
        invalidParams(t, err, 'Invalid cursor for resources/list', { param: 'cursor' }, `${what} cursor`)
      }

      const asViewer = await session(t, served, revision, viewer.key)
      const seenByViewer = (await allPages(t, served, asViewer, 'resources/list', 'resources')).pages.flat().map((r) => r.uri)
      t.strictSame(seenByViewer, EVERYTHING.filter((u) => u !== URI.admin), 'a viewer does not see the admin resource')

      const asReader = await session(t, served, revision, readOnlyAdmin.key)
      const seenByReader = (await allPages(t, served, asReader, 'resources/list', 'resources')).pages.flat().map((r) => r.uri)
      t.strictSame(seenByReader, EVERYTHING.filter((u) => u !== URI.write), 'a token without mcp:write does not see the write resource')
    })
  }
})

t.test('resources/read: text and blob contents; not found is one answer for every reason', async (t) => {
  const served = await serve(t)
  const { server } = served
  const viewer = await createMember(server, { role: 'viewer' })
  const readOnly = await createMember(server, { role: 'owner', scopes: ['mcp:read'] })
  const acme = await server.app.repos.organizations.create({ slug: 'acme' })
  served.records.items.set(acme.id, ['z9'])

  for (const revision of LEGACY_REVISIONS) {
    await t.test(revision, async (t) => {
      const owner = await session(t, served, revision)
      const textRead = await result(t, served, owner, 'resources/read', { uri: URI.text })
      t.strictSame(textRead, {
        contents: [{ uri: URI.text, mimeType: 'text/plain', text: 'hello', ...(atLeast(revision, '2025-06-18') ? { _meta: { 'example.com/source': 'test' } } : {}) }],
      }, 'text contents (their _meta from 2025-06-18 only)')
      t.strictSame(await result(t, served, owner, 'resources/read', { uri: URI.blob }), { contents: [{ uri: URI.blob, mimeType: 'image/png', blob: PNG }] }, 'blob contents')
      t.strictSame(await result(t, served, owner, 'resources/read', { uri: URI.item('a1') }), { contents: [{ uri: URI.item('a1'), mimeType: 'application/json', text: '{"id":"a1"}' }] }, 'a templated resource')
      t.strictSame(await result(t, served, owner, 'resources/read', { uri: URI.admin }), { contents: [{ uri: URI.admin, text: 'for admins' }] }, 'the owner reads the admin resource')

      const asViewer = await session(t, served, revision, viewer.key)
      const asReadOnly = await session(t, served, revision, readOnly.key)
      const cases: Array<[Session, string, string]> = [
        [owner, 'test://nothing/here', 'a URI nothing serves'],
        [owner, URI.item('zz'), 'an absent id of a template'],
        [owner, URI.item('z9'), 'another organization\'s id'],
        [owner, URI.nullReader, 'a reader that returns null'],
        [asViewer, URI.admin, 'a resource the viewer\'s role may not read'],
        [asReadOnly, URI.write, 'a resource the token\'s scope does not cover'],
      ]
      for (const [s, uri, what] of cases) {
        t.strictSame(await error(t, served, s, 'resources/read', { uri }), notFound(uri), `${what}: -32002 with data.uri`)
      }
      internal(t, await error(t, served, owner, 'resources/read', { uri: URI.throwing }), 'a reader that throws')
      internal(t, await error(t, served, owner, 'resources/read', { uri: URI.garbage }), 'a reader that returns something else than contents')
      const bad = await error(t, served, owner, 'resources/read', {})
      t.equal(bad.code, -32602, 'no uri: -32602')
    })
  }
})

t.test('2025-03-26 batches of resources, prompts and completion requests', async (t) => {
  const served = await serve(t)
  const s = await session(t, served, '2025-03-26')
  const batch = [
    { jsonrpc: '2.0', id: 'r', method: 'resources/read', params: { uri: URI.text } },
    { jsonrpc: '2.0', id: 'p', method: 'prompts/get', params: { name: 'greet', arguments: { name: 'Cy' } } },
    { jsonrpc: '2.0', id: 'c', method: 'completion/complete', params: { ref: { type: 'ref/prompt', name: 'greet' }, argument: { name: 'style', value: 'fu' } } },
    { jsonrpc: '2.0', id: 'n', method: 'resources/read', params: { uri: 'test://nothing' } },
  ]
  const reply = await post(served.server.mcpUrl, batch, s.headers)
  t.equal(reply.status, 200)
  t.ok(Array.isArray(reply.json), 'a JSON array of responses')
  t.strictSame(reply.json.map((r: any) => r.id), ['r', 'p', 'c', 'n'], 'in request order')
  assertValid(t, '2025-03-26', 'JSONRPCBatchResponse', reply.json)
  for (const [i, method] of ['resources/read', 'prompts/get', 'completion/complete', 'resources/read'].entries()) assertResponse(t, '2025-03-26', method, reply.json[i])
  t.strictSame(reply.json[0].result, { contents: [{ uri: URI.text, mimeType: 'text/plain', text: 'hello' }] })
  t.strictSame(reply.json[1].result.messages[0].content, { type: 'text', text: 'Hello Cy' })
  t.strictSame(reply.json[2].result.completion.values, ['funny'])
  t.strictSame(reply.json[3].error, notFound('test://nothing'))
})

t.test('resources/templates/list: titles and icons as each revision has them; an admin template hidden from others', async (t) => {
  const served = await serve(t, { pageSize: 1 })
  const viewer = await createMember(served.server, { role: 'viewer' })
  for (const revision of LEGACY_REVISIONS) {
    const s = await session(t, served, revision)
    const { pages } = await allPages(t, served, s, 'resources/templates/list', 'resourceTemplates')
    t.strictSame(pages.map((p) => p.length), [1, 1, 1], `${revision}: one template per page`)
    t.strictSame(pages.flat(), [
      {
        uriTemplate: ITEMS_TEMPLATE,
        name: 'items',
        ...(atLeast(revision, '2025-06-18') ? { title: 'Items' } : {}),
        ...(atLeast(revision, '2025-11-25') ? { icons: [ICON] } : {}),
        description: 'The items of the caller\'s organization',
        mimeType: 'application/json',
        annotations: annotationsFor(revision, { priority: 1, lastModified: LAST_MODIFIED }),
      },
      { uriTemplate: MEMBERS_TEMPLATE, name: 'team_members' },
      { uriTemplate: VAULT_TEMPLATE, name: 'vault' },
    ], `${revision}: the templates (title from 2025-06-18, icons from 2025-11-25, no annotations.lastModified before 2025-06-18)`)
    const asViewer = await session(t, served, revision, viewer.key)
    t.strictSame((await allPages(t, served, asViewer, 'resources/templates/list', 'resourceTemplates')).pages.flat().map((x) => x.uriTemplate), [ITEMS_TEMPLATE, MEMBERS_TEMPLATE], `${revision}: a viewer does not see the admin template`)
    t.strictSame(await error(t, served, asViewer, 'resources/read', { uri: 'test://vault/k1' }), notFound('test://vault/k1'), `${revision}: nor read it`)
    t.strictSame(await result(t, served, s, 'resources/read', { uri: 'test://vault/k1' }), { contents: [{ uri: 'test://vault/k1', text: 'vaulted' }] }, `${revision}: an admin reads it`)
  }
})

t.test('prompts/list: arguments, titles and icons per revision; visibility by role and scope', async (t) => {
  const served = await serve(t)
  const ALL = ['greet', 'rich', 'team_prompt', 'many_values', 'admin_prompt', 'write_prompt', 'ask_name', 'sampled', 'rooted', 'two_rounds', 'at_once', 'asking_completer', 'broken_prompt', 'throwing_prompt']
  const viewer = await createMember(served.server, { role: 'viewer' })
  const readOnly = await createMember(served.server, { role: 'owner', scopes: ['mcp:read'] })
  for (const revision of LEGACY_REVISIONS) {
    await t.test(revision, async (t) => {
      const owner = await session(t, served, revision)
      const { pages } = await allPages(t, served, owner, 'prompts/list', 'prompts')
      t.strictSame(pages.map((p) => p.length), [3, 3, 3, 3, 2])
      t.strictSame(pages.flat().map((p) => p.name), ALL, 'every prompt, in registration order')
      const titled = atLeast(revision, '2025-06-18')
      t.strictSame(pages[0]![0], {
        name: 'greet',
        ...(titled ? { title: 'Greeting' } : {}),
        ...(atLeast(revision, '2025-11-25') ? { icons: [ICON] } : {}),
        description: 'Greets someone',
        arguments: [
          { name: 'name', ...(titled ? { title: 'Name' } : {}), description: 'Who to greet', required: true },
          { name: 'style', description: 'How', required: false },
        ],
      }, 'the prompt as the revision defines it')
      const err = await error(t, served, owner, 'prompts/list', { cursor: 'Zm9vOmJhcg' })
      invalidParams(t, err, 'Invalid cursor for prompts/list', { param: 'cursor' }, 'a cursor of another list')

      const asViewer = await session(t, served, revision, viewer.key)
      t.strictSame((await allPages(t, served, asViewer, 'prompts/list', 'prompts')).pages.flat().map((p) => p.name), ALL.filter((n) => n !== 'admin_prompt'), 'a viewer does not see the admin prompt')
      const asReadOnly = await session(t, served, revision, readOnly.key)
      t.strictSame((await allPages(t, served, asReadOnly, 'prompts/list', 'prompts')).pages.flat().map((p) => p.name), ALL.filter((n) => n !== 'write_prompt'), 'a read-only token does not see the write prompt')
    })
  }
})

t.test('prompts/get: arguments checked before the prompt runs; unknown and hidden prompts are one answer', async (t) => {
  const served = await serve(t)
  const viewer = await createMember(served.server, { role: 'viewer' })
  for (const revision of LEGACY_REVISIONS) {
    await t.test(revision, async (t) => {
      const owner = await session(t, served, revision)
      const runs = served.records.runs.get('greet') ?? 0
      t.strictSame(await result(t, served, owner, 'prompts/get', { name: 'greet', arguments: { name: 'Ann', style: 'formal' } }), {
        description: 'A greeting',
        messages: [{ role: 'user', content: { type: 'text', text: 'Hello Ann (formal)' } }],
      }, 'the prompt with its arguments')
      t.strictSame(await result(t, served, owner, 'prompts/get', { name: 'greet', arguments: { name: 'Bo' } }), {
        description: 'A greeting',
        messages: [{ role: 'user', content: { type: 'text', text: 'Hello Bo' } }],
      }, 'an optional argument left out')

      invalidParams(t, await error(t, served, owner, 'prompts/get', { name: 'greet' }), 'Prompt greet needs name', { missing: ['name'] }, 'a missing required argument')
      invalidParams(t, await error(t, served, owner, 'prompts/get', { name: 'greet', arguments: { name: '' } }), 'Prompt greet needs name', { missing: ['name'] }, 'an empty required argument')
      invalidParams(t, await error(t, served, owner, 'prompts/get', { name: 'greet', arguments: { name: 'A', mood: 'x' } }), 'Prompt greet has no argument mood', { unknown: ['mood'] }, 'an unknown argument')
      invalidParams(t, await error(t, served, owner, 'prompts/get', { name: 'nope' }), 'Unknown prompt: nope', { name: 'nope' }, 'an unknown prompt')
      const asViewer = await session(t, served, revision, viewer.key)
      invalidParams(t, await error(t, served, asViewer, 'prompts/get', { name: 'admin_prompt' }), 'Unknown prompt: admin_prompt', { name: 'admin_prompt' }, 'a prompt the viewer may not see')
      const num = await error(t, served, owner, 'prompts/get', { name: 'greet', arguments: { name: 5 } })
      t.equal(num.code, -32602, 'a non-string argument: -32602')
      t.equal(served.records.runs.get('greet'), runs + 2, 'the prompt ran only for the two valid requests')

      internal(t, await error(t, served, owner, 'prompts/get', { name: 'broken_prompt' }), 'a prompt returning an image without mimeType')
      internal(t, await error(t, served, owner, 'prompts/get', { name: 'throwing_prompt' }), 'a prompt that throws')
    })
  }
})

t.test('prompts/get: every content kind, rendered for the revision', async (t) => {
  const served = await serve(t)
  for (const revision of LEGACY_REVISIONS) {
    const s = await session(t, served, revision)
    const r = await result(t, served, s, 'prompts/get', { name: 'rich' })
    const expected = richBlocks(revision).map((content, i, all) => ({ role: i === all.length - 1 ? 'user' : 'assistant', content }))
    t.strictSame(r, { messages: expected }, `${revision}: the messages (resource_link as text before 2025-06-18, icons from 2025-11-25, _meta and lastModified from 2025-06-18)`)
  }
})

t.test('completion/complete: prompt arguments, template variables, context, limits and errors', async (t) => {
  const served = await serve(t)
  const { server } = served
  const acme = await server.app.repos.organizations.create({ slug: 'acme' })
  served.records.items.set(acme.id, ['a9-foreign'])
  const viewer = await createMember(server, { role: 'viewer' })
  const complete = (ref: Record<string, unknown>, name: string, value: string, context?: Record<string, string>) => ({
    ref,
    argument: { name, value },
    ...(context ? { context: { arguments: context } } : {}),
  })
  for (const revision of LEGACY_REVISIONS) {
    await t.test(revision, async (t) => {
      const s = await session(t, served, revision)
      const greet = { type: 'ref/prompt', name: 'greet' }
      t.strictSame(await result(t, served, s, 'completion/complete', complete(greet, 'style', 'f')), { completion: { values: ['formal', 'friendly', 'funny'], total: 3, hasMore: false } }, 'a prompt argument')
      t.strictSame(await result(t, served, s, 'completion/complete', complete(greet, 'style', 'fr')), { completion: { values: ['friendly'], total: 1, hasMore: false } }, 'narrowed by the value')
      t.strictSame(await result(t, served, s, 'completion/complete', complete(greet, 'name', 'x')), { completion: { values: [], total: 0, hasMore: false } }, 'an argument without a completer: no values')

      const items = { type: 'ref/resource', uri: ITEMS_TEMPLATE }
      t.strictSame(await result(t, served, s, 'completion/complete', complete(items, 'item_id', 'a')), { completion: { values: ['a1', 'a2'], total: 2, hasMore: false } }, 'a template variable, the caller\'s organization only')

      const before = served.records.contexts.length
      const members = { type: 'ref/resource', uri: MEMBERS_TEMPLATE }
      t.strictSame(await result(t, served, s, 'completion/complete', complete(members, 'member', 'r', { team: 'red' })), { completion: { values: ['rita', 'rob', 'ron'], total: 3, hasMore: false } }, 'a template variable completed with context')
      t.strictSame(await result(t, served, s, 'completion/complete', complete({ type: 'ref/prompt', name: 'team_prompt' }, 'member', '', { team: 'blue' })), { completion: { values: ['bea', 'bo'], total: 2, hasMore: false } }, 'a prompt argument completed with context')
      t.strictSame(await result(t, served, s, 'completion/complete', complete(members, 'member', '')), { completion: { values: [], total: 0, hasMore: false } }, 'without context')
      t.strictSame(served.records.contexts.slice(before), [{ team: 'red' }, { team: 'blue' }, {}], 'completers got context.arguments ({} without)')

      const many = await result(t, served, s, 'completion/complete', complete({ type: 'ref/prompt', name: 'many_values' }, 'n', ''))
      t.strictSame(many, { completion: { values: MANY.slice(0, 100), total: 150, hasMore: true } }, 'at most 100 values, with the total of distinct values and hasMore')

      invalidParams(t, await error(t, served, s, 'completion/complete', complete({ type: 'ref/prompt', name: 'nope' }, 'x', '')), 'Unknown prompt: nope', { name: 'nope' }, 'an unknown prompt')
      invalidParams(t, await error(t, served, s, 'completion/complete', complete({ type: 'ref/resource', uri: 'test://none/{x}' }, 'x', '')), 'Unknown resource template: test://none/{x}', { uri: 'test://none/{x}' }, 'an unknown template')
      invalidParams(t, await error(t, served, s, 'completion/complete', complete(greet, 'mood', '')), 'Prompt greet has no argument mood', { argument: 'mood' }, 'an unknown argument')
      invalidParams(t, await error(t, served, s, 'completion/complete', complete(items, 'other', '')), `Resource template ${ITEMS_TEMPLATE} has no variable other`, { argument: 'other' }, 'an unknown variable')
      const vault = { type: 'ref/resource', uri: VAULT_TEMPLATE }
      t.strictSame(await result(t, served, s, 'completion/complete', complete(vault, 'key', 'k')), { completion: { values: ['k1', 'k2'], total: 2, hasMore: false } }, 'an admin completes the admin template')
      const asViewer = await session(t, served, revision, viewer.key)
      invalidParams(t, await error(t, served, asViewer, 'completion/complete', complete({ type: 'ref/prompt', name: 'admin_prompt' }, 'x', '')), 'Unknown prompt: admin_prompt', { name: 'admin_prompt' }, 'a prompt the caller may not see')
      invalidParams(t, await error(t, served, asViewer, 'completion/complete', complete(vault, 'key', 'k')), `Unknown resource template: ${VAULT_TEMPLATE}`, { uri: VAULT_TEMPLATE }, 'a template the caller may not see')
    })
  }
})

t.test('tools: icons and titles per revision; every content block kind, with and without structuredContent', async (t) => {
  const served = await serve(t, { pageSize: 50 })
  for (const revision of LEGACY_REVISIONS) {
    await t.test(revision, async (t) => {
      const s = await session(t, served, revision)
      const list = await result(t, served, s, 'tools/list')
      const icon = list.tools.find((x: any) => x.name === 'icon_tool')
      const { _meta: _m, inputSchema: _i, ...described } = icon
      const titled = atLeast(revision, '2025-06-18')
      t.strictSame(described, {
        name: 'icon_tool',
        description: 'Has icons and a title',
        ...(titled ? { title: 'Tool with an icon' } : {}),
        annotations: { readOnlyHint: true, idempotentHint: true, ...(titled ? {} : { title: 'Tool with an icon' }) },
        ...(atLeast(revision, '2025-11-25') ? { icons: [ICON, { src: 'data:image/png;base64,' + PNG, mimeType: 'image/png', theme: 'dark' }] } : {}),
      }, 'title (annotations.title before 2025-06-18) and icons (from 2025-11-25)')
      const structuredTool = list.tools.find((x: any) => x.name === 'structured_tool')
      t.equal('outputSchema' in structuredTool, titled, 'outputSchema from 2025-06-18')

      const call = (name: string) => result(t, served, s, 'tools/call', { name, arguments: {} })
      t.strictSame(await call('rich_tool'), { content: richBlocks(revision), isError: false }, 'every block kind')
      t.strictSame(await call('structured_tool'), {
        content: [{ type: 'text', text: '3 items' }, { type: 'image', data: PNG, mimeType: 'image/png' }],
        isError: false,
        ...(titled ? { structuredContent: { count: 3 } } : {}),
      }, 'blocks and structuredContent (from 2025-06-18)')
      t.strictSame(await call('plain_tool'), { content: [{ type: 'text', text: '{"ok":true}' }], isError: false, ...(titled ? { structuredContent: { ok: true } } : {}) }, 'an output object')
      t.strictSame(await call('tool_error'), {
        content: [{ type: 'text', text: 'it went wrong' }, titled ? { type: 'resource_link', uri: URI.text, name: 'static_text' } : { type: 'text', text: `Resource link: static_text <${URI.text}>` }],
        isError: true,
      }, 'a tool-level error of the tool\'s own content')
      for (const name of ['broken_block', 'broken_structure']) {
        const r = await call(name)
        t.equal(r.isError, true, `${name}: a failure`)
        t.strictSame(JSON.parse(r.content[0].text), { code: 'INTERNAL_ERROR', message: 'Internal error' }, `${name}: INTERNAL_ERROR, not a malformed result`)
        t.notOk('structuredContent' in r, `${name}: nothing of the bad output`)
      }
    })
  }
})

// ---- Questions to the client (elicitation, sampling, roots) ----------------------------------------------------------

/** A request on a live SSE answer (the session's call stream), read while it is open. */
async function liveRequest(t: Test, served: Served, s: Session, method: string, params: Record<string, unknown>): Promise<{ id: number; live: LiveStream }> {
  const id = rid()
  const live = await openLiveCall(t, served.server.mcpUrl, s.headers, { jsonrpc: '2.0', id, method, params })
  return { id, live }
}

/** The server request `method` on a live stream, checked against the revision's schema. */
async function serverRequestOn(t: Test, s: Session, live: LiveStream, method: string): Promise<any> {
  await live.waitFor(() => messagesOf(live).some((m) => m.method === method && 'id' in m), 5000, method)
  t.equal(live.headers['content-type'], 'text/event-stream', 'the call answers on an SSE stream')
  const message = messagesOf(live).find((m) => m.method === method && 'id' in m)
  let checked = message
  if (s.revision === '2025-06-18' && method === 'elicitation/create') {
    // docs/decisions/protocol-revisions.md: `mode: "form"` is sent in every revision; 2025-06-18 does not define the
    // field (it ignores it).
    t.equal(message.params?.mode, 'form', 'mode: "form", as decided for every revision')
    const { mode: _m, ...params } = message.params
    checked = { ...message, params }
  }
  assertServerRequest(t, s.revision, checked, { what: `${s.revision} ${method}` })
  return message
}

/** The response to the live request `id`, once the stream ended, checked against the revision's schema. */
async function liveResponse(t: Test, s: Session, live: LiveStream, id: number, method: string): Promise<any> {
  const { messages, responses } = await readToEnd(live, id)
  t.equal(responses.length, 1, 'one response')
  t.equal(messages.at(-1), responses[0], 'the response ends the stream')
  for (const m of messages) if (!('id' in m)) assertNotification(t, s.revision, m)
  assertResponse(t, s.revision, method, responses[0], { what: `${s.revision} ${method}` })
  return responses[0]
}

t.test('a resource or prompt that asks: elicitation/create on the call\'s stream, the answer completes it', async (t) => {
  const served = await serve(t)
  for (const revision of ['2025-06-18', '2025-11-25'] as const) {
    await t.test(revision, async (t) => {
      const s = await session(t, served, revision, served.server.apiKey, { elicitation: {} })
      const { id, live } = await liveRequest(t, served, s, 'resources/read', { uri: URI.asking })
      const asked = await serverRequestOn(t, s, live, 'elicitation/create')
      t.strictSame(asked.params, { mode: 'form', message: 'Which color?', requestedSchema: ELICIT_COLOR }, 'the form')

      const wrong = await answerRequest(served.server.mcpUrl, s.headers, asked.id, { action: 'accept', content: { color: 'blue' } })
      t.equal(wrong.status, 400, 'an answer outside the enum is refused (400)')
      t.equal(wrong.json?.error?.code, -32600)
      const right = await answerRequest(served.server.mcpUrl, s.headers, asked.id, { action: 'accept', content: { color: 'red' } })
      t.equal(right.status, 202, 'the answer is accepted')
      const response = await liveResponse(t, s, live, id, 'resources/read')
      t.strictSame(response.result, { contents: [{ uri: URI.asking, text: 'color=red' }] }, 'the read completes with the answer')

      const prompt = await liveRequest(t, served, s, 'prompts/get', { name: 'ask_name', arguments: { topic: 'tea' } })
      const askedName = await serverRequestOn(t, s, prompt.live, 'elicitation/create')
      t.strictSame(askedName.params.requestedSchema, ELICIT_NAME)
      t.equal((await answerRequest(served.server.mcpUrl, s.headers, askedName.id, { action: 'decline' })).status, 202)
      const got = await liveResponse(t, s, prompt.live, prompt.id, 'prompts/get')
      t.strictSame(got.result, { messages: [{ role: 'user', content: { type: 'text', text: '(decline) asks about tea' } }] }, 'a decline reaches the prompt')
    })
  }
})

t.test('a client that cannot be asked gets CAPABILITY_REQUIRED; a refusal INPUT_REFUSED; no answer INPUT_TIMEOUT', async (t) => {
  // The wait for an answer is on a manual clock: an answer is never late, and no answer ends only when time is moved.
  const ELICIT_MS = 10_000
  const clock = new ManualClock()
  const served = await serve(t, { elicitationTimeoutMs: ELICIT_MS }, clock)
  const { server } = served
  for (const revision of LEGACY_REVISIONS) {
    const s = await session(t, served, revision)
    const err = await error(t, served, s, 'resources/read', { uri: URI.asking })
    t.equal(err.code, -32000, `${revision}: an error of the server (-32000)`)
    t.equal(err.data?.code, 'CAPABILITY_REQUIRED', `${revision}: CAPABILITY_REQUIRED`)
    t.match(err.message, /elicitation/, 'naming the capability')
    const sampled = await error(t, served, s, 'prompts/get', { name: 'sampled' })
    t.equal(sampled.data?.code, 'CAPABILITY_REQUIRED', `${revision}: sampling undeclared`)
    t.match(sampled.message, /sampling/)
    const rooted = await error(t, served, s, 'prompts/get', { name: 'rooted' })
    t.equal(rooted.data?.code, 'CAPABILITY_REQUIRED', `${revision}: roots undeclared`)
    t.match(rooted.message, /roots/)
  }

  const s = await session(t, served, '2025-11-25', server.apiKey, { elicitation: {} })
  const jsonOnly = await post(server.mcpUrl, { jsonrpc: '2.0', id: 77, method: 'resources/read', params: { uri: URI.asking } }, { ...s.headers, accept: 'application/json' })
  t.equal(jsonOnly.status, 200)
  t.equal(jsonOnly.json?.error?.data?.code, 'CAPABILITY_REQUIRED', 'a client that takes only JSON cannot be asked')
  assertResponse(t, '2025-11-25', 'resources/read', jsonOnly.json)

  const refused = await liveRequest(t, served, s, 'resources/read', { uri: URI.asking })
  const asked = await serverRequestOn(t, s, refused.live, 'elicitation/create')
  const reply = await post(server.mcpUrl, { jsonrpc: '2.0', id: asked.id, error: { code: -1, message: 'user closed the dialog' } }, s.headers)
  t.equal(reply.status, 202)
  const refusal = await liveResponse(t, s, refused.live, refused.id, 'resources/read')
  t.equal(refusal.error?.code, -32000)
  t.equal(refusal.error?.data?.code, 'INPUT_REFUSED', 'a JSON-RPC error answer: INPUT_REFUSED')

  const waiting = await liveRequest(t, served, s, 'prompts/get', { name: 'ask_name', arguments: { topic: 'x' } })
  const unanswered = await serverRequestOn(t, s, waiting.live, 'elicitation/create')
  await clock.advance(ELICIT_MS)
  const timedOut = await liveResponse(t, s, waiting.live, waiting.id, 'prompts/get')
  t.equal(timedOut.error?.data?.code, 'INPUT_TIMEOUT', 'no answer in time: INPUT_TIMEOUT')
  const cancelled = messagesOf(waiting.live).find((m) => m.method === 'notifications/cancelled')
  t.equal(cancelled?.params?.requestId, unanswered.id, 'the unanswered request is withdrawn with notifications/cancelled')
})

t.test('sampling/createMessage and roots/list in sessions that declare them', async (t) => {
  const served = await serve(t)
  for (const revision of LEGACY_REVISIONS) {
    await t.test(revision, async (t) => {
      const s = await session(t, served, revision, served.server.apiKey, { sampling: {}, roots: { listChanged: true } })
      const sampled = await liveRequest(t, served, s, 'prompts/get', { name: 'sampled' })
      const asked = await serverRequestOn(t, s, sampled.live, 'sampling/createMessage')
      t.strictSame(asked.params, {
        messages: [{ role: 'user', content: { type: 'text', text: 'Say hi' } }],
        maxTokens: 50,
        systemPrompt: 'Be brief',
        modelPreferences: { hints: [{ name: 'small' }], speedPriority: 1 },
      }, 'the sampling request')
      const answer = await answerRequest(served.server.mcpUrl, s.headers, asked.id, { role: 'assistant', content: { type: 'text', text: 'hi there' }, model: 'm-1', stopReason: 'endTurn' })
      t.equal(answer.status, 202)
      const got = await liveResponse(t, s, sampled.live, sampled.id, 'prompts/get')
      t.strictSame(got.result, { messages: [{ role: 'assistant', content: { type: 'text', text: 'm-1 said hi there' } }] }, 'the prompt used the sampled message')

      const read = await liveRequest(t, served, s, 'resources/read', { uri: URI.sampling })
      const askedByRead = await serverRequestOn(t, s, read.live, 'sampling/createMessage')
      const bad = await answerRequest(served.server.mcpUrl, s.headers, askedByRead.id, { role: 'assistant', content: { type: 'text', text: 'x' } })
      t.equal(bad.status, 400, 'a sampling answer without model is refused')
      t.equal((await answerRequest(served.server.mcpUrl, s.headers, askedByRead.id, { role: 'assistant', content: { type: 'image', data: PNG, mimeType: 'image/png' }, model: 'm-2' })).status, 202)
      t.strictSame((await liveResponse(t, s, read.live, read.id, 'resources/read')).result, { contents: [{ uri: URI.sampling, text: 'm-2: image' }] })

      const rooted = await liveRequest(t, served, s, 'prompts/get', { name: 'rooted' })
      const askedRoots = await serverRequestOn(t, s, rooted.live, 'roots/list')
      t.equal((await answerRequest(served.server.mcpUrl, s.headers, askedRoots.id, { roots: [{ uri: 'file:///home/a', name: 'A' }, { uri: 'file:///srv' }] })).status, 202)
      const roots = await liveResponse(t, s, rooted.live, rooted.id, 'prompts/get')
      t.strictSame(roots.result, { messages: [{ role: 'user', content: { type: 'text', text: 'roots: file:///home/a (A), file:///srv' } }] }, 'the prompt used the roots')
    })
  }
})

t.test('questions one after another, and several at once', async (t) => {
  const served = await serve(t)
  for (const revision of ['2025-06-18', '2025-11-25'] as const) {
    await t.test(revision, async (t) => {
      const s = await session(t, served, revision, served.server.apiKey, { elicitation: {}, roots: {} })
      const requestsOf = (live: LiveStream) => messagesOf(live).filter((m) => 'method' in m && 'id' in m)

      const two = await liveRequest(t, served, s, 'prompts/get', { name: 'two_rounds' })
      const first = await serverRequestOn(t, s, two.live, 'elicitation/create')
      t.equal(first.params.message, 'First: a color?')
      t.equal((await answerRequest(served.server.mcpUrl, s.headers, first.id, { action: 'accept', content: { color: 'red' } })).status, 202)
      await two.live.waitFor(() => requestsOf(two.live).length === 2, 3000, 'the second question')
      const second = requestsOf(two.live)[1]
      t.not(second.id, first.id, 'a request of its own')
      t.strictSame(second.params, { mode: 'form', message: 'Second: a name?', requestedSchema: ELICIT_NAME })
      t.equal((await answerRequest(served.server.mcpUrl, s.headers, second.id, { action: 'accept', content: { name: 'Al' } })).status, 202)
      const done = await liveResponse(t, s, two.live, two.id, 'prompts/get')
      t.strictSame(done.result, { messages: [{ role: 'user', content: { type: 'text', text: 'red/Al' } }] }, 'both answers reached the prompt')

      const both = await liveRequest(t, served, s, 'prompts/get', { name: 'at_once' })
      await both.live.waitFor(() => requestsOf(both.live).length === 2, 3000, 'both questions')
      const [a, b] = requestsOf(both.live)
      t.strictSame([a.method, b.method].sort(), ['elicitation/create', 'roots/list'], 'asked at once, before any answer')
      const roots = a.method === 'roots/list' ? a : b
      const form = a.method === 'roots/list' ? b : a
      assertServerRequest(t, revision, roots)
      t.equal((await answerRequest(served.server.mcpUrl, s.headers, roots.id, { roots: [{ uri: 'file:///x' }] })).status, 202)
      t.equal((await answerRequest(served.server.mcpUrl, s.headers, form.id, { action: 'accept', content: { color: 'green' } })).status, 202)
      const got = await liveResponse(t, s, both.live, both.id, 'prompts/get')
      t.strictSame(got.result, { messages: [{ role: 'user', content: { type: 'text', text: 'green in file:///x' } }] })
    })
  }
})

// ---- Subscriptions and list changes (the session's GET stream) -------------------------------------------------------

async function getStream(t: Test, served: Served, s: Session): Promise<LiveStream> {
  const live = await openLive(served.server.mcpUrl, { method: 'GET', headers: { ...s.headers, accept: 'text/event-stream' } })
  t.teardown(() => live.close())
  t.equal(live.status, 200, 'the GET stream is open')
  return live
}

async function notified(live: LiveStream, predicate: (m: any) => boolean, what: string): Promise<any> {
  await live.waitFor(() => messagesOf(live).some(predicate), 3000, what)
  return messagesOf(live).find(predicate)
}

const updatedFor = (uri: string) => (m: any) => m.method === 'notifications/resources/updated' && m.params?.uri === uri

t.test('resources/subscribe: notifications/resources/updated on the GET stream until resources/unsubscribe', async (t) => {
  const served = await serve(t, { resourceSubscriptionsMax: 3 })
  const { server, orgId } = served
  const acme = await server.app.repos.organizations.create({ slug: 'acme' })
  const viewer = await createMember(server, { role: 'viewer' })
  for (const revision of LEGACY_REVISIONS) {
    await t.test(revision, async (t) => {
      const s = await session(t, served, revision)
      const live = await getStream(t, served, s)
      t.strictSame(await result(t, served, s, 'resources/subscribe', { uri: URI.text }), {}, 'subscribed')
      t.strictSame(await result(t, served, s, 'resources/subscribe', { uri: URI.item('a1') }), {}, 'to a templated resource too')

      server.app.resources.updated(URI.text, acme.id) // another organization's resource of that URI
      server.app.resources.updated(URI.blob, orgId) // not subscribed
      server.app.resources.updated(URI.text, orgId)
      const first = await notified(live, updatedFor(URI.text), 'the update')
      assertNotification(t, revision, first)
      t.strictSame(first, { jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri: URI.text } }, 'exactly the notification')
      server.app.resources.updated(URI.item('a1'), null) // every organization's
      await notified(live, updatedFor(URI.item('a1')), 'the templated update')
      t.strictSame(messagesOf(live).map((m) => m.params?.uri), [URI.text, URI.item('a1')], 'nothing for another organization or an unsubscribed URI')

      t.strictSame(await result(t, served, s, 'resources/unsubscribe', { uri: URI.text }), {}, 'unsubscribed')
      t.strictSame(await result(t, served, s, 'resources/unsubscribe', { uri: URI.text }), {}, 'twice is harmless')
      server.app.resources.updated(URI.text, orgId)
      server.app.resources.updated(URI.item('a1'), orgId)
      await live.waitFor(() => messagesOf(live).filter(updatedFor(URI.item('a1'))).length === 2, 3000, 'the second templated update')
      t.equal(messagesOf(live).filter(updatedFor(URI.text)).length, 1, 'no update after unsubscribe')

      t.strictSame(await error(t, served, s, 'resources/subscribe', { uri: 'test://nothing' }), notFound('test://nothing'), 'an unknown URI: -32002')
      const asViewer = await session(t, served, revision, viewer.key)
      t.strictSame(await error(t, served, asViewer, 'resources/subscribe', { uri: URI.admin }), notFound(URI.admin), 'a resource the caller may not read: the same')

      t.strictSame(await result(t, served, s, 'resources/subscribe', { uri: URI.blob }), {})
      t.strictSame(await result(t, served, s, 'resources/subscribe', { uri: URI.page(1) }), {})
      const over = await error(t, served, s, 'resources/subscribe', { uri: URI.page(2) })
      t.equal(over.code, -32602, 'beyond SERVICE_RESOURCE_SUBSCRIPTIONS_MAX: -32602')
      t.strictSame(over.data?.details, { limit: 3 })
      for (const m of messagesOf(live)) assertNotification(t, revision, m)
    })
  }
})

t.test('resources/subscribe: a member who may no longer read a resource stops hearing of its updates', async (t) => {
  const served = await serve(t)
  const { server, orgId } = served
  const admin = await createMember(server, { role: 'admin' })
  const s = await session(t, served, '2025-11-25', admin.key)
  const live = await getStream(t, served, s)
  t.strictSame(await result(t, served, s, 'resources/subscribe', { uri: URI.admin }), {}, 'an admin may subscribe to the admin resource')
  t.strictSame(await result(t, served, s, 'resources/subscribe', { uri: URI.text }), {})
  server.app.resources.updated(URI.admin, orgId)
  await notified(live, updatedFor(URI.admin), 'the update while an admin')

  await server.app.repos.memberships.upsert({ userId: admin.user.id, organizationId: orgId, role: 'viewer' })
  t.strictSame(await error(t, served, s, 'resources/read', { uri: URI.admin }), notFound(URI.admin), 'once a viewer, the resource is not found')
  server.app.resources.updated(URI.admin, orgId)
  server.app.resources.updated(URI.text, orgId)
  await notified(live, updatedFor(URI.text), 'the readable update')
  t.equal(messagesOf(live).filter(updatedFor(URI.admin)).length, 1, 'no update of the admin resource after the demotion')
})

t.test('list_changed notifications on the GET stream when an embedder adds or removes tools, prompts or resources', async (t) => {
  const served = await serve(t, { pageSize: 100 })
  const { server } = served
  const acme = await server.app.repos.organizations.create({ slug: 'acme' })
  for (const [i, revision] of LEGACY_REVISIONS.entries()) {
    await t.test(revision, async (t) => {
      const s = await session(t, served, revision)
      const live = await getStream(t, served, s)
      const count = (method: string) => messagesOf(live).filter((m) => m.method === method).length

      server.app.resources.listChanged(acme.id) // another organization's resources
      server.app.prompts.add(definePrompt({ name: `added_prompt_${i}`, get: () => ({ messages: [{ role: 'user', content: text('added') }] }) }))
      const prompts = await notified(live, (m) => m.method === 'notifications/prompts/list_changed', 'prompts/list_changed')
      assertNotification(t, revision, prompts)
      t.strictSame(prompts, { jsonrpc: '2.0', method: 'notifications/prompts/list_changed' })
      t.ok((await result(t, served, s, 'prompts/list')).prompts.some((p: any) => p.name === `added_prompt_${i}`), 'prompts/list shows the new prompt')

      server.app.resources.registry.add(defineResource({ name: `added_resource_${i}`, uri: `test://added/${i}`, read: () => ({ uri: `test://added/${i}`, text: 'new' }) }))
      assertNotification(t, revision, await notified(live, (m) => m.method === 'notifications/resources/list_changed', 'resources/list_changed'))
      t.strictSame((await result(t, served, s, 'resources/read', { uri: `test://added/${i}` })).contents, [{ uri: `test://added/${i}`, text: 'new' }], 'the new resource reads')

      server.app.tools.add(defineTool({
        name: `added_tool_${i}`,
        title: 'Added',
        description: 'Added at run time',
        inputSchema: { type: 'object' },
        scope: 'mcp:read',
        role: 'viewer',
        handler: () => toolResult([text('added')]),
      }))
      assertNotification(t, revision, await notified(live, (m) => m.method === 'notifications/tools/list_changed', 'tools/list_changed'))

      t.ok(server.app.prompts.remove(`added_prompt_${i}`), 'removed')
      t.ok(server.app.resources.registry.remove(`added_resource_${i}`))
      t.ok(server.app.tools.remove(`added_tool_${i}`))
      await live.waitFor(() => count('notifications/tools/list_changed') === 2 && count('notifications/prompts/list_changed') === 2 && count('notifications/resources/list_changed') === 2, 3000, 'the removals')
      for (const m of messagesOf(live)) assertNotification(t, revision, m)
      t.strictSame(await error(t, served, s, 'prompts/get', { name: `added_prompt_${i}` }), {
        code: -32602,
        message: `Unknown prompt: added_prompt_${i}`,
        data: { code: 'INVALID_PARAMS', action: 'Fix the params listed in details and retry', details: { name: `added_prompt_${i}` } },
      }, 'a removed prompt is unknown')
      t.strictSame(await error(t, served, s, 'resources/read', { uri: `test://added/${i}` }), notFound(`test://added/${i}`), 'a removed resource is not found')
      await sleep(50)
      t.equal(messagesOf(live).length, 6, 'one notification per change, nothing else')
    })
  }
})

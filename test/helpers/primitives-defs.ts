import {
  audio,
  defineResource,
  definePrompt,
  defineTool,
  embeddedResource,
  image,
  resourceLink,
  text,
  toolResult,
  type ContentBlock,
  type PromptDefinition,
  type RequestContext,
  type ResourceDefinition,
  type TextContent,
  type ToolDefinition,
} from '../../src/index.js'

/**
 * Test definitions of the embedding API (not the built-in catalog) for test/e2e/primitives-*.test.ts: resources
 * (static text and blob, a template with list/read/complete, one for admins, one for the mcp:write scope, readers that
 * return null, throw or return garbage, one that asks the client), prompts (arguments, every content kind, completers
 * with context, questions, sampling, roots) and tools with rich content. Each call of `primitives()` makes a fresh set
 * with its own records.
 */

/** A 1×1 PNG and a tiny WAV, base64. */
export const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=='
export const WAV = 'UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA='
export const ICON = { src: 'https://example.com/icon.png', mimeType: 'image/png', sizes: ['48x48'] }
export const LAST_MODIFIED = '2025-01-02T03:04:05Z'

export const URI = {
  text: 'test://static/text',
  blob: 'test://static/blob',
  admin: 'test://admin/secret',
  write: 'test://write/secret',
  nullReader: 'test://null',
  throwing: 'test://throws',
  garbage: 'test://garbage',
  asking: 'test://ask',
  sampling: 'test://sample',
  item: (id: string) => `test://items/${id}`,
  page: (n: number) => `test://page/${n}`,
}
export const ITEMS_TEMPLATE = 'test://items/{item_id}'
export const MEMBERS_TEMPLATE = 'test://teams/{team}/members/{member}'
/** A template only admins may see, read and complete. */
export const VAULT_TEMPLATE = 'test://vault/{key}'
export const TEAMS: Readonly<Record<string, readonly string[]>> = { red: ['rita', 'rob', 'ron'], blue: ['bea', 'bo'] }
/** What the throwing reader and prompt throw: none of it may reach a client. */
export const SECRET_FAILURE = 'SQLITE_CORRUPT at /var/lib/secret.db: SELECT password FROM users'
export const STYLES = ['formal', 'friendly', 'funny']
/** The many_values completer's values: 150 distinct ones (v000…v149), plus repeats that must not count. */
export const MANY = Array.from({ length: 150 }, (_, i) => `v${String(i).padStart(3, '0')}`)

export const ELICIT_COLOR = {
  type: 'object',
  properties: { color: { type: 'string', title: 'Color', enum: ['red', 'green'] } },
  required: ['color'],
} as const

export const ELICIT_NAME = {
  type: 'object',
  properties: { name: { type: 'string', title: 'Name', minLength: 1 } },
  required: ['name'],
} as const

export interface Records {
  /** organizationId → the item ids it holds (the template lists and reads only the caller's). */
  items: Map<string, string[]>
  /** How many times each handler ran (by name). */
  runs: Map<string, number>
  /** The `context` each completer was given. */
  contexts: Array<Record<string, string>>
}

function count(records: Records, name: string): void {
  records.runs.set(name, (records.runs.get(name) ?? 0) + 1)
}

export function primitives() {
  const records: Records = { items: new Map(), runs: new Map(), contexts: [] }

  const resources: ResourceDefinition[] = [
    defineResource({
      name: 'static_text',
      uri: URI.text,
      title: 'Static text',
      description: 'A text resource',
      mimeType: 'text/plain',
      size: 5,
      icons: [ICON],
      annotations: { audience: ['user'], priority: 0.5, lastModified: LAST_MODIFIED },
      read: () => {
        count(records, 'static_text')
        return { uri: URI.text, mimeType: 'text/plain', text: 'hello', _meta: { 'example.com/source': 'test' } }
      },
    }),
    defineResource({
      name: 'static_blob',
      uri: URI.blob,
      title: 'Static blob',
      mimeType: 'image/png',
      read: () => ({ uri: URI.blob, mimeType: 'image/png', blob: PNG }),
    }),
    defineResource({
      name: 'items',
      uriTemplate: ITEMS_TEMPLATE,
      title: 'Items',
      description: 'The items of the caller\'s organization',
      mimeType: 'application/json',
      icons: [ICON],
      annotations: { priority: 1, lastModified: LAST_MODIFIED },
      list: (ctx) => (records.items.get(ctx.principal.organizationId) ?? []).map((id) => ({ uri: URI.item(id), name: `item_${id}`, title: `Item ${id}`, mimeType: 'application/json' })),
      read: (vars, uri, ctx) => {
        count(records, 'items')
        const mine = records.items.get(ctx.principal.organizationId) ?? []
        return mine.includes(vars.item_id!) ? { uri, mimeType: 'application/json', text: JSON.stringify({ id: vars.item_id }) } : null
      },
      complete: {
        item_id: (value, ctx) => (records.items.get(ctx.principal.organizationId) ?? []).filter((id) => id.startsWith(value)),
      },
    }),
    defineResource({
      name: 'team_members',
      uriTemplate: MEMBERS_TEMPLATE,
      read: (vars, uri) => (TEAMS[vars.team!]?.includes(vars.member!) ? { uri, text: `${vars.member} of ${vars.team}` } : null),
      complete: {
        team: (value) => Object.keys(TEAMS).filter((team) => team.startsWith(value)),
        member: (value, _ctx, context) => {
          records.contexts.push({ ...context })
          return (TEAMS[context.team ?? ''] ?? []).filter((m) => m.startsWith(value))
        },
      },
    }),
    defineResource({
      name: 'vault',
      uriTemplate: VAULT_TEMPLATE,
      role: 'admin',
      read: (vars, uri) => (vars.key === 'k1' ? { uri, text: 'vaulted' } : null),
      complete: { key: (value) => ['k1', 'k2'].filter((k) => k.startsWith(value)) },
    }),
    defineResource({ name: 'admin_secret', uri: URI.admin, role: 'admin', read: () => ({ uri: URI.admin, text: 'for admins' }) }),
    defineResource({ name: 'write_secret', uri: URI.write, scope: 'mcp:write', read: () => ({ uri: URI.write, text: 'for writers' }) }),
    defineResource({ name: 'null_reader', uri: URI.nullReader, read: () => null }),
    defineResource({
      name: 'throwing_reader',
      uri: URI.throwing,
      read: () => {
        throw new Error(SECRET_FAILURE)
      },
    }),
    defineResource({ name: 'garbage_reader', uri: URI.garbage, read: () => ({ uri: URI.garbage, text: 42 }) as never }),
    defineResource({
      name: 'asking_reader',
      uri: URI.asking,
      read: async (ctx: RequestContext) => {
        count(records, 'asking_reader')
        const answer = await ctx.elicit('Which color?', ELICIT_COLOR)
        return { uri: URI.asking, text: answer.action === 'accept' ? `color=${String(answer.content?.color)}` : `action=${answer.action}` }
      },
    }),
    defineResource({
      name: 'sampling_reader',
      uri: URI.sampling,
      read: async (ctx: RequestContext) => {
        const answer = await ctx.sample({ messages: [{ role: 'user', content: text('Describe the resource') }], maxTokens: 20 })
        const first = Array.isArray(answer.content) ? answer.content[0] : answer.content
        return { uri: URI.sampling, text: `${answer.model}: ${first?.type === 'text' ? first.text : first?.type}` }
      },
    }),
    ...[1, 2, 3].map((n) => defineResource({ name: `page_${n}`, uri: URI.page(n), read: () => ({ uri: URI.page(n), text: String(n) }) })),
  ]

  const rich: ContentBlock[] = [
    text('plain text', { audience: ['assistant'], priority: 0.2, lastModified: LAST_MODIFIED }),
    image(PNG, 'image/png'),
    audio(WAV, 'audio/wav'),
    embeddedResource({ uri: URI.text, mimeType: 'text/plain', text: 'hello', _meta: { 'example.com/embedded': true } }),
    embeddedResource({ uri: URI.blob, mimeType: 'image/png', blob: PNG }),
    resourceLink({ uri: URI.item('a1'), name: 'item_a1', title: 'Item a1', description: 'an item', mimeType: 'application/json', icons: [ICON] }),
  ]
  const withMeta: TextContent = { type: 'text', text: 'with meta', _meta: { 'example.com/block': 1 } }

  const prompts: PromptDefinition<any>[] = [
    definePrompt<{ name: string; style?: string }>({
      name: 'greet',
      title: 'Greeting',
      description: 'Greets someone',
      icons: [ICON],
      arguments: [
        { name: 'name', title: 'Name', description: 'Who to greet', required: true },
        { name: 'style', description: 'How', required: false },
      ],
      get: (args) => {
        count(records, 'greet')
        return { description: 'A greeting', messages: [{ role: 'user', content: text(`Hello ${args.name}${args.style ? ` (${args.style})` : ''}`) }] }
      },
      complete: { style: (value) => STYLES.filter((s) => s.startsWith(value)) },
    }),
    definePrompt({
      name: 'rich',
      description: 'Every kind of content',
      get: () => ({ messages: [...rich.map((content) => ({ role: 'assistant' as const, content })), { role: 'user', content: withMeta }] }),
    }),
    definePrompt<{ team: string; member?: string }>({
      name: 'team_prompt',
      arguments: [{ name: 'team', required: true }, { name: 'member' }],
      get: (args) => ({ messages: [{ role: 'user', content: text(`${args.member ?? 'someone'} of ${args.team}`) }] }),
      complete: {
        member: (value, _ctx, context) => {
          records.contexts.push({ ...context })
          return (TEAMS[context.team ?? ''] ?? []).filter((m) => m.startsWith(value))
        },
      },
    }),
    definePrompt<{ n?: string }>({
      name: 'many_values',
      arguments: [{ name: 'n' }],
      get: () => ({ messages: [{ role: 'user', content: text('many') }] }),
      complete: { n: () => [...MANY, ...MANY.slice(0, 10)] },
    }),
    definePrompt({ name: 'admin_prompt', role: 'admin', get: () => ({ messages: [{ role: 'user', content: text('admin') }] }) }),
    definePrompt({ name: 'write_prompt', scope: 'mcp:write', get: () => ({ messages: [{ role: 'user', content: text('write') }] }) }),
    definePrompt<{ topic: string }>({
      name: 'ask_name',
      arguments: [{ name: 'topic', required: true }],
      get: async (args, ctx) => {
        count(records, 'ask_name')
        const answer = await ctx.elicit('Your name?', ELICIT_NAME)
        const who = answer.action === 'accept' ? String(answer.content?.name) : `(${answer.action})`
        return { messages: [{ role: 'user', content: text(`${who} asks about ${args.topic}`) }] }
      },
    }),
    definePrompt({
      name: 'sampled',
      get: async (_args, ctx) => {
        const answer = await ctx.sample({
          messages: [{ role: 'user', content: text('Say hi') }],
          maxTokens: 50,
          systemPrompt: 'Be brief',
          modelPreferences: { hints: [{ name: 'small' }], speedPriority: 1 },
        })
        const first = Array.isArray(answer.content) ? answer.content[0] : answer.content
        return { messages: [{ role: 'assistant', content: text(`${answer.model} said ${first?.type === 'text' ? first.text : first?.type}`) }] }
      },
    }),
    definePrompt({
      name: 'rooted',
      get: async (_args, ctx) => {
        const { roots } = await ctx.listRoots()
        return { messages: [{ role: 'user', content: text(`roots: ${roots.map((r) => `${r.uri}${r.name ? ` (${r.name})` : ''}`).join(', ')}`) }] }
      },
    }),
    definePrompt({
      name: 'two_rounds',
      get: async (_args, ctx) => {
        count(records, 'two_rounds')
        const first = await ctx.elicit('First: a color?', ELICIT_COLOR)
        const second = await ctx.elicit('Second: a name?', ELICIT_NAME)
        return { messages: [{ role: 'user', content: text(`${String(first.content?.color)}/${String(second.content?.name)}`) }] }
      },
    }),
    definePrompt({
      name: 'at_once',
      get: async (_args, ctx) => {
        const answers = await ctx.ask({
          color: { method: 'elicitation/create', params: { mode: 'form', message: 'A color?', requestedSchema: ELICIT_COLOR } },
          where: { method: 'roots/list' },
        })
        return { messages: [{ role: 'user', content: text(`${String(answers.color.content?.color)} in ${answers.where.roots.map((r) => r.uri).join(',')}`) }] }
      },
    }),
    definePrompt<{ x?: string }>({
      name: 'asking_completer',
      arguments: [{ name: 'x' }],
      get: () => ({ messages: [{ role: 'user', content: text('x') }] }),
      // A completer may not ask the client anything (completion/complete cannot be input_required).
      complete: { x: async (_value, ctx) => [String((await ctx.elicit('Really?', ELICIT_NAME)).action)] },
    }),
    definePrompt({
      name: 'broken_prompt',
      get: () => ({ messages: [{ role: 'user', content: { type: 'image', data: PNG } as never }] }),
    }),
    definePrompt({
      name: 'throwing_prompt',
      get: () => {
        throw new Error(SECRET_FAILURE)
      },
    }),
  ]
  const tools: ToolDefinition<any, any>[] = [
    defineTool({
      name: 'rich_tool',
      title: 'Rich content',
      description: 'Returns every kind of content block',
      inputSchema: { type: 'object', properties: {}, additionalProperties: false },
      scope: 'mcp:read',
      role: 'viewer',
      handler: () => toolResult([...rich, withMeta]),
    }),
    defineTool({
      name: 'structured_tool',
      title: 'Structured',
      description: 'Content blocks and structured output',
      inputSchema: { type: 'object', properties: {}, additionalProperties: false },
      outputSchema: { type: 'object', properties: { count: { type: 'integer' } }, required: ['count'], additionalProperties: false },
      scope: 'mcp:read',
      role: 'viewer',
      handler: () => toolResult([text('3 items'), image(PNG, 'image/png')], { structuredContent: { count: 3 } }),
    }),
    defineTool({
      name: 'plain_tool',
      title: 'Plain output',
      description: 'An output object with an outputSchema',
      inputSchema: { type: 'object', properties: {}, additionalProperties: false },
      outputSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
      scope: 'mcp:read',
      role: 'viewer',
      handler: () => ({ ok: true }),
    }),
    defineTool({
      name: 'icon_tool',
      title: 'Tool with an icon',
      description: 'Has icons and a title',
      inputSchema: { type: 'object', properties: {}, additionalProperties: false },
      scope: 'mcp:read',
      role: 'viewer',
      icons: [ICON, { src: 'data:image/png;base64,' + PNG, mimeType: 'image/png', theme: 'dark' }],
      annotations: { readOnlyHint: true, idempotentHint: true },
      handler: () => toolResult([text('icon')]),
    }),
    defineTool({
      name: 'tool_error',
      title: 'Tool-level error',
      description: 'A failure of the tool\'s choosing',
      inputSchema: { type: 'object', properties: {}, additionalProperties: false },
      scope: 'mcp:read',
      role: 'viewer',
      handler: () => toolResult([text('it went wrong'), resourceLink({ uri: URI.text, name: 'static_text' })], { isError: true }),
    }),
    defineTool({
      name: 'broken_block',
      title: 'Broken block',
      description: 'Returns an image without mimeType',
      inputSchema: { type: 'object', properties: {}, additionalProperties: false },
      scope: 'mcp:read',
      role: 'viewer',
      handler: () => toolResult([{ type: 'image', data: PNG } as never]),
    }),
    defineTool({
      name: 'broken_structure',
      title: 'Broken structure',
      description: 'structuredContent that breaks its outputSchema',
      inputSchema: { type: 'object', properties: {}, additionalProperties: false },
      outputSchema: { type: 'object', properties: { count: { type: 'integer' } }, required: ['count'] },
      scope: 'mcp:read',
      role: 'viewer',
      handler: () => toolResult([text('x')], { structuredContent: { count: 'three' } }),
    }),
  ]

  return { resources, prompts, tools, records }
}

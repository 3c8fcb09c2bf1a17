/**
 * Resources, prompts, completions and rich tool content through the official SDK clients, on real sockets: the v1
 * client (`@modelcontextprotocol/sdk`, a 2025-11-25 session) and the v2 client (`@modelcontextprotocol/client`,
 * pinned to the stateless 2026-07-28 revision, and in its legacy mode for resources/subscribe). Each SDK validates
 * every message with its own schemas, so an answer that parses is one the SDK accepts. Every feature is also seen
 * through the eyes of a narrower caller (a viewer, a token without mcp:read) and of another organization's member.
 */
import { Client as V2Client, ProtocolError, SdkError, SdkErrorCode, StreamableHTTPClientTransport as V2Transport, type VersionNegotiationMode } from '@modelcontextprotocol/client'
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { McpError, ResourceListChangedNotificationSchema, ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import t, { type Test } from 'tap'
import {
  audio,
  builtinTools,
  defineTool,
  embeddedResource,
  fail,
  image,
  resourceLink,
  text,
  toolResult,
} from '../../src/index.js'
import { logText, otherOrganization, seedApp, seedDeployment, serve, storedLines } from '../helpers/builtin-catalog.js'
import { createMember } from '../helpers/seed.js'
import type { TestServer } from '../helpers/server.js'
import { sleep, until } from '../helpers/stream.js'

const MODERN: VersionNegotiationMode = { pin: '2026-07-28' }
const APP_TEMPLATE = 'service://apps/{app_id}'
const LOG_TEMPLATE = 'service://deployments/{deployment_id}/log'
const appUri = (id: string) => `service://apps/${id}`
const logUri = (id: string) => `service://deployments/${id}/log`

/** A 1×1 PNG and a WAV header with no samples: small, real media. */
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=='
const WAV = 'UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA='

/**
 * A tool answering with every kind of content block and structured output: a card of one app of the caller's
 * organization (developer and up, mcp:read), as an embedder would write it.
 */
const appCard = defineTool<{ app_id: string }, { app_id: string; name: string; blocks: number }>({
  name: 'team_app_card',
  title: 'App card',
  description: 'An app of your organization as text, an image, a sound, a link to its resource and its resource embedded.',
  inputSchema: { type: 'object', properties: { app_id: { type: 'string' } }, required: ['app_id'], additionalProperties: false },
  outputSchema: { type: 'object', properties: { app_id: { type: 'string' }, name: { type: 'string' }, blocks: { type: 'integer' } }, required: ['app_id', 'name', 'blocks'], additionalProperties: false },
  scope: 'mcp:read',
  role: 'developer',
  annotations: { readOnlyHint: true },
  async handler(args, ctx) {
    const app = await ctx.repos.apps.byId(ctx.principal.organizationId, args.app_id)
    if (!app) throw fail('RESOURCE_NOT_FOUND', { message: 'No app with this id in your organization' })
    return toolResult([
      text(`App ${app.name}`),
      image(PNG, 'image/png'),
      audio(WAV, 'audio/wav', { audience: ['user'], priority: 0.2 }),
      resourceLink({ uri: appUri(app.id), name: app.name, title: `App ${app.name}`, mimeType: 'application/json', description: 'Read it for the details' }),
      embeddedResource({ uri: appUri(app.id), mimeType: 'application/json', text: JSON.stringify({ id: app.id, name: app.name }) }),
    ], { structuredContent: { app_id: app.id, name: app.name, blocks: 5 } })
  },
})

async function start(t: Test, config: Parameters<typeof serve>[1] = {}): Promise<TestServer> {
  return serve(t, config, { tools: [...builtinTools, appCard] })
}

/** A v1 client on a 2025-11-25 session (the SDK opens the session's GET stream itself). */
async function v1(t: Test, server: TestServer, key: string) {
  const transport = new V1Transport(new URL(server.mcpUrl), {
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
    reconnectionOptions: { maxReconnectionDelay: 100, initialReconnectionDelay: 10, reconnectionDelayGrowFactor: 1, maxRetries: 0 },
  })
  const client = new V1Client({ name: 'sdk-v1-primitives', version: '1.0.0' })
  const errors: Error[] = []
  client.onerror = (err) => void errors.push(err)
  const updated: string[] = []
  const listChanged: number[] = []
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => void updated.push(n.params.uri))
  client.setNotificationHandler(ResourceListChangedNotificationSchema, () => void listChanged.push(Date.now()))
  t.teardown(() => client.close())
  await client.connect(transport)
  return { client, transport, errors, updated, listChanged }
}

/** A v2 client, pinned to 2026-07-28 unless told (`'legacy'`: the 2025 handshake). */
async function v2(t: Test, server: TestServer, key: string, mode: VersionNegotiationMode = MODERN) {
  const transport = new V2Transport(new URL(server.mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${key}` } } })
  const client = new V2Client({ name: 'sdk-v2-primitives', version: '2.0.0' }, { capabilities: {}, versionNegotiation: { mode } })
  const errors: Error[] = []
  client.onerror = (err) => void errors.push(err)
  const updated: string[] = []
  client.setNotificationHandler('notifications/resources/updated', (n) => void updated.push(n.params.uri))
  t.teardown(() => client.close())
  await client.connect(transport)
  return { client, transport, errors, updated }
}

/** The code of a rejected SDK request (McpError in v1, ProtocolError in v2). */
async function codeOf(promise: Promise<unknown>): Promise<number | string> {
  const err = await promise.then(() => null, (e: unknown) => e)
  if (err instanceof McpError || err instanceof ProtocolError) return err.code
  return `not a protocol error: ${String(err)}`
}

/** Org A (owner's): apps alpha and beta, a failed deploy of alpha; org B: app gamma and a failed deploy of it. */
async function seed(server: TestServer) {
  const alpha = await seedApp(server, 'alpha', { description: 'Front end', env: ['API_URL'] })
  const beta = await seedApp(server, 'beta')
  const failed = await seedDeployment(server, alpha)
  const b = await otherOrganization(server)
  const bFailed = await seedDeployment(server, b.app)
  return { alpha, beta, failed, b, bFailed }
}

for (const sdk of ['v1', 'v2'] as const) {
  const connect = (t: Test, server: TestServer, key: string) => (sdk === 'v1' ? v1(t, server, key) : v2(t, server, key))

  t.test(`SDK ${sdk}: resources, templates, reads and completions, by role, scope and organization`, async (t) => {
    const server = await start(t)
    const { alpha, beta, failed, b, bFailed } = await seed(server)
    const owner = await connect(t, server, server.apiKey)
    if (sdk === 'v2') t.equal((owner.client as V2Client).getProtocolEra(), 'modern', 'v2 speaks 2026-07-28')
    const caps = owner.client.getServerCapabilities()
    t.match(caps, { resources: { subscribe: true, listChanged: true }, prompts: { listChanged: true }, completions: {} }, 'the capabilities the SDK saw')

    const templates = await owner.client.listResourceTemplates()
    t.strictSame(templates.resourceTemplates.map((x) => [x.uriTemplate, x.name, x.title, x.mimeType]), [
      [APP_TEMPLATE, 'app', 'App', 'application/json'],
      [LOG_TEMPLATE, 'deployment_log', 'Deployment log', 'text/plain'],
    ])
    const { resources } = await owner.client.listResources()
    t.strictSame(resources.map((r) => [r.uri, r.name, r.mimeType]), [
      [appUri(alpha.id), 'alpha', 'application/json'],
      [appUri(beta.id), 'beta', 'application/json'],
      [logUri(failed.id), `alpha deploy ${failed.id}`, 'text/plain'],
    ], 'org A\'s apps and deployment log, nothing of org B')
    t.equal(resources[0]!.description, 'Front end')

    const app = await owner.client.readResource({ uri: appUri(alpha.id) })
    t.equal(app.contents.length, 1)
    const appContents = app.contents[0] as { uri: string; mimeType?: string; text?: string }
    t.equal(appContents.uri, appUri(alpha.id))
    t.equal(appContents.mimeType, 'application/json')
    t.strictSame(JSON.parse(appContents.text!).env.map((e: { name: string }) => e.name), ['API_URL'])
    t.equal(JSON.parse(appContents.text!).app.name, 'alpha')
    const log = await owner.client.readResource({ uri: logUri(failed.id) })
    t.strictSame(log.contents, [{ uri: logUri(failed.id), mimeType: 'text/plain', text: logText(await storedLines(server, failed.id)) }], 'the log, exactly')
    t.equal(await codeOf(owner.client.readResource({ uri: appUri(b.app.id) })), sdk === 'v1' ? -32002 : -32602, 'org B\'s app is not found')
    t.equal(await codeOf(owner.client.readResource({ uri: logUri('dep_01aaaaaaaaaaaaaaaaaaaaaaaa') })), sdk === 'v1' ? -32002 : -32602, 'an absent deployment: the same')

    const byName = await owner.client.complete({ ref: { type: 'ref/resource', uri: APP_TEMPLATE }, argument: { name: 'app_id', value: 'al' } })
    t.strictSame(byName.completion, { values: [alpha.id], total: 1, hasMore: false }, 'a template variable, by app name')
    const deployments = await owner.client.complete({ ref: { type: 'ref/resource', uri: LOG_TEMPLATE }, argument: { name: 'deployment_id', value: '' } })
    t.strictSame(deployments.completion, { values: [failed.id], total: 1, hasMore: false })

    // A viewer reads what the owner reads; a token without mcp:read sees nothing.
    const viewer = await connect(t, server, (await createMember(server, { role: 'viewer', scopes: ['mcp:read'] })).key)
    t.strictSame((await viewer.client.listResources()).resources.map((r) => r.uri), resources.map((r) => r.uri), 'a viewer lists the same')
    t.equal(((await viewer.client.readResource({ uri: logUri(failed.id) })).contents[0] as { text: string }).text, logText(await storedLines(server, failed.id)))
    const blind = await connect(t, server, (await createMember(server, { role: 'owner', scopes: ['mcp:write'] })).key)
    t.strictSame((await blind.client.listResources()).resources, [], 'without mcp:read: no resources')
    t.strictSame((await blind.client.listResourceTemplates()).resourceTemplates, [], 'and no templates')
    t.equal(await codeOf(blind.client.readResource({ uri: appUri(alpha.id) })), sdk === 'v1' ? -32002 : -32602, 'a read is not found')
    t.equal(await codeOf(blind.client.complete({ ref: { type: 'ref/resource', uri: APP_TEMPLATE }, argument: { name: 'app_id', value: '' } })), -32602, 'the template is unknown to it')

    // Org B's client: its own app and deployment only.
    const other = await connect(t, server, b.member.key)
    t.strictSame((await other.client.listResources()).resources.map((r) => r.uri), [appUri(b.app.id), logUri(bFailed.id)])
    t.equal(await codeOf(other.client.readResource({ uri: appUri(alpha.id) })), sdk === 'v1' ? -32002 : -32602)
    t.strictSame((await other.client.complete({ ref: { type: 'ref/resource', uri: APP_TEMPLATE }, argument: { name: 'app_id', value: '' } })).completion.values, [b.app.id])
    t.strictSame((await other.client.complete({ ref: { type: 'ref/resource', uri: APP_TEMPLATE }, argument: { name: 'app_id', value: 'al' } })).completion.values, [], 'never org A\'s app by name')
    for (const c of [owner, viewer, blind, other]) t.strictSame(c.errors.map(String), [], 'the SDK reported no errors')
  })

  t.test(`SDK ${sdk}: prompts with arguments and completions, by role, scope and organization`, async (t) => {
    const server = await start(t)
    const { alpha, failed, b, bFailed } = await seed(server)
    const owner = await connect(t, server, server.apiKey)
    t.strictSame((await owner.client.listPrompts()).prompts.map((p) => [p.name, p.title, p.arguments?.map((a) => [a.name, a.required])]), [
      ['review_failed_deployment', 'Review a failed deployment', [['deployment_id', true]]],
      ['summarize_recent_activity', 'Summarize recent activity', [['app_id', false]]],
    ])
    const review = await owner.client.getPrompt({ name: 'review_failed_deployment', arguments: { deployment_id: failed.id } })
    t.equal(review.description, `Review of the deploy ${failed.id} of alpha (failed)`)
    t.equal(review.messages.length, 3)
    t.ok(review.messages.every((m) => m.role === 'user'))
    const [ask, appBlock, logBlock] = review.messages.map((m) => m.content) as [any, any, any]
    t.equal(ask.type, 'text')
    t.match(ask.text, new RegExp(`^The deploy ${failed.id} of alpha failed\\. `))
    t.strictSame(appBlock.type, 'resource')
    t.equal(appBlock.resource.uri, appUri(alpha.id))
    t.equal(appBlock.resource.mimeType, 'application/json')
    t.strictSame(logBlock, { type: 'resource', resource: { uri: logUri(failed.id), mimeType: 'text/plain', text: logText(await storedLines(server, failed.id)) } }, 'the log embedded as a resource')
    const activity = await owner.client.getPrompt({ name: 'summarize_recent_activity', arguments: { app_id: alpha.id } })
    t.equal(activity.description, `Recent activity of app alpha (${alpha.id}) of organization Default organization (default)`)
    t.match((activity.messages[2]!.content as { text: string }).text, new RegExp(`${failed.id} deploy of alpha: failed`))

    const promptCompletion = await owner.client.complete({ ref: { type: 'ref/prompt', name: 'review_failed_deployment' }, argument: { name: 'deployment_id', value: 'alp' } })
    t.strictSame(promptCompletion.completion, { values: [failed.id], total: 1, hasMore: false }, 'a prompt argument')
    const appCompletion = await owner.client.complete({ ref: { type: 'ref/prompt', name: 'summarize_recent_activity' }, argument: { name: 'app_id', value: 'AL' } })
    t.strictSame(appCompletion.completion, { values: [alpha.id], total: 1, hasMore: false })
    t.equal(await codeOf(owner.client.getPrompt({ name: 'review_failed_deployment', arguments: { deployment_id: bFailed.id } })), -32602, 'org B\'s deployment: invalid params')

    const viewer = await connect(t, server, (await createMember(server, { role: 'viewer', scopes: ['mcp:read'] })).key)
    t.strictSame((await viewer.client.listPrompts()).prompts.map((p) => p.name), ['review_failed_deployment'], 'a viewer: the review only')
    t.equal(await codeOf(viewer.client.getPrompt({ name: 'summarize_recent_activity', arguments: {} })), -32602, 'the admin prompt is unknown to a viewer')
    t.equal(await codeOf(viewer.client.complete({ ref: { type: 'ref/prompt', name: 'summarize_recent_activity' }, argument: { name: 'app_id', value: '' } })), -32602)
    const blind = await connect(t, server, (await createMember(server, { role: 'owner', scopes: ['mcp:write'] })).key)
    t.strictSame((await blind.client.listPrompts()).prompts, [], 'without mcp:read: no prompts')

    const other = await connect(t, server, b.member.key)
    const theirs = await other.client.getPrompt({ name: 'review_failed_deployment', arguments: { deployment_id: bFailed.id } })
    t.equal((theirs.messages[2]!.content as { resource: { uri: string } }).resource.uri, logUri(bFailed.id))
    t.equal(await codeOf(other.client.getPrompt({ name: 'review_failed_deployment', arguments: { deployment_id: failed.id } })), -32602, 'org A\'s deployment is not org B\'s')
    t.strictSame((await other.client.complete({ ref: { type: 'ref/prompt', name: 'review_failed_deployment' }, argument: { name: 'deployment_id', value: '' } })).completion.values, [bFailed.id])
    for (const c of [owner, viewer, blind, other]) t.strictSame(c.errors.map(String), [], 'the SDK reported no errors')
  })

  t.test(`SDK ${sdk}: rich tool content (text, image, audio, resource link, embedded resource, structured output)`, async (t) => {
    const server = await start(t)
    const { alpha, b } = await seed(server)
    const owner = await connect(t, server, server.apiKey)
    const { tools } = await owner.client.listTools()
    const card = tools.find((x) => x.name === 'team_app_card')
    t.ok(card, 'the embedder\'s tool is listed beside the built-ins')
    t.equal(tools.length, builtinTools.length + 1)
    const result = await owner.client.callTool({ name: 'team_app_card', arguments: { app_id: alpha.id } })
    t.equal(result.isError, false)
    t.strictSame(result.structuredContent, { app_id: alpha.id, name: 'alpha', blocks: 5 }, 'structured output, checked by the SDK against the outputSchema')
    t.strictSame(result.content, [
      { type: 'text', text: 'App alpha' },
      { type: 'image', data: PNG, mimeType: 'image/png' },
      { type: 'audio', data: WAV, mimeType: 'audio/wav', annotations: { audience: ['user'], priority: 0.2 } },
      { type: 'resource_link', uri: appUri(alpha.id), name: 'alpha', title: 'App alpha', mimeType: 'application/json', description: 'Read it for the details' },
      { type: 'resource', resource: { uri: appUri(alpha.id), mimeType: 'application/json', text: JSON.stringify({ id: alpha.id, name: 'alpha' }) } },
    ], 'each block as sent, parsed by the SDK')
    const linked = await owner.client.readResource({ uri: (result.content as Array<{ type: string; uri?: string }>)[3]!.uri! })
    t.equal((linked.contents[0] as { uri: string }).uri, appUri(alpha.id), 'the link reads')

    const viewer = await connect(t, server, (await createMember(server, { role: 'viewer' })).key)
    t.notOk((await viewer.client.listTools()).tools.some((x) => x.name === 'team_app_card'), 'a viewer does not see a developer tool')
    const blind = await connect(t, server, (await createMember(server, { role: 'owner', scopes: ['mcp:write'] })).key)
    t.notOk((await blind.client.listTools()).tools.some((x) => x.name === 'team_app_card'), 'nor does a token without mcp:read')
    const other = await connect(t, server, b.member.key)
    const mine = await other.client.callTool({ name: 'team_app_card', arguments: { app_id: b.app.id } })
    t.equal((mine.structuredContent as { name: string }).name, 'gamma', 'org B gets its own app')
    const foreign = await other.client.callTool({ name: 'team_app_card', arguments: { app_id: alpha.id } })
    t.equal(foreign.isError, true, 'org A\'s app is a tool failure')
    t.strictSame(JSON.parse((foreign.content as Array<{ text: string }>)[0]!.text), { code: 'RESOURCE_NOT_FOUND', message: 'No app with this id in your organization' })
    for (const c of [owner, viewer, blind, other]) t.strictSame(c.errors.map(String), [], 'the SDK reported no errors')
  })
}

t.test('SDK v1: subscribeResource, then notifications/resources/updated while a deployment runs; not to org B', async (t) => {
  const server = await start(t, { resourceUpdateIntervalMs: 50 })
  const { b } = await seed(server)
  const app = await seedApp(server, 'late', { pipeline: 'late' })
  const owner = await v1(t, server, server.apiKey)
  const other = await v1(t, server, b.member.key)
  await sleep(100) // the SDK opens its GET stream after initialize
  const handle = await server.app.pipelines.start({ organizationId: app.organizationId, appId: app.id, kind: 'deploy', createdBy: null })
  const uri = logUri(handle.deployment.id)
  t.strictSame(await owner.client.subscribeResource({ uri }), {}, 'subscribed')
  t.equal(await codeOf(other.client.subscribeResource({ uri })), -32002, 'org B may not subscribe to org A\'s log: not found, as a read')
  await handle.done
  await until(() => owner.updated.length > 0, 3000, 'notifications/resources/updated')
  await sleep(150)
  t.ok(owner.updated.every((u) => u === uri), 'each names the log')
  const read = await owner.client.readResource({ uri })
  t.match((read.contents[0] as { text: string }).text, /\[system\] failed: the pipeline exited with code 3\n$/, 'the log is complete after the last update')
  t.ok(owner.listChanged.length >= 1, 'and resources/list_changed for the new deployment')
  t.strictSame(other.updated, [], 'org B heard no update')
  t.strictSame(other.listChanged, [], 'nor a list change')
  await owner.client.unsubscribeResource({ uri })
  t.strictSame(owner.errors.map(String), [])
})

t.test('SDK v2: listen({resourceSubscriptions}) on 2026-07-28, and subscribeResource in its legacy mode', async (t) => {
  const server = await start(t, { resourceUpdateIntervalMs: 50 })
  const { b } = await seed(server)
  const app = await seedApp(server, 'late', { pipeline: 'late' })
  const modern = await v2(t, server, server.apiKey)
  const legacy = await v2(t, server, server.apiKey, 'legacy')
  const other = await v2(t, server, b.member.key)
  t.equal(legacy.client.getProtocolEra(), 'legacy')
  const handle = await server.app.pipelines.start({ organizationId: app.organizationId, appId: app.id, kind: 'deploy', createdBy: null })
  const uri = logUri(handle.deployment.id)
  const sub = await modern.client.listen({ resourceSubscriptions: [uri] })
  t.strictSame(sub.honoredFilter, { resourceSubscriptions: [uri] }, 'the log is honoured')
  const theirs = await other.client.listen({ resourceSubscriptions: [uri] })
  t.strictSame(await legacy.client.subscribeResource({ uri }), {})
  // resources/subscribe is a session method; the SDK steers a 2026-07-28 client to listen() without asking the server.
  const refused = await modern.client.subscribeResource({ uri }).then(() => null, (e: unknown) => e)
  t.ok(refused instanceof SdkError && refused.code === SdkErrorCode.MethodNotSupportedByProtocolVersion, 'the v2 SDK refuses resources/subscribe on 2026-07-28 itself')
  await handle.done
  await until(() => modern.updated.length > 0 && legacy.updated.length > 0, 3000, 'notifications/resources/updated on both')
  await sleep(150)
  t.ok(modern.updated.every((u) => u === uri) && legacy.updated.every((u) => u === uri), 'each names the log')
  t.strictSame(other.updated, [], 'org B heard nothing')
  await sub.close()
  await theirs.close()
  t.strictSame(modern.errors.map(String), [])
})

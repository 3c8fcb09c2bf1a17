/**
 * Interoperability with the official MCP TypeScript SDK v2 client (`@modelcontextprotocol/client` 2.4.0) over real
 * sockets: the stateless revision 2026-07-28 (pinned, and reached by the `auto` probe), the 2025 handshake on the same
 * endpoint at the same time, confirmations by input_required rounds answered through the SDK's own elicitation
 * handler, streamed deployments, the tasks extension, subscriptions/listen, and an OAuth token refreshed mid-use.
 *
 * What the SDK does not do (checked here, and reported): callTool() cannot consume a `resultType: "task"` answer (it
 * rejects with SdkError UNSUPPORTED_RESULT_TYPE, and the error does not carry the task id: the task the call started
 * keeps running on the server); the task handle is read off the wire here (the test's fetch) and followed with
 * `client.request({ method: 'tasks/get' })`, which the SDK does send on a modern connection.
 *
 * Other SDK behaviours the assertions account for: `onprogress` also receives one synthetic progress per
 * input_required round ("Fulfilling input required by 'tools/call' (round N)", progress 1) before the server's own,
 * which restart at 1 under the retry's new progress token; MissingRequiredClientCapabilityError keeps only
 * `requiredCapabilities` in `data` (the catalog `code` is checked on the wire); stored OAuth tokens without the
 * SEP-2352 `issuer` stamp make the SDK print a warning, so the provider here stores them stamped.
 */
import {
  Client,
  ProtocolError,
  SdkError,
  SdkErrorCode,
  StreamableHTTPClientTransport,
  type ClientCapabilities,
  type ElicitRequest,
  type ElicitResult,
  type FetchLike,
  type LoggingMessageNotificationParams,
  type OAuthClientMetadata,
  type OAuthClientProvider,
  type Progress,
  type StoredOAuthClientInformation,
  type StoredOAuthTokens,
  type VersionNegotiationMode,
} from '@modelcontextprotocol/client'
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import t, { type Test } from 'tap'
import { z } from 'zod'
import { builtinTools } from '../../src/index.js'
import type { Config } from '../../src/config.js'
import { ENV_KEY, EXAMPLE, seedApp } from '../helpers/modern-runs.js'
import { openSession, post } from '../helpers/mcp.js'
import { answerOf, confirmAnswer, modernCall, TASKS_EXTENSION, WITH_TASKS } from '../helpers/modern.js'
import { oauthTokens, type RegisteredClient } from '../helpers/oauth.js'
import { createMember, defaultOrganization } from '../helpers/seed.js'
import { startServer, type TestServer } from '../helpers/server.js'
import { ManualClock } from '../helpers/clock.js'
import { sleep, until } from '../helpers/stream.js'

const MODERN = '2026-07-28'
const PIN: VersionNegotiationMode = { pin: MODERN }
const LOG_LEVEL_KEY = 'io.modelcontextprotocol/logLevel'
const BUILTIN_NAMES = builtinTools.map((d) => d.name)

async function serve(t: Test, config: Partial<Config> = {}, clock?: ManualClock): Promise<TestServer> {
  return startServer(t, { tools: builtinTools, ...(clock ? { clock } : {}), config: { envKey: ENV_KEY, pipelines: { default: { argv: [process.execPath, EXAMPLE] } }, heartbeatMs: 60_000, ...config } })
}


async function appExists(server: TestServer, appId: string): Promise<boolean> {
  return (await server.app.repos.apps.byId((await defaultOrganization(server)).id, appId)) !== undefined
}

async function auditOf(server: TestServer, action: string) {
  return (await server.app.repos.audit.page((await defaultOrganization(server)).id, 100, undefined, action)).items
}

/** One HTTP exchange the SDK made, as its fetch saw it. */
interface Sent {
  method: string
  path: string
  /** The JSON-RPC message POSTed, when the body was one. */
  rpc?: { id?: string | number; method?: string; params?: Record<string, any> }
  /** Bearer token sent. */
  bearer?: string
  headers: Record<string, string>
  status: number
  contentType: string | null
  sessionId: string | null
  /** The JSON body of a JSON answer. */
  json?: any
  form?: URLSearchParams
}

/** A fetch that records what the SDK sends and receives (JSON answers are read from a clone). */
function recordingFetch(): { fetch: FetchLike; sent: Sent[] } {
  const sent: Sent[] = []
  const fetchFn: FetchLike = async (input, init) => {
    const headers = Object.fromEntries(new Headers(init?.headers).entries())
    const url = new URL(String(input instanceof Request ? input.url : input))
    let rpc: Sent['rpc']
    let form: URLSearchParams | undefined
    const body = init?.body
    if (typeof body === 'string') {
      try {
        rpc = JSON.parse(body)
      } catch {
        form = new URLSearchParams(body)
      }
    } else if (body instanceof URLSearchParams) form = new URLSearchParams(body)
    const res = await fetch(input, init)
    const entry: Sent = {
      method: (init?.method ?? 'GET').toUpperCase(),
      path: url.pathname,
      ...(rpc !== undefined ? { rpc } : {}),
      ...(form !== undefined ? { form } : {}),
      ...(headers.authorization ? { bearer: headers.authorization.replace(/^Bearer /i, '') } : {}),
      headers,
      status: res.status,
      contentType: res.headers.get('content-type'),
      sessionId: res.headers.get('mcp-session-id'),
    }
    if (entry.contentType?.startsWith('application/json')) entry.json = await res.clone().json().catch(() => undefined)
    sent.push(entry)
    return res
  }
  return { fetch: fetchFn, sent }
}

/** POSTs to /mcp carrying JSON-RPC method `method`. */
const posts = (sent: Sent[], method?: string) => sent.filter((s) => s.method === 'POST' && s.path === '/mcp' && (method === undefined || s.rpc?.method === method))

interface V2Options {
  mode?: VersionNegotiationMode
  capabilities?: ClientCapabilities
  key?: string
  authProvider?: OAuthClientProvider
  decide?: (request: ElicitRequest) => ElicitResult | Promise<ElicitResult>
}

/** A v2 client on a recording fetch; it answers elicitation/create with `decide` and records every notification. */
function v2Client(t: Test, server: TestServer, options: V2Options = {}) {
  const { fetch: fetchFn, sent } = recordingFetch()
  const transport = new StreamableHTTPClientTransport(new URL(server.mcpUrl), {
    fetch: fetchFn,
    ...(options.authProvider
      ? { authProvider: options.authProvider }
      : { requestInit: { headers: { Authorization: `Bearer ${options.key ?? server.apiKey}` } } }),
  })
  const client = new Client(
    { name: 'sdk-v2-test', version: '2.0.0' },
    { capabilities: options.capabilities ?? { elicitation: { form: {} } }, versionNegotiation: { mode: options.mode ?? PIN } },
  )
  const asked: ElicitRequest[] = []
  if (options.decide) {
    const decide = options.decide
    client.setRequestHandler('elicitation/create', async (request) => {
      asked.push(request)
      return decide(request)
    })
  }
  const logs: LoggingMessageNotificationParams[] = []
  client.setNotificationHandler('notifications/message', (n) => void logs.push(n.params))
  const listChanged: number[] = []
  client.setNotificationHandler('notifications/tools/list_changed', () => void listChanged.push(Date.now()))
  const errors: Error[] = []
  client.onerror = (err) => void errors.push(err)
  t.teardown(() => client.close())
  return { client, transport, sent, asked, logs, listChanged, errors }
}

const ACCEPT: ElicitResult = { action: 'accept', content: { confirm: true } }

/** The service error a failed tool result carries in its text content. */
function toolError(result: { content?: unknown }): { code: string; message: string } {
  const content = result.content as Array<{ type: string; text: string }>
  return JSON.parse(content[0]!.text)
}

/** Payload of a compact JWT, unverified (the server verifies). */
function jwtPayload(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')) as Record<string, unknown>
}

/** Moves the server's clock just past the access token's `exp` (whole seconds): from then on the server refuses it. */
async function outlive(clock: ManualClock, accessToken: string): Promise<void> {
  const exp = jwtPayload(accessToken).exp as number
  await clock.advance(Math.max(0, exp * 1000 + 1 - clock.now()))
}

interface Whoami {
  user: { email: string }
  role: string
  scopes: string[]
  credential: { kind: string; id: string; client_id?: string }
}

/** A legacy session's tools/list names (raw requests, no SDK). */
async function legacyToolNames(server: TestServer): Promise<string[]> {
  const session = await openSession(server.mcpUrl, server.apiKey)
  const reply = await post(server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }, session.headers)
  return (reply.json?.result?.tools as Array<{ name: string }>).map((x) => x.name)
}

t.test('pinned to 2026-07-28 with an API key: discover, tools, calls, no session', async (t) => {
  const server = await serve(t)
  const { client, transport, sent, errors } = v2Client(t, server)
  await client.connect(transport)
  t.equal(client.getProtocolEra(), 'modern')
  t.equal(client.getNegotiatedProtocolVersion(), MODERN)
  const discover = client.getDiscoverResult()
  t.strictSame(discover?.supportedVersions, [MODERN], 'discover lists the modern revision only')
  t.strictSame((discover?.capabilities as { extensions?: unknown }).extensions, { [TASKS_EXTENSION]: {} }, 'the tasks extension is advertised')
  t.match(discover?.capabilities, { logging: {}, tools: { listChanged: true } })
  t.equal(client.getServerVersion()?.name, 'service-mcp', 'serverInfo from the discover result _meta')
  t.equal(posts(sent)[0]?.rpc?.method, 'server/discover', 'the pinned connect probes server/discover')

  const { tools } = await client.listTools()
  const names = tools.map((x) => x.name)
  t.strictSame(names, BUILTIN_NAMES, 'the built-in tools, in catalog order')
  t.strictSame(names, await legacyToolNames(server), 'the same names as a legacy session lists')
  const listed = posts(sent, 'tools/list').at(-1)!
  t.equal(listed.json?.result?.cacheScope, 'private')
  t.equal(listed.json?.result?.ttlMs, 60_000)

  const who = await client.callTool({ name: 'service_whoami', arguments: {} })
  t.equal(who.isError, false)
  const me = who.structuredContent as Whoami
  t.equal(me.credential.kind, 'api_key')
  t.equal(me.role, 'owner')
  t.equal(me.user.email, 'owner@example.com')

  const created = await client.callTool({ name: 'service_apps_create', arguments: { name: 'v2-app' } })
  t.equal(created.isError, false)
  const app = (created.structuredContent as { app: { id: string; name: string } }).app
  t.equal(app.name, 'v2-app')
  t.ok(await appExists(server, app.id), 'stored')
  const listedApps = await client.callTool({ name: 'service_apps_list', arguments: {} })
  t.strictSame((listedApps.structuredContent as { apps: Array<{ id: string }> }).apps.map((a) => a.id), [app.id], 'service_apps_list sees it')

  // The wire: every POST modern, with the standard headers; never a session.
  const all = posts(sent)
  t.ok(all.length >= 5)
  t.ok(all.every((s) => s.status === 200), 'every POST answered 200')
  t.ok(all.every((s) => s.sessionId === null), 'no Mcp-Session-Id was ever received')
  t.ok(all.every((s) => s.headers['mcp-session-id'] === undefined), 'and none was sent')
  t.ok(all.every((s) => s.rpc?.params?._meta?.['io.modelcontextprotocol/protocolVersion'] === MODERN), 'every request claims 2026-07-28 in _meta')
  t.ok(all.every((s) => s.headers['mcp-protocol-version'] === MODERN), 'MCP-Protocol-Version on every POST')
  t.ok(all.every((s) => s.headers['mcp-method'] === s.rpc?.method), 'Mcp-Method mirrors the body')
  t.ok(posts(sent, 'tools/call').every((s) => s.headers['mcp-name'] === s.rpc?.params?.name), 'Mcp-Name mirrors the tool name')
  t.ok(posts(sent, 'tools/call').every((s) => s.json?.result?.resultType === 'complete'), 'results carry resultType complete')
  t.strictSame(errors.map(String), [], 'the client reported no errors')
})

t.test('auto mode: the server/discover probe succeeds, so the client is modern without initialize', async (t) => {
  const server = await serve(t)
  const { client, transport, sent } = v2Client(t, server, { mode: 'auto' })
  await client.connect(transport)
  t.equal(client.getProtocolEra(), 'modern', 'the probe gave definitive modern evidence')
  t.equal(client.getNegotiatedProtocolVersion(), MODERN)
  t.strictSame(client.getDiscoverResult()?.supportedVersions, [MODERN])
  const who = await client.callTool({ name: 'service_whoami', arguments: {} })
  t.equal((who.structuredContent as Whoami).credential.kind, 'api_key')

  const all = posts(sent)
  t.equal(all[0]?.rpc?.method, 'server/discover', 'the first POST was server/discover')
  t.equal(all[0]?.status, 200)
  t.equal(all[0]?.json?.result?.resultType, 'complete')
  t.equal(posts(sent, 'initialize').length, 0, 'no initialize was sent')
  t.equal(posts(sent, 'notifications/initialized').length, 0)
  t.ok(sent.every((s) => s.sessionId === null), 'no Mcp-Session-Id was ever received')
  t.ok(sent.every((s) => s.method === 'POST'), 'no GET stream was opened')
  t.equal(transport.sessionId, undefined)
})

t.test('both eras on one endpoint at once: a pinned and a legacy v2 client side by side', async (t) => {
  const server = await serve(t)
  const modern = v2Client(t, server)
  const legacy = v2Client(t, server, { mode: 'legacy' })
  await Promise.all([modern.client.connect(modern.transport), legacy.client.connect(legacy.transport)])

  t.equal(legacy.client.getProtocolEra(), 'legacy')
  t.equal(legacy.client.getNegotiatedProtocolVersion(), '2025-11-25')
  t.equal(legacy.client.getDiscoverResult(), undefined, 'no discover result on the legacy path')
  t.type(legacy.transport.sessionId, 'string', 'the legacy client holds a session')
  t.equal(posts(legacy.sent)[0]?.rpc?.method, 'initialize', 'legacy mode starts with initialize')
  t.equal(posts(legacy.sent, 'server/discover').length, 0, 'and never probes')
  t.equal(modern.client.getProtocolEra(), 'modern')
  t.equal(modern.transport.sessionId, undefined)

  // Interleaved calls on both connections.
  const [a, b] = await Promise.all([
    modern.client.callTool({ name: 'service_apps_create', arguments: { name: 'from-modern' } }),
    legacy.client.callTool({ name: 'service_apps_create', arguments: { name: 'from-legacy' } }),
  ])
  t.equal(a.isError, false)
  t.equal(b.isError, false)
  const [fromModern, fromLegacy, legacyTools, modernTools] = await Promise.all([
    modern.client.callTool({ name: 'service_apps_list', arguments: {} }),
    legacy.client.callTool({ name: 'service_apps_list', arguments: {} }),
    legacy.client.listTools(),
    modern.client.listTools(),
  ])
  const namesOf = (r: typeof fromModern) => (r.structuredContent as { apps: Array<{ name: string }> }).apps.map((x) => x.name).sort()
  t.strictSame(namesOf(fromModern), ['from-legacy', 'from-modern'], 'the modern client sees both apps')
  t.strictSame(namesOf(fromLegacy), ['from-legacy', 'from-modern'], 'the legacy client sees both apps')
  t.strictSame(legacyTools.tools.map((x) => x.name), modernTools.tools.map((x) => x.name), 'the same tools on both eras')

  const legacyPosts = posts(legacy.sent)
  t.ok(legacyPosts.every((s) => s.rpc?.params?._meta?.['io.modelcontextprotocol/protocolVersion'] === undefined), 'the legacy client never sends the modern claim')
  t.ok(legacyPosts.slice(1).every((s) => s.headers['mcp-session-id'] === legacy.transport.sessionId), 'and always its session id')
  t.ok(posts(legacy.sent, 'tools/call').every((s) => s.json?.result === undefined || !('resultType' in s.json.result)), 'legacy results carry no resultType')
  t.ok(posts(modern.sent).every((s) => s.sessionId === null), 'the modern client never got a session')
})

t.test('confirmation accepted through the elicitation handler on the modern path: deleted exactly once', async (t) => {
  const server = await serve(t)
  const doomed = await seedApp(server, 'doomed')
  const { client, transport, sent, asked } = v2Client(t, server, { decide: () => ACCEPT })
  await client.connect(transport)

  const deleted = await client.callTool({ name: 'service_apps_delete', arguments: { app_id: doomed.id } })
  t.equal(deleted.isError, false, 'the delete ran')
  t.strictSame(deleted.structuredContent, { deleted: true, app_id: doomed.id, name: 'doomed', deployments_deleted: 0 })
  t.notOk(await appExists(server, doomed.id), 'the app is gone')

  t.equal(asked.length, 1, 'the handler was asked once')
  const params = asked[0]!.params as { mode?: string; message: string; requestedSchema: { type: string; properties: Record<string, { type: string }>; required?: string[] } }
  t.equal(params.mode, 'form')
  t.equal(params.message, `Delete app doomed (${doomed.id}) and its 0 deployments?`, 'the exact message')
  t.equal(params.requestedSchema.type, 'object')
  t.strictSame(Object.keys(params.requestedSchema.properties), ['confirm'])
  t.equal(params.requestedSchema.properties.confirm?.type, 'boolean', 'one boolean field')
  t.strictSame(params.requestedSchema.required, ['confirm'])

  // The rounds on the wire: input_required, then a retry with a new id, the same arguments and the state unchanged.
  const calls = posts(sent, 'tools/call')
  t.equal(calls.length, 2, 'two rounds')
  const [r1, r2] = calls as [Sent, Sent]
  t.equal(r1.json?.result?.resultType, 'input_required')
  t.strictSame(Object.keys(r1.json?.result?.inputRequests ?? {}), ['confirm'])
  t.not(r2.rpc?.id, r1.rpc?.id, 'the retry has a new JSON-RPC id')
  t.strictSame(r2.rpc?.params?.arguments, r1.rpc?.params?.arguments, 'the same arguments')
  t.equal(r2.rpc?.params?.requestState, r1.json?.result?.requestState, 'requestState echoed byte for byte')
  t.strictSame(r2.rpc?.params?.inputResponses, { confirm: ACCEPT }, 'the handler\'s answer under the key asked')
  t.equal(r2.json?.result?.resultType, 'complete')

  const writes = await auditOf(server, 'service_apps_delete')
  t.equal(writes.length, 1, 'exactly one deletion')
  t.equal(writes[0]?.outcome, 'succeeded')
  t.equal(writes[0]?.targetId, doomed.id)
  const answers = await auditOf(server, 'service_apps_delete.confirmation')
  t.strictSame(answers.map((e) => e.outcome), ['confirmed'], 'the confirmation is audited')
})

t.test('confirmation declined through the handler: ELICITATION_DENIED, the app remains', async (t) => {
  const server = await serve(t)
  const keeper = await seedApp(server, 'keeper')
  const { client, transport, sent, asked } = v2Client(t, server, { decide: () => ({ action: 'decline' }) })
  await client.connect(transport)

  const result = await client.callTool({ name: 'service_apps_delete', arguments: { app_id: keeper.id } })
  t.equal(result.isError, true, 'a tool failure')
  t.equal(toolError(result).code, 'ELICITATION_DENIED')
  t.equal(result.structuredContent, undefined)
  t.equal(asked.length, 1)
  t.ok(await appExists(server, keeper.id), 'the app remains')
  t.strictSame(posts(sent, 'tools/call').at(-1)?.rpc?.params?.inputResponses, { confirm: { action: 'decline' } })
  t.equal((await auditOf(server, 'service_apps_delete')).length, 0, 'no deletion recorded')
  t.strictSame((await auditOf(server, 'service_apps_delete.confirmation')).map((e) => e.outcome), ['declined'])
})

t.test('a pinned client that does not declare elicitation: -32021, nothing deleted', async (t) => {
  const server = await serve(t)
  const keeper = await seedApp(server, 'keeper')
  const { client, transport, sent } = v2Client(t, server, { capabilities: {} })
  await client.connect(transport)

  const err = await client.callTool({ name: 'service_apps_delete', arguments: { app_id: keeper.id } }).then(() => null, (e: unknown) => e)
  t.ok(err instanceof ProtocolError, 'the call fails with a ProtocolError')
  const pe = err as ProtocolError & { data?: Record<string, unknown> }
  t.equal(pe.code, -32021, 'JSON-RPC -32021')
  t.strictSame(pe.data?.requiredCapabilities, { elicitation: {} }, 'naming the capability')
  const call = posts(sent, 'tools/call')
  t.equal(call.length, 1, 'one request, no retry')
  t.equal(call[0]?.status, 400, 'HTTP 400')
  t.equal(call[0]?.json?.error?.data?.code, 'MISSING_CLIENT_CAPABILITY', 'the catalog code on the wire (the SDK keeps only requiredCapabilities in data)')
  t.equal(call[0]?.json?.id, call[0]?.rpc?.id, 'the error echoes the request id')
  t.strictSame(call[0]?.rpc?.params?._meta?.['io.modelcontextprotocol/clientCapabilities'], {}, 'the request declared nothing')
  t.ok(await appExists(server, keeper.id), 'the app remains')
  t.equal((await auditOf(server, 'service_apps_delete')).length, 0)
})

t.test('a streamed deployment on the modern path: progress, log lines in order, succeeded', async (t) => {
  const server = await serve(t)
  const org = await defaultOrganization(server)
  const web = await seedApp(server, 'web', { PIPELINE_STEP_MS: '5' })
  const { client, transport, sent, asked, logs } = v2Client(t, server, { decide: () => ACCEPT })
  await client.connect(transport)

  const progress: Progress[] = []
  const result = await client.callTool(
    { name: 'service_deployments_create', arguments: { app_id: web.id }, _meta: { [LOG_LEVEL_KEY]: 'info' } },
    { onprogress: (p) => void progress.push(p) },
  )
  t.equal(result.isError, false, `succeeded${result.isError ? ': ' + JSON.stringify(result.content) : ''}`)
  const dep = (result.structuredContent as { deployment: { id: string; status: string; app_id: string; exit_code: number } }).deployment
  t.match(dep, { app_id: web.id, status: 'succeeded', exit_code: 0 })
  t.equal((await server.app.repos.deployments.byId(org.id, dep.id))?.status, 'succeeded', 'stored as succeeded')
  t.equal(asked.length, 1)
  t.equal((asked[0]!.params as { message: string }).message, `Deploy app web (${web.id}) with pipeline default?`)

  // The SDK fires one synthetic progress per input_required round before retrying; the rest are the server's.
  const synthetic = progress.filter((p) => /^Fulfilling input required/.test(p.message ?? ''))
  t.equal(synthetic.length, 1, 'one synthetic progress for the one round')
  t.equal(progress[0], synthetic[0], 'and it came first')
  const fromServer = progress.filter((p) => !synthetic.includes(p))
  const lines = logs.filter((l) => l.logger === 'deployment').map((l) => l.data as { deployment_id: string; seq: number; line: string })
  t.ok(lines.length >= 10, `log lines arrived (${lines.length})`)
  t.ok(lines.every((l) => l.deployment_id === dep.id), 'each names the deployment')
  t.strictSame(lines.map((l) => l.seq), lines.map((_, i) => i), 'in order, without a gap')
  t.ok(lines.some((l) => l.line === 'web is live'))
  t.match(lines.at(-1)?.line, /^succeeded/, 'the last line is the outcome')
  t.ok(logs.every((l) => l.level === 'info'))
  t.ok(fromServer.every((p, i) => i === 0 || p.progress > fromServer[i - 1]!.progress), 'progress strictly increases')
  t.equal(fromServer.length, lines.length, 'one progress per line')
  t.strictSame(fromServer.map((p) => p.message), lines.map((l) => l.line), 'with the line as message')

  const calls = posts(sent, 'tools/call')
  t.equal(calls.length, 2)
  t.match(calls[0]?.contentType, /^application\/json/, 'round 1 (input_required) is JSON')
  t.equal(calls[1]?.contentType, 'text/event-stream', 'the confirmed run streams')
  t.equal(calls[1]?.rpc?.params?._meta?.[LOG_LEVEL_KEY], 'info', 'the retry keeps the log level')
  t.not(calls[1]?.rpc?.params?._meta?.progressToken, undefined, 'and carries a progress token')
})

t.test('tasks extension: callTool rejects the task answer; tasks/get through client.request follows it', async (t) => {
  const server = await serve(t)
  const org = await defaultOrganization(server)
  const web = await seedApp(server, 'web', { PIPELINE_STEP_MS: '5' })
  const { client, transport, sent, asked } = v2Client(t, server, {
    capabilities: { elicitation: { form: {} }, extensions: { [TASKS_EXTENSION]: {} } },
    decide: () => ACCEPT,
  })
  await client.connect(transport)

  // What the SDK does with `resultType: "task"` on callTool: a typed rejection, without the task id.
  const err = await client.callTool({ name: 'service_deployments_create', arguments: { app_id: web.id } }).then(() => null, (e: unknown) => e)
  t.ok(err instanceof SdkError, 'callTool rejects with an SdkError')
  t.equal((err as SdkError).code, SdkErrorCode.UnsupportedResultType, 'UNSUPPORTED_RESULT_TYPE')
  t.strictSame((err as SdkError).data, { resultType: 'task', method: 'tools/call' }, 'naming the result type; the task id is not surfaced')
  t.equal(asked.length, 1, 'the confirmation was answered first (rounds settle before the task)')
  const calls = posts(sent, 'tools/call')
  t.equal(calls.length, 2)
  t.equal(calls[0]?.json?.result?.resultType, 'input_required')
  const handle = calls[1]?.json?.result
  t.equal(handle?.resultType, 'task', 'the server answered the confirmed call with a task')
  t.equal(handle?.status, 'working')
  t.type(handle?.taskId, 'string')

  // The task the SDK could not consume runs anyway; follow it with client.request (the SDK sends tasks/get).
  const TaskView = z.looseObject({ taskId: z.string(), status: z.string(), result: z.optional(z.looseObject({})) })
  const follow = async (taskId: string) => {
    const deadline = Date.now() + 10_000
    for (;;) {
      const view = await client.request({ method: 'tasks/get', params: { taskId } }, TaskView)
      if (view.status !== 'working') return view
      if (Date.now() > deadline) throw new Error(`task ${taskId} still working`)
      await sleep(25)
    }
  }
  const done = await follow(handle.taskId)
  t.equal(done.taskId, handle.taskId)
  t.equal(done.status, 'completed')
  const sdkResult = done.result as { isError: boolean; structuredContent: { deployment: { id: string; status: string } } }
  t.equal(sdkResult.isError, false)
  t.equal(sdkResult.structuredContent.deployment.status, 'succeeded')
  t.equal((await server.app.repos.deployments.byId(org.id, sdkResult.structuredContent.deployment.id))?.status, 'succeeded', 'the deployment the rejected call started ran')
  const gets = posts(sent, 'tasks/get')
  t.ok(gets.length >= 1)
  t.ok(gets.every((s) => s.headers['mcp-name'] === handle.taskId), 'Mcp-Name carries the task id')
  t.ok(gets.every((s) => s.json?.result?.resultType === 'complete'), 'tasks/get results are complete')

  // A task started with raw requests and the same key is the same member's: the SDK can follow it too.
  const round1 = answerOf(await modernCall(server.mcpUrl, server.apiKey, 'service_deployments_create', { app_id: web.id }, { capabilities: WITH_TASKS, id: 1 }), 1)?.result
  t.equal(round1?.resultType, 'input_required')
  const raw = answerOf(await modernCall(server.mcpUrl, server.apiKey, 'service_deployments_create', { app_id: web.id }, {
    capabilities: WITH_TASKS, id: 2, extra: { requestState: round1.requestState, inputResponses: { confirm: confirmAnswer() } },
  }), 2)?.result
  t.equal(raw?.resultType, 'task')
  const rawDone = await follow(raw.taskId)
  t.equal(rawDone.status, 'completed')
  t.equal((rawDone.result as { isError: boolean }).isError, false)
  t.equal((await server.app.repos.deployments.list(org.id, { appId: web.id, limit: 10, offset: 0 })).total, 2, 'two deployments: one per task')

  // tasks/get for an unknown id: the server's -32602 surfaces as a ProtocolError.
  const unknown = await client.request({ method: 'tasks/get', params: { taskId: 'task_nope' } }, TaskView).then(() => null, (e: unknown) => e)
  t.ok(unknown instanceof ProtocolError)
  t.equal((unknown as ProtocolError).code, -32602)
})

t.test('listen: the honoured filter, then tools/list_changed after the member\'s role changes', async (t) => {
  // The listen stream's checks run at the server's clock's intervals (docs/decisions/clock.md), which the test moves.
  const CHECK_MS = 30_000
  const clock = new ManualClock()
  const server = await serve(t, { listenCheckMs: CHECK_MS }, clock)
  const member = await createMember(server, { role: 'developer' })
  const { client, transport, sent, listChanged } = v2Client(t, server, { key: member.key })
  await client.connect(transport)

  const before = (await client.listTools()).tools.map((x) => x.name)
  t.notOk(before.includes('service_apps_delete'), 'a developer does not see service_apps_delete')

  const sub = await client.listen({ toolsListChanged: true })
  t.strictSame(sub.honoredFilter, { toolsListChanged: true }, 'the honoured filter')
  const listen = posts(sent, 'subscriptions/listen')
  t.equal(listen.length, 1)
  t.equal(listen[0]?.contentType, 'text/event-stream', 'listen is an SSE answer')

  await clock.advance(3 * CHECK_MS)
  t.equal(listChanged.length, 0, 'nothing changes while the role stays')
  await server.app.repos.memberships.upsert({ userId: member.user.id, organizationId: (await defaultOrganization(server)).id, role: 'admin' })
  await clock.advance(CHECK_MS)
  await until(() => listChanged.length > 0, 5000, 'notifications/tools/list_changed')
  t.equal(listChanged.length, 1, 'one list_changed for one change')

  const after = (await client.listTools()).tools.map((x) => x.name)
  t.ok(after.includes('service_apps_delete'), 'the list the client fetches next shows the admin tools')
  t.ok(after.length > before.length)

  await sub.close()
  t.equal(await sub.closed, 'local', 'closed by the client')
  await until(() => posts(sent, 'notifications/cancelled').length > 0, 2000, 'the SDK to send notifications/cancelled for the listen')
  t.equal(posts(sent, 'notifications/cancelled')[0]?.status, 202, 'the cancel notification is accepted (202)')

  // The server shutting down ends a subscription gracefully: the SDK sees the listen result.
  const second = await client.listen({ toolsListChanged: true })
  const closing = server.close()
  const how = await Promise.race([second.closed, sleep(5000).then(() => 'timeout')])
  await closing
  t.equal(how, 'graceful', 'a server shutdown ends the subscription with its result')
})

t.test('SDK v1 client on the same server at the same time: the legacy path unchanged', async (t) => {
  const server = await serve(t)
  const modern = v2Client(t, server)
  const v1Transport = new V1Transport(new URL(server.mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${server.apiKey}` } } })
  const v1 = new V1Client({ name: 'sdk-v1', version: '1.0.0' })
  t.teardown(() => v1.close())
  await Promise.all([modern.client.connect(modern.transport), v1.connect(v1Transport)])
  const [fromV1, fromV2] = await Promise.all([
    v1.callTool({ name: 'service_whoami', arguments: {} }),
    modern.client.callTool({ name: 'service_whoami', arguments: {} }),
  ])
  t.equal(fromV1.isError, false)
  t.strictSame(fromV1.structuredContent, fromV2.structuredContent, 'the same answer on both eras')
  t.type(v1Transport.sessionId, 'string', 'the v1 client holds a session')
  t.equal(v1Transport.protocolVersion, '2025-11-25')
  t.equal(modern.client.getProtocolEra(), 'modern')
  await v1Transport.terminateSession()
})

/**
 * An OAuthClientProvider (v2 interface) holding a registration and tokens obtained beforehand (test/helpers/oauth.ts
 * walks the browser-less code flow); the SDK refreshes through it on a 401. A redirect would mean the refresh failed.
 */
class GrantProvider implements OAuthClientProvider {
  stored: StoredOAuthTokens
  info: StoredOAuthClientInformation
  readonly saved: StoredOAuthTokens[] = []
  readonly redirects: URL[] = []
  verifier: string | undefined

  constructor(readonly registered: RegisteredClient, tokens: StoredOAuthTokens) {
    this.stored = tokens
    this.info = { client_id: registered.client_id, redirect_uris: registered.redirect_uris, issuer: tokens.issuer }
  }

  get redirectUrl(): string {
    return this.registered.redirect_uris[0]!
  }

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'Test client',
      redirect_uris: this.registered.redirect_uris,
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      scope: 'mcp:read mcp:write',
    }
  }

  clientInformation(): StoredOAuthClientInformation {
    return this.info
  }

  saveClientInformation(info: StoredOAuthClientInformation): void {
    this.info = info
  }

  tokens(): StoredOAuthTokens {
    return this.stored
  }

  saveTokens(tokens: StoredOAuthTokens): void {
    this.stored = tokens
    this.saved.push(tokens)
  }

  redirectToAuthorization(url: URL): void {
    this.redirects.push(url)
  }

  saveCodeVerifier(verifier: string): void {
    this.verifier = verifier
  }

  codeVerifier(): string {
    if (!this.verifier) throw new Error('no code verifier saved')
    return this.verifier
  }
}

t.test('OAuth refreshed mid-use on the modern path: calls keep working, a confirmation spans the refresh', async (t) => {
  // Access tokens live a minute of the server's clock (docs/decisions/clock.md), which only the test moves: they expire
  // exactly when the test says, never because a loaded machine was slow between two calls.
  const clock = new ManualClock()
  const server = await serve(t, { accessTokenTtlMs: 60_000 }, clock)
  const { client: registered, tokens } = await oauthTokens(server)
  // Stored as the SDK stores them: stamped with the issuer of the authorization server (SEP-2352).
  const provider = new GrantProvider(registered, { ...tokens, issuer: server.url })
  const doomed = await seedApp(server, 'doomed')
  /** The token the handler held when it was asked: it answers only once that token has expired. */
  const heldWhenAsked: string[] = []
  const { client, transport, sent, asked } = v2Client(t, server, {
    authProvider: provider,
    decide: async () => {
      heldWhenAsked.push(provider.stored.access_token)
      await outlive(clock, provider.stored.access_token)
      return ACCEPT
    },
  })
  await client.connect(transport)
  const tokenA = tokens.access_token
  const claimsA = jwtPayload(tokenA)

  const whoA = (await client.callTool({ name: 'service_whoami', arguments: {} })).structuredContent as Whoami
  t.equal(whoA.credential.kind, 'oauth')
  t.equal(whoA.credential.id, claimsA.jti, 'the first calls run on the first access token')
  t.equal(whoA.credential.client_id, registered.client_id)
  const created = await client.callTool({ name: 'service_apps_create', arguments: { name: 'oauth-app' } })
  t.equal(created.isError, false)

  // The token expires; the next calls get 401, the SDK refreshes once and re-sends: nothing else to redo (no session).
  await outlive(clock, tokenA)
  let mark = sent.length
  const whoB = (await client.callTool({ name: 'service_whoami', arguments: {} })).structuredContent as Whoami
  const apps = await client.callTool({ name: 'service_apps_list', arguments: {} })
  t.strictSame((apps.structuredContent as { apps: Array<{ name: string }> }).apps.map((a) => a.name), ['doomed', 'oauth-app'].sort(), 'calls keep working after the expiry')
  const firstRefresh = sent.slice(mark)
  const rejected = posts(firstRefresh).filter((s) => s.status === 401)
  t.equal(rejected.length, 1, 'the expired token got one 401 on /mcp')
  t.equal(rejected[0]?.bearer, tokenA)
  const refreshes = firstRefresh.filter((s) => s.path === '/oauth/token')
  t.equal(refreshes.length, 1, 'the SDK refreshed once')
  t.equal(refreshes[0]?.form?.get('grant_type'), 'refresh_token')
  t.equal(refreshes[0]?.form?.get('refresh_token'), tokens.refresh_token)
  t.equal(refreshes[0]?.status, 200)
  const tokenB = provider.stored.access_token
  t.not(tokenB, tokenA, 'a new access token')
  t.equal(whoB.credential.id, jwtPayload(tokenB).jti, 'the re-sent call ran on the refreshed token')
  t.equal(whoB.credential.client_id, registered.client_id)
  t.equal(client.getProtocolEra(), 'modern', 'still the same modern connection')

  // A confirmation whose round 1 runs on token B and whose round 2 needs a refresh (token C): the requestState is
  // bound to the grant, not to the access token, so the retry runs.
  mark = sent.length
  const deleted = await client.callTool({ name: 'service_apps_delete', arguments: { app_id: doomed.id } })
  t.equal(deleted.isError, false, `the confirmed delete ran after the refresh${deleted.isError ? ': ' + JSON.stringify(deleted.content) : ''}`)
  t.notOk(await appExists(server, doomed.id), 'the app is gone')
  t.equal(asked.length, 1)
  t.strictSame(heldWhenAsked, [tokenB], 'asked while token B was current')
  const during = sent.slice(mark)
  const calls = posts(during, 'tools/call')
  t.equal(calls.length, 3, 'round 1, round 2 refused with 401, round 2 re-sent')
  const [round1, refused, round2] = calls as [Sent, Sent, Sent]
  t.equal(round1.bearer, tokenB)
  t.equal(round1.status, 200)
  t.equal(round1.json?.result?.resultType, 'input_required', 'round 1 on token B')
  t.equal(refused.status, 401, 'round 2 with the expired token B: 401')
  t.equal(refused.bearer, tokenB)
  const tokenC = provider.stored.access_token
  t.not(tokenC, tokenB)
  t.equal(round2.bearer, tokenC, 'round 2 re-sent with the refreshed token C')
  t.equal(round2.status, 200)
  t.equal(round2.rpc?.params?.requestState, round1.json?.result?.requestState, 'with the state of round 1')
  t.equal(round2.json?.result?.resultType, 'complete')
  t.equal(jwtPayload(tokenC).client_id, claimsA.client_id, 'the same client (and grant)')
  t.equal(during.filter((s) => s.path === '/oauth/token').length, 1, 'one refresh for the round')
  t.equal((await auditOf(server, 'service_apps_delete')).length, 1, 'deleted once')

  t.strictSame(provider.redirects, [], 'never sent back to the browser')
  t.strictSame([...new Set(provider.saved.map((x) => x.access_token))].filter((x) => x !== tokenA), [tokenB, tokenC], 'the refreshed tokens were saved')
  t.equal(sent.filter((s) => s.path === '/oauth/token').length, 2, 'two refreshes in all')
  t.ok(sent.every((s) => s.sessionId === null), 'no session, so none to lose')
})

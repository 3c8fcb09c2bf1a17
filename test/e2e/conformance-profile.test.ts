// test-backends: sqlite-only (the profile runs on an in-memory SQLite database by design)
/**
 * The conformance profile (`service-mcp serve --profile conformance`): its guards — loopback only, an in-memory
 * database with nothing written to disk, a loud banner, unauthenticated requests acting as the owner of a fresh
 * organization while a credential that is sent is still verified, only the suite's fixtures — and the fixture
 * behaviours the official conformance suite depends on, in both eras, so that a regression shows here without running
 * the suite (`npm run conformance` runs the suite itself).
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { CreateMessageRequestSchema, ElicitRequestSchema, LoggingMessageNotificationSchema, type ElicitRequest } from '@modelcontextprotocol/sdk/types.js'
import t, { type Test } from 'tap'
import { createConformanceServer, type ConformanceServer } from '../../src/conformance/profile.js'
import { ConfigError, createServer, defineTool, loadConfig } from '../../src/index.js'
import { cleanEnv, cli, cliEntry } from '../helpers/cli.js'
import { post } from '../helpers/mcp.js'
import { answerOf, modernLive, modernPost, SUBSCRIPTION_ID_KEY, TASKS_EXTENSION, type ModernOptions } from '../helpers/modern.js'
import { messagesOf, sleep, until } from '../helpers/stream.js'

/** Every tool of the profile, in the order tools/list gives them (test_simple_text first: the suite calls tools[0]). */
const FIXTURE_TOOLS = [
  'test_simple_text', 'test_image_content', 'test_audio_content', 'test_embedded_resource', 'test_multiple_content_types',
  'test_tool_with_logging', 'test_tool_with_progress', 'test_error_handling', 'test_sampling', 'test_elicitation',
  'test_elicitation_sep1034_defaults', 'test_elicitation_sep1330_enums', 'json_schema_2020_12_tool', 'test_missing_capability',
  'test_streaming_elicitation', 'test_logging_tool', 'test_trigger_tool_change', 'test_trigger_prompt_change',
  'test_input_required_result_elicitation', 'test_input_required_result_sampling', 'test_input_required_result_list_roots',
  'test_input_required_result_request_state', 'test_input_required_result_multiple_inputs', 'test_input_required_result_multi_round',
  'test_input_required_result_tampered_state', 'test_input_required_result_capabilities', 'test_custom_header', 'greet',
  'slow_compute', 'failing_job', 'confirm_delete', 'multi_input', 'test_tool_with_task', 'protocol_error_job',
]
const FIXTURE_PROMPTS = ['test_simple_prompt', 'test_prompt_with_arguments', 'test_prompt_with_embedded_resource', 'test_prompt_with_image', 'test_input_required_result_prompt']
const FIXTURE_RESOURCES = ['test://static-text', 'test://static-binary', 'test://watched-resource']

// ---- The command line ------------------------------------------------------------------------------------------------

interface Exited {
  code: number | null
  stdout: string
  stderr: string
}

/** `service-mcp serve --profile conformance <args>` from `cwd`, with only `env` as SERVICE_* settings. */
function spawnProfile(cwd: string, args: string[], env: Record<string, string>) {
  return spawn(process.execPath, [...cliEntry(), 'serve', '--profile', 'conformance', ...args], {
    cwd,
    env: cleanEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
}

/** Runs the profile to its exit (a refused start), bounded. */
function refusedStart(cwd: string, args: string[], env: Record<string, string> = {}): Promise<Exited> {
  return new Promise((resolve, reject) => {
    const child = spawnProfile(cwd, args, env)
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`the profile did not exit within 20 s\nstdout: ${stdout}\nstderr: ${stderr}`))
    }, 20_000)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })
}

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'conformance-profile-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

t.test('the command line refuses to serve without authentication anywhere but on a loopback address', async (t) => {
  const cwd = tempDir(t)
  const cases: Array<[string, string[], Record<string, string>, RegExp]> = [
    ['--host 0.0.0.0', ['--host', '0.0.0.0', '--port', '0'], {}, /listens only on a loopback address \(127\.0\.0\.1, ::1 or localhost\), not SERVICE_HOST "0\.0\.0\.0"/],
    ['SERVICE_HOST=192.168.1.10', ['--port', '0'], { SERVICE_HOST: '192.168.1.10' }, /not SERVICE_HOST "192\.168\.1\.10"/],
    ['a public base URL', ['--port', '0'], { SERVICE_BASE_URL: 'https://mcp.example.com' }, /base address must be a loopback one, not SERVICE_BASE_URL "https:\/\/mcp\.example\.com"/],
    ['an unknown profile', ['--profile', 'demo', '--port', '0'], {}, /SERVICE_PROFILE must be conformance \(or empty for none\), got "demo"/],
  ]
  const runs = await Promise.all(cases.map(([, args, env]) => refusedStart(cwd, args, env)))
  cases.forEach(([what, , , message], i) => {
    const run = runs[i]!
    t.equal(run.code, 2, `${what}: exit code 2`)
    t.match(run.stderr, message, `${what}: says why`)
    t.equal(run.stderr.trimEnd().split('\n').length, 1, `${what}: in one line`)
    t.notMatch(run.stderr, /CONFORMANCE PROFILE/, `${what}: no banner, nothing served`)
  })
  t.same(readdirSync(cwd), [], 'nothing was written')

  // The setting works as an environment variable too (the settings table: SERVICE_PROFILE).
  const byEnv = await cli(['serve', '--host', '0.0.0.0', '--port', '0'], { SERVICE_PROFILE: 'conformance' })
  t.equal(byEnv.code, 2, 'SERVICE_PROFILE=conformance selects the profile, and its guard')
  t.match(byEnv.stderr, /^service-mcp: SERVICE_PROFILE conformance serves without authentication/)
})

t.test('the command line: banner, in-memory database, nothing on disk, requests without credentials act as the owner', async (t) => {
  const cwd = tempDir(t)
  const configured = join(cwd, 'configured.db')
  const child = spawnProfile(cwd, ['--port', '0'], { SERVICE_DATABASE: configured, SERVICE_ENV_KEY_FILE: join(cwd, 'keys', 'env.key') })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d) => (stdout += d))
  child.stderr.on('data', (d) => (stderr += d))
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL')
  })
  const listening = await until(() => stdout.split('\n').map((l) => (l.startsWith('{') ? JSON.parse(l) : null)).find((l) => l?.msg === 'MCP server listening'), 20_000, 'the listening log line')
  const url: string = listening.url
  t.match(url, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/, 'listens on 127.0.0.1 by default')

  t.match(stderr, /CONFORMANCE PROFILE/, 'the banner names the profile')
  t.match(stderr, /NO AUTHENTICATION/)
  t.match(stderr, /NO PERSISTENCE: in-memory database/)
  t.match(stderr, new RegExp(`ignored: SERVICE_DATABASE "${configured.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}", SERVICE_ENV_KEY_FILE`), 'it says which settings it ignored')
  t.match(stderr, /LOOPBACK ONLY: listening on 127\.0\.0\.1/)
  t.match(stderr, new RegExp(`${FIXTURE_TOOLS.length} tools, 4 resources and templates, 5 prompts; no built-in tool`))
  t.ok(stderr.includes(`MCP endpoint (give it to the suite or your client): ${url}`), 'the banner gives the URL')

  // A session and a stateless request, neither with credentials.
  const init = await post(url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } } })
  t.equal(init.status, 200, 'initialize without Authorization is served')
  const sessionId = String(init.headers['mcp-session-id'])
  const headers = { 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' }
  t.equal((await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, headers)).status, 202)
  const listed = await post(url, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, headers)
  t.same(listed.json.result.tools.map((x: { name: string }) => x.name), FIXTURE_TOOLS, 'exactly the fixtures, test_simple_text first')
  const called = await post(url, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'test_simple_text' } }, headers)
  t.same(called.json.result.content, [{ type: 'text', text: 'This is a simple text response for testing.' }])
  const stateless = await modernPost(url, '', 'tools/list', {}, { headers: { authorization: undefined } })
  t.equal(stateless.status, 200)
  t.equal(stateless.json.result.tools.length, FIXTURE_TOOLS.length)

  // A credential that is sent is verified as always.
  const forged = await post(url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } } }, { authorization: `Bearer service_mcp_${'x'.repeat(43)}` })
  t.equal(forged.status, 401, 'an invalid API key is refused')
  t.equal(forged.json.error.code, 'INVALID_TOKEN')
  t.match(String(forged.headers['www-authenticate']), /error="invalid_token"/)

  child.kill('SIGTERM')
  t.equal(await exited, 0, 'SIGTERM stops it cleanly')
  t.notMatch(stdout + stderr, /password|API key|service_mcp_/i, 'the owner\'s password and key are never shown: nobody signs in, no OAuth client gets a token')
  t.same(readdirSync(cwd), [], 'nothing was written: no database, lock or env.key file, in the configured places or the default ones')
})

// ---- In process ------------------------------------------------------------------------------------------------------

interface Profile {
  server: ConformanceServer
  mcpUrl: string
}

async function startProfile(t: Test, argv: string[] = []): Promise<Profile> {
  const server = await createConformanceServer({ argv: ['--port', '0', ...argv], env: {}, logger: false })
  t.teardown(() => server.close())
  const base = await server.listen()
  return { server, mcpUrl: `${base}/mcp` }
}

/** What the suite's 2026-07-28 requests declare unless a scenario says otherwise. */
const SUITE_CAPABILITIES = { sampling: {}, elicitation: {}, roots: { listChanged: true } }

/** A conforming 2026-07-28 request without credentials, declaring the suite's capabilities unless told otherwise. */
function stateless(mcpUrl: string, method: string, params: Record<string, unknown> = {}, options: ModernOptions = {}) {
  return modernPost(mcpUrl, '', method, params, { capabilities: SUITE_CAPABILITIES, ...options, headers: { authorization: undefined, ...options.headers } })
}

function call(mcpUrl: string, name: string, extra: Record<string, unknown> = {}, options: ModernOptions = {}) {
  return stateless(mcpUrl, 'tools/call', { name, arguments: {}, ...extra }, options)
}

t.test('the profile forces its own settings, whatever the flags say', async (t) => {
  const { server } = await startProfile(t, ['--database', join(tmpdir(), 'never-created.db'), '--rate-limit-api-key-member', '5', '--env-key-file', join(tmpdir(), 'never.key')])
  t.equal(server.config.profile, 'conformance')
  t.equal(server.config.database, ':memory:')
  t.equal(server.config.envKeyFile, '')
  t.ok(server.config.rateLimitApiKeyMember >= 1_000_000, 'the per-member limit is lifted')
  t.ok(server.config.rateLimitOrganization >= 1_000_000, 'so is the per-organization one')
  t.equal(server.config.maxConnectionsPerAddress, 0)
  t.match(server.ignored, [/^SERVICE_DATABASE ".*never-created\.db"$/, /^SERVICE_ENV_KEY_FILE /])
  t.match(server.banner(), /ignored: SERVICE_DATABASE/)
  t.equal(server.app.tools.size, FIXTURE_TOOLS.length, 'no built-in tool')
  t.notOk(server.app.tools.get('service_whoami'))
})

t.test('requests without Authorization act as the owner of a fresh organization, with both scopes', async (t) => {
  const { server, mcpUrl } = await startProfile(t)
  const repos = server.app.repos
  t.equal(await repos.organizations.count(), 1, 'one organization')
  t.equal(await repos.users.count(), 1, 'one user')
  // Who a request acts as, asked through a tool only an owner with mcp:write may call.
  server.app.tools.add(defineTool({
    name: 'probe_principal',
    title: 'Probe',
    description: 'Who is calling',
    inputSchema: { type: 'object', properties: {} },
    scope: 'mcp:write',
    role: 'owner',
    handler: (_args, ctx) => ({ role: ctx.principal.role, scopes: ctx.principal.scopes, kind: ctx.principal.kind, organizationId: ctx.principal.organizationId }),
  }))
  const reply = await call(mcpUrl, 'probe_principal')
  t.equal(reply.status, 200)
  t.equal(reply.json.result.isError, false)
  const who = JSON.parse(reply.json.result.content[0].text)
  t.same(who, { role: 'owner', scopes: ['mcp:read', 'mcp:write'], kind: 'api_key', organizationId: (await repos.organizations.list())[0]!.id })

  const forged = await modernPost(mcpUrl, `service_mcp_${'y'.repeat(43)}`, 'tools/list')
  t.equal(forged.status, 401, 'an invalid credential is still refused')
  t.equal(forged.json.error.code, 'INVALID_TOKEN')
  const malformed = await modernPost(mcpUrl, '', 'tools/list', { }, { headers: { authorization: 'Basic b3duZXI6cHc=' } })
  t.equal(malformed.status, 401, 'so is a malformed Authorization header')
})

t.test('requests without credentials are served by the profile only', async (t) => {
  t.throws(() => loadConfig({ env: { SERVICE_PROFILE: 'conformance', SERVICE_HOST: '0.0.0.0' } }), ConfigError, 'not on a public interface, even embedded')
  const plain = await createServer({ env: {}, config: { database: ':memory:', port: 0 }, logger: false })
  t.teardown(() => plain.close())
  t.throws(() => plain.app.auth.actWithoutAuthorization('service_mcp_x'), /only by the conformance profile/, 'a server without the profile refuses')
  await plain.listen()
  const refused = await post(`${plain.config.baseUrl}/mcp`, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } } })
  t.equal(refused.status, 401, 'and answers a request without credentials 401')
  const dir = tempDir(t)
  const onDisk = await createServer({ env: {}, config: { profile: 'conformance', database: join(dir, 'x.db'), port: 0 }, logger: false })
  t.teardown(() => onDisk.close())
  t.throws(() => onDisk.app.auth.actWithoutAuthorization('service_mcp_x'), /in-memory database/, 'nor with a database on disk')
})

// ---- Fixtures in a session (the SDK client, as the suite's 2025-11-25 runs use it) -----------------------------------

function sdkClient(mcpUrl: string) {
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), {
    reconnectionOptions: { maxReconnectionDelay: 100, initialReconnectionDelay: 10, reconnectionDelayGrowFactor: 1, maxRetries: 0 },
  })
  const client = new Client({ name: 'conformance-test-client', version: '1.0.0' }, { capabilities: { sampling: {}, elicitation: {} } })
  const elicited: ElicitRequest[] = []
  client.setRequestHandler(ElicitRequestSchema, (request) => {
    elicited.push(request)
    return { action: 'accept', content: { username: 'testuser', email: 'test@example.com' } }
  })
  const sampled: unknown[] = []
  client.setRequestHandler(CreateMessageRequestSchema, (request) => {
    sampled.push(request.params)
    return { role: 'assistant', content: { type: 'text', text: 'This is a test response from the client' }, model: 'test-model', stopReason: 'endTurn' }
  })
  const logs: unknown[] = []
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logs.push(n.params.data))
  return { client, transport, elicited, sampled, logs }
}

t.test('fixtures in a 2025-11-25 session', async (t) => {
  const { mcpUrl } = await startProfile(t)
  const { client, transport, elicited, sampled, logs } = sdkClient(mcpUrl)
  t.teardown(() => client.close())
  await client.connect(transport)
  t.match(client.getServerCapabilities(), { tools: {}, resources: { subscribe: true }, prompts: {}, logging: {}, completions: {} })

  t.strictSame(await client.ping(), {}, 'ping answers exactly {}')
  t.strictSame(await client.setLoggingLevel('debug'), {}, 'logging/setLevel answers exactly {}')

  const { tools } = await client.listTools()
  t.same(tools.map((x) => x.name), FIXTURE_TOOLS)
  for (const tool of tools) t.ok(tool.description, `${tool.name} has a description`)

  t.match(await client.callTool({ name: 'test_audio_content', arguments: {} }), { content: [{ type: 'audio', mimeType: 'audio/wav' }] })
  t.match(await client.callTool({ name: 'test_multiple_content_types', arguments: {} }), { content: [{ type: 'text' }, { type: 'image', mimeType: 'image/png' }, { type: 'resource', resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json' } }] })
  t.match(await client.callTool({ name: 'test_error_handling', arguments: {} }), { isError: true, content: [{ type: 'text', text: 'This tool intentionally returns an error for testing' }] }, 'a tool error is a result')

  const progress: number[] = []
  const withProgress = await client.callTool({ name: 'test_tool_with_progress', arguments: {} }, undefined, { onprogress: (p) => void progress.push(p.progress) })
  t.same(progress, [0, 50, 100], 'three progress notifications before the result')
  t.match(withProgress, { content: [{ type: 'text' }] })

  await client.callTool({ name: 'test_tool_with_logging', arguments: {} })
  await until(() => logs.length >= 3, 2000, 'three log messages')
  t.same(logs, ['Tool execution started', 'Tool processing data', 'Tool execution completed'])

  const sampling = await client.callTool({ name: 'test_sampling', arguments: { prompt: 'Test prompt for sampling' } })
  t.match(sampled, [{ messages: [{ role: 'user', content: { type: 'text', text: 'Test prompt for sampling' } }], maxTokens: 100 }])
  t.same(sampling.content, [{ type: 'text', text: 'LLM response: This is a test response from the client' }])

  const elicitation = await client.callTool({ name: 'test_elicitation', arguments: { message: 'Please provide your information' } })
  t.equal(elicited[0]?.params.message, 'Please provide your information')
  t.same(elicitation.content, [{ type: 'text', text: 'User response: action=accept, content={"username":"testuser","email":"test@example.com"}' }])

  await client.callTool({ name: 'test_elicitation_sep1034_defaults', arguments: {} })
  t.match(elicited[1]?.params, { requestedSchema: { properties: { name: { default: 'John Doe' }, age: { type: 'integer', default: 30 }, score: { default: 95.5 }, status: { default: 'active' }, verified: { default: true } } } })

  const sessionFailing = await client.callTool({ name: 'failing_job', arguments: {} })
  t.match(sessionFailing, { isError: true, content: [{ type: 'text', text: /CAPABILITY_REQUIRED.*runs only as a task/ }] }, 'a task-only tool in a session: a tool error')

  const { resources } = await client.listResources()
  t.same(resources.map((r) => r.uri), FIXTURE_RESOURCES, 'test://static-text first; the template is not listed')
  t.match(await client.readResource({ uri: 'test://static-binary' }), { contents: [{ uri: 'test://static-binary', mimeType: 'image/png', blob: /^iVBOR/ }] })
  t.same((await client.readResource({ uri: 'test://template/123/data' })).contents, [{ uri: 'test://template/123/data', mimeType: 'application/json', text: '{"id":"123","templateTest":true,"data":"Data for ID: 123"}' }])
  t.strictSame(await client.subscribeResource({ uri: 'test://watched-resource' }), {})
  t.strictSame(await client.unsubscribeResource({ uri: 'test://watched-resource' }), {})
  t.same((await client.listResourceTemplates()).resourceTemplates.map((x) => x.uriTemplate), ['test://template/{id}/data'])

  t.same((await client.listPrompts()).prompts.map((p) => p.name), FIXTURE_PROMPTS)
  t.same((await client.getPrompt({ name: 'test_prompt_with_arguments', arguments: { arg1: 'testValue1', arg2: 'testValue2' } })).messages, [{ role: 'user', content: { type: 'text', text: "Prompt with arguments: arg1='testValue1', arg2='testValue2'" } }])
  t.match((await client.getPrompt({ name: 'test_prompt_with_embedded_resource', arguments: { resourceUri: 'test://example-resource' } })).messages, [{ content: { type: 'resource', resource: { uri: 'test://example-resource', mimeType: 'text/plain' } } }, { content: { type: 'text' } }])
  t.same((await client.complete({ ref: { type: 'ref/prompt', name: 'test_prompt_with_arguments' }, argument: { name: 'arg1', value: 'test' } })).completion, { values: ['testValue1', 'testValue2', 'test'], total: 3, hasMore: false })
  t.same((await client.complete({ ref: { type: 'ref/resource', uri: 'test://template/{id}/data' }, argument: { name: 'id', value: '1' } })).completion.values, ['1', '123'])
})

// ---- Fixtures on 2026-07-28 requests ---------------------------------------------------------------------------------

t.test('2026-07-28: discovery, content, missing capability, logging, progress, unknown resource', async (t) => {
  const { mcpUrl } = await startProfile(t)
  const discover = await stateless(mcpUrl, 'server/discover')
  t.equal(discover.status, 200)
  t.match(discover.json.result, {
    resultType: 'complete',
    supportedVersions: ['2026-07-28'],
    capabilities: { tools: { listChanged: true }, prompts: { listChanged: true }, resources: {}, completions: {}, extensions: { [TASKS_EXTENSION]: {} } },
    cacheScope: 'public',
  })

  const simple = await stateless(mcpUrl, 'tools/call', { name: 'test_simple_text' }, { id: 7 })
  t.equal(simple.json.id, 7)
  t.match(simple.json.result, { resultType: 'complete', content: [{ type: 'text', text: 'This is a simple text response for testing.' }], isError: false }, 'a call without arguments')

  const missing = await call(mcpUrl, 'test_missing_capability', {}, { id: 401, capabilities: {} })
  t.equal(missing.status, 400, 'a tool needing sampling, without it declared: 400')
  t.equal(missing.json.id, 401)
  t.equal(missing.json.error.code, -32021)
  t.same(missing.json.error.data.requiredCapabilities, { sampling: {} })

  const streaming = await call(mcpUrl, 'test_streaming_elicitation', {}, { capabilities: { elicitation: {} } })
  t.ok(streaming.json, 'a question on a stateless request: one JSON answer')
  t.match(streaming.json.result, { resultType: 'input_required', inputRequests: { name: { method: 'elicitation/create' } } }, 'the input_required result, never a server request')

  const quiet = await call(mcpUrl, 'test_logging_tool')
  t.equal(quiet.status, 200)
  t.ok(quiet.json, 'no logLevel: a JSON answer, no log message')
  const loud = await call(mcpUrl, 'test_logging_tool', {}, { meta: { 'io.modelcontextprotocol/logLevel': 'info' } })
  t.match(loud.messages, [{ method: 'notifications/message', params: { level: 'info', data: 'Diagnostic trace logging activated' } }, { result: { content: [{ text: 'Logging evaluated' }] } }], 'with a logLevel: the message, then the result')

  const progress = await call(mcpUrl, 'test_tool_with_progress', {}, { meta: { progressToken: 'progress-test-1' } })
  t.equal(progress.headers['content-type'], 'text/event-stream', 'progress makes the answer a stream')
  t.same(progress.messages.filter((m) => m.method === 'notifications/progress').map((m) => [m.params.progressToken, m.params.progress]), [['progress-test-1', 0], ['progress-test-1', 50], ['progress-test-1', 100]])
  t.equal(progress.messages.at(-1).result.resultType, 'complete', 'the result comes last')
  for (const line of progress.text.split('\n').filter((l) => l.startsWith('data:'))) t.doesNotThrow(() => JSON.parse(line.slice(5)), 'each message is one data line')

  const unknown = await stateless(mcpUrl, 'resources/read', { uri: 'test://nonexistent-resource-for-conformance-testing' })
  t.equal(unknown.json.error.code, -32602)
  t.equal(unknown.json.error.data.uri, 'test://nonexistent-resource-for-conformance-testing')
  const read = await stateless(mcpUrl, 'resources/read', { uri: 'test://static-text' })
  t.match(read.json.result, { resultType: 'complete', contents: [{ uri: 'test://static-text', mimeType: 'text/plain', text: 'This is the content of the static text resource.' }], cacheScope: 'private' })
  t.type(read.json.result.ttlMs, 'number')
  const templates = await stateless(mcpUrl, 'resources/templates/list')
  t.match(templates.json.result, { resourceTemplates: [{ uriTemplate: 'test://template/{id}/data', name: 'template', mimeType: 'application/json' }], cacheScope: 'private' })
})

t.test('2026-07-28: input_required rounds of the MRTR fixtures', async (t) => {
  const { mcpUrl } = await startProfile(t)
  const first = await call(mcpUrl, 'test_input_required_result_elicitation')
  const round1 = first.json.result
  t.equal(round1.resultType, 'input_required')
  t.same(round1.inputRequests, { user_name: { method: 'elicitation/create', params: { message: 'What is your name?', requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } } } })
  t.type(round1.requestState, 'string')
  const alice = { action: 'accept', content: { name: 'Alice' } }
  const second = await call(mcpUrl, 'test_input_required_result_elicitation', { requestState: round1.requestState, inputResponses: { user_name: alice } }, { id: 2 })
  t.same(second.json.result.content, [{ type: 'text', text: 'Hello, Alice!' }])
  const tampered = await call(mcpUrl, 'test_input_required_result_elicitation', { requestState: `${round1.requestState}-TAMPERED`, inputResponses: { user_name: alice } }, { id: 3 })
  t.equal(tampered.status, 200)
  t.equal(tampered.json.error.code, -32602, 'an altered requestState is refused')
  const unasked = await call(mcpUrl, 'test_input_required_result_elicitation', { inputResponses: { user_name: alice, unknown_extra_key: { action: 'accept', content: { foo: 'bar' } } } })
  t.same(unasked.json.result.content, [{ type: 'text', text: 'Hello, Alice!' }], 'an answer given up front is taken, unknown keys ignored')
  const wrongKey = await call(mcpUrl, 'test_input_required_result_elicitation', { inputResponses: { wrong_key: { action: 'accept', content: { data: 'wrong' } } } })
  t.equal(wrongKey.json.result.resultType, 'input_required', 'no answer for user_name: asked again')
  const invalid = await call(mcpUrl, 'test_input_required_result_elicitation', { inputResponses: { user_name: 12345 } })
  t.equal(invalid.json.error.code, -32602, 'an answer that is not one is refused')

  const r1 = (await call(mcpUrl, 'test_input_required_result_multi_round')).json.result
  t.same(Object.keys(r1.inputRequests), ['step1'])
  const r2 = (await call(mcpUrl, 'test_input_required_result_multi_round', { requestState: r1.requestState, inputResponses: { step1: alice } })).json.result
  t.same(Object.keys(r2.inputRequests), ['step2'])
  t.not(r2.requestState, r1.requestState, 'the second round has a state of its own')
  const r3 = (await call(mcpUrl, 'test_input_required_result_multi_round', { requestState: r2.requestState, inputResponses: { step2: { action: 'accept', content: { color: 'blue' } } } })).json.result
  t.same(r3.content, [{ type: 'text', text: 'Multi-round complete for Alice who likes blue' }])

  const many = (await call(mcpUrl, 'test_input_required_result_multiple_inputs', {}, { capabilities: { elicitation: {}, sampling: {}, roots: {} } })).json.result
  t.same(Object.fromEntries(Object.entries(many.inputRequests).map(([k, v]) => [k, (v as { method: string }).method])), { user_name: 'elicitation/create', greeting: 'sampling/createMessage', client_roots: 'roots/list' })
  const answered = await call(mcpUrl, 'test_input_required_result_multiple_inputs', {
    requestState: many.requestState,
    inputResponses: { user_name: alice, greeting: { role: 'assistant', content: { type: 'text', text: 'Hello there!' }, model: 'test-model', stopReason: 'endTurn' }, client_roots: { roots: [{ uri: 'file:///test/root', name: 'Test Root' }] } },
  }, { capabilities: { elicitation: {}, sampling: {}, roots: {} } })
  t.same(answered.json.result.content, [{ type: 'text', text: 'Name: Alice; Greeting: Hello there!; Roots: 1' }])

  const onlySampling = (await call(mcpUrl, 'test_input_required_result_capabilities', {}, { capabilities: { sampling: {} } })).json.result
  t.same(Object.keys(onlySampling.inputRequests), ['sample_input'], 'only what the request declared is asked')

  const prompt = (await stateless(mcpUrl, 'prompts/get', { name: 'test_input_required_result_prompt' }, { capabilities: { elicitation: {} } })).json.result
  t.equal(prompt.resultType, 'input_required')
  t.same(Object.keys(prompt.inputRequests), ['user_context'])
  const rendered = await stateless(mcpUrl, 'prompts/get', { name: 'test_input_required_result_prompt', requestState: prompt.requestState, inputResponses: { user_context: { action: 'accept', content: { context: 'test context' } } } }, { capabilities: { elicitation: {} } })
  t.same(rendered.json.result.messages, [{ role: 'user', content: { type: 'text', text: 'Prompt with context: test context' } }])

  const listed = await stateless(mcpUrl, 'tools/list')
  t.equal(listed.json.result.resultType, 'complete', 'tools/list never asks')
})

t.test('2026-07-28: the trigger tools change the lists for real, and listen streams hear it', async (t) => {
  const { server, mcpUrl } = await startProfile(t)
  const live = await modernLive(mcpUrl, '', 'subscriptions/listen', { notifications: { toolsListChanged: true, promptsListChanged: true } }, { id: 'listen-1', headers: { authorization: undefined } })
  t.teardown(() => live.close())
  await live.waitFor(() => messagesOf(live).length >= 1, 3000, 'the acknowledgement')
  t.match(messagesOf(live)[0], { method: 'notifications/subscriptions/acknowledged', params: { notifications: { toolsListChanged: true, promptsListChanged: true } } })

  const added = await call(mcpUrl, 'test_trigger_tool_change')
  t.same(added.json.result.content, [{ type: 'text', text: 'Tool list changed: test_dynamic_tool added' }])
  await live.waitFor(() => messagesOf(live).some((m) => m.method === 'notifications/tools/list_changed'), 3000, 'tools/list_changed')
  t.equal(messagesOf(live).find((m) => m.method === 'notifications/tools/list_changed').params._meta[SUBSCRIPTION_ID_KEY], 'listen-1')
  const names = (await stateless(mcpUrl, 'tools/list')).json.result.tools.map((x: { name: string }) => x.name)
  t.same(names, [...FIXTURE_TOOLS, 'test_dynamic_tool'], 'the tool is served')
  t.same((await call(mcpUrl, 'test_trigger_tool_change')).json.result.content[0].text, 'Tool list changed: test_dynamic_tool removed')
  t.notOk(server.app.tools.get('test_dynamic_tool'), 'and no longer')

  await call(mcpUrl, 'test_trigger_prompt_change')
  await live.waitFor(() => messagesOf(live).some((m) => m.method === 'notifications/prompts/list_changed'), 3000, 'prompts/list_changed')
  t.same((await stateless(mcpUrl, 'prompts/list')).json.result.prompts.map((p: { name: string }) => p.name), [...FIXTURE_PROMPTS, 'test_dynamic_prompt'])
})

t.test('2026-07-28: custom header, tasks fixtures', async (t) => {
  const { mcpUrl } = await startProfile(t)
  const withHeader = await call(mcpUrl, 'test_custom_header', { arguments: { value: 'Hello' } }, { headers: { 'mcp-param-value': '=?base64?SGVsbG8=?=' } })
  t.same(withHeader.json.result.content, [{ type: 'text', text: 'Header matched: Hello' }], 'the base64 form of the header matches')
  const without = await call(mcpUrl, 'test_custom_header', { arguments: { value: 'test-value' } })
  t.equal(without.status, 400, 'a missing Mcp-Param-Value is refused')
  t.equal(without.json.error.code, -32020)

  t.same((await call(mcpUrl, 'greet', { arguments: { name: 'World' }, task: { ttl: 60000 } }, { capabilities: { extensions: { [TASKS_EXTENSION]: {} } } })).json.result.content, [{ type: 'text', text: 'Hello, World!' }], 'greet never becomes a task')
  const refused = await call(mcpUrl, 'failing_job', {}, { id: 9, capabilities: {} })
  t.equal(refused.status, 400, 'failing_job without the tasks extension')
  t.equal(refused.json.error.code, -32021)
  t.same(refused.json.error.data.requiredCapabilities, { extensions: { [TASKS_EXTENSION]: {} } })

  const tasks = { capabilities: { extensions: { [TASKS_EXTENSION]: {} } } }
  const created = answerOf(await call(mcpUrl, 'slow_compute', { arguments: { seconds: 0.2, label: 'quick' } }, tasks)).result
  t.match(created, { resultType: 'task', status: 'working' })
  const failing = answerOf(await call(mcpUrl, 'failing_job', {}, tasks)).result
  t.equal(failing.resultType, 'task')
  /** The task once it is no longer working (polled, bounded). */
  const settled = async (taskId: string): Promise<any> => {
    for (const deadline = Date.now() + 5000; Date.now() < deadline; await sleep(50)) {
      const got = (await stateless(mcpUrl, 'tasks/get', { taskId }, tasks)).json.result
      if (got.status !== 'working') return got
    }
    throw new Error(`task ${taskId} still working after 5 s`)
  }
  const done = await settled(created.taskId)
  t.match(done, { status: 'completed', result: { content: [{ type: 'text', text: 'quick: computed for 0.2 s' }], isError: false } })
  const failed = await settled(failing.taskId)
  t.match(failed, { status: 'completed', result: { isError: true } }, 'a tool error completes the task with isError')
  const crashing = answerOf(await call(mcpUrl, 'protocol_error_job', {}, tasks)).result
  t.equal(crashing.resultType, 'task')
  const crashed = await settled(crashing.taskId)
  t.match(crashed, { status: 'failed', error: { code: -32603, message: String, data: { code: 'INTERNAL_ERROR' } } }, 'a crash of the work fails the task with the JSON-RPC error')
  t.notOk('result' in crashed, 'a failed task has no result')
  t.notMatch(JSON.stringify(crashed.error), /crashed, as it always does/, 'the crash message stays in the log')

  const long = answerOf(await call(mcpUrl, 'slow_compute', { arguments: { seconds: 60 } }, tasks)).result
  const ack = (await stateless(mcpUrl, 'tasks/cancel', { taskId: long.taskId }, tasks)).json.result
  t.same(Object.keys(ack).sort(), ['_meta', 'resultType'], 'tasks/cancel is acknowledged with an empty result')
  t.equal(ack.resultType, 'complete')
  t.match(await settled(long.taskId), { status: 'cancelled' }, 'and stops the work')
})


t.test('2026-07-28: tasks that ask (input_required, tasks/update, partial answers, cancellation, asking before the task)', async (t) => {
  const { mcpUrl } = await startProfile(t)
  const tasks = { capabilities: { elicitation: {}, extensions: { [TASKS_EXTENSION]: {} } } }
  const get = async (taskId: string) => (await stateless(mcpUrl, 'tasks/get', { taskId }, tasks)).json.result
  const update = async (taskId: string, inputResponses: Record<string, unknown>) => (await stateless(mcpUrl, 'tasks/update', { taskId, inputResponses }, tasks)).json.result
  /** The task once its status is one of `statuses` (polled, bounded). */
  const reached = async (taskId: string, statuses: string[]): Promise<any> => {
    for (const deadline = Date.now() + 5000; Date.now() < deadline; await sleep(30)) {
      const got = await get(taskId)
      if (statuses.includes(got.status)) return got
    }
    throw new Error(`task ${taskId} not ${statuses.join(' or ')} after 5 s`)
  }

  const deleting = answerOf(await call(mcpUrl, 'confirm_delete', { arguments: { filename: 'a.txt' } }, tasks)).result
  t.equal(deleting.resultType, 'task')
  t.notOk('inputRequests' in deleting, 'the handle carries no input requests')
  const asking = await reached(deleting.taskId, ['input_required'])
  const key = Object.keys(asking.inputRequests)[0] as string
  t.equal(Object.keys(asking.inputRequests).length, 1, 'one input request')
  t.match(asking.inputRequests[key], { method: 'elicitation/create', params: { message: 'Delete a.txt?' } })
  t.equal((await update(deleting.taskId, { 'unknown-key': { ignored: true } })).resultType, 'complete', 'unknown keys are acknowledged and ignored')
  t.equal((await get(deleting.taskId)).status, 'input_required', 'still waiting')
  const badAnswer = await stateless(mcpUrl, 'tasks/update', { taskId: deleting.taskId, inputResponses: { [key]: { action: 'maybe' } } }, tasks)
  t.equal(badAnswer.json.error?.code, -32602, 'an answer that does not fit its request is refused')
  const ack = await update(deleting.taskId, { [key]: { action: 'accept', content: { confirm: true } } })
  t.equal(ack.resultType, 'complete')
  for (const k of ['taskId', 'status', 'inputRequests']) t.notOk(k in ack, `the ack has no ${k}`)
  t.match(await reached(deleting.taskId, ['completed', 'failed', 'cancelled']), { status: 'completed', result: { content: [{ type: 'text', text: 'Deleted a.txt' }] } }, 'the task resumed where it asked')

  const multi = answerOf(await call(mcpUrl, 'multi_input', {}, tasks)).result
  const both = await reached(multi.taskId, ['input_required'])
  const keys = Object.keys(both.inputRequests)
  t.equal(keys.length, 2, 'two requests pending at once')
  await update(multi.taskId, { [keys[0]!]: { action: 'accept', content: { name: 'Ada', confirm: true } } })
  const partly = await get(multi.taskId)
  t.equal(partly.status, 'input_required', 'a partial answer keeps the task waiting')
  t.same(Object.keys(partly.inputRequests), [keys[1]], 'only the unanswered request remains')
  await update(multi.taskId, { [keys[1]!]: { action: 'accept', content: { name: 'Ada', confirm: true } } })
  t.match(await reached(multi.taskId, ['completed']), { result: { content: [{ text: 'Name: Ada; confirmed: true' }] } })

  const cancelled = answerOf(await call(mcpUrl, 'confirm_delete', { arguments: { filename: 'b.txt' } }, tasks)).result
  await reached(cancelled.taskId, ['input_required'])
  await stateless(mcpUrl, 'tasks/cancel', { taskId: cancelled.taskId }, tasks)
  const stopped = await reached(cancelled.taskId, ['completed', 'failed', 'cancelled'])
  t.equal(stopped.status, 'cancelled', 'a task waiting for answers is cancelled')
  t.notOk('inputRequests' in stopped)

  const round1 = answerOf(await call(mcpUrl, 'test_tool_with_task', {}, tasks)).result
  t.equal(round1.resultType, 'input_required', 'the question before the task is an input_required round of the call')
  t.notOk('taskId' in round1)
  const round2 = answerOf(await call(mcpUrl, 'test_tool_with_task', { inputResponses: { user_name: { action: 'accept', content: { name: 'Alice' } } }, requestState: round1.requestState }, tasks)).result
  t.equal(round2.resultType, 'task', 'answered, the call becomes a task')
  t.notOk('requestState' in round2)
  t.match(await reached(round2.taskId, ['completed']), { result: { content: [{ text: /Hello, Alice!/ }] } })
})

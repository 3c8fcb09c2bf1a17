/**
 * Interoperability of confirmations: the official MCP TypeScript SDK client declares the elicitation capability and
 * answers elicitation/create with its own request handler, over Streamable HTTP on a real socket.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import {
  CallToolResultSchema,
  ElicitRequestSchema,
  LoggingMessageNotificationSchema,
  type ElicitRequest,
  type ElicitResult,
  type Progress,
} from '@modelcontextprotocol/sdk/types.js'
import t, { type Test } from 'tap'
import { builtinTools } from '../../src/index.js'
import { ENV_KEY, EXAMPLE, seedApp } from '../helpers/modern-runs.js'
import { defaultOrganization } from '../helpers/seed.js'
import { startServer, type TestServer } from '../helpers/server.js'


async function serve(t: Test): Promise<TestServer> {
  return startServer(t, { tools: builtinTools, config: { envKey: ENV_KEY, pipelines: { default: { argv: [process.execPath, EXAMPLE] } }, heartbeatMs: 60_000 } })
}


/** An SDK client declaring `elicitation: {}` (form), answering every elicitation/create with `decide`. */
function sdkClient(server: TestServer, decide: (request: ElicitRequest) => ElicitResult) {
  const transport = new StreamableHTTPClientTransport(new URL(server.mcpUrl), {
    requestInit: { headers: { Authorization: 'Bearer ' + server.apiKey } },
    reconnectionOptions: { maxReconnectionDelay: 100, initialReconnectionDelay: 10, reconnectionDelayGrowFactor: 1, maxRetries: 0 },
  })
  const client = new Client({ name: 'sdk-elicitation-test', version: '1.0.0' }, { capabilities: { elicitation: {} } })
  const asked: ElicitRequest[] = []
  client.setRequestHandler(ElicitRequestSchema, (request) => {
    asked.push(request)
    return decide(request)
  })
  const logs: Array<{ level: string; logger?: string; data: any }> = []
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logs.push(n.params))
  const errors: Error[] = []
  client.onerror = (err) => void errors.push(err)
  return { client, transport, asked, logs, errors }
}

/** Errors other than the ended standalone GET stream after DELETE (see sdk-client.test.ts). */
function unexpected(errors: Error[]): string[] {
  return errors.map(String).filter((e) => !/Maximum reconnection attempts \(0\) exceeded/.test(e))
}

/** The service error a failed tool result carries in its text content. */
function toolError(result: Record<string, unknown>): { code: string; message: string } {
  const content = result.content as Array<{ type: string; text: string }>
  return JSON.parse(content[0]!.text)
}

t.test('SDK client accepting: the app is deleted, and a deployment streams progress and log lines to success', async (t) => {
  const server = await serve(t)
  const org = await defaultOrganization(server)
  const doomed = await seedApp(server, 'doomed')
  const web = await seedApp(server, 'web', { PIPELINE_STEP_MS: '5' })
  const { client, transport, asked, logs, errors } = sdkClient(server, () => ({ action: 'accept', content: { confirm: true } }))
  t.teardown(() => client.close())
  await client.connect(transport)

  const deleted = await client.callTool({ name: 'service_apps_delete', arguments: { app_id: doomed.id } })
  t.equal(deleted.isError, false, 'the delete ran')
  t.strictSame(deleted.structuredContent, { deleted: true, app_id: doomed.id, name: 'doomed', deployments_deleted: 0 })
  t.equal(await server.app.repos.apps.byId(org.id, doomed.id), undefined, 'the app is gone')
  t.equal(asked.length, 1, 'the handler was asked once')
  t.equal(asked[0]!.params.mode, 'form')
  t.equal(asked[0]!.params.message, `Delete app doomed (${doomed.id}) and its 0 deployments?`)
  const schema = (asked[0]!.params as { requestedSchema: { type: string; properties: Record<string, { type: string }>; required?: string[] } }).requestedSchema
  t.equal(schema.type, 'object')
  t.equal(schema.properties.confirm?.type, 'boolean')
  t.strictSame(schema.required, ['confirm'])

  const progress: Progress[] = []
  const deployed = await client.callTool({ name: 'service_deployments_create', arguments: { app_id: web.id } }, CallToolResultSchema, {
    onprogress: (p) => void progress.push(p),
  })
  t.equal(asked.length, 2, 'the deployment was confirmed too')
  t.equal(asked[1]!.params.message, `Deploy app web (${web.id}) with pipeline default?`)
  t.equal(deployed.isError, false, `the deployment succeeded${deployed.isError ? ': ' + JSON.stringify(deployed.content) : ''}`)
  const dep = (deployed.structuredContent as { deployment: { id: string; status: string; app_id: string; exit_code: number } }).deployment
  t.match(dep, { app_id: web.id, status: 'succeeded', exit_code: 0 })
  t.equal((await server.app.repos.deployments.byId(org.id, dep.id))?.status, 'succeeded', 'stored as succeeded')

  const lines = logs.filter((l) => l.logger === 'deployment').map((l) => l.data)
  t.ok(lines.length >= 10, `log lines arrived (${lines.length})`)
  t.ok(lines.every((l) => l.deployment_id === dep.id), 'each names the deployment')
  t.strictSame(lines.map((l) => l.seq), lines.map((_, i) => i), 'in order, without a gap')
  t.ok(lines.some((l) => l.line === 'web is live'), 'the pipeline output is there')
  t.match(lines.at(-1)?.line, /^succeeded/, 'the last line is the outcome')

  t.ok(progress.length > 0, `progress notifications arrived (${progress.length})`)
  t.ok(progress.every((p, i) => i === 0 || p.progress > progress[i - 1]!.progress), 'progress strictly increases')
  t.equal(progress.length, lines.length, 'one progress notification per line')
  t.strictSame(progress.map((p) => p.message), lines.map((l) => l.line), 'with the line as message')

  const audit = (await server.app.repos.audit.page(org.id, 50)).items
  t.ok(audit.some((e) => e.action === 'service_apps_delete.confirmation' && e.outcome === 'confirmed'), 'the delete confirmation is audited')
  t.ok(audit.some((e) => e.action === 'service_deployments_create.confirmation' && e.outcome === 'confirmed'), 'the deploy confirmation is audited')

  t.strictSame(errors.map(String), [], 'the transport reported no errors')
  await transport.terminateSession()
  await client.close()
  t.strictSame(unexpected(errors), [])
})

t.test('SDK client declining: ELICITATION_DENIED, the app remains, nothing is deployed', async (t) => {
  const server = await serve(t)
  const org = await defaultOrganization(server)
  const keeper = await seedApp(server, 'keeper', { PIPELINE_STEP_MS: '5' })
  const { client, transport, asked, logs, errors } = sdkClient(server, () => ({ action: 'decline' }))
  t.teardown(() => client.close())
  await client.connect(transport)

  const deleted = await client.callTool({ name: 'service_apps_delete', arguments: { app_id: keeper.id } })
  t.equal(deleted.isError, true, 'a tool failure')
  t.equal(toolError(deleted).code, 'ELICITATION_DENIED')
  t.equal(deleted.structuredContent, undefined, 'a failure carries no structuredContent')
  t.ok(await server.app.repos.apps.byId(org.id, keeper.id), 'the app remains')

  const progress: Progress[] = []
  const deployed = await client.callTool({ name: 'service_deployments_create', arguments: { app_id: keeper.id } }, CallToolResultSchema, {
    onprogress: (p) => void progress.push(p),
  })
  t.equal(deployed.isError, true)
  t.equal(toolError(deployed).code, 'ELICITATION_DENIED')
  t.equal(asked.length, 2, 'both calls asked')
  t.equal((await server.app.repos.deployments.list(org.id, { appId: keeper.id, limit: 10, offset: 0 })).total, 0, 'no deployment was created')
  t.strictSame(progress, [], 'no progress')
  t.strictSame(logs.filter((l) => l.logger === 'deployment'), [], 'no deployment log lines')

  const outcomes = (await server.app.repos.audit.page(org.id, 50)).items.filter((e) => e.action.endsWith('.confirmation')).map((e) => e.outcome)
  t.strictSame(outcomes, ['declined', 'declined'], 'both declines are audited')

  t.strictSame(errors.map(String), [], 'the transport reported no errors')
  await transport.terminateSession()
  await client.close()
  t.strictSame(unexpected(errors), [])
})

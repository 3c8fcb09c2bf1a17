/**
 * Interoperability: the official MCP TypeScript SDK client talks to the server over Streamable HTTP on a real socket.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js'
import t from 'tap'
import { builtinTools, defineTool } from '../../src/index.js'
import { startServer, type TestServer } from '../helpers/server.js'
import { visibleCatalog } from '../helpers/catalog.js'

function sdkClient(server: TestServer, key = server.apiKey) {
  const transport = new StreamableHTTPClientTransport(new URL(server.mcpUrl), {
    requestInit: { headers: { Authorization: 'Bearer ' + key } },
    // Fail fast rather than retrying the standalone GET stream in the background.
    reconnectionOptions: { maxReconnectionDelay: 100, initialReconnectionDelay: 10, reconnectionDelayGrowFactor: 1, maxRetries: 0 },
  })
  const client = new Client({ name: 'sdk-interop-test', version: '1.0.0' })
  const errors: Error[] = []
  client.onerror = (err) => void errors.push(err)
  return { client, transport, errors }
}

/**
 * Errors other than the one expected after DELETE: the server ends the session's standalone GET stream, which the SDK
 * treats as resumable and (with maxRetries 0) reports as "Maximum reconnection attempts (0) exceeded".
 */
function afterEnd(errors: Error[]): string[] {
  return errors.map(String).filter((e) => !/Maximum reconnection attempts \(0\) exceeded/.test(e))
}

/** Text content of a tool result, parsed as JSON. */
function textJson(result: unknown): unknown {
  const content = (result as { content: Array<{ type: string; text?: string }> }).content
  const text = content.find((c) => c.type === 'text')?.text
  if (text === undefined) throw new Error('no text content in the tool result')
  return JSON.parse(text)
}

t.test('SDK client: initialize, list, call, terminate', async (t) => {
  const server = await startServer(t)
  const { client, transport, errors } = sdkClient(server)
  t.teardown(() => client.close())

  await client.connect(transport)
  t.equal(transport.protocolVersion, LATEST_PROTOCOL_VERSION, 'negotiated the latest revision the SDK knows')
  t.type(transport.sessionId, 'string', 'the server issued a session id')
  t.ok(transport.sessionId!.length > 0)
  const info = client.getServerVersion()
  t.equal(info?.name, 'service-mcp')
  t.equal(info?.version, '0.1.0')
  t.ok(client.getServerCapabilities()?.tools, 'tools capability advertised')
  t.match(client.getInstructions(), /service_whoami/)

  const { tools } = await client.listTools()
  t.same(tools.map((x) => x.name), visibleCatalog('owner'))
  for (const tool of tools) {
    t.equal(tool.inputSchema.type, 'object', `${tool.name} has an object inputSchema`)
    t.ok(tool.outputSchema, `${tool.name} has an outputSchema`)
  }

  const org = await server.app.repos.organizations.bySlug('default')
  t.ok(org, 'the default organization exists')
  const a = await server.app.repos.apps.create({ organizationId: org!.id, name: 'Alpha' })
  const b = await server.app.repos.apps.create({ organizationId: org!.id, name: 'Beta' })

  const list = await client.callTool({ name: 'service_apps_list', arguments: {} })
  t.equal(list.isError, false)
  const structured = list.structuredContent as { apps: Array<{ id: string; name: string }>; next_cursor: string | null }
  // Created in the same millisecond: ids stay in creation order (newId's sequence), so the list is oldest first.
  t.same(structured.apps.map((x) => x.id), [a.id, b.id], 'both apps, oldest first')
  t.same(structured.apps.map((x) => x.name), ['Alpha', 'Beta'])
  t.equal(structured.next_cursor, null)
  t.same(textJson(list), structured, 'text content carries the same object')

  const who = await client.callTool({ name: 'service_whoami', arguments: {} })
  t.equal(who.isError, false)
  const me = who.structuredContent as { user: { email: string }; organization: { slug: string }; role: string; credential: { kind: string } }
  t.equal(me.user.email, 'owner@example.com')
  t.equal(me.organization.slug, 'default')
  t.equal(me.role, 'owner')
  t.equal(me.credential.kind, 'api_key')
  t.same(textJson(who), me)

  t.same(await client.ping(), {}, 'ping answers an empty result')

  t.same(errors.map(String), [], 'the transport reported no errors while the session was open')
  const sessionId = transport.sessionId!
  await transport.terminateSession()
  t.equal(transport.sessionId, undefined, 'the SDK forgot the session after DELETE')
  t.notOk(await server.app.sessions.get(sessionId), 'the server ended the session')
  await client.close()
  t.same(afterEnd(errors), [], 'closing reported nothing beyond the ended standalone stream')
})

t.test('SDK client: an invalid key fails connect with 401', async (t) => {
  const server = await startServer(t)
  const { client, transport } = sdkClient(server, 'service_mcp_' + 'X'.repeat(43))
  t.teardown(() => client.close())
  const err = await client.connect(transport).then(() => null, (e: unknown) => e)
  t.ok(err, 'connect rejected')
  t.type(err, StreamableHTTPError)
  t.equal((err as StreamableHTTPError).code, 401)
  t.equal(transport.sessionId, undefined, 'no session was created')
  t.equal(server.app.sessions.size, 0)
})

t.test('SDK client: a custom tool added to the built-in catalog', async (t) => {
  const echo = defineTool<{ text: string }, { text: string; length: number }>({
    name: 'team_echo',
    title: 'Echo',
    description: 'Returns the text it was given.',
    inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'], additionalProperties: false },
    scope: 'mcp:read',
    role: 'viewer',
    handler: (args) => ({ text: args.text, length: args.text.length }),
  })
  const server = await startServer(t, { tools: [...builtinTools, echo] })
  const { client, transport, errors } = sdkClient(server)
  t.teardown(() => client.close())
  await client.connect(transport)

  const { tools } = await client.listTools()
  t.same(tools.map((x) => x.name), visibleCatalog('owner', undefined, ['team_echo']))
  const listed = tools.find((x) => x.name === 'team_echo')!
  t.same(listed.inputSchema, { type: 'object', properties: { text: { type: 'string' } }, required: ['text'], additionalProperties: false })
  t.equal(listed.outputSchema, undefined, 'no outputSchema declared')

  const result = await client.callTool({ name: 'team_echo', arguments: { text: 'héllo' } })
  t.equal(result.isError, false)
  t.same(textJson(result), { text: 'héllo', length: 5 })
  t.equal(result.structuredContent, undefined, 'no structuredContent without an outputSchema')

  const bad = await client.callTool({ name: 'team_echo', arguments: { text: 1 } })
  t.equal(bad.isError, true, 'invalid arguments are a tool error in 2025-11-25')

  t.same(errors.map(String), [], 'the transport reported no errors while the session was open')
  await transport.terminateSession()
  await client.close()
  t.same(afterEnd(errors), [], 'closing reported nothing beyond the ended standalone stream')
})

/**
 * URL-mode elicitation in both eras (docs/decisions/url-elicitation.md), through a tool that asks the person to open
 * a page: in a 2025-11-25 session an `elicitation/create` with `mode: "url"` and an `elicitationId` on the call's
 * stream, then `notifications/elicitation/complete`; on a stateless 2026-07-28 request an `input_required` result
 * with a URL-mode input request (no elicitationId) and the answer on the retry. Only clients that declared
 * `elicitation.url` are asked.
 */
import { Client, StreamableHTTPClientTransport, type ElicitRequest, type VersionNegotiationMode } from '@modelcontextprotocol/client'
import t, { type Test } from 'tap'
import { defineTool, text, toolResult } from '../../src/index.js'
import { answerRequest, openLiveCall, readToEnd } from '../helpers/confirm.js'
import { injectServer } from '../helpers/inject.js'
import { openSession, post } from '../helpers/mcp.js'
import { answerOf, modernCall } from '../helpers/modern.js'
import { startServer, type TestServer } from '../helpers/server.js'
import { assertNotification, assertServerRequest } from '../helpers/spec-schema.js'
import { messagesOf } from '../helpers/stream.js'

const PAGE = 'https://example.invalid/finish'
const ELICITATION_ID = 'el-7f3a'

/** Asks the person to open PAGE; says what they chose, and announces the completion when they accepted. */
function pageTool() {
  return defineTool({
    name: 'open_page',
    title: 'Open a page',
    description: 'Asks the person to open a page in their browser',
    inputSchema: { type: 'object', properties: {}, additionalProperties: false },
    scope: 'mcp:read',
    role: 'viewer',
    handler: async (_args, ctx) => {
      const answer = await ctx.elicitUrl({ message: 'Finish in your browser', url: PAGE, elicitationId: ELICITATION_ID })
      if (answer.action === 'accept') ctx.completeElicitation(ELICITATION_ID)
      return toolResult([text(`action=${answer.action} content=${JSON.stringify(answer.content ?? null)}`)])
    },
  })
}

const URL_MODE = { elicitation: { url: {} } }
const isUrlElicitation = (m: any) => m.method === 'elicitation/create' && 'id' in m
const isCompletion = (m: any) => m.method === 'notifications/elicitation/complete'

async function sessionCall(t: Test, capabilities: Record<string, unknown>, answer?: Record<string, unknown>) {
  const server = await startServer(t, { tools: [pageTool()] })
  const s = await openSession(server.mcpUrl, server.apiKey, '2025-11-25', capabilities)
  await post(server.mcpUrl, { jsonrpc: '2.0', method: 'notifications/initialized' }, s.headers)
  const live = await openLiveCall(t, server.mcpUrl, s.headers, { jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'open_page', arguments: {} } })
  let request: any
  if (answer) {
    await live.waitFor(() => messagesOf(live).some(isUrlElicitation), 5000, 'elicitation/create')
    request = messagesOf(live).find(isUrlElicitation)
    const reply = await answerRequest(server.mcpUrl, s.headers, request.id, answer)
    t.equal(reply.status, 202, 'the answer is taken')
  }
  const { messages, responses } = await readToEnd(live, 9)
  // A call that asks nothing may answer with plain JSON rather than a stream.
  const response = responses[0] ?? (messages.length === 0 ? JSON.parse(live.text()) : undefined)
  return { request, messages, response }
}

t.test('2025-11-25 session: mode url with url and elicitationId on the call\'s stream; accept → completion notification', async (t) => {
  const { request, messages, response } = await sessionCall(t, URL_MODE, { action: 'accept', content: { smuggled: 'x' } })
  t.strictSame(request.params, { mode: 'url', message: 'Finish in your browser', url: PAGE, elicitationId: ELICITATION_ID })
  assertServerRequest(t, '2025-11-25', request, { what: 'the URL-mode elicitation/create' })
  const completion = messages.find(isCompletion)
  t.strictSame(completion?.params, { elicitationId: ELICITATION_ID }, 'notifications/elicitation/complete names the elicitation')
  assertNotification(t, '2025-11-25', completion)
  t.ok(messages.indexOf(completion) < messages.indexOf(response), 'the completion comes before the result')
  t.equal(response.result.content[0].text, 'action=accept content=null', 'the handler sees the choice only: content of a URL answer is dropped')
})

for (const action of ['decline', 'cancel'] as const) {
  t.test(`2025-11-25 session: ${action} reaches the handler, no completion is sent`, async (t) => {
    const { messages, response } = await sessionCall(t, URL_MODE, { action })
    t.equal(response.result.content[0].text, `action=${action} content=null`)
    t.notOk(messages.some(isCompletion), 'no notifications/elicitation/complete')
  })
}

t.test('2025-11-25 session that declared form only: CAPABILITY_REQUIRED naming elicitation.url, nothing asked', async (t) => {
  const { messages, response } = await sessionCall(t, { elicitation: {} })
  t.notOk(messages.some(isUrlElicitation), 'no elicitation/create')
  t.equal(response.result.isError, true)
  const failure = JSON.parse(response.result.content[0].text)
  t.equal(failure.code, 'CAPABILITY_REQUIRED')
  t.match(failure.message, /elicitation\.url/)
})

t.test('2026-07-28: input_required with a URL-mode input request (no elicitationId); the retry carries the answer', async (t) => {
  const server = await injectServer(t, { tools: [pageTool()] })
  const first = answerOf(await modernCall(server.mcpUrl, server.apiKey, 'open_page', {}, { capabilities: URL_MODE }))
  t.equal(first.result.resultType, 'input_required')
  t.strictSame(first.result.inputRequests, {
    elicit: { method: 'elicitation/create', params: { mode: 'url', message: 'Finish in your browser', url: PAGE } },
  }, 'the revision\'s URL mode: mode, message, url; no elicitationId')
  for (const action of ['accept', 'decline', 'cancel'] as const) {
    const retry = answerOf(await modernCall(server.mcpUrl, server.apiKey, 'open_page', {}, {
      id: 2,
      capabilities: URL_MODE,
      extra: { requestState: first.result.requestState, inputResponses: { elicit: { action } } },
    }), 2)
    t.equal(retry.result.resultType, 'complete', `${action}: complete`)
    t.equal(retry.result.content[0].text, `action=${action} content=null`, `${action}: the handler sees the choice`)
  }
})

t.test('2026-07-28 request that declared form only: -32021 requiring elicitation.url', async (t) => {
  const server = await injectServer(t, { tools: [pageTool()] })
  const reply = await modernCall(server.mcpUrl, server.apiKey, 'open_page', {}, { capabilities: { elicitation: {} } })
  t.equal(reply.status, 400)
  const error = answerOf(reply).error
  t.equal(error.code, -32021)
  t.strictSame(error.data.requiredCapabilities, { elicitation: { url: {} } })
  t.match(error.message, /elicitation\.url/)
})

/** The SDK v2 client, declaring URL mode, answering with `action` and recording completion notifications. */
function sdkClient(t: Test, server: TestServer, mode: VersionNegotiationMode, action: 'accept' | 'decline') {
  const transport = new StreamableHTTPClientTransport(new URL(server.mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${server.apiKey}` } } })
  const client = new Client({ name: 'sdk-v2-url', version: '2.0.0' }, { capabilities: { elicitation: { url: {} } }, versionNegotiation: { mode } })
  const asked: ElicitRequest[] = []
  client.setRequestHandler('elicitation/create', async (request) => {
    asked.push(request)
    return { action }
  })
  const completed: string[] = []
  client.setNotificationHandler('notifications/elicitation/complete', (n) => void completed.push(n.params.elicitationId))
  t.teardown(() => client.close())
  return { client, transport, asked, completed }
}

t.test('SDK v2 client declaring elicitation.url: asked in URL mode in both eras, its answer reaches the handler', async (t) => {
  const server = await startServer(t, { tools: [pageTool()] })
  for (const [mode, action] of [['legacy', 'accept'], [{ pin: '2026-07-28' }, 'accept'], [{ pin: '2026-07-28' }, 'decline']] as const) {
    const what = typeof mode === 'string' ? mode : mode.pin
    const { client, transport, asked, completed } = sdkClient(t, server, mode, action)
    await client.connect(transport)
    const result = await client.callTool({ name: 'open_page', arguments: {} })
    t.equal((result.content as Array<{ text: string }>)[0]!.text, `action=${action} content=null`, `${what} ${action}: the handler got the answer`)
    t.equal(asked.length, 1, `${what}: asked once`)
    t.match(asked[0]!.params, { mode: 'url', url: PAGE, message: 'Finish in your browser' }, `${what}: URL mode`)
    if (typeof mode === 'string') t.strictSame(completed, [ELICITATION_ID], 'the session heard the completion')
    else t.notOk('elicitationId' in asked[0]!.params, '2026-07-28: no elicitationId')
  }
})

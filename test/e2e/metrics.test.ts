import t, { type Test } from 'tap'
import { request } from 'undici'
import { builtinTools } from '../../src/index.js'
import { elicitingSession, elicitationOn, answerRequest, decision, openLiveCall } from '../helpers/confirm.js'
import { callTool, openSession, post } from '../helpers/mcp.js'
import { modernCall, modernLive } from '../helpers/modern.js'
import { ENV_KEY, seedApp } from '../helpers/modern-runs.js'
import { createKey, ownerMembership } from '../helpers/seed.js'
import { OWNER_EMAIL, startServer, type TestServer } from '../helpers/server.js'
import { until } from '../helpers/stream.js'
import { DISTINCTIVE, echoNoteTool } from '../helpers/echo-note.js'

/**
 * SERVICE_METRICS: GET /metrics after real calls over real sockets (a legacy session, stateless requests, tool calls,
 * a refused call, a rate-limit refusal), the gauges asked of their owners, the token, and nothing at all when off.
 */

/** A well-formed app id that names no app. */
const DISTINCTIVE_ID = 'app_zebraquartz773100000000000'
const ECHO = echoNoteTool({ rateLimitPerMinute: 2 })
/** A pipeline that runs until it is stopped. */
const ENDLESS = { argv: [process.execPath, '-e', "console.log('started'); setInterval(() => {}, 1000)"] }

interface Sample {
  name: string
  labels: Record<string, string>
  value: number
}

function parse(text: string): Sample[] {
  const out: Sample[] = []
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (!m) continue
    const labels: Record<string, string> = {}
    for (const l of (m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)) labels[l[1]!] = l[2]!
    out.push({ name: m[1]!, labels, value: Number(m[3]) })
  }
  return out
}

/** The value of the sample with exactly these labels (undefined when there is none). */
function valueOf(samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const want = JSON.stringify(Object.entries(labels).sort())
  return samples.find((s) => s.name === name && JSON.stringify(Object.entries(s.labels).sort()) === want)?.value
}

async function scrape(server: TestServer, token?: string): Promise<{ status: number; headers: Record<string, unknown>; text: string; samples: Sample[] }> {
  const res = await request(`${server.url}/metrics`, { headers: token === undefined ? {} : { authorization: `Bearer ${token}` } })
  const text = await res.body.text()
  return { status: res.statusCode, headers: res.headers, text, samples: parse(text) }
}

function serve(t: Test, config: Record<string, unknown> = {}) {
  return startServer(t, {
    tools: [...builtinTools, ECHO],
    config: { metrics: true, rateLimitToolFactor: 1, envKey: ENV_KEY, pipelines: { endless: ENDLESS }, pipelineGraceMs: 200, heartbeatMs: 60_000, ...config },
  })
}

t.test('off by default: no /metrics route, no observer on the dispatcher', async (t) => {
  const server = await startServer(t)
  const res = await scrape(server)
  t.equal(res.status, 404)
  t.equal(JSON.parse(res.text).error.code, 'NOT_FOUND')
  t.equal(server.app.rpc.observer, null, 'the front-ends observe nothing')
})

t.test('SERVICE_METRICS_TOKEN: 401 in the catalog shape without it or with another, 200 with it', async (t) => {
  const server = await serve(t, { metricsToken: 's3cret-scrape-token' })
  for (const token of [undefined, 'wrong', 's3cret-scrape-token-longer', '']) {
    const res = await scrape(server, token)
    t.equal(res.status, 401, `token ${JSON.stringify(token)}`)
    const body = JSON.parse(res.text)
    t.equal(body.error.code, 'METRICS_TOKEN_REQUIRED')
    t.match(body.error.message, /SERVICE_METRICS_TOKEN/)
    // The action names the credential /metrics takes: not an OAuth token (the catalog's INVALID_TOKEN said so).
    t.match(body.error.action, /^Send Authorization: Bearer <the value of SERVICE_METRICS_TOKEN>/)
    t.notMatch(body.error.action, /obtain a token through OAuth/)
    t.equal(res.headers['www-authenticate'], 'Bearer realm="metrics"')
    t.match(res.headers['x-request-id'], /^[0-9a-f-]{36}$/)
  }
  const ok = await scrape(server, 's3cret-scrape-token')
  t.equal(ok.status, 200)
  t.match(ok.headers['content-type'], /^text\/plain; version=0\.0\.4/)
  t.equal(valueOf(ok.samples, 'service_mcp_build_info', { version: String(ok.headers['x-service-mcp-version']) }), 1)
})

t.test('after real calls: requests by method, era and outcome; tool calls; refusals; HTTP latency; no argument values', async (t) => {
  const server = await serve(t)
  const before = await scrape(server)
  t.equal(before.status, 200)
  t.equal(valueOf(before.samples, 'mcp_sessions_open'), 0)

  // A legacy session: initialize, tools/list, a tool call with a distinctive argument, a tool error, an unknown method.
  const { headers } = await openSession(server.mcpUrl, server.apiKey, '2025-11-25')
  t.equal((await post(server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }, headers)).status, 200)
  const echoed = await post(server.mcpUrl, callTool('echo_note', { note: DISTINCTIVE }, 2), headers)
  t.equal(echoed.json?.result?.structuredContent?.length ?? JSON.parse(echoed.json?.result?.content?.[0]?.text ?? '{}').length, DISTINCTIVE.length)
  const missing = await post(server.mcpUrl, callTool('service_apps_get', { app_id: DISTINCTIVE_ID }, 3), headers)
  t.equal(missing.json?.result?.isError, true, 'a tool error')
  const unknown = await post(server.mcpUrl, { jsonrpc: '2.0', id: 4, method: `made/${DISTINCTIVE}`, params: {} }, headers)
  t.equal(unknown.json?.error?.code, -32601)
  // A tool that is not registered, named with the distinctive value.
  const unregistered = await post(server.mcpUrl, callTool(`tool_${DISTINCTIVE}`, {}, 5), headers)
  t.ok(unregistered.json?.error ?? unregistered.json?.result?.isError, 'an unknown tool is refused')

  // Stateless requests: a tool call, and a refused one (a read-only key calling a write tool: 403).
  t.equal((await modernCall(server.mcpUrl, server.apiKey, 'service_apps_list', {})).status, 200)
  const { key: readOnly } = await createKey(server, (await ownerMembership(server)).id, ['mcp:read'])
  const refused = await modernCall(server.mcpUrl, readOnly, 'service_apps_create', { name: DISTINCTIVE })
  t.equal(refused.status, 403)
  // The echo tool allows 2 calls per window: the stateless one is the second, the next is refused 429.
  t.equal((await modernCall(server.mcpUrl, server.apiKey, 'echo_note', { note: DISTINCTIVE })).status, 200)
  const limited = await modernCall(server.mcpUrl, server.apiKey, 'echo_note', { note: DISTINCTIVE })
  t.equal(limited.status, 429)

  const { samples, text } = await scrape(server)
  const requests = (labels: Record<string, string>) => valueOf(samples, 'mcp_requests_total', labels)
  t.equal(requests({ method: 'initialize', era: 'legacy', outcome: 'ok', code: '' }), 1)
  t.equal(requests({ method: 'tools/list', era: 'legacy', outcome: 'ok', code: '' }), 1)
  t.equal(requests({ method: 'tools/call', era: 'legacy', outcome: 'ok', code: '' }), 1)
  t.equal(requests({ method: 'tools/call', era: 'legacy', outcome: 'tool_error', code: 'RESOURCE_NOT_FOUND' }), 1)
  t.equal(requests({ method: 'other', era: 'legacy', outcome: 'error', code: 'METHOD_NOT_FOUND' }), 1)
  t.equal(requests({ method: 'tools/call', era: 'legacy', outcome: 'error', code: 'INVALID_PARAMS' }), 1, 'the unknown tool')
  t.equal(requests({ method: 'tools/call', era: 'modern', outcome: 'ok', code: '' }), 2)
  t.equal(requests({ method: 'tools/call', era: 'modern', outcome: 'error', code: 'INSUFFICIENT_SCOPE' }), 1)
  t.equal(requests({ method: 'tools/call', era: 'modern', outcome: 'error', code: 'RATE_LIMITED' }), 1)

  const tools = (labels: Record<string, string>) => valueOf(samples, 'mcp_tool_calls_total', labels)
  t.equal(tools({ tool: 'echo_note', outcome: 'ok', code: '' }), 2)
  t.equal(tools({ tool: 'echo_note', outcome: 'error', code: 'RATE_LIMITED' }), 1)
  t.equal(tools({ tool: 'service_apps_get', outcome: 'tool_error', code: 'RESOURCE_NOT_FOUND' }), 1)
  t.equal(tools({ tool: 'service_apps_list', outcome: 'ok', code: '' }), 1)
  t.equal(tools({ tool: 'service_apps_create', outcome: 'error', code: 'INSUFFICIENT_SCOPE' }), 1)
  t.equal(tools({ tool: 'other', outcome: 'error', code: 'INVALID_PARAMS' }), 1)
  t.equal(valueOf(samples, 'mcp_tool_call_duration_seconds_count', { tool: 'echo_note' }), 3)

  t.equal(valueOf(samples, 'mcp_rate_limit_refusals_total', { limiter: 'tool' }), 1)
  t.equal(valueOf(samples, 'mcp_request_duration_seconds_count', { method: 'tools/call', era: 'modern' }), 4)
  t.equal(valueOf(samples, 'mcp_request_duration_seconds_bucket', { method: 'tools/call', era: 'modern', le: '+Inf' }), 4)
  t.equal(valueOf(samples, 'mcp_sessions_open'), 1, 'the session is open')
  // POSTs to /mcp: initialize, notifications/initialized (202), five more in the session, two stateless ones; 403 and 429.
  t.equal(valueOf(samples, 'http_request_duration_seconds_count', { method: 'POST', route: '/mcp', status_class: '2xx' }), 9)
  t.equal(valueOf(samples, 'http_request_duration_seconds_count', { method: 'POST', route: '/mcp', status_class: '4xx' }), 2)
  t.equal(valueOf(samples, 'http_request_duration_seconds_count', { method: 'GET', route: '/metrics', status_class: '2xx' }), 1)
  t.ok(valueOf(samples, 'process_cpu_user_seconds_total') !== undefined, "Node's process metrics are there")
  t.ok(samples.some((s) => s.name === 'nodejs_eventloop_lag_seconds'), 'and the event-loop lag')

  for (const secret of [DISTINCTIVE, DISTINCTIVE_ID, server.apiKey, readOnly, headers['mcp-session-id']!, OWNER_EMAIL]) t.notOk(text.includes(secret), `${secret.slice(0, 16)}… is nowhere in the metrics`)
  const labelValues = new Set(samples.flatMap((s) => Object.values(s.labels)))
  t.notOk([...labelValues].some((v) => /^(app|dep|mem|org|usr)_/.test(v)), 'no ids as label values')

  // The session ends: the gauge follows its owner.
  const deleted = await request(server.mcpUrl, { method: 'DELETE', headers })
  t.equal(deleted.statusCode, 204)
  await deleted.body.dump()
  t.equal(valueOf((await scrape(server)).samples, 'mcp_sessions_open'), 0)
})

t.test('a refusal by the per-member limit at the door: counted by limiter, and as an HTTP 429, not as a JSON-RPC request', async (t) => {
  const server = await serve(t, { rateLimitApiKeyMember: 2 })
  for (let i = 0; i < 2; i++) t.equal((await modernCall(server.mcpUrl, server.apiKey, 'service_apps_list', {}, { id: i })).status, 200)
  t.equal((await modernCall(server.mcpUrl, server.apiKey, 'service_apps_list', {}, { id: 3 })).status, 429)
  const { samples } = await scrape(server)
  t.equal(valueOf(samples, 'mcp_rate_limit_refusals_total', { limiter: 'mcp_member_api_key' }), 1)
  t.equal(valueOf(samples, 'http_request_duration_seconds_count', { method: 'POST', route: '/mcp', status_class: '4xx' }), 1)
  t.equal(valueOf(samples, 'mcp_requests_total', { method: 'tools/call', era: 'modern', outcome: 'ok', code: '' }), 2)
  t.notOk(samples.some((s) => s.name === 'mcp_requests_total' && s.labels.code === 'RATE_LIMITED'), 'refused before its body was read')
})

t.test('gauges are asked of their owners: SSE streams by kind, questions awaiting clients, deployments running', async (t) => {
  const server = await serve(t)
  const gauges = async () => {
    const { samples } = await scrape(server)
    return {
      sessions: valueOf(samples, 'mcp_sessions_open'),
      standalone: valueOf(samples, 'mcp_sse_streams_open', { era: 'legacy', kind: 'standalone' }),
      calls: valueOf(samples, 'mcp_sse_streams_open', { era: 'legacy', kind: 'call' }),
      modern: valueOf(samples, 'mcp_sse_streams_open', { era: 'modern', kind: 'call' }),
      asking: valueOf(samples, 'mcp_client_requests_pending', { method: 'elicitation/create' }),
      running: valueOf(samples, 'mcp_deployments_running'),
    }
  }
  t.strictSame(await gauges(), { sessions: 0, standalone: 0, calls: 0, modern: 0, asking: 0, running: 0 })

  // A session with its GET stream, and a stateless subscriptions/listen stream.
  const { headers } = await elicitingSession(server)
  const standalone = await request(server.mcpUrl, { method: 'GET', headers: { ...headers, accept: 'text/event-stream' } })
  t.equal(standalone.statusCode, 200)
  const listen = await modernLive(server.mcpUrl, server.apiKey, 'subscriptions/listen', { notifications: {} }, { id: 'listen' })
  t.teardown(() => listen.close())
  await listen.waitFor((text) => text.includes('"id":"listen"') || text.includes('data:'), 3000, 'the acknowledgement')
  t.match(await gauges(), { sessions: 1, standalone: 1, calls: 0, modern: 1, asking: 0, running: 0 })

  // A deployment in that session: its call stream is open and its confirmation awaits the user.
  const app = await seedApp(server, 'web', {}, { pipeline: 'endless' })
  const live = await openLiveCall(t, server.mcpUrl, headers, callTool('service_deployments_create', { app_id: app.id }, 'deploy'))
  const question = await elicitationOn(live)
  t.match(await gauges(), { calls: 1, asking: 1, running: 0 })
  t.equal((await answerRequest(server.mcpUrl, headers, question.id, decision())).status, 202)
  await until(() => server.app.pipelines.running === 1, 5000, 'the deployment to run')
  t.match(await gauges(), { calls: 1, asking: 0, running: 1 })

  // The GET stream and the listen stream close: their gauges go back down.
  standalone.body.destroy()
  listen.close()
  let after = await gauges()
  for (let i = 0; i < 100 && (after.standalone !== 0 || after.modern !== 0); i++) after = await gauges()
  t.match(after, { sessions: 1, standalone: 0, modern: 0, calls: 1, running: 1 })
})

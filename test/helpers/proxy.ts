import { spawn, type ChildProcess } from 'node:child_process'
import { accessSync, constants, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { CallToolResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import type { Test } from 'tap'
import { Agent, request } from 'undici'
import type { Config } from '../../src/config.js'
import { builtinTools } from '../../src/index.js'
import { callTool, openSession, post } from './mcp.js'
import { ENV_KEY, PIPELINES, seedApp } from './modern-runs.js'
import { startServer, type TestServer } from './server.js'
import { countOccurrences, openLive } from './stream.js'
import { freePort } from './ports.js'
import { ROOT } from './root.js'

/**
 * Real reverse proxies in front of the server, run from the recipes in docs/deploy/ (proxy-nginx and proxy-caddy
 * tests): the recipe file itself is read, and only what cannot run unprivileged on loopback is swapped (ports, the
 * TLS lines), each swap required to match exactly, so a recipe that changes shape fails the test instead of being
 * tested half. The proxy runs as a child process with every file it writes in a temporary folder, and is stopped at
 * teardown, a failed test included.
 */

const DOCS = join(ROOT, 'docs', 'deploy')

export function recipe(name: 'nginx.conf' | 'Caddyfile'): string {
  return readFileSync(join(DOCS, name), 'utf8')
}

/** An executable on PATH or in the sbin folders (nginx lives in /usr/sbin, often off a user's PATH). */
export function findBinary(name: string): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/local/sbin', '/usr/sbin', '/sbin']
  for (const dir of dirs.filter(Boolean)) {
    try {
      accessSync(join(dir, name), constants.X_OK)
      return join(dir, name)
    } catch {
      // not here
    }
  }
  return undefined
}


/** Replaces `from` (a string or a regex with the g flag) and insists on exactly `times` matches. */
export function swap(text: string, from: string | RegExp, to: string, times = 1): string {
  const pattern = typeof from === 'string' ? new RegExp(from.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'g') : from
  const found = text.match(pattern)?.length ?? 0
  if (found !== times) throw new Error(`the recipe changed: expected ${times} match(es) of ${pattern}, found ${found}`)
  return text.replace(pattern, to)
}

export const PUBLIC_HOST = 'mcp.example.com'

/**
 * docs/deploy/nginx.conf for loopback: the HTTPS server listens in plain HTTP on `listen`, the redirect server on
 * `redirect`, the upstream is the test server; the certificate lines go. Every other directive is the recipe's.
 */
export function nginxSite(text: string, ports: { listen: number; redirect: number; upstream: number | number[] }): string {
  // Several processes behind one port: one `server` line each (docs/deploy/README.md, "Several processes").
  // The recipe's parameters of the line (max_fails, fail_timeout) stay as they are on each.
  const parameters = /^ {4}server 127\.0\.0\.1:3000( [^;\n]*)?;$/m.exec(text)?.[1] ?? ''
  const upstreams = (Array.isArray(ports.upstream) ? ports.upstream : [ports.upstream]).map((p) => `server 127.0.0.1:${p}${parameters};`).join('\n    ')
  let site = swap(text, /^ {4}server 127\.0\.0\.1:3000( [^;\n]*)?;$/gm, `    ${upstreams}`)
  site = swap(site, /^ {4}listen 80;$/gm, `    listen 127.0.0.1:${ports.redirect};`)
  site = swap(site, /^ {4}listen \[::\]:80;\n/gm, '')
  site = swap(site, /^ {4}listen 443 ssl;$/gm, `    listen 127.0.0.1:${ports.listen};`)
  site = swap(site, /^ {4}listen \[::\]:443 ssl;\n/gm, '')
  site = swap(site, /^ {4}ssl_\w+ .*\n/gm, '', 4)
  return site
}

/** docs/deploy/Caddyfile for loopback: the site is served in plain HTTP on `listen`, to the test server. */
export function caddySite(text: string, ports: { listen: number; upstream: number | number[] }): string {
  let site = swap(text, /^mcp\.example\.com \{$/gm, `http://127.0.0.1:${ports.listen} {`)
  // Several processes: all of them on the one line (the recipe's comment says so).
  const upstreams = (Array.isArray(ports.upstream) ? ports.upstream : [ports.upstream]).map((p) => `127.0.0.1:${p}`).join(' ')
  site = swap(site, 'reverse_proxy 127.0.0.1:3000', `reverse_proxy ${upstreams}`)
  // Global options come first: no admin API (it would take port 2019), and a stop that cuts open SSE streams at once
  // instead of waiting for them to end.
  return `{\n\tadmin off\n\tgrace_period 100ms\n}\n\n${site}`
}

export interface RunningProxy {
  /** http://127.0.0.1:port of the site the recipe serves. */
  url: string
  /** What the proxy wrote on stdout and stderr. */
  output(): string
  stop(): Promise<void>
}

interface Teardown {
  teardown(fn: () => unknown): void
}

/** Resolves once something accepts connections on the port; rejects when the child exits first or after `timeoutMs`. */
async function waitForPort(port: number, child: ChildProcess, output: () => string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the proxy exited (${child.exitCode ?? child.signalCode}) before listening:\n${output()}`)
    const open = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1')
      socket.once('connect', () => { socket.destroy(); resolve(true) })
      socket.once('error', () => resolve(false))
    })
    if (open) return
    if (Date.now() > deadline) throw new Error(`the proxy did not listen on ${port} within ${timeoutMs} ms:\n${output()}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

function launch(t: Teardown, dir: string, command: string, args: string[], env: NodeJS.ProcessEnv, port: number): Promise<RunningProxy> {
  const child = spawn(command, args, { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout!.on('data', (d) => (out += d))
  child.stderr!.on('data', (d) => (out += d))
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  // Should the test process die without its teardown, the proxy goes with it.
  const onExit = () => child.kill('SIGKILL')
  process.once('exit', onExit)
  let stopped: Promise<void> | undefined
  const stop = () => (stopped ??= (async () => {
    process.removeListener('exit', onExit)
    if (child.exitCode === null && child.signalCode === null) {
      // nginx stops at once on SIGTERM, Caddy after its grace period (100 ms here); open SSE streams are cut.
      child.kill('SIGTERM')
      const killer = setTimeout(() => child.kill('SIGKILL'), 3000)
      await exited
      clearTimeout(killer)
    }
    rmSync(dir, { recursive: true, force: true })
  })())
  t.teardown(stop)
  const output = () => out
  return waitForPort(port, child, output).then(() => ({ url: `http://127.0.0.1:${port}`, output, stop }))
}

/**
 * The recipe is a conf.d file that nginx's own nginx.conf includes in its `http {}` block: this main file stands in
 * for it, with the pid file, logs and temporary folders in `dir`, writable without privileges.
 */
export function writeNginxMain(dir: string, site: string): string {
  const file = join(dir, 'nginx.conf')
  writeFileSync(file, [
    `pid ${dir}/nginx.pid;`,
    'error_log stderr warn;',
    // One process, no worker user to switch to: nothing of the recipe depends on it.
    'master_process off;',
    'events { worker_connections 256; }',
    'http {',
    `  access_log ${dir}/access.log;`,
    `  client_body_temp_path ${dir}/client_body;`,
    `  proxy_temp_path ${dir}/proxy;`,
    `  fastcgi_temp_path ${dir}/fastcgi;`,
    `  uwsgi_temp_path ${dir}/uwsgi;`,
    `  scgi_temp_path ${dir}/scgi;`,
    `  include ${site};`,
    '}',
    '',
  ].join('\n'))
  return file
}

/**
 * nginx from docs/deploy/nginx.conf in front of 127.0.0.1:upstream (several: round-robin, nginx's default), unprivileged,
 * every file in a temporary prefix.
 */
export async function startNginx(t: Teardown, nginx: string, upstream: number | number[]): Promise<RunningProxy & { redirectUrl: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'service-mcp-nginx-'))
  const listen = await freePort()
  let redirect = await freePort()
  while (redirect === listen) redirect = await freePort()
  writeFileSync(join(dir, 'site.conf'), nginxSite(recipe('nginx.conf'), { listen, redirect, upstream }))
  writeNginxMain(dir, join(dir, 'site.conf'))
  const running = await launch(t, dir, nginx, ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', 'stderr', '-g', 'daemon off;'], process.env, listen)
  return { ...running, redirectUrl: `http://127.0.0.1:${redirect}` }
}

/** Caddy from docs/deploy/Caddyfile in front of 127.0.0.1:upstream, with a temporary HOME and XDG folders. */
export async function startCaddy(t: Teardown, caddy: string, upstream: number | number[]): Promise<RunningProxy> {
  const dir = mkdtempSync(join(tmpdir(), 'service-mcp-caddy-'))
  const listen = await freePort()
  const file = join(dir, 'Caddyfile')
  writeFileSync(file, caddySite(recipe('Caddyfile'), { listen, upstream }))
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, XDG_CONFIG_HOME: join(dir, 'config'), XDG_DATA_HOME: join(dir, 'data') }
  return launch(t, dir, caddy, ['run', '--config', file, '--adapter', 'caddyfile'], env, listen)
}

/** An undici dispatcher whose connections leave from `address` (any 127.x.y.z is this machine), for one "client". */
export function clientAt(t: Teardown, address: string): Agent {
  const agent = new Agent({ localAddress: address })
  t.teardown(() => agent.close())
  return agent
}

/** POST /oauth/register through `base` from `agent`, claiming `forwardedFor` in X-Forwarded-For when given. */
export async function register(base: string, agent: Agent, forwardedFor?: string): Promise<number> {
  const res = await request(`${base}/oauth/register`, {
    method: 'POST',
    dispatcher: agent,
    headers: { 'content-type': 'application/json', ...(forwardedFor ? { 'x-forwarded-for': forwardedFor } : {}) },
    body: JSON.stringify({ client_name: 'Proxy test', redirect_uris: ['http://127.0.0.1:9999/callback'] }),
  })
  await res.body.text()
  return res.statusCode
}

/** The port the server listens on (its url is SERVICE_BASE_URL's when that is set). */
export function listeningPort(server: { app: { server: { address(): unknown } } }): number {
  return (server.app.server.address() as { port: number }).port
}

// What both recipes must do. proxy-nginx.test.ts and proxy-caddy.test.ts run each of these behind their proxy.

export type StartProxy = (t: Test, upstream: number) => Promise<RunningProxy>

/** The public address of the recipes: what SERVICE_BASE_URL says behind them. */
export const PUBLIC_BASE = `https://${PUBLIC_HOST}`

/** A server set up as docs/deploy/README.md says for a proxy on the same machine, and that proxy in front of it. */
export async function behind(t: Test, start: StartProxy, config: Partial<Config> = {}): Promise<{ server: TestServer; proxy: RunningProxy; mcpUrl: string }> {
  const server = await startServer(t, {
    tools: builtinTools,
    config: { baseUrl: PUBLIC_BASE, trustProxy: ['127.0.0.1'], maxConnectionsPerAddress: 0, envKey: ENV_KEY, pipelines: PIPELINES, heartbeatMs: 60_000, ...config },
  })
  const proxy = await start(t, listeningPort(server))
  return { server, proxy, mcpUrl: `${proxy.url}/mcp` }
}

/** `promise`, or a rejection naming `what` after `ms` (a proxy that holds a response back must fail fast, not hang). */
function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

/** (a) An open SSE stream passes each `: heartbeat` on as the server sends it: the proxy holds nothing back. */
export async function heartbeatsComeThrough(t: Test, start: StartProxy): Promise<void> {
  const { server, mcpUrl } = await behind(t, start, { heartbeatMs: 100 })
  const { headers } = await openSession(mcpUrl, server.apiKey)
  const live = await within(3000, 'the head of the GET stream', openLive(mcpUrl, { method: 'GET', headers: { ...headers, accept: 'text/event-stream' } }))
  t.teardown(() => live.close())
  t.equal(live.status, 200, 'the standalone stream opened through the proxy')
  t.match(String(live.headers['content-type']), /^text\/event-stream/, 'as an event stream')
  // 14 bytes each: a proxy that buffered would hold them until kilobytes piled up, many seconds at this pace.
  await live.waitFor((text) => countOccurrences(text, ': heartbeat\n\n') >= 3, 3000, 'three heartbeats through the proxy')
  t.notOk(live.endedByServer, 'the heartbeats arrived while the stream stayed open')
  t.strictSame(live.parsed().events, [], 'nothing but heartbeats on the idle stream')
}

/**
 * (b) The official SDK (v1) client through the proxy: a session, a list, a call, and a deployment the user confirms by
 * elicitation whose progress arrives while the pipeline runs, not in one piece at its end.
 */
export async function sdkDeploysThrough(t: Test, start: StartProxy): Promise<void> {
  const { server, mcpUrl } = await behind(t, start)
  const app = await seedApp(server, 'web', { PIPELINE_STEP_MS: '150' })
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), {
    requestInit: { headers: { Authorization: `Bearer ${server.apiKey}` } },
    reconnectionOptions: { maxReconnectionDelay: 100, initialReconnectionDelay: 10, reconnectionDelayGrowFactor: 1, maxRetries: 0 },
  })
  const client = new Client({ name: 'proxy-test', version: '1.0.0' }, { capabilities: { elicitation: {} } })
  const asked: string[] = []
  client.setRequestHandler(ElicitRequestSchema, (request) => {
    asked.push(request.params.message)
    return { action: 'accept', content: { confirm: true } }
  })
  const errors: Error[] = []
  client.onerror = (err) => void errors.push(err)
  t.teardown(() => client.close())

  await client.connect(transport)
  const sessionId = transport.sessionId
  t.type(sessionId, 'string', 'a session through the proxy')
  t.ok(await server.app.sessions.get(sessionId!), 'the server holds it')
  const { tools } = await client.listTools()
  t.ok(tools.some((tool) => tool.name === 'service_deployments_create'), 'tools/list')
  const who = await client.callTool({ name: 'service_whoami', arguments: {} })
  t.match(who.structuredContent, { role: 'owner', credential: { kind: 'api_key' } }, 'a plain call')

  const progressAt: number[] = []
  const deployed = await client.callTool({ name: 'service_deployments_create', arguments: { app_id: app.id } }, CallToolResultSchema, {
    onprogress: () => void progressAt.push(Date.now()),
  })
  const answeredAt = Date.now()
  t.strictSame(asked, [`Deploy app web (${app.id}) with pipeline default?`], 'the confirmation was asked through the proxy')
  t.equal(deployed.isError, false, `the deployment succeeded${deployed.isError ? ': ' + JSON.stringify(deployed.content) : ''}`)
  t.match(deployed.structuredContent, { deployment: { app_id: app.id, status: 'succeeded', exit_code: 0 } })
  t.ok(progressAt.length >= 9, `a progress notification per log line (${progressAt.length})`)
  // Seven steps of 150 ms: the first line comes out about a second before the answer, unless a proxy holds it back.
  t.ok(answeredAt - progressAt[0]! >= 600, `the first progress arrived ${answeredAt - progressAt[0]!} ms before the answer, while the pipeline ran`)

  await transport.terminateSession()
  t.notOk(await server.app.sessions.get(sessionId!), 'DELETE through the proxy ended the session')
  await client.close()
  // After DELETE the server ends the standalone GET stream, which the SDK (maxRetries 0) reports; nothing else.
  t.strictSame(errors.map(String).filter((e) => !/Maximum reconnection attempts \(0\) exceeded/.test(e)), [], 'the transport reported no errors')
}

/**
 * (c) X-Forwarded-For, observed through the registrations allowed per client address (one here): with
 * SERVICE_TRUST_PROXY off every client is the proxy; with it on, in any form, each client is the address the proxy
 * saw, never the one it claims in its own X-Forwarded-For. Clients are told apart by the local address they connect
 * from (127.0.0.2 and 127.0.0.3; the whole of 127/8 is this machine).
 */
export async function forwardedForOnlyWhenTrusted(t: Test, start: StartProxy): Promise<void> {
  const limited = { registerRateLimit: 1, registerRateLimitWindowMs: 600_000 }
  const a = clientAt(t, '127.0.0.2')
  const b = clientAt(t, '127.0.0.3')

  t.test('SERVICE_TRUST_PROXY off: every client is the proxy', async (t) => {
    const { proxy } = await behind(t, start, { ...limited, trustProxy: false })
    t.equal(await register(proxy.url, a, '203.0.113.1'), 201, 'client A registers')
    t.equal(await register(proxy.url, b, '203.0.113.2'), 429, 'client B, claiming yet another address, shares the proxy\'s allowance')
  })

  const forms: Array<[string, Config['trustProxy']]> = [['the proxy\'s address (127.0.0.1)', ['127.0.0.1']], ['one hop (1)', 1], ['every hop (true)', true]]
  for (const [label, trustProxy] of forms) {
    t.test(`SERVICE_TRUST_PROXY ${label}: each client is the address the proxy saw`, async (t) => {
      const { proxy } = await behind(t, start, { ...limited, trustProxy })
      t.equal(await register(proxy.url, a, '203.0.113.1'), 201, 'client A registers')
      t.equal(await register(proxy.url, a, '203.0.113.2'), 429, 'client A claiming another address is still client A')
      t.equal(await register(proxy.url, b), 201, 'client B has its own allowance')
    })
  }
}

/** (d) Discovery through the proxy advertises SERVICE_BASE_URL, not the address the server listens on. */
export async function discoveryAdvertisesBaseUrl(t: Test, start: StartProxy): Promise<void> {
  const { proxy, mcpUrl } = await behind(t, start)
  const get = async (path: string) => {
    const res = await request(`${proxy.url}${path}`)
    t.equal(res.statusCode, 200, `${path}: 200`)
    return (await res.body.json()) as Record<string, unknown>
  }
  const as = await get('/.well-known/oauth-authorization-server')
  t.equal(as.issuer, PUBLIC_BASE, 'issuer')
  t.equal(as.authorization_endpoint, `${PUBLIC_BASE}/oauth/authorize`)
  t.equal(as.token_endpoint, `${PUBLIC_BASE}/oauth/token`)
  t.equal(as.registration_endpoint, `${PUBLIC_BASE}/oauth/register`)
  const resource = await get('/.well-known/oauth-protected-resource/mcp')
  t.equal(resource.resource, `${PUBLIC_BASE}/mcp`, 'the protected resource')
  t.strictSame(resource.authorization_servers, [PUBLIC_BASE])
  const refused = await post(mcpUrl, { jsonrpc: '2.0', id: 1, method: 'ping' })
  t.equal(refused.status, 401, '/mcp without credentials')
  t.ok(String(refused.headers['www-authenticate']).includes(`resource_metadata="${PUBLIC_BASE}/.well-known/oauth-protected-resource/mcp"`), 'the challenge points at the public metadata')
}

/** The proxy lets a body somewhat above SERVICE_MAX_BODY_BYTES through: the server refuses it in its own shape. */
export async function serverJudgesBodySize(t: Test, start: StartProxy): Promise<void> {
  const { server, mcpUrl } = await behind(t, start)
  const { headers } = await openSession(mcpUrl, server.apiKey)
  const big = await post(mcpUrl, callTool('service_whoami', { padding: 'x'.repeat(server.config.maxBodyBytes) }), headers)
  t.equal(big.status, 413, 'too large')
  t.equal(big.json?.error?.code, 'PAYLOAD_TOO_LARGE', 'answered by the server, in the service error shape')
  const fits = await post(mcpUrl, callTool('service_whoami'), headers)
  t.equal(fits.status, 200, 'a body under the limit is served')
}

import type { LightMyRequestResponse } from 'fastify'
import t, { type Test } from 'tap'
import { ACCEPT_BOTH, initializeMessage } from '../helpers/mcp.js'
import { injectServer, type InjectServer } from '../helpers/inject.js'
import { modernRequest } from '../helpers/modern.js'
import { authorizeUrl, formAction, formValue, pkce, registerClient } from '../helpers/oauth.js'
import { OWNER_EMAIL, OWNER_PASSWORD } from '../helpers/server.js'

// Issue 26: the server prints http://127.0.0.1:PORT, and a person or a client that used http://localhost:PORT was
// refused (403 FORBIDDEN_ORIGIN on /mcp, CSRF_FAILED on the forms). A loopback base address answers to every loopback
// name with its scheme and port, for Origin and Host alike; look-alikes and other names stay refused, and a public base
// address is as before (docs/decisions/http-errors.md, "Origins and hosts").

/** The inject server's port (its base address is http://127.0.0.1:<port>). */
const portOf = (server: InjectServer) => new URL(server.url).port
const LOOPBACK = ['localhost', '127.0.0.1', '[::1]']
/** Names that only look like ours: DNS names anyone can point at 127.0.0.1 (what DNS rebinding does). */
const LOOK_ALIKES = ['localhost.evil.example', '127.0.0.1.nip.io', 'evil.example']

function mcp(server: InjectServer, method: 'POST' | 'GET' | 'DELETE' | 'OPTIONS', headers: Record<string, string>, body?: unknown) {
  return server.app.inject({
    method,
    url: '/mcp',
    headers: { authorization: `Bearer ${server.apiKey}`, accept: ACCEPT_BOTH, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
  })
}

function forbidden(t: Test, res: LightMyRequestResponse, what: string): void {
  t.equal(res.statusCode, 403, `${what}: 403`)
  t.equal(res.json().error?.code, 'FORBIDDEN_ORIGIN', `${what}: FORBIDDEN_ORIGIN`)
  t.equal(res.headers['access-control-allow-origin'], undefined, `${what}: no CORS grant`)
}

t.test('MCP: every loopback name with the base port is accepted as Origin and as Host', async (t) => {
  const server = await injectServer(t)
  const port = portOf(server)
  for (const name of LOOPBACK) {
    const origin = `http://${name}:${port}`
    const headers = { host: `${name}:${port}`, origin }
    const init = await mcp(server, 'POST', headers, initializeMessage())
    t.equal(init.statusCode, 200, `${name}: initialize answered`)
    t.equal(init.headers['access-control-allow-origin'], origin, `${name}: CORS grants the origin as sent`)
    t.match(String(init.headers.vary), /Origin/, `${name}: Vary: Origin`)
    const sessionId = String(init.headers['mcp-session-id'])
    const session = { ...headers, 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' }
    t.equal((await mcp(server, 'POST', session, { jsonrpc: '2.0', method: 'notifications/initialized' })).statusCode, 202, `${name}: a notification`)

    const stream = await server.app.inject({ method: 'GET', url: '/mcp', headers: { authorization: `Bearer ${server.apiKey}`, accept: 'text/event-stream', ...session }, payloadAsStream: true })
    t.equal(stream.statusCode, 200, `${name}: GET opens the session's stream`)
    t.equal(stream.headers['access-control-allow-origin'], origin, `${name}: GET: CORS grants the origin`)
    stream.stream().destroy()

    const preflight = await server.app.inject({ method: 'OPTIONS', url: '/mcp', headers: { ...headers, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' } })
    t.equal(preflight.statusCode, 204, `${name}: preflight`)
    t.equal(preflight.headers['access-control-allow-origin'], origin, `${name}: preflight grants the origin`)
    t.equal((await mcp(server, 'DELETE', session)).statusCode, 204, `${name}: DELETE ends the session`)
  }
  for (const [hostName, originName] of [['localhost', '127.0.0.1'], ['127.0.0.1', '[::1]'], ['[::1]', 'localhost']]) {
    const mixed = await mcp(server, 'POST', { host: `${hostName}:${port}`, origin: `http://${originName}:${port}` }, initializeMessage())
    t.equal(mixed.statusCode, 200, `Host ${hostName} with Origin ${originName}: both ours`)
  }
  const noOrigin = await mcp(server, 'POST', { host: `LOCALHOST:${port}` }, initializeMessage())
  t.equal(noOrigin.statusCode, 200, 'a client without Origin, Host in capitals')
  t.equal(noOrigin.headers['access-control-allow-origin'], undefined, 'no Origin, no CORS header')
})

t.test('MCP: the 2026-07-28 path is behind the same gate', async (t) => {
  const server = await injectServer(t)
  const port = portOf(server)
  const { body: discover, headers } = modernRequest(server.apiKey, 'server/discover')
  const ok = await mcp(server, 'POST', { ...headers, host: `localhost:${port}`, origin: `http://localhost:${port}` }, discover)
  t.equal(ok.statusCode, 200, 'localhost: answered')
  forbidden(t, await mcp(server, 'POST', { ...headers, host: `localhost.evil.example:${port}` }, discover), 'a look-alike Host')
  forbidden(t, await mcp(server, 'POST', { ...headers, origin: `http://127.0.0.1.nip.io:${port}` }, discover), 'a look-alike Origin')
})

t.test('MCP: look-alikes, other ports and other schemes are refused, as Origin and as Host', async (t) => {
  const server = await injectServer(t)
  const port = portOf(server)
  const other = String(Number(port) + 1000)
  const own = { host: `localhost:${port}` }
  for (const origin of [...LOOK_ALIKES.map((n) => `http://${n}:${port}`), `http://localhost:${other}`, `http://127.0.0.1:${other}`, `https://localhost:${port}`, `https://127.0.0.1:${port}`, 'null']) {
    forbidden(t, await mcp(server, 'POST', { ...own, origin }, initializeMessage()), `POST, Origin ${origin}`)
    forbidden(t, await mcp(server, 'GET', { ...own, origin }), `GET, Origin ${origin}`)
    forbidden(t, await server.app.inject({ method: 'OPTIONS', url: '/mcp', headers: { ...own, origin, 'access-control-request-method': 'POST' } }), `preflight, Origin ${origin}`)
  }
  for (const host of [...LOOK_ALIKES.map((n) => `${n}:${port}`), `localhost:${other}`, `[::1]:${other}`, 'localhost', 'evil.example']) {
    // Without Origin: a page rebound to 127.0.0.1 sends none on its own same-origin GET.
    const post = await mcp(server, 'POST', { host }, initializeMessage())
    forbidden(t, post, `POST, Host ${host}`)
    t.same(post.json().error.details, { host }, `POST, Host ${host}: named in the details`)
    forbidden(t, await mcp(server, 'GET', { host }), `GET, Host ${host}`)
    // The way the conformance suite's DNS-rebinding check sends it: both headers naming the other host.
    forbidden(t, await mcp(server, 'POST', { host, origin: `http://${host}` }, initializeMessage()), `Host and Origin ${host}`)
  }
})

t.test('MCP: a public base address is as before', async (t) => {
  const server = await injectServer(t, { config: { baseUrl: 'https://mcp.example.com' } })
  for (const origin of ['http://localhost:443', 'https://localhost', 'http://127.0.0.1', 'https://127.0.0.1', 'https://[::1]', 'http://mcp.example.com', 'https://mcp.example.com.evil.example']) {
    forbidden(t, await mcp(server, 'POST', { host: 'mcp.example.com', origin }, initializeMessage()), `Origin ${origin}`)
  }
  const own = await mcp(server, 'POST', { host: 'mcp.example.com', origin: 'https://mcp.example.com' }, initializeMessage())
  t.equal(own.statusCode, 200, 'its own origin')
  for (const host of ['mcp.example.com', '127.0.0.1:3000', 'backend.internal:8080']) {
    t.equal((await mcp(server, 'POST', { host }, initializeMessage())).statusCode, 200, `Host ${host}: what a proxy forwards is not checked`)
  }
})

/** The `name=value` pairs of a response's Set-Cookie lines, as a Cookie header. */
const cookieOf = (res: LightMyRequestResponse) => ([] as string[]).concat(res.headers['set-cookie'] ?? []).map((line) => line.split(';')[0]).join('; ')

/** The account sign-in form as a browser at `host` gets it: where it posts, its CSRF token and the cookie. */
async function signInForm(server: InjectServer, host: string) {
  const page = await server.app.inject({ method: 'GET', url: '/account/signin', headers: { host } })
  if (page.statusCode !== 200) throw new Error(`the sign-in page answered ${page.statusCode}`)
  return { action: formAction(page.body), csrf: formValue(page.body, 'csrf')!, cookie: cookieOf(page) }
}

t.test('forms: a page opened by another loopback name posts from its own origin', async (t) => {
  const server = await injectServer(t)
  const port = portOf(server)
  const postForm = async (host: string, origin: string, site: string) => {
    const form = await signInForm(server, host)
    return server.app.inject({
      method: 'POST',
      url: form.action,
      headers: { host, origin, 'sec-fetch-site': site, cookie: form.cookie, 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ csrf: form.csrf, email: OWNER_EMAIL, password: OWNER_PASSWORD }).toString(),
    })
  }
  for (const name of LOOPBACK) {
    const res = await postForm(`${name}:${port}`, `http://${name}:${port}`, 'same-origin')
    t.equal(res.statusCode, 303, `account sign-in from http://${name}:${port}`)
    t.equal(res.headers.location, '/account')
  }
  for (const origin of [...LOOK_ALIKES.map((n) => `http://${n}:${port}`), `http://localhost:${Number(port) + 1000}`, `https://localhost:${port}`]) {
    const res = await postForm(`localhost:${port}`, origin, 'cross-site')
    t.equal(res.statusCode, 403, `account sign-in from ${origin}: refused`)
    t.match(res.body, /another site/, `${origin}: as a form from another site`)
  }

  // The OAuth sign-in of an authorization, by the same check.
  const client = await registerClient(server)
  const authorize = new URL(authorizeUrl(server, client, pkce()))
  const start = await server.app.inject({ method: 'GET', url: authorize.pathname + authorize.search, headers: { host: `localhost:${port}` } })
  t.equal(start.statusCode, 303, 'authorize sends the person to sign in')
  const cookie = cookieOf(start)
  const interaction = String(start.headers.location)
  const page = await server.app.inject({ method: 'GET', url: interaction, headers: { host: `localhost:${port}`, cookie } })
  const fields = new URLSearchParams({ csrf: formValue(page.body, 'csrf')!, email: OWNER_EMAIL, password: OWNER_PASSWORD }).toString()
  const send = (origin: string) => server.app.inject({
    method: 'POST',
    url: formAction(page.body),
    headers: { host: `localhost:${port}`, origin, cookie, 'content-type': 'application/x-www-form-urlencoded' },
    payload: fields,
  })
  t.equal((await send(`http://localhost.evil.example:${port}`)).statusCode, 403, 'OAuth sign-in from a look-alike: refused')
  const signedIn = await send(`http://localhost:${port}`)
  t.equal(signedIn.statusCode, 303, 'OAuth sign-in from http://localhost: accepted')
  t.equal(signedIn.headers.location, interaction, 'on to the consent page')
})

t.test('forms: a public base address is as before', async (t) => {
  const server = await injectServer(t, { config: { baseUrl: 'https://mcp.example.com' } })
  const form = await signInForm(server, 'mcp.example.com')
  const post = (origin: string) => server.app.inject({
    method: 'POST',
    url: form.action,
    headers: { host: 'mcp.example.com', origin, cookie: form.cookie, 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({ csrf: form.csrf, email: OWNER_EMAIL, password: OWNER_PASSWORD }).toString(),
  })
  for (const origin of ['http://localhost:3000', 'https://localhost', 'https://127.0.0.1']) t.equal((await post(origin)).statusCode, 403, `${origin}: refused`)
  t.equal((await post('https://mcp.example.com')).statusCode, 303, 'its own origin: accepted')
})

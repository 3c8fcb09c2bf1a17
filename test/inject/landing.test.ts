import type { LightMyRequestResponse } from 'fastify'
import t, { type Test } from 'tap'
import { catalog } from '../../src/errors/catalog.js'
import { FAVICON_SVG } from '../../src/web/favicon.js'
import { pageHeaders } from '../../src/web/headers.js'
import { injectServer, type InjectServer } from '../helpers/inject.js'
import { authorizeUrl, FormBrowser, pkce, registerClient } from '../helpers/oauth.js'
import { OWNER_EMAIL, OWNER_PASSWORD } from '../helpers/server.js'

// What a browser finds at the root of the server (the landing page, the icon) and what an API client still finds there
// (the 404 of any unknown path); the sign-in and consent pages naming the server a password is typed for.

const BROWSER = 'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8'

function hasPageHeaders(t: Test, res: LightMyRequestResponse, label: string): void {
  for (const [name, value] of Object.entries(pageHeaders())) t.equal(res.headers[name], value, `${label}: ${name}`)
}

/** The catalog's 404, as every unknown path answers it. */
function isJson404(t: Test, res: LightMyRequestResponse, label: string): void {
  t.equal(res.statusCode, 404, `${label}: 404`)
  t.match(res.headers['content-type'], /^application\/json/, `${label}: JSON`)
  t.same(res.json(), { error: { code: 'NOT_FOUND', message: catalog.NOT_FOUND.message, details: null, action: catalog.NOT_FOUND.action } }, `${label}: the service error body`)
  t.equal(res.headers['content-security-policy'], undefined, `${label}: not a page`)
}

t.test('GET / gives a browser the landing page', async (t) => {
  const server = await injectServer(t)
  const res = await server.app.inject({ method: 'GET', url: '/', headers: { accept: BROWSER } })
  t.equal(res.statusCode, 200)
  hasPageHeaders(t, res, 'landing page')
  t.equal(res.headers.vary, 'Accept', 'the answer depends on Accept, and says so to caches')
  t.match(res.headers['x-service-mcp-version'], /^\d{4}-\d{2}-\d{2}$/, 'with the headers of every response')
  const host = new URL(server.url).host
  t.match(res.body, `<title>MCP server at ${host}</title>`, 'the title names the server')
  t.match(res.body, `<code class="copy-text" id="mcp-url">${server.url}/mcp</code>`, 'the address to give a client')
  t.match(res.body, '<a href="/account">', 'the way to the account page')
  t.match(res.body, 'README.md', 'where the documentation is')
  t.match(res.body, /<script>[\s\S]+<\/script>/, 'with the copy script')
})

t.test('the landing page names the configured base URL, whatever the request says', async (t) => {
  const server = await injectServer(t, { config: { baseUrl: 'https://mcp.example.com/team' } })
  const res = await server.app.inject({ method: 'GET', url: '/', headers: { accept: 'text/html', host: 'other.example' } })
  t.equal(res.statusCode, 200)
  t.match(res.body, '<code class="copy-text" id="mcp-url">https://mcp.example.com/team/mcp</code>')
  t.match(res.body, '<p class="host mono" id="server-host">mcp.example.com/team</p>')
  t.notMatch(res.body, 'other.example')
})

t.test('GET / still answers an API client with the JSON 404', async (t) => {
  const server = await injectServer(t)
  const unknown = await server.app.inject({ method: 'GET', url: '/no-such-path', headers: { accept: 'application/json' } })
  isJson404(t, unknown, 'an unknown path (the reference)')
  for (const accept of [undefined, '*/*', 'application/json', 'application/json, text/event-stream', 'application/json, text/html']) {
    const res = await server.app.inject({ method: 'GET', url: '/', headers: accept === undefined ? {} : { accept } })
    isJson404(t, res, `Accept ${JSON.stringify(accept)}`)
    t.equal(res.headers.vary, 'Accept', `Accept ${JSON.stringify(accept)}: Vary: Accept`)
  }
  isJson404(t, await server.app.inject({ method: 'POST', url: '/', headers: { accept: BROWSER, 'content-type': 'application/json' }, payload: '{}' }), 'POST / (a browser\'s)')
})

t.test('HEAD / answers as GET would, without a body', async (t) => {
  const server = await injectServer(t)
  const page = await server.app.inject({ method: 'HEAD', url: '/', headers: { accept: BROWSER } })
  t.equal(page.statusCode, 200, 'a browser: 200')
  t.match(page.headers['content-type'], /^text\/html/)
  hasPageHeaders(t, page, 'HEAD of the page')
  t.equal(page.body, '', 'no body')
  const api = await server.app.inject({ method: 'HEAD', url: '/', headers: { accept: 'application/json' } })
  t.equal(api.statusCode, 404, 'an API client: 404')
  t.match(api.headers['content-type'], /^application\/json/)
  t.equal(api.body, '', 'no body')
})

t.test('the icon: /favicon.svg, linked from the pages; /favicon.ico answers 204, not a JSON error', async (t) => {
  const server = await injectServer(t)
  const svg = await server.app.inject({ method: 'GET', url: '/favicon.svg', headers: { accept: 'image/avif,image/webp,*/*' } })
  t.equal(svg.statusCode, 200)
  t.equal(svg.headers['content-type'], 'image/svg+xml')
  t.equal(svg.body, FAVICON_SVG)
  t.equal(svg.headers['x-content-type-options'], 'nosniff')
  t.equal(svg.headers['content-security-policy'], "default-src 'none'", 'opened on its own, it runs and loads nothing')
  t.match(svg.headers['cache-control'], /^public, max-age=\d+$/)
  t.notMatch(FAVICON_SVG, /<script|on[a-z]+=|href=|url\(/i, 'nothing executable or fetched')

  for (const accept of [BROWSER, 'application/json']) {
    const ico = await server.app.inject({ method: 'GET', url: '/favicon.ico', headers: { accept } })
    t.equal(ico.statusCode, 204, `/favicon.ico, Accept ${accept}: 204`)
    t.equal(ico.body, '', 'no body')
    t.match(ico.headers['cache-control'], /^public, max-age=\d+$/, 'cached, so a browser does not ask again on every page')
  }
})

/** The sign-in page of an OAuth authorization, and the consent page after it, as a browser walks them. */
async function oauthPages(server: InjectServer) {
  const browser = new FormBrowser(server.url)
  const client = await registerClient(server, { client_name: 'Named Client' })
  const start = await browser.get(authorizeUrl(server, client, pkce()))
  const signIn = await browser.get(start.location!)
  const action = /<form[^>]*action="([^"]+)"/.exec(signIn.text)![1]!
  const csrf = /name="csrf" value="([^"]+)"/.exec(signIn.text)![1]!
  const posted = await browser.post(action, { csrf, email: OWNER_EMAIL, password: OWNER_PASSWORD })
  const consent = await browser.get(posted.location!)
  return { signIn: signIn.text, consent: consent.text }
}

t.test('the sign-in pages and the consent page name the server', async (t) => {
  const server = await injectServer(t)
  const host = new URL(server.url).host
  const account = await server.app.inject({ method: 'GET', url: '/account/signin' })
  t.equal(account.statusCode, 200)
  t.match(account.body, `<p>to your account on</p>\n<p class="host mono" id="server-host">${host}</p>`, '/account/signin')

  const { signIn, consent } = await oauthPages(server)
  t.match(signIn, `<p class="host mono" id="server-host">${host}</p>`, 'the OAuth sign-in page')
  t.match(signIn, 'to continue to <strong>Named Client</strong>', 'beside the application')
  t.match(consent, `<h1>Authorize Named Client</h1>`, 'the consent page')
  t.match(consent, `your account on <strong class="mono" id="server-host">${host}</strong> as <strong>${OWNER_EMAIL}</strong>`, 'names the server and the account')
})

/**
 * What clients that register commonly get wrong, and what they get back: a registration without `scope` (both scopes,
 * stored and offered at consent), and an authorization without `resource` (sent back with a description that says what
 * to send).
 */
import t from 'tap'
import { request } from 'undici'
import { injectServer } from '../helpers/inject.js'
import { authorizeUrl, browserAuthorize, formAction, formValue, FormBrowser, pkce, tokenRequest, type RegisteredClient } from '../helpers/oauth.js'
import { OWNER_EMAIL, OWNER_PASSWORD } from '../helpers/server.js'

async function register(url: string, body: Record<string, unknown>) {
  const res = await request(`${url}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
  return { status: res.statusCode, json: (await res.body.json()) as RegisteredClient }
}

t.test('a registration without scope gets both scopes, stored and offered at consent', async (t) => {
  const server = await injectServer(t)
  for (const [label, extra] of [['no scope', {}], ['scope null', { scope: null }], ['scope empty', { scope: '' }]] as const) {
    const res = await register(server.url, { client_name: 'Scopeless', redirect_uris: ['http://127.0.0.1:9999/callback'], ...extra })
    t.equal(res.status, 201, `${label}: registered`)
    t.equal(res.json.scope, 'mcp:read mcp:write', `${label}: the answer names both scopes`)
    t.equal((await server.app.repos.oauthClients.byId(res.json.client_id))?.scope, 'mcp:read mcp:write', `${label}: the stored client has both`)
  }

  const client = (await register(server.url, { client_name: 'Scopeless', redirect_uris: ['http://127.0.0.1:9999/callback'] })).json
  const browser = new FormBrowser(server.url)
  const start = await browser.get(authorizeUrl(server, client, pkce()))
  t.equal(start.status, 303, 'both scopes may be asked for')
  const signIn = await browser.get(start.location!)
  const posted = await browser.post(formAction(signIn.text), { csrf: formValue(signIn.text, 'csrf') ?? '', email: OWNER_EMAIL, password: OWNER_PASSWORD })
  const consent = await browser.get(posted.location!)
  t.match(consent.text, /<li><span class="mono">mcp:read<\/span>/, 'consent offers mcp:read')
  t.match(consent.text, /<li><span class="mono">mcp:write<\/span>/, 'consent offers mcp:write')

  const p = pkce()
  const { redirect } = await browserAuthorize(server, authorizeUrl(server, client, p), { browser })
  const tokens = await tokenRequest(server, { grant_type: 'authorization_code', code: redirect.searchParams.get('code')!, redirect_uri: client.redirect_uris[0]!, client_id: client.client_id, code_verifier: p.verifier })
  t.equal(tokens.json?.scope, 'mcp:read mcp:write', 'the tokens carry both scopes')
})

t.test('an authorization without resource goes back to the client saying what to send', async (t) => {
  const server = await injectServer(t)
  const client = (await register(server.url, { redirect_uris: ['http://127.0.0.1:9999/callback'] })).json
  const res = await new FormBrowser(server.url).get(authorizeUrl(server, client, pkce(), { resource: null, state: 'st' }))
  t.equal(res.status, 303, 'redirected: the client and its redirect URI are known')
  const back = new URL(res.location!)
  t.equal(`${back.origin}${back.pathname}`, 'http://127.0.0.1:9999/callback')
  t.equal(back.searchParams.get('error'), 'invalid_target')
  t.equal(back.searchParams.get('error_description'), `resource is required: send resource=${server.url}`, 'the description names the value to send')
  t.equal(back.searchParams.get('state'), 'st')
})

/**
 * Clients identified by a Client ID Metadata Document, in the authorization server: the metadata flag per policy, the
 * registration switch, /oauth/authorize (the document's redirect URIs, errors shown as pages), the consent and account
 * pages naming the document's host, and the token and revocation endpoints resolving the document on every use.
 *
 * The documents come from a test double of the resolver (test/helpers/client-documents.ts): what the fetcher checks is
 * tested with the fetcher; here the question is what the endpoints do with a document, or with its refusal.
 */
import t, { type Test } from 'tap'
import { request } from 'undici'
import type { Config } from '../../src/config.js'
import { DocumentsDouble } from '../helpers/client-documents.js'
import { injectServer } from '../helpers/inject.js'
import { initializeMessage, post } from '../helpers/mcp.js'
import { authorizeUrl, browserAuthorize, formAction, formValue, FormBrowser, pkce, registerClient, revokeRequest, tokenRequest, type Pkce, type RegisteredClient } from '../helpers/oauth.js'
import { OWNER_EMAIL, OWNER_PASSWORD } from '../helpers/server.js'

const DOC = 'https://claude.example/oauth/client.json'

async function setup(t: Test, config: Partial<Config> = {}, options: { log?: string[] } = {}) {
  const documents = new DocumentsDouble()
  const log = options.log
  const server = await injectServer(t, {
    config,
    clientDocuments: documents,
    ...(log ? { logger: { level: 'info', stream: { write: (line: string) => log.push(line) } } } : {}),
  })
  const browser = new FormBrowser(server.url)

  /** authorize → sign-in → consent (approve), in the one browser; the code from the redirect. */
  async function code(client: RegisteredClient, p: Pkce): Promise<string> {
    const { redirect } = await browserAuthorize(server, authorizeUrl(server, client, p), { browser })
    const c = redirect.searchParams.get('code')
    if (!c) throw new Error(`no code in ${redirect.href}`)
    return c
  }
  const exchange = (client: RegisteredClient, p: Pkce, c: string) =>
    tokenRequest(server, { grant_type: 'authorization_code', code: c, redirect_uri: client.redirect_uris[0]!, client_id: client.client_id, code_verifier: p.verifier })
  const refresh = (client: RegisteredClient, refreshToken: string) =>
    tokenRequest(server, { grant_type: 'refresh_token', refresh_token: refreshToken, client_id: client.client_id })
  return { server, documents, browser, code, exchange, refresh }
}

async function metadata(url: string) {
  const res = await request(`${url}/.well-known/oauth-authorization-server`)
  return (await res.body.json()) as Record<string, unknown>
}

/** The page GET /oauth/authorize answers, in a fresh browser. */
async function authorizePage(server: { url: string }, url: string) {
  return new FormBrowser(server.url).get(url)
}

/** Signs in on the interaction page `location` leads to, and returns the consent page. */
async function consentPageOf(browser: FormBrowser, location: string) {
  const signIn = await browser.get(location)
  const posted = await browser.post(formAction(signIn.text), { csrf: formValue(signIn.text, 'csrf') ?? '', email: OWNER_EMAIL, password: OWNER_PASSWORD })
  return { signIn, consent: await browser.get(posted.location!) }
}

t.test('the metadata advertises documents unless the policy is off, and registration unless it is off', async (t) => {
  for (const [label, config, flag, registration] of [
    ['all (default)', {}, true, true],
    ['listed', { clientDocuments: 'listed', clientDocumentHosts: ['claude.ai'] }, true, true],
    ['off', { clientDocuments: 'off' }, undefined, true],
    ['registration off', { registration: false }, true, false],
  ] as const) {
    const { server } = await setup(t, config as Partial<Config>)
    const m = await metadata(server.url)
    t.equal(m.client_id_metadata_document_supported, flag, `${label}: client_id_metadata_document_supported ${flag}`)
    t.equal(m.registration_endpoint, registration ? `${server.url}/oauth/register` : undefined, `${label}: registration_endpoint ${registration ? 'present' : 'absent'}`)
    t.strictSame(m.token_endpoint_auth_methods_supported, ['none'], `${label}: public clients (none)`)
  }
})

t.test('registration off: /oauth/register refuses in the OAuth shape and says what to use instead', async (t) => {
  const { server } = await setup(t, { registration: false, registerRateLimit: 2 })
  for (let i = 1; i <= 4; i++) {
    const res = await request(`${server.url}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'x', redirect_uris: ['http://127.0.0.1:9999/callback'] }),
    })
    const body = (await res.body.json()) as Record<string, string>
    t.equal(res.statusCode, 403, `attempt ${i}: 403, never the limiter's 429`)
    t.strictSame(Object.keys(body).sort(), ['error', 'error_description'], `attempt ${i}: the OAuth error body`)
    t.equal(body.error, 'access_denied')
    t.match(body.error_description, /turned off/)
    t.equal(res.headers['cache-control'], 'no-store')
    t.equal(res.headers['access-control-allow-origin'], '*', 'readable by a page of another origin, like every answer there')
  }
})

t.test('authorize with a document client: its host is the identity on the sign-in and consent pages', async (t) => {
  const { server, documents } = await setup(t)
  const client = documents.serve(DOC, { clientName: 'Claude' })
  const browser = new FormBrowser(server.url)
  const start = await browser.get(authorizeUrl(server, client, pkce()))
  t.equal(start.status, 303, 'the request is parked')
  t.match(start.location, /^\/oauth\/interaction\//)
  const { signIn, consent } = await consentPageOf(browser, start.location!)
  t.match(signIn.text, /to continue to <strong>claude\.example<\/strong>/, 'the sign-in page names the host')
  t.equal(consent.status, 200)
  t.match(consent.text, /<h1>Authorize claude\.example<\/h1>/, 'the host is the heading')
  t.match(consent.text, /id="client-identity"[^]*claude\.example[^]*calls itself <strong>Claude<\/strong> \(a name it gives itself, not checked/, 'the name is secondary, marked as the client’s own claim')
  t.match(consent.text, /id="loopback-notice"/, 'a loopback redirect gets the warning')
  t.match(consent.text, /Client ID: <span class="mono">https:\/\/claude\.example\/oauth\/client\.json<\/span>/)
  const row = await server.app.repos.oauthClients.byId(DOC)
  t.match(row, { source: 'metadata_document', name: 'Claude', redirectUris: client.redirect_uris, scope: 'mcp:read mcp:write' }, 'the client row is saved from the document')
})

t.test('a document client with an https redirect: no loopback warning; a registered client: no document identity', async (t) => {
  const { server, documents } = await setup(t)
  const https = documents.serve(DOC, { redirectUris: ['https://claude.example/api/callback'] })
  const browser = new FormBrowser(server.url)
  const start = await browser.get(authorizeUrl(server, https, pkce()))
  const { consent } = await consentPageOf(browser, start.location!)
  t.match(consent.text, /id="client-identity"/)
  t.notMatch(consent.text, /id="loopback-notice"/, 'an https redirect goes to the host itself')

  const registered = await registerClient(server, { client_name: 'Registered app' })
  const again = await browser.get(authorizeUrl(server, registered, pkce()))
  const page = await browser.get(again.location!)
  t.match(page.text, /<h1>Authorize Registered app<\/h1>/, 'a registered client keeps its name as the heading')
  t.notMatch(page.text, /id="client-identity"|id="loopback-notice"/, 'and no document identity')
})

t.test('authorize: document problems are pages, never redirects', async (t) => {
  const { server, documents } = await setup(t)
  const client = documents.serve(DOC)

  const wrong = await authorizePage(server, authorizeUrl(server, client, pkce(), { redirect_uri: 'http://127.0.0.1:9999/elsewhere' }))
  t.equal(wrong.status, 400, 'a redirect_uri the document does not list: 400')
  t.equal(wrong.location, undefined, 'not redirected')
  t.match(wrong.text, /This sign-in link is not valid/)
  t.match(wrong.text, /redirect_uri is not one of the addresses listed in the redirect_uris of the client metadata document/)

  const otherPort = await authorizePage(server, authorizeUrl(server, client, pkce(), { redirect_uri: 'http://127.0.0.1:41234/callback' }))
  t.equal(otherPort.status, 303, 'a loopback redirect on another port matches (RFC 8252), as for registered clients')

  const missing = await authorizePage(server, authorizeUrl(server, { ...client, client_id: 'https://unknown.example/client.json' }, pkce()))
  t.equal(missing.status, 400, 'the resolver refuses: 400')
  t.equal(missing.location, undefined)
  t.match(missing.text, /could not be fetched: HTTP 404/, 'the page carries the resolver’s description')

  documents.refusing = 'The host claude.example is not in SERVICE_CLIENT_DOCUMENT_HOSTS'
  const policy = await authorizePage(server, authorizeUrl(server, client, pkce()))
  t.equal(policy.status, 400)
  t.match(policy.text, /not in SERVICE_CLIENT_DOCUMENT_HOSTS/)
  documents.refusing = undefined

  const asked = documents.asked.length
  const http = await authorizePage(server, authorizeUrl(server, { ...client, client_id: 'HTTP://claude.example/oauth/client.json' }, pkce()))
  t.equal(http.status, 400, 'an http client_id: 400')
  t.equal(http.location, undefined)
  t.match(http.text, /must be served over https/)
  t.equal(documents.asked.length, asked, 'the resolver is never asked for an http URL')
  t.equal(await server.app.repos.oauthClients.byId('https://unknown.example/client.json'), undefined, 'nothing is saved for a refused document')
})

t.test('a document client: the full code flow, refresh, revoke', async (t) => {
  const log: string[] = []
  const { server, documents, code, exchange, refresh } = await setup(t, {}, { log })
  const client = documents.serve(DOC)
  const p = pkce()
  const c = await code(client, p)
  const res = await exchange(client, p, c)
  t.equal(res.status, 200, `exchange: 200 ${res.status === 200 ? '' : JSON.stringify(res.json)}`)
  const tokens = res.json as { access_token: string; refresh_token: string; scope: string }
  t.equal(tokens.scope, 'mcp:read mcp:write')
  const claims = JSON.parse(Buffer.from(tokens.access_token.split('.')[1]!, 'base64url').toString('utf8'))
  t.equal(claims.client_id, DOC, 'the access token names the document URL as client_id')
  const init = await post(server.mcpUrl, initializeMessage(), { authorization: `Bearer ${tokens.access_token}` })
  t.equal(init.status, 200, 'the access token works on /mcp')

  const seen = log.filter((l) => l.includes('first seen through its metadata document'))
  t.equal(seen.length, 1, 'one log line when the client is first seen')
  t.match(JSON.parse(seen[0]!), { client: DOC, host: 'claude.example' })

  // The document changes between uses: a refresh brings the row up to date and says so in the log.
  documents.serve(DOC, { clientName: 'Claude (renamed)', redirectUris: ['http://127.0.0.1:9999/callback', 'https://claude.example/cb'] })
  const refreshed = await refresh(client, tokens.refresh_token)
  t.equal(refreshed.status, 200, 'refresh: 200')
  t.match(await server.app.repos.oauthClients.byId(DOC), { name: 'Claude (renamed)', redirectUris: ['http://127.0.0.1:9999/callback', 'https://claude.example/cb'] }, 'the row follows the document')
  t.equal(log.filter((l) => l.includes('metadata document changed')).length, 1, 'one log line for the change')
  t.ok(documents.asked.filter((u) => u === DOC).length >= 3, 'the document is resolved at authorize, exchange and refresh')

  const next = refreshed.json as { access_token: string; refresh_token: string }
  const revoked = await revokeRequest(server, { token: next.refresh_token, client_id: DOC })
  t.equal(revoked.status, 200, 'revoke: 200')
  const after = await refresh(client, next.refresh_token)
  t.equal(after.status, 400)
  t.equal(after.json?.error, 'invalid_grant', 'the revoked grant is gone')
})

t.test('a refresh after the policy stops allowing the client fails with invalid_client', async (t) => {
  const { server, documents, code, exchange, refresh } = await setup(t)
  const client = documents.serve(DOC)
  const p = pkce()
  const tokens = (await exchange(client, p, await code(client, p))).json as { refresh_token: string }
  documents.refusing = 'Client ID Metadata Documents are turned off on this server (SERVICE_CLIENT_DOCUMENTS=off)'
  const res = await refresh(client, tokens.refresh_token)
  t.equal(res.status, 401)
  t.equal(res.json?.error, 'invalid_client')
  t.match(res.json?.error_description, /turned off/, 'the description says why')
  const revoke = await revokeRequest(server, { token: tokens.refresh_token, client_id: DOC })
  t.equal(revoke.status, 401, 'revocation by a refused client: invalid_client too')

  documents.refusing = undefined
  const back = await refresh(client, tokens.refresh_token)
  t.equal(back.status, 200, 'the refused refresh used nothing up: allowed again, the same refresh token works')
})

t.test('the token endpoint never resolves a document that authorized nothing here', async (t) => {
  const { server, documents } = await setup(t)
  documents.serve(DOC)
  const requests: Array<Record<string, string>> = [
    { grant_type: 'authorization_code', code: 'x'.repeat(43), redirect_uri: 'http://127.0.0.1:9999/callback', client_id: DOC, code_verifier: 'v'.repeat(43) },
    { grant_type: 'refresh_token', refresh_token: 'mcp_rt_' + 'x'.repeat(43), client_id: DOC },
  ]
  for (const fields of requests) {
    const res = await tokenRequest(server, fields)
    t.equal(res.status, 401, `${fields.grant_type}: 401`)
    t.equal(res.json?.error, 'invalid_client')
    t.match(res.json?.error_description, /no authorization was ever started with this metadata document/)
  }
  const http = await tokenRequest(server, { grant_type: 'refresh_token', refresh_token: 'mcp_rt_x', client_id: 'http://claude.example/client.json' })
  t.equal(http.json?.error, 'invalid_client', 'an http client_id: invalid_client')
  t.match(http.json?.error_description, /https/)
  t.strictSame(documents.asked, [], 'no document was resolved')
})

t.test('the account page lists a document client by its host, and revokes it', async (t) => {
  const { server, documents, browser, code, exchange } = await setup(t)
  const client = documents.serve(DOC, { clientName: 'Claude' })
  const p = pkce()
  const tokens = (await exchange(client, p, await code(client, p))).json as { access_token: string }
  const account = await browser.get('/account')
  t.equal(account.status, 200)
  const row = /<tr data-client-id="https:\/\/claude\.example\/oauth\/client\.json">[^]*?<\/tr>/.exec(account.text)?.[0] ?? ''
  t.match(row, /claude\.example <span class="small muted">\(client document; calls itself Claude\)<\/span>/, 'the host first, the name as its claim')
  const href = /href="(\/account\/clients\/[^"]+\/revoke)"/.exec(row)?.[1]
  t.ok(href, 'a revoke link')
  const question = await browser.get(href!.replace(/&amp;/g, '&'))
  t.equal(question.status, 200, 'the revoke question opens for a URL client_id')
  t.match(question.text, /Revoke access of “claude\.example”\?/)
  const done = await browser.post(formAction(question.text), { csrf: formValue(question.text, 'csrf') ?? '', confirm: 'yes' })
  t.equal(done.status, 303)
  const init = await post(server.mcpUrl, initializeMessage(), { authorization: `Bearer ${tokens.access_token}` })
  t.equal(init.status, 401, 'its token is refused after the revocation')
})

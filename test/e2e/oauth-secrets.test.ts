/**
 * Nothing secret is stored or logged in the clear. A server logging everything (level trace) runs a full OAuth flow
 * (register, sign-in and consent over HTTP, exchange, use, refresh, reuse, revoke), API keys are created on the account
 * page and through the repositories, the owner signs in with the password (and once with a wrong one). Then the raw
 * bytes of the SQLite database (with its -wal and -shm files, while running and after a clean stop), or on PostgreSQL
 * every row of every table, and every captured log line are searched for each secret. Hashes of the secrets are
 * expected, and are checked for, so the search is known to look at the right bytes.
 */
import { existsSync, readFileSync } from 'node:fs'
import t, { type Test } from 'tap'
import { request } from 'undici'
import { isPostgresUrl } from '../../src/lib/database-url.js'
import { sha256Hex } from '../../src/lib/crypto.js'
import { postgresTableText } from '../helpers/database.js'
import { callTool, openSession, post } from '../helpers/mcp.js'
import { authorizeUrl, browserAuthorize, FormBrowser, formAction, formValue, pkce, registerClient, revokeRequest, tokenRequest } from '../helpers/oauth.js'
import { createKey, ownerMembership } from '../helpers/seed.js'
import { OWNER_EMAIL, OWNER_KEY, OWNER_PASSWORD, startServer, type TestServer } from '../helpers/server.js'

/**
 * The database file and its companions, as raw bytes (absent files are skipped); on PostgreSQL, whose files are the
 * cluster's, what every row of every table holds, as text (named 'db' too).
 */
async function databaseBytes(t: Test, dbPath: string): Promise<Array<{ name: string; bytes: Buffer }>> {
  if (isPostgresUrl(dbPath)) return [{ name: 'db', bytes: Buffer.from(await postgresTableText(t, dbPath)) }]
  return [dbPath, `${dbPath}-wal`, `${dbPath}-shm`, `${dbPath}-journal`]
    .filter((p) => existsSync(p))
    .map((p) => ({ name: p.slice(dbPath.length) || 'db', bytes: readFileSync(p) }))
}

async function whoamiKind(server: TestServer, token: string): Promise<string> {
  const { headers } = await openSession(server.mcpUrl, token)
  const reply = await post(server.mcpUrl, callTool('service_whoami'), headers)
  const result = reply.json?.result ?? reply.messages.find((m) => m.id === 1)?.result
  return result?.structuredContent?.credential?.kind
}

t.test('secrets never reach the database file or the logs in the clear', async (t) => {
  const logLines: string[] = []
  const stream = { write: (line: string) => void logLines.push(line) }
  const server = await startServer(t, { logger: { level: 'trace', stream } })
  const secrets = new Map<string, string>()
  const secret = (label: string, value: string | undefined | null) => {
    if (typeof value !== 'string' || value.length < 8) throw new Error(`${label}: no usable value (${String(value)})`)
    secrets.set(label, value)
    return value
  }
  secret('owner password', OWNER_PASSWORD)
  secret('bootstrap API key', OWNER_KEY)

  // --- OAuth: register, authorize in the form browser, exchange.
  const client = await registerClient(server, { client_name: 'Secrets test' })
  const p = pkce()
  secret('code_verifier', p.verifier)
  const browser = new FormBrowser(server.url)
  const { redirect } = await browserAuthorize(server, authorizeUrl(server, client, p), { browser })
  const code = secret('authorization code', redirect.searchParams.get('code'))
  const exchange = await tokenRequest(server, { grant_type: 'authorization_code', code, redirect_uri: client.redirect_uris[0]!, client_id: client.client_id, code_verifier: p.verifier, resource: server.url })
  t.equal(exchange.status, 200, 'code exchanged')
  const access1 = exchange.json.access_token as string
  const refresh1 = secret('refresh token 1', exchange.json.refresh_token)
  secret('access token 1 signature', access1.split('.')[2])
  t.equal(await whoamiKind(server, access1), 'oauth', 'the access token works on /mcp')

  // --- Refresh (rotation), then replay the rotated refresh token and the used code (both revoke the grant).
  const refreshed = await tokenRequest(server, { grant_type: 'refresh_token', refresh_token: refresh1, client_id: client.client_id })
  t.equal(refreshed.status, 200, 'refreshed')
  const access2 = refreshed.json.access_token as string
  const refresh2 = secret('refresh token 2', refreshed.json.refresh_token)
  secret('access token 2 signature', access2.split('.')[2])
  t.equal(await whoamiKind(server, access2), 'oauth')

  const revokedAccess = await revokeRequest(server, { token: access2, client_id: client.client_id })
  t.equal(revokedAccess.status, 200, 'access token revoked')
  const afterRevoke = await post(server.mcpUrl, { jsonrpc: '2.0', id: 0, method: 'ping' }, { authorization: `Bearer ${access2}` })
  t.equal(afterRevoke.status, 401, 'a revoked access token is refused')

  const replay = await tokenRequest(server, { grant_type: 'refresh_token', refresh_token: refresh1, client_id: client.client_id })
  t.equal(replay.json?.error, 'invalid_grant', 'a rotated refresh token replayed is refused')
  const revokedRefresh = await revokeRequest(server, { token: refresh2, client_id: client.client_id })
  t.equal(revokedRefresh.status, 200)
  const codeReplay = await tokenRequest(server, { grant_type: 'authorization_code', code, redirect_uri: client.redirect_uris[0]!, client_id: client.client_id, code_verifier: p.verifier })
  t.equal(codeReplay.json?.error, 'invalid_grant', 'a used code replayed is refused')

  // --- A second authorization in the same, already signed-in browser (the consent-only path).
  const p2 = pkce()
  secret('code_verifier 2', p2.verifier)
  const second = await browserAuthorize(server, authorizeUrl(server, client, p2), { browser })
  const code2 = secret('authorization code 2', second.redirect.searchParams.get('code'))
  const exchange2 = await tokenRequest(server, { grant_type: 'authorization_code', code: code2, redirect_uri: client.redirect_uris[0]!, client_id: client.client_id, code_verifier: p2.verifier })
  t.equal(exchange2.status, 200)
  secret('refresh token 3', exchange2.json.refresh_token)
  secret('access token 3 signature', (exchange2.json.access_token as string).split('.')[2])

  // --- The account page: a wrong password, the right one, a key created and rotated.
  const account = new FormBrowser(server.url)
  const signinPage = await account.get('/account/signin')
  t.equal(signinPage.status, 200)
  const wrongPassword = secret('wrong password attempt', 'not the right password 9f3k2')
  const wrong = await account.post('/account/signin', { csrf: formValue(signinPage.text, 'csrf') ?? '', email: OWNER_EMAIL, password: wrongPassword })
  t.equal(wrong.status, 401, 'a wrong password is refused')
  const signin = await account.post('/account/signin', { csrf: formValue(wrong.text, 'csrf') ?? '', email: OWNER_EMAIL, password: OWNER_PASSWORD })
  t.equal(signin.status, 303, 'signed in on the account page')
  const page = await account.get('/account')
  t.equal(page.status, 200)
  const csrf = secret('account CSRF token', formValue(page.text, 'csrf'))
  const posted = await account.post('/account/keys', { csrf, name: 'laptop', membership: formValue(page.text, 'membership') ?? '', scope: 'mcp:read' })
  t.equal(posted.status, 303, 'key created on the account page')
  const created = await account.get(posted.location!)
  const pageKey = secret('account-page API key', /id="new-key">([^<]+)</.exec(created.text)?.[1])
  t.match(pageKey, /^service_mcp_/)
  t.equal(await whoamiKind(server, pageKey), 'api_key', 'the new key works')
  const rotateLink = /href="(\/account\/keys\/[^"]+\/rotate)"/.exec(created.text)?.[1]
  t.ok(rotateLink, 'the page offers to rotate the key')
  const question = await account.get(rotateLink!)
  t.equal(question.status, 200, 'rotating asks first')
  const rotatedPost = await account.post(formAction(question.text), { csrf: formValue(question.text, 'csrf') ?? '', confirm: 'yes' })
  t.equal(rotatedPost.status, 303)
  const rotated = await account.get(rotatedPost.location!)
  const rotatedKey = secret('rotated API key', /id="new-key">([^<]+)</.exec(rotated.text)?.[1])
  t.not(rotatedKey, pageKey)
  t.equal(await whoamiKind(server, rotatedKey), 'api_key')

  // --- A key made through the repositories, and the bootstrap key, used on /mcp.
  const repoKey = secret('repository API key', (await createKey(server, (await ownerMembership(server)).id)).key)
  t.equal(await whoamiKind(server, repoKey), 'api_key')
  t.equal(await whoamiKind(server, OWNER_KEY), 'api_key')
  const bad = await request(server.mcpUrl, { method: 'POST', headers: { authorization: `Bearer ${OWNER_KEY}x`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{}' })
  await bad.body.text()
  t.equal(bad.statusCode, 401, 'a near-miss key is refused (and maybe logged)')

  // Cookies of both browsers: the browser binding and the sign-in cookies.
  for (const [who, b] of [['authorize', browser], ['account', account]] as const) {
    t.ok(b.cookies.has('mcp_browser'), `${who} browser has the browser cookie`)
    t.ok(b.cookies.has('mcp_signin'), `${who} browser has the sign-in cookie`)
    for (const [name, value] of b.cookies) secret(`${who} cookie ${name}`, value)
  }

  // --- While running (the WAL holds the recent writes), then after a clean stop (checkpointed into the main file).
  const running = await databaseBytes(t, server.dbPath)
  await server.close()
  const stopped = await databaseBytes(t, server.dbPath)
  t.ok(stopped.some((f) => f.name === 'db' && f.bytes.length > 0), 'the database file was read')
  const logs = logLines.join('')

  // The search sees the right bytes: what is meant to be stored is found there, in hashed form.
  const all = Buffer.concat(stopped.map((f) => f.bytes))
  for (const label of ['refresh token 1', 'refresh token 2', 'account-page API key', 'rotated API key', 'repository API key', 'authorization code']) {
    t.ok(all.includes(sha256Hex(secrets.get(label)!)), `the SHA-256 of the ${label} is stored`)
  }
  t.ok(all.includes(client.client_id), 'the client id is stored')
  t.ok(logLines.length > 0, 'the logger captured lines')
  for (const message of ['OAuth client registered', 'authorization approved', 'API key created on the account page', 'OAuth credential reuse detected']) {
    t.match(logs, message, `the log has "${message}"`)
  }

  for (const [label, value] of secrets) {
    const needle = Buffer.from(value)
    for (const f of [...running.map((x) => ({ ...x, name: `running ${x.name}` })), ...stopped.map((x) => ({ ...x, name: `stopped ${x.name}` }))]) {
      t.notOk(f.bytes.includes(needle), `${label} is not in the ${f.name} file`)
    }
    t.notOk(logs.includes(value), `${label} is not in the logs`)
  }
})

t.test('refusals are logged with their catalog code, while the secrets sent with them are not', async (t) => {
  const logLines: string[] = []
  const server = await startServer(t, { logger: { level: 'debug', stream: { write: (line: string) => void logLines.push(line) } } })
  const client = await registerClient(server)
  const bogusCode = 'bogus-authorization-code-' + 'x'.repeat(20)
  const refusedGrant = await tokenRequest(server, { grant_type: 'authorization_code', code: bogusCode, redirect_uri: client.redirect_uris[0]!, client_id: client.client_id, code_verifier: pkce().verifier })
  t.equal(refusedGrant.json?.error, 'invalid_grant')
  const refusedToken = await post(server.mcpUrl, { jsonrpc: '2.0', id: 0, method: 'ping' }, { authorization: `Bearer ${OWNER_KEY}x` })
  t.equal(refusedToken.status, 401)
  await server.close()

  const refusals = logLines.filter((l) => (JSON.parse(l) as { msg?: string }).msg === 'request refused')
  t.equal(refusals.length, 2, 'both refusals logged at debug')
  // The redaction path 'code' (meant for authorization codes) must not hide the catalog code, whatever field holds it.
  t.match(refusals[0], '"OAUTH_INVALID_GRANT"', 'the token endpoint refusal names its catalog code')
  t.match(refusals[1], '"INVALID_TOKEN"', 'the /mcp refusal names its catalog code')
  const logs = logLines.join('')
  t.notOk(logs.includes(bogusCode), 'the code sent is not logged')
  t.notOk(logs.includes(`${OWNER_KEY}x`), 'the key sent is not logged')
})

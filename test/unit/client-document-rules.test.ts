/**
 * The rules of client metadata documents that need no network (src/oauth/client-documents/): which client_id URLs
 * are fetched at all, what a document must and must not say, how long a response may be reused, and the settings.
 * The fetch itself, against a real HTTPS server, is in client-documents.test.ts.
 */
import t, { type Test } from 'tap'
import { ConfigError, loadConfig } from '../../src/config.js'
import { checkDocument } from '../../src/oauth/client-documents/document.js'
import { freshnessMs } from '../../src/oauth/client-documents/freshness.js'
import { checkDocumentUrl, isDocumentUrl } from '../../src/oauth/client-documents/url.js'

// RFC 6749 §5.2: error_description may only hold %x20-21 / %x23-5B / %x5D-7E.
const DESCRIPTION_CHARS = /^[\x20\x21\x23-\x5b\x5d-\x7e]+$/
const URL_ = 'https://app.example.com/oauth/client.json'
const SCHEMES = { privateSchemes: ['cursor'] }

function urlRefused(t: Test, raw: string, pattern: RegExp): void {
  const check = checkDocumentUrl(raw)
  if (check.ok) {
    t.fail(`expected ${JSON.stringify(raw)} to be refused`)
    return
  }
  t.match(check.reason, pattern, `${JSON.stringify(raw.slice(0, 60))}: ${check.reason}`)
  t.match(check.reason, DESCRIPTION_CHARS)
}

t.test('isDocumentUrl: http and https URLs in any case, nothing else', async (t) => {
  for (const id of ['https://a.example/c.json', 'HTTPS://a.example/c', 'Https://x', 'http://a.example/c', 'HTTP://x']) t.ok(isDocumentUrl(id), id)
  for (const id of ['mcp_abc', 'https:/a.example', 'https:a.example', ' https://a.example/c', 'ftp://a.example/c', '']) t.notOk(isDocumentUrl(id), id)
})

t.test('URLs in their one normalised form pass', async (t) => {
  for (const raw of [URL_, 'https://vscode.dev/oauth/client-metadata.json', 'https://a.example:8443/c', 'https://[2606:4700::1]/c', 'https://1.1.1.1/c', 'https://a.example/c/', 'https://a.example/%7Euser/c', 'https://xn--bcher-kva.example/c']) {
    const check = checkDocumentUrl(raw)
    t.ok(check.ok, raw)
    if (check.ok) t.equal(check.url.href, raw)
  }
})

t.test('the scheme must be https, in lowercase', async (t) => {
  urlRefused(t, 'http://app.example.com/c.json', /must use https/)
  urlRefused(t, 'HTTPS://app.example.com/c.json', /lowercase/)
  urlRefused(t, 'Https://app.example.com/c.json', /lowercase/)
  urlRefused(t, 'ftp://app.example.com/c.json', /must use https/)
})

t.test('a fragment, even empty, is refused', async (t) => {
  urlRefused(t, `${URL_}#x`, /fragment/)
  urlRefused(t, `${URL_}#`, /fragment/)
})

t.test('userinfo is refused', async (t) => {
  urlRefused(t, 'https://user@app.example.com/c.json', /userinfo/)
  urlRefused(t, 'https://user:pw@app.example.com/c.json', /userinfo/)
  urlRefused(t, 'https://@app.example.com/c.json', /userinfo/)
})

t.test('dot segments are refused, raw and percent-encoded', async (t) => {
  for (const path of ['/./c.json', '/a/../c.json', '/a/.', '/a/..', '/%2e/c', '/%2E%2E/c', '/.%2e/c', '/a/%2e%2E']) {
    urlRefused(t, `https://app.example.com${path}`, /\. or \.\. path segments/)
  }
  t.ok(checkDocumentUrl('https://app.example.com/.well-known/c.json').ok, 'a segment that only starts with a dot is fine')
  t.ok(checkDocumentUrl('https://app.example.com/a.../c').ok)
})

t.test('a query is refused (our choice: the draft only advises against one)', async (t) => {
  urlRefused(t, `${URL_}?v=1`, /query/)
  urlRefused(t, `${URL_}?`, /query/)
  urlRefused(t, 'https://app.example.com?x', /query/)
})

t.test('the path must be there and be more than /', async (t) => {
  urlRefused(t, 'https://app.example.com', /path other than \//)
  urlRefused(t, 'https://app.example.com/', /path other than \//)
  urlRefused(t, 'https:///c.json', /must have a host/)
  urlRefused(t, 'https://', /must have a host/)
})

t.test('control, whitespace, non-ASCII and non-URI characters are refused', async (t) => {
  for (const raw of [`${URL_}\n`, `${URL_} `, ` ${URL_}`, 'https://app.example.com/c\t.json', 'https://app.example.com/c\u0000', 'https://bücher.example/c', 'https://app.example.com/\u202ec', 'https://app.example.com/c\u007f']) {
    urlRefused(t, raw, /whitespace, control or non-ASCII/)
  }
  urlRefused(t, 'https://app.example.com\\c.json', /not allowed in a URI/)
  urlRefused(t, 'https://app.example.com/c"x', /not allowed in a URI/)
  urlRefused(t, 'https://app.example.com/c<x>', /not allowed in a URI/)
  urlRefused(t, 'https://app.example.com/%zz', /malformed percent-encoding/)
  urlRefused(t, 'https://app.example.com/%4', /malformed percent-encoding/)
})

t.test('other spellings of a URL are refused: the id the client sends is the URL fetched', async (t) => {
  for (const raw of ['https://App.Example.com/c.json', 'https://app.example.com:443/c.json', 'https://app.example.com:/c.json', 'https://0x7f.0.0.1/c', 'https://2130706433/c', 'https://127.1/c', 'https://[::FFFF:127.0.0.1]/c', 'https://%61pp.example.com/c']) {
    urlRefused(t, raw, /normalised form|not a valid URL/)
  }
  urlRefused(t, 'https://[::1/c', /not a valid URL/)
})

t.test('at most 2000 characters', async (t) => {
  const base = 'https://app.example.com/'
  t.ok(checkDocumentUrl(base + 'a'.repeat(2000 - base.length)).ok, 'exactly 2000')
  urlRefused(t, base + 'a'.repeat(2001 - base.length), /at most 2000/)
})

// ---------- the document ----------

const url = new URL(URL_)

function documentRefused(t: Test, body: unknown, pattern: RegExp): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body)
  const check = checkDocument(text, url, SCHEMES)
  if (check.ok) {
    t.fail(`expected refusal of ${text.slice(0, 80)}`)
    return
  }
  t.match(check.reason, pattern, check.reason)
  t.match(check.reason, DESCRIPTION_CHARS, 'a valid error_description')
  t.notMatch(check.reason, /evil|secret-value|attacker/, 'the document is not echoed')
}

const doc = (extra: Record<string, unknown> = {}) => ({ client_id: URL_, client_name: 'Example', redirect_uris: ['http://127.0.0.1:3000/cb'], ...extra })

t.test('a valid document: registration rules, defaults, the host as a missing name', async (t) => {
  const full = checkDocument(JSON.stringify(doc({ grant_types: ['authorization_code'], scope: 'mcp:read', token_endpoint_auth_method: 'none', response_types: ['code'], jwks_uri: 'https://app.example.com/jwks', logo_uri: 'http://x', extra: 1 })), url, SCHEMES)
  t.same(full, { ok: true, document: { clientId: URL_, host: 'app.example.com', clientName: 'Example', redirectUris: ['http://127.0.0.1:3000/cb'], grantTypes: ['authorization_code'], scope: 'mcp:read' } })
  const bare = checkDocument(JSON.stringify({ client_id: URL_, redirect_uris: ['cursor://cb'] }), url, SCHEMES)
  t.same(bare, { ok: true, document: { clientId: URL_, host: 'app.example.com', clientName: 'app.example.com', redirectUris: ['cursor://cb'], grantTypes: ['authorization_code', 'refresh_token'], scope: 'mcp:read mcp:write' } })
  const nullName = checkDocument(JSON.stringify(doc({ client_name: null })), url, SCHEMES)
  t.equal(nullName.ok && nullName.document.clientName, 'app.example.com', 'a null name counts as none')
  const withPort = checkDocument(JSON.stringify({ client_id: 'https://a.example:8443/c', redirect_uris: ['https://a.example/cb'] }), new URL('https://a.example:8443/c'), SCHEMES)
  t.equal(withPort.ok && withPort.document.host, 'a.example:8443', 'the host shows a port other than 443')
})

t.test('invalid JSON and non-objects are refused', async (t) => {
  for (const text of ['', '{', '{"client_id":', 'nul', '\u00ff\u00fe{}', '{"a":1}x']) documentRefused(t, text, /not valid JSON/)
  for (const text of ['null', '[]', '"x"', '42', 'true', `[${JSON.stringify(doc())}]`]) documentRefused(t, text, /must be a JSON object/)
})

t.test('client_id must equal the URL exactly', async (t) => {
  documentRefused(t, { redirect_uris: ['https://a.example/cb'] }, /must contain client_id/)
  for (const id of [`${URL_}/`, URL_.toUpperCase(), 'https://APP.example.com/oauth/client.json', 'https://app.example.com:443/oauth/client.json', `${URL_}#`, `${URL_}?`, ` ${URL_}`, 'https://evil.example/oauth/client.json', 'https://app.example.com/oauth/./client.json', null, 42, [URL_]]) {
    documentRefused(t, doc({ client_id: id }), /client_id must equal the client_id URL exactly/)
  }
})

t.test('secrets in the document are refused', async (t) => {
  documentRefused(t, doc({ client_secret: 'secret-value' }), /must not contain client_secret/)
  documentRefused(t, doc({ client_secret: '' }), /must not contain client_secret/)
  documentRefused(t, doc({ client_secret_expires_at: 0 }), /must not contain client_secret/)
})

t.test('an authentication method other than none is refused', async (t) => {
  for (const method of ['client_secret_basic', 'client_secret_post', 'client_secret_jwt', 'private_key_jwt', 'tls_client_auth', 'None', '']) {
    documentRefused(t, doc({ token_endpoint_auth_method: method }), /token_endpoint_auth_method must be none/)
  }
  documentRefused(t, doc({ token_endpoint_auth_method: 1 }), /token_endpoint_auth_method must be a string/)
})

t.test('bad redirect URIs are refused, naming the index', async (t) => {
  documentRefused(t, doc({ redirect_uris: undefined }), /redirect_uris is required/)
  documentRefused(t, doc({ redirect_uris: [] }), /at least one/)
  documentRefused(t, doc({ redirect_uris: 'https://a.example/cb' }), /must be an array/)
  documentRefused(t, doc({ redirect_uris: ['https://a.example/cb', 'javascript:alert(1)'] }), /redirect_uris\[1\] the javascript: scheme is never allowed/)
  documentRefused(t, doc({ redirect_uris: ['http://attacker.example/cb'] }), /redirect_uris\[0\] http is only allowed on localhost/)
  documentRefused(t, doc({ redirect_uris: ['https://a.example/cb#frag'] }), /redirect_uris\[0\] must not contain a fragment/)
  documentRefused(t, doc({ redirect_uris: ['vscode://cb'] }), /redirect_uris\[0\] the vscode: scheme is not allowed on this server/)
  documentRefused(t, doc({ redirect_uris: ['https://A.example/cb'] }), /redirect_uris\[0\] must be in normalised form/)
})

t.test('the other registration fields are checked as at registration', async (t) => {
  documentRefused(t, doc({ grant_types: ['client_credentials'] }), /grant_types may only contain/)
  documentRefused(t, doc({ grant_types: ['refresh_token'] }), /grant_types must include authorization_code/)
  documentRefused(t, doc({ response_types: ['token'] }), /response_types must be exactly \[code\]/)
  documentRefused(t, doc({ scope: 'admin' }), /scope may only contain/)
  documentRefused(t, doc({ client_name: 'evil\u202ename' }), /client_name must not contain control/)
  documentRefused(t, doc({ client_name: 7 }), /client_name must be a string/)
})

// ---------- freshness ----------

const bounds = { minMs: 300_000, maxMs: 86_400_000 }
const NOW = Date.parse('2026-01-01T00:00:00Z')

t.test('freshness: max-age honoured between the bounds, clamped both ways', async (t) => {
  t.equal(freshnessMs({ 'cache-control': 'public, max-age=3600' }, NOW, bounds), 3_600_000)
  t.equal(freshnessMs({ 'cache-control': 'max-age="3600"' }, NOW, bounds), 3_600_000, 'a quoted value')
  t.equal(freshnessMs({ 'cache-control': 'max-age=3600', age: '600' }, NOW, bounds), 3_000_000, 'Age is subtracted')
  t.equal(freshnessMs({ 'cache-control': 'max-age=10' }, NOW, bounds), 300_000, 'raised to the minimum')
  t.equal(freshnessMs({ 'cache-control': 'max-age=31536000' }, NOW, bounds), 86_400_000, 'lowered to the maximum')
  t.equal(freshnessMs({ 'cache-control': 'max-age=0' }, NOW, bounds), 300_000)
})

t.test('freshness: no-store and no-cache mean the minimum, whatever else is said', async (t) => {
  t.equal(freshnessMs({ 'cache-control': 'no-store' }, NOW, bounds), 300_000)
  t.equal(freshnessMs({ 'cache-control': 'max-age=3600, no-cache' }, NOW, bounds), 300_000)
  t.equal(freshnessMs({ 'cache-control': 'No-Store', expires: 'Thu, 01 Jan 2026 02:00:00 GMT' }, NOW, bounds), 300_000)
})

t.test('freshness: Expires, against the response Date when there is one', async (t) => {
  t.equal(freshnessMs({ expires: 'Thu, 01 Jan 2026 02:00:00 GMT' }, NOW, bounds), 7_200_000, 'against our clock')
  t.equal(freshnessMs({ expires: 'Thu, 01 Jan 2026 02:00:00 GMT', date: 'Thu, 01 Jan 2026 01:00:00 GMT' }, NOW + 999_000, bounds), 3_600_000, 'against its Date')
  t.equal(freshnessMs({ expires: '0' }, NOW, bounds), 300_000, 'an invalid Expires is already expired')
  t.equal(freshnessMs({ expires: 'Wed, 01 Jan 2025 00:00:00 GMT' }, NOW, bounds), 300_000, 'a past Expires')
  t.equal(freshnessMs({ 'cache-control': 'max-age=7200', expires: 'Thu, 01 Jan 2026 00:10:00 GMT' }, NOW, bounds), 7_200_000, 'max-age wins over Expires')
  t.equal(freshnessMs({}, NOW, bounds), 300_000, 'nothing said: the minimum')
})

// ---------- settings ----------

t.test('settings: defaults, and what stops the start', async (t) => {
  const c = loadConfig({ env: {} })
  t.match(c, { clientDocuments: 'all', clientDocumentHosts: [], clientDocumentsUnsafeLoopbackHosts: [], clientDocumentTimeoutMs: 2500, clientDocumentMaxBytes: 5120, clientDocumentCacheMinMs: 300_000, clientDocumentCacheMaxMs: 86_400_000, clientDocumentFailureCacheMs: 30_000 })
  const env = (extra: Record<string, string>) => () => loadConfig({ env: extra })
  t.throws(env({ SERVICE_CLIENT_DOCUMENTS: 'some' }), ConfigError)
  t.throws(env({ SERVICE_CLIENT_DOCUMENTS: 'listed' }), /SERVICE_CLIENT_DOCUMENT_HOSTS, which is empty/)
  t.match(loadConfig({ env: { SERVICE_CLIENT_DOCUMENTS: 'listed', SERVICE_CLIENT_DOCUMENT_HOSTS: 'vscode.dev, docs.example.com:8443' } }).clientDocumentHosts, ['vscode.dev', 'docs.example.com:8443'])
  for (const bad of ['VSCode.dev', 'https://vscode.dev', 'vscode.dev/x', 'vscode.dev:443', 'user@vscode.dev', 'a b']) {
    t.throws(env({ SERVICE_CLIENT_DOCUMENTS: 'listed', SERVICE_CLIENT_DOCUMENT_HOSTS: bad }), /SERVICE_CLIENT_DOCUMENT_HOSTS entry/, bad)
  }
  t.match(loadConfig({ env: { SERVICE_CLIENT_DOCUMENTS_UNSAFE_LOOPBACK_HOSTS: 'localhost,[::1]' } }).clientDocumentsUnsafeLoopbackHosts, ['localhost', '[::1]'])
  t.throws(env({ SERVICE_CLIENT_DOCUMENTS_UNSAFE_LOOPBACK_HOSTS: 'localhost:8443' }), /UNSAFE_LOOPBACK_HOSTS entry/)
  t.throws(env({ SERVICE_CLIENT_DOCUMENT_CACHE_MIN_MS: '10', SERVICE_CLIENT_DOCUMENT_CACHE_MAX_MS: '5' }), /must not exceed/)
})

import t, { type Test } from 'tap'
import { FORBIDDEN_REDIRECT_SCHEMES } from '../../src/config.js'
import { checkRedirectUri, isLoopbackRedirect, MAX_REDIRECT_URI_LENGTH, redirectUriMatches } from '../../src/oauth/redirect-uri.js'

const none = { privateSchemes: [] as string[] }
const cursor = { privateSchemes: ['cursor', 'com.example.app'] }
// RFC 6749 §5.2: error_description may only hold %x20-21 / %x23-5B / %x5D-7E.
const DESCRIPTION_CHARS = /^[\x20\x21\x23-\x5b\x5d-\x7e]+$/

function refused(t: Test, raw: unknown, options = none, pattern?: RegExp): void {
  const reason = checkRedirectUri(raw, options)
  t.type(reason, 'string', `refused: ${JSON.stringify(raw)?.slice(0, 80)}`)
  if (typeof reason === 'string') {
    t.match(reason, DESCRIPTION_CHARS, 'reason is a valid error_description')
    if (pattern) t.match(reason, pattern, `reason for ${JSON.stringify(raw)?.slice(0, 80)}`)
  }
}

function accepted(t: Test, raw: string, options = none): void {
  t.equal(checkRedirectUri(raw, options), null, `accepted: ${raw}`)
}

t.test('accepted redirect URIs', async (t) => {
  for (const uri of [
    'http://localhost:3000/cb',
    'http://localhost/cb',
    'http://127.0.0.1/cb',
    'http://127.0.0.1:8080/oauth/callback',
    'http://[::1]:3000/cb',
    'http://localhost',
    'http://localhost:65535/cb',
    'http://localhost/cb?x=1&y=2',
    'https://app.example.com/cb',
    'https://app.example.com',
    'https://app.example.com/',
    'https://app.example.com:8443/cb',
    'https://app.example.com/cb?client=1',
    'https://app.example.com/a%20b',
    'https://app.example.com/a%2Fb',
    'https://203.0.113.7/cb',
    'https://app.example.com/' + 'a'.repeat(MAX_REDIRECT_URI_LENGTH - 'https://app.example.com/'.length),
  ]) {
    accepted(t, uri)
  }
})

t.test('http only on a literal loopback host', async (t) => {
  refused(t, 'http://example.com/cb', none, /localhost, 127\.0\.0\.1 or \[::1\]/)
  refused(t, 'http://app.example.com:3000/cb')
  refused(t, 'http://10.0.0.1/cb')
  refused(t, 'http://127.0.0.2/cb')
  refused(t, 'http://localhost.example.com/cb')
  refused(t, 'http://127.000.000.001/cb')
  refused(t, 'http://127.1/cb')
  refused(t, 'http://0x7f.0.0.1/cb')
  refused(t, 'http://LOCALHOST/cb')
  refused(t, 'http://Localhost/cb')
  refused(t, 'http://localhost./cb')
  refused(t, 'http://[0:0:0:0:0:0:0:1]/cb')
  refused(t, 'http://[::ffff:127.0.0.1]/cb')
  refused(t, 'HTTP://localhost/cb', none, /lowercase/)
  refused(t, 'Http://localhost/cb', none, /lowercase/)
  refused(t, 'HTTPS://app.example.com/cb', none, /lowercase/)
})

t.test('ports', async (t) => {
  refused(t, 'http://localhost:0/cb')
  refused(t, 'http://localhost:65536/cb')
  refused(t, 'http://localhost:03000/cb')
  refused(t, 'http://localhost:/cb')
  refused(t, 'http://localhost:80/cb', none, /normalised/)
  refused(t, 'https://app.example.com:443/cb', none, /normalised/)
  refused(t, 'https://app.example.com:/cb', none, /normalised/)
})

t.test('forbidden schemes are always refused', async (t) => {
  const everything = { privateSchemes: [...FORBIDDEN_REDIRECT_SCHEMES] }
  refused(t, 'javascript:alert(1)', none, /javascript: scheme is never allowed/)
  refused(t, 'JAVASCRIPT:alert(1)', none, /javascript: scheme is never allowed/)
  refused(t, 'JavaScript:alert(1)', everything, /never allowed/)
  refused(t, 'javascript://app.example.com/%0aalert(1)', everything, /never allowed/)
  refused(t, 'data:text/html,<script>alert(1)</script>', none, /data: scheme is never allowed/)
  refused(t, 'data:text/html;base64,PHNjcmlwdD4=', everything, /never allowed/)
  refused(t, 'file:///x', none, /file: scheme is never allowed/)
  refused(t, 'file:///etc/passwd', everything, /never allowed/)
  for (const scheme of FORBIDDEN_REDIRECT_SCHEMES) {
    refused(t, `${scheme}://app.example.com/cb`, everything, /never allowed/)
  }
})

t.test('fragments, userinfo, dot segments', async (t) => {
  refused(t, 'https://a.example.com/cb#', none, /fragment/)
  refused(t, 'https://a.example.com/cb#x', none, /fragment/)
  refused(t, 'http://localhost:3000/cb#', none, /fragment/)
  refused(t, 'cursor://callback#', cursor, /fragment/)
  refused(t, 'https://user@a.example.com/cb', none, /userinfo/)
  refused(t, 'https://user:pass@a.example.com/cb', none, /userinfo/)
  refused(t, 'https://@a.example.com/cb', none, /userinfo/)
  refused(t, 'http://user@localhost/cb', none, /userinfo/)
  refused(t, 'cursor://user@callback', cursor, /userinfo/)
  accepted(t, 'https://a.example.com/cb/@handle')
  refused(t, 'http://localhost/x/../cb', none, /\. or \.\. path segments/)
  refused(t, 'http://localhost/./cb', none, /path segments/)
  refused(t, 'http://localhost/cb/.', none, /path segments/)
  refused(t, 'https://a.example.com/x/%2e%2e/cb', none, /path segments/)
  refused(t, 'https://a.example.com/x/.%2E/cb', none, /path segments/)
  refused(t, 'cursor://callback/x/../cb', cursor, /path segments/)
  refused(t, 'com.example.app:/./cb', cursor, /path segments/)
  accepted(t, 'https://a.example.com/x/..cb')
  accepted(t, 'https://a.example.com/x/.well-known/cb')
})

t.test('characters, length, type', async (t) => {
  refused(t, undefined, none, /string/)
  refused(t, null, none, /string/)
  refused(t, 42, none, /string/)
  refused(t, ['https://a.example.com/cb'], none, /string/)
  refused(t, '', none, /empty/)
  refused(t, 'https://app.example.com/' + 'a'.repeat(MAX_REDIRECT_URI_LENGTH), none, /at most 2000/)
  refused(t, 'https://a.example.com/c b', none, /whitespace/)
  refused(t, ' https://a.example.com/cb', none, /whitespace/)
  refused(t, 'https://a.example.com/cb ', none, /whitespace/)
  refused(t, 'https://a.example.com/c\tb', none, /whitespace/)
  refused(t, 'https://a.example.com/cb\n', none, /whitespace/)
  refused(t, 'https://a.example.com/c\u0000b', none, /control/)
  refused(t, 'https://a.example.com/c\u007fb', none, /control/)
  refused(t, 'https://a.example.com/caf\u00e9', none, /non-ASCII/)
  refused(t, 'https://bücher.example/cb', none, /non-ASCII/)
  refused(t, 'https://a.example.com\\@evil.example/cb', none, /not allowed in a URI/)
  refused(t, 'https://a.example.com/a<b', none, /not allowed in a URI/)
  refused(t, 'https://a.example.com/a"b', none, /not allowed in a URI/)
  refused(t, 'https://a.example.com/a|b', none, /not allowed in a URI/)
  refused(t, 'https://a.example.com/%zz', none, /percent-encoding/)
  refused(t, 'https://a.example.com/%2', none, /percent-encoding/)
  refused(t, '/cb', none, /absolute/)
  refused(t, 'a.example.com/cb', none, /absolute/)
  refused(t, '//a.example.com/cb', none, /absolute/)
})

t.test('https needs a host and the normalised form', async (t) => {
  refused(t, 'https:///cb', none)
  refused(t, 'https:cb', none, /host/)
  refused(t, 'https://', none)
  refused(t, 'https://A.example.com/cb', none, /normalised/)
  refused(t, 'https://a.example.com?x=1', none, /normalised/)
  refused(t, 'https://%61.example.com/cb', none, /normalised/)
  refused(t, 'https://a.example.COM/cb', none, /normalised/)
  // Percent-encoded unreserved characters are left alone by URL parsing; exact matching keeps them harmless.
  accepted(t, 'https://a.example.com/%7Euser')
  refused(t, 'https://XN--BCHER-KVA.EXAMPLE/CB', none, /normalised/)
  accepted(t, 'https://xn--bcher-kva.example/cb')
})

t.test('private-use schemes only when configured', async (t) => {
  refused(t, 'cursor://callback', none, /cursor: scheme is not allowed on this server/)
  accepted(t, 'cursor://callback', { privateSchemes: ['cursor'] })
  accepted(t, 'cursor://anysphere.cursor-retrieval/oauth/callback', cursor)
  accepted(t, 'com.example.app:/oauth2redirect', cursor)
  refused(t, 'com.example.app:/oauth2redirect', { privateSchemes: ['cursor'] }, /not allowed on this server/)
  refused(t, 'vscode://callback', cursor, /vscode: scheme is not allowed/)
  refused(t, 'Cursor://callback', cursor, /lowercase/)
  refused(t, 'cursor:', cursor, /something after the scheme/)
  refused(t, 'cursor://callback:0080/x', cursor, /normalised/)
  refused(t, 'cursor://callback:/x', cursor, /normalised/)
  // http and https keep their own rules even if the list (wrongly) names them.
  refused(t, 'http://example.com/cb', { privateSchemes: ['http'] }, /localhost/)
})

t.test('isLoopbackRedirect', async (t) => {
  for (const uri of ['http://localhost/cb', 'http://localhost:1234/cb', 'http://127.0.0.1:1/x', 'http://[::1]:65535/', 'http://localhost']) {
    t.equal(isLoopbackRedirect(uri), true, uri)
  }
  for (const uri of [
    'https://localhost/cb',
    'http://localhost:0/cb',
    'http://localhost:65536/cb',
    'http://localhost:012/cb',
    'http://localhost:/cb',
    'http://LOCALHOST/cb',
    'HTTP://localhost/cb',
    'http://127.0.0.1.nip.io/cb',
    'http://localhost@evil.example/cb',
    'http://localhost/cb#x',
    'http://example.com/cb',
  ]) {
    t.equal(isLoopbackRedirect(uri), false, uri)
  }
})

t.test('redirectUriMatches: exact string match', async (t) => {
  const reg = ['https://a.example.com/cb']
  t.equal(redirectUriMatches(reg, 'https://a.example.com/cb'), true, 'itself')
  for (const other of [
    'https://a.example.com/cb/',
    'https://a.example.com/cb?x=1',
    'https://a.example.com/cb?',
    'https://a.example.com/cb#',
    'https://a.example.com:443/cb',
    'https://a.example.com:8443/cb',
    'https://A.example.com/cb',
    'https://a.example.com/CB',
    'https://a.example.com/cb2',
    'https://a.example.com/c%62',
    'https://a.example.com/x/../cb',
    'http://a.example.com/cb',
    'https://a.example.com',
    'https://b.example.com/cb',
    '',
  ]) {
    t.equal(redirectUriMatches(reg, other), false, `no match: ${other}`)
  }
  t.equal(redirectUriMatches(['https://a.example.com/cb?x=1'], 'https://a.example.com/cb'), false, 'query differs')
  t.equal(redirectUriMatches(['https://a.example.com/one', 'https://a.example.com/two'], 'https://a.example.com/two'), true, 'any entry')
  t.equal(redirectUriMatches([], 'https://a.example.com/cb'), false, 'nothing registered')
  t.equal(redirectUriMatches(['cursor://callback'], 'cursor://callback'), true)
  t.equal(redirectUriMatches(['cursor://callback'], 'cursor://callback/'), false)
  t.equal(redirectUriMatches(reg, undefined as unknown as string), false, 'non-string never matches')
})

t.test('redirectUriMatches: loopback port may differ (RFC 8252)', async (t) => {
  t.equal(redirectUriMatches(['http://localhost:5678/cb'], 'http://localhost:1234/cb'), true, 'other port')
  t.equal(redirectUriMatches(['http://localhost/cb'], 'http://localhost:1234/cb'), true, 'registered without port')
  t.equal(redirectUriMatches(['http://localhost:5678/cb'], 'http://localhost/cb'), true, 'requested without port')
  t.equal(redirectUriMatches(['http://127.0.0.1/cb'], 'http://127.0.0.1:49152/cb'), true)
  t.equal(redirectUriMatches(['http://[::1]:1/cb'], 'http://[::1]:2/cb'), true)
  t.equal(redirectUriMatches(['http://localhost/cb?a=1'], 'http://localhost:9/cb?a=1'), true, 'same query')
  t.equal(redirectUriMatches(['http://localhost'], 'http://localhost:9'), true, 'bare origin')

  t.equal(redirectUriMatches(['http://localhost:5678/cb'], 'http://127.0.0.1:1234/cb'), false, 'localhost is not 127.0.0.1')
  t.equal(redirectUriMatches(['http://127.0.0.1/cb'], 'http://localhost/cb'), false)
  t.equal(redirectUriMatches(['http://127.0.0.1/cb'], 'http://[::1]/cb'), false)
  t.equal(redirectUriMatches(['http://localhost/cb'], 'http://localhost:1234/cb/'), false, 'path differs')
  t.equal(redirectUriMatches(['http://localhost/cb'], 'http://localhost:1234/CB'), false)
  t.equal(redirectUriMatches(['http://localhost/cb'], 'http://localhost:1234/cb?x=1'), false, 'query differs')
  t.equal(redirectUriMatches(['http://localhost'], 'http://localhost:1234/'), false, 'missing path is not /')
  t.equal(redirectUriMatches(['http://localhost/'], 'http://localhost:1234'), false)
  t.equal(redirectUriMatches(['http://localhost/cb'], 'http://localhost:1234/cb#'), false, 'fragment')
  t.equal(redirectUriMatches(['http://localhost/cb'], 'http://localhost:99999/cb'), false, 'port out of range')
  t.equal(redirectUriMatches(['http://localhost/cb'], 'http://localhost:0/cb'), false, 'port 0')
  t.equal(redirectUriMatches(['http://localhost/cb'], 'http://localhost:/cb'), false, 'empty port')
  t.equal(redirectUriMatches(['http://localhost/cb'], 'http://LOCALHOST:1234/cb'), false, 'host case')
  t.equal(redirectUriMatches(['http://localhost/cb'], 'https://localhost:1234/cb'), false, 'https is not loopback http')
  t.equal(redirectUriMatches(['https://localhost/cb'], 'https://localhost:1234/cb'), false, 'only http loopback may vary')
  t.equal(redirectUriMatches(['http://localhost/cb'], 'http://localhost:1234@evil.example/cb'), false, 'userinfo trick')
})

import t, { type Test } from 'tap'
import { checkRegistration, type ClientRegistration, type RegistrationCheck } from '../../src/oauth/client-metadata.js'

const opts = { privateSchemes: [] as string[] }
const CB = 'http://localhost:3000/cb'
// RFC 6749 §5.2: error_description may only hold %x20-21 / %x23-5B / %x5D-7E.
const DESCRIPTION_CHARS = /^[\x20\x21\x23-\x5b\x5d-\x7e]+$/

function ok(t: Test, body: unknown, options = opts): ClientRegistration {
  const r = checkRegistration(body, options)
  if (!r.ok) t.fail(`expected success, got ${r.error}: ${r.description}`)
  else t.pass('accepted')
  return (r as Extract<RegistrationCheck, { ok: true }>).value
}

function bad(t: Test, body: unknown, error: 'invalid_redirect_uri' | 'invalid_client_metadata', pattern: RegExp, options = opts): void {
  const r = checkRegistration(body, options)
  if (r.ok) {
    t.fail(`expected ${error}, got success for ${JSON.stringify(body).slice(0, 100)}`)
    return
  }
  t.equal(r.error, error, `${error}: ${r.description}`)
  t.match(r.description, pattern)
  t.match(r.description, DESCRIPTION_CHARS, 'description is a valid error_description')
}

t.test('minimal body gets the defaults', async (t) => {
  t.same(ok(t, { redirect_uris: [CB] }), {
    clientName: 'Unnamed client',
    redirectUris: [CB],
    grantTypes: ['authorization_code', 'refresh_token'],
    responseTypes: ['code'],
    tokenEndpointAuthMethod: 'none',
    scope: 'mcp:read mcp:write',
  })
})

t.test('a full, typical body', async (t) => {
  const value = ok(t, {
    client_name: '  Claude Code  ',
    redirect_uris: ['http://localhost:53211/callback', 'https://app.example.com/cb'],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
    scope: 'mcp:read mcp:write',
  })
  t.same(value, {
    clientName: 'Claude Code',
    redirectUris: ['http://localhost:53211/callback', 'https://app.example.com/cb'],
    grantTypes: ['authorization_code', 'refresh_token'],
    responseTypes: ['code'],
    tokenEndpointAuthMethod: 'none',
    scope: 'mcp:read mcp:write',
  })
})

t.test('body must be a plain JSON object', async (t) => {
  for (const body of [null, undefined, [], [{ redirect_uris: [CB] }], 'x', 42, true, new Map(), new Date()]) {
    bad(t, body, 'invalid_client_metadata', /JSON object/)
  }
  ok(t, Object.assign(Object.create(null) as object, { redirect_uris: [CB] }))
})

t.test('redirect_uris', async (t) => {
  bad(t, {}, 'invalid_redirect_uri', /redirect_uris is required/)
  bad(t, { redirect_uris: null }, 'invalid_redirect_uri', /redirect_uris is required/)
  bad(t, { redirect_uris: CB }, 'invalid_client_metadata', /redirect_uris must be an array/)
  bad(t, { redirect_uris: { 0: CB } }, 'invalid_client_metadata', /redirect_uris must be an array/)
  bad(t, { redirect_uris: [] }, 'invalid_redirect_uri', /at least one/)
  bad(t, { redirect_uris: [CB, 42] }, 'invalid_client_metadata', /redirect_uris\[1\] must be a string/)
  bad(t, { redirect_uris: [null] }, 'invalid_client_metadata', /redirect_uris\[0\] must be a string/)
  const eleven = Array.from({ length: 11 }, (_, i) => `http://localhost/cb${i}`)
  bad(t, { redirect_uris: eleven }, 'invalid_redirect_uri', /at most 10/)
  t.equal(ok(t, { redirect_uris: eleven.slice(0, 10) }).redirectUris.length, 10, 'ten is fine')

  bad(t, { redirect_uris: [CB, 'http://example.com/cb'] }, 'invalid_redirect_uri', /^redirect_uris\[1\] http is only allowed on localhost/)
  bad(t, { redirect_uris: ['javascript:alert(1)'] }, 'invalid_redirect_uri', /redirect_uris\[0\] the javascript: scheme is never allowed/)
  bad(t, { redirect_uris: ['https://a.example.com/cb#'] }, 'invalid_redirect_uri', /redirect_uris\[0\] .*fragment/)
  bad(t, { redirect_uris: ['https://user@a.example.com/cb'] }, 'invalid_redirect_uri', /userinfo/)
  bad(t, { redirect_uris: ['cursor://callback'] }, 'invalid_redirect_uri', /cursor: scheme is not allowed/)
  t.same(ok(t, { redirect_uris: ['cursor://callback'] }, { privateSchemes: ['cursor'] }).redirectUris, ['cursor://callback'])
  bad(t, { redirect_uris: ['https://a.example.com/"><script>'] }, 'invalid_redirect_uri', /redirect_uris\[0\]/)

  t.same(
    ok(t, { redirect_uris: [CB, 'http://127.0.0.1:3000/cb', CB, 'http://127.0.0.1:3000/cb', 'https://a.example.com/cb'] }).redirectUris,
    [CB, 'http://127.0.0.1:3000/cb', 'https://a.example.com/cb'],
    'duplicates removed, order kept, localhost and 127.0.0.1 kept apart',
  )
})

t.test('client_name', async (t) => {
  t.equal(ok(t, { redirect_uris: [CB], client_name: 'My App' }).clientName, 'My App')
  t.equal(ok(t, { redirect_uris: [CB], client_name: '  My App\u00a0 ' }).clientName, 'My App', 'trimmed (Unicode spaces too)')
  t.equal(ok(t, { redirect_uris: [CB], client_name: 'Ünïcödé 日本 🚀' }).clientName, 'Ünïcödé 日本 🚀', 'Unicode is fine')
  t.equal(ok(t, { redirect_uris: [CB], client_name: null }).clientName, 'Unnamed client', 'null counts as absent')
  t.equal(ok(t, { redirect_uris: [CB], client_name: 'x'.repeat(200) }).clientName.length, 200, '200 characters')
  t.equal(ok(t, { redirect_uris: [CB], client_name: '🚀'.repeat(200) }).clientName, '🚀'.repeat(200), 'length counts characters, not UTF-16 units')
  bad(t, { redirect_uris: [CB], client_name: 'x'.repeat(201) }, 'invalid_client_metadata', /client_name must be at most 200/)
  bad(t, { redirect_uris: [CB], client_name: '' }, 'invalid_client_metadata', /client_name must not be empty/)
  bad(t, { redirect_uris: [CB], client_name: '   ' }, 'invalid_client_metadata', /client_name must not be empty/)
  bad(t, { redirect_uris: [CB], client_name: 42 }, 'invalid_client_metadata', /client_name must be a string/)
  bad(t, { redirect_uris: [CB], client_name: ['My App'] }, 'invalid_client_metadata', /client_name must be a string/)
  for (const name of ['My\nApp', 'My\tApp', 'My App\n', 'A\u0000B', 'A\u007fB', 'A\u0085B', 'A\u202eB', 'A\u200bB', 'A\u2028B', 'A\ufeffB', 'A\ud800B']) {
    bad(t, { redirect_uris: [CB], client_name: name }, 'invalid_client_metadata', /client_name must not contain control/)
  }
})

t.test('grant_types', async (t) => {
  t.same(ok(t, { redirect_uris: [CB], grant_types: ['authorization_code'] }).grantTypes, ['authorization_code'], 'no refresh tokens')
  t.same(ok(t, { redirect_uris: [CB], grant_types: ['refresh_token', 'authorization_code', 'refresh_token'] }).grantTypes, ['authorization_code', 'refresh_token'], 'deduplicated, canonical order')
  t.same(ok(t, { redirect_uris: [CB], grant_types: null }).grantTypes, ['authorization_code', 'refresh_token'], 'null counts as absent')
  bad(t, { redirect_uris: [CB], grant_types: ['refresh_token'] }, 'invalid_client_metadata', /must include authorization_code/)
  bad(t, { redirect_uris: [CB], grant_types: [] }, 'invalid_client_metadata', /must include authorization_code/)
  for (const g of ['client_credentials', 'implicit', 'password', 'urn:ietf:params:oauth:grant-type:device_code', 'AUTHORIZATION_CODE']) {
    bad(t, { redirect_uris: [CB], grant_types: ['authorization_code', g] }, 'invalid_client_metadata', /grant_types may only contain authorization_code and refresh_token/)
  }
  bad(t, { redirect_uris: [CB], grant_types: 'authorization_code' }, 'invalid_client_metadata', /grant_types must be an array of strings/)
  bad(t, { redirect_uris: [CB], grant_types: ['authorization_code', 1] }, 'invalid_client_metadata', /grant_types must be an array of strings/)
})

t.test('response_types', async (t) => {
  t.same(ok(t, { redirect_uris: [CB], response_types: ['code'] }).responseTypes, ['code'])
  t.same(ok(t, { redirect_uris: [CB], response_types: ['code', 'code'] }).responseTypes, ['code'], 'deduplicated')
  bad(t, { redirect_uris: [CB], response_types: [] }, 'invalid_client_metadata', /response_types must be exactly \[code\]/)
  bad(t, { redirect_uris: [CB], response_types: ['token'] }, 'invalid_client_metadata', /response_types must be exactly/)
  bad(t, { redirect_uris: [CB], response_types: ['code', 'token'] }, 'invalid_client_metadata', /response_types must be exactly/)
  bad(t, { redirect_uris: [CB], response_types: ['code id_token'] }, 'invalid_client_metadata', /response_types must be exactly/)
  bad(t, { redirect_uris: [CB], response_types: 'code' }, 'invalid_client_metadata', /response_types must be an array of strings/)
})

t.test('token_endpoint_auth_method', async (t) => {
  t.equal(ok(t, { redirect_uris: [CB], token_endpoint_auth_method: 'none' }).tokenEndpointAuthMethod, 'none')
  for (const m of ['client_secret_basic', 'client_secret_post', 'private_key_jwt', 'NONE', '']) {
    bad(t, { redirect_uris: [CB], token_endpoint_auth_method: m }, 'invalid_client_metadata', /only public clients are supported; PKCE is required/)
  }
  bad(t, { redirect_uris: [CB], token_endpoint_auth_method: ['none'] }, 'invalid_client_metadata', /token_endpoint_auth_method must be a string/)
})

t.test('scope', async (t) => {
  const scope = (s: unknown): string => ok(t, { redirect_uris: [CB], scope: s }).scope
  t.equal(scope('mcp:read'), 'mcp:read')
  t.equal(scope('mcp:write'), 'mcp:write')
  t.equal(scope('mcp:write mcp:read'), 'mcp:read mcp:write', 'canonical order')
  t.equal(scope('mcp:read  mcp:read   mcp:write '), 'mcp:read mcp:write', 'deduplicated, extra spaces dropped')
  t.equal(scope(''), 'mcp:read mcp:write', 'empty means unspecified')
  t.equal(scope(null), 'mcp:read mcp:write', 'null means unspecified')
  bad(t, { redirect_uris: [CB], scope: 'mcp:read openid' }, 'invalid_client_metadata', /scope may only contain mcp:read and mcp:write/)
  bad(t, { redirect_uris: [CB], scope: 'mcp:admin' }, 'invalid_client_metadata', /scope may only contain/)
  bad(t, { redirect_uris: [CB], scope: 'MCP:READ' }, 'invalid_client_metadata', /scope may only contain/)
  bad(t, { redirect_uris: [CB], scope: 'mcp:read\tmcp:write' }, 'invalid_client_metadata', /scope may only contain/)
  bad(t, { redirect_uris: [CB], scope: 'mcp:read,mcp:write' }, 'invalid_client_metadata', /scope may only contain/)
  bad(t, { redirect_uris: [CB], scope: ['mcp:read'] }, 'invalid_client_metadata', /scope must be a space-separated string/)
  bad(t, { redirect_uris: [CB], scope: 1 }, 'invalid_client_metadata', /scope must be a space-separated string/)
})

t.test('client-chosen ids, secrets and unknown fields are ignored', async (t) => {
  const value = ok(t, {
    redirect_uris: [CB],
    client_id: 'mcp_attacker_chosen',
    client_secret: 's3cret',
    client_secret_expires_at: 0,
    client_id_issued_at: 1,
    jwks_uri: 'https://evil.example/jwks',
    jwks: { keys: [] },
    software_statement: 'eyJ...',
    logo_uri: 'https://evil.example/logo.png',
    pkce_required: false,
    extra: { nested: true },
  })
  t.same(Object.keys(value).sort(), ['clientName', 'grantTypes', 'redirectUris', 'responseTypes', 'scope', 'tokenEndpointAuthMethod'], 'only known fields come out')
  t.notMatch(JSON.stringify(value), /attacker|s3cret|evil|jwks/)
})

t.test('only own properties are read', async (t) => {
  const proto = { scope: 'mcp:admin', grant_types: ['implicit'] }
  const body = Object.assign(Object.create(proto) as object, { redirect_uris: [CB] })
  bad(t, body, 'invalid_client_metadata', /JSON object/)
  const parsed = JSON.parse('{"redirect_uris":["http://localhost:3000/cb"],"__proto__":{"scope":"mcp:admin"}}') as unknown
  t.equal(ok(t, parsed).scope, 'mcp:read mcp:write', 'an own __proto__ key is just an unknown field')
})

t.test('redirect_uris is checked before the other fields', async (t) => {
  bad(t, { redirect_uris: ['http://example.com/cb'], scope: 'nope' }, 'invalid_redirect_uri', /redirect_uris\[0\]/)
})

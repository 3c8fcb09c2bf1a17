/**
 * The client metadata document resolver against real HTTPS servers on loopback (test/helpers/document-server.ts, with
 * the committed test certificate): the policy, the address checked in the socket's own lookup (rebinding included),
 * redirects, statuses, content types, the body cap, the deadline, the cache and the per-host fetch limit. Host names
 * are answered by an injected resolver, so `client.test` reaches the test server only through the checked lookup.
 * Time is the manual clock's: a deadline or an expiry happens when the test moves the clock, never by waiting.
 */
import type { ServerResponse } from 'node:http'
import t, { type Test } from 'tap'
import { loadConfig, type Config } from '../../src/config.js'
import { isServiceError } from '../../src/errors/service-error.js'
import { openLimitsStore } from '../../src/limits/store.js'
import { clientDocumentResolver, type ClientDocumentResolver } from '../../src/oauth/client-documents/index.js'
import type { HostResolver, ResolvedAddress } from '../../src/oauth/client-documents/lookup.js'
import { ManualClock } from '../helpers/clock.js'
import { documentServer, rawTlsServer, TEST_CA, type DocumentServer } from '../helpers/document-server.js'

// RFC 6749 §5.2: error_description may only hold %x20-21 / %x23-5B / %x5D-7E.
const DESCRIPTION_CHARS = /^[\x20\x21\x23-\x5b\x5d-\x7e]+$/
const LOOPBACK: ResolvedAddress[] = [{ address: '127.0.0.1', family: 4 }]

interface Setup {
  resolver: ClientDocumentResolver
  clock: ManualClock
  config: Config
  server: DocumentServer
  /** Names the injected resolver was asked for, in order. */
  lookups: string[]
  /** What each name resolves to (a function: a different answer per call). */
  names: Map<string, ResolvedAddress[] | (() => ResolvedAddress[])>
  warnings: string[]
  url(path: string, host?: string): string
  document(path: string, extra?: Record<string, unknown>, headers?: Record<string, string>): string
}

async function setup(t: Test, overrides: Partial<Config> = {}, options: { ca?: boolean; resolveHost?: HostResolver } = {}): Promise<Setup> {
  const clock = new ManualClock()
  const server = await documentServer()
  t.teardown(() => server.close())
  const config = loadConfig({
    env: {},
    overrides: { clientDocumentsUnsafeLoopbackHosts: ['client.test', 'other.test', '127.0.0.1'], clientDocumentMaxBytes: 1024, ...overrides },
  })
  const log = { warn: (_obj: unknown, msg?: string) => void warnings.push(String(msg)), info: () => {}, debug: () => {} }
  const warnings: string[] = []
  const limits = openLimitsStore({ config, log: log as never, redis: null, key: (k) => k, clock })
  t.teardown(() => limits.close())
  const lookups: string[] = []
  const names = new Map<string, ResolvedAddress[] | (() => ResolvedAddress[])>([['client.test', LOOPBACK], ['other.test', LOOPBACK]])
  const resolveHost: HostResolver = options.resolveHost ?? (async (name) => {
    lookups.push(name)
    const answer = names.get(name)
    if (answer === undefined) throw Object.assign(new Error(`no such name ${name}`), { code: 'ENOTFOUND' })
    return typeof answer === 'function' ? answer() : answer
  })
  const resolver = clientDocumentResolver({ config, clock, limits, log: log as never, resolveHost, ...(options.ca === false ? {} : { ca: TEST_CA }) })
  const url = (path: string, host = 'client.test') => `https://${host}:${server.port}${path}`
  return {
    resolver, clock, config, server, lookups, names, warnings, url,
    document(path, extra = {}, headers = {}) {
      const id = url(path)
      server.serve(path, { client_id: id, client_name: 'Test client', redirect_uris: ['http://127.0.0.1:9999/cb'], ...extra }, headers)
      return id
    },
  }
}

/** The resolve is refused with invalid_client, a description matching `pattern`, in error_description's alphabet. */
async function refused(t: Test, resolving: Promise<unknown>, pattern: RegExp): Promise<void> {
  try {
    await resolving
    t.fail(`expected a refusal matching ${pattern}`)
  } catch (err) {
    if (!isServiceError(err)) throw err
    t.equal(err.code, 'OAUTH_INVALID_CLIENT')
    t.match(err.message, pattern, err.message)
    t.match(err.message, DESCRIPTION_CHARS, 'a valid error_description')
  }
}

/** A route that hands the test its response, to answer (or not) when the test decides. */
function held(server: DocumentServer, path: string): Promise<ServerResponse> {
  return new Promise((resolve) => server.route(path, (_req, res) => resolve(res)))
}

t.test('a served document resolves: GET with Accept JSON and our User-Agent, fields as checked', async (t) => {
  const s = await setup(t)
  const seen: Record<string, string | undefined> = {}
  const id = s.url('/client.json')
  s.server.route('/client.json', (req, res) => {
    Object.assign(seen, { method: req.method, accept: req.headers.accept, ua: req.headers['user-agent'], host: req.headers.host })
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify({ client_id: id, client_name: 'Test client', redirect_uris: ['http://127.0.0.1:9999/cb'], scope: 'mcp:read' }))
  })
  t.ok(s.resolver.isDocumentUrl(id))
  const document = await s.resolver.resolve(id)
  t.same(document, { clientId: id, host: `client.test:${s.server.port}`, clientName: 'Test client', redirectUris: ['http://127.0.0.1:9999/cb'], grantTypes: ['authorization_code', 'refresh_token'], scope: 'mcp:read' })
  t.match(seen, { method: 'GET', accept: 'application/json', ua: /^service-mcp\/\S+ \(OAuth client metadata document fetcher\)$/, host: `client.test:${s.server.port}` })
  t.same(s.lookups, ['client.test'], 'the socket used the checked lookup')
  document.redirectUris.push('https://evil.example/cb')
  t.same((await s.resolver.resolve(id)).redirectUris, ['http://127.0.0.1:9999/cb'], 'a caller cannot change the cached document')
})

t.test('policy off: refused before anything is fetched, cached documents too', async (t) => {
  const s = await setup(t)
  const id = s.document('/c.json')
  await s.resolver.resolve(id)
  s.config.clientDocuments = 'off'
  await refused(t, s.resolver.resolve(id), /does not accept client metadata documents/)
  await refused(t, s.resolver.resolve('not even a URL'), /does not accept client metadata documents/)
  t.equal(s.server.hits.get('/c.json'), 1)
})

t.test('policy listed: only the listed hosts (host and port exactly), checked on cache hits too', async (t) => {
  const s = await setup(t, { clientDocuments: 'listed', clientDocumentHosts: ['client.test'] })
  const id = s.document('/c.json')
  await refused(t, s.resolver.resolve(id), /host is not one of the client metadata document hosts this server allows/)
  t.equal(s.server.connections, 0, 'not listed: no connection')
  s.config.clientDocumentHosts = [`client.test:${s.server.port}`]
  t.equal((await s.resolver.resolve(id)).clientId, id)
  s.config.clientDocumentHosts = ['other.test']
  await refused(t, s.resolver.resolve(id), /not one of the client metadata document hosts/)
  t.equal(s.server.hits.get('/c.json'), 1)
})

t.test('policy all (the default) fetches any host that passes the address rules', async (t) => {
  const s = await setup(t)
  t.equal(s.config.clientDocuments, 'all')
  const id = s.document('/c.json')
  t.equal((await s.resolver.resolve(id)).clientName, 'Test client')
})

t.test('a URL that breaks the rules is refused without a lookup', async (t) => {
  const s = await setup(t)
  s.document('/c.json')
  await refused(t, s.resolver.resolve(`http://client.test:${s.server.port}/c.json`), /must use https/)
  await refused(t, s.resolver.resolve(`${s.url('/c.json')}?x=1`), /query/)
  await refused(t, s.resolver.resolve(`${s.url('/c.json')}#f`), /fragment/)
  await refused(t, s.resolver.resolve(`https://u@client.test:${s.server.port}/c.json`), /userinfo/)
  await refused(t, s.resolver.resolve(s.url('/a/../c.json')), /path segments/)
  await refused(t, s.resolver.resolve(s.url('/')), /path other than/)
  t.same(s.lookups, [])
  t.equal(s.server.connections, 0)
})

t.test('a name resolving to a non-global address is refused at connect time, with no connection', async (t) => {
  const s = await setup(t)
  s.document('/c.json')
  const answers: Array<[string, 4 | 6]> = [['127.0.0.1', 4], ['10.0.0.1', 4], ['172.16.5.4', 4], ['192.168.1.1', 4], ['169.254.169.254', 4], ['100.64.0.1', 4], ['0.0.0.0', 4], ['::1', 6], ['::ffff:127.0.0.1', 6], ['fd00::1', 6], ['fe80::1', 6], ['64:ff9b::7f00:1', 6], ['2002:7f00:1::1', 6]]
  for (const [address, family] of answers) {
    const name = `n${s.lookups.length}.example`
    s.names.set(name, [{ address, family }])
    await refused(t, s.resolver.resolve(`https://${name}:${s.server.port}/c.json`), /resolves to an address that is not publicly routable/)
  }
  t.equal(s.lookups.length, answers.length, 'each name was looked up once')
  t.equal(s.server.connections, 0, 'no socket ever reached the server')
})

t.test('one refused answer among several refuses the name', async (t) => {
  const s = await setup(t)
  s.names.set('mixed.example', [{ address: '93.184.216.34', family: 4 }, { address: '127.0.0.1', family: 4 }])
  await refused(t, s.resolver.resolve(`https://mixed.example:${s.server.port}/c.json`), /not publicly routable/)
  t.equal(s.server.connections, 0)
})

t.test('IP-literal hosts are checked the same way, before any socket', async (t) => {
  const s = await setup(t, { clientDocumentsUnsafeLoopbackHosts: [] })
  for (const host of [`127.0.0.1:${s.server.port}`, `[::1]:${s.server.port}`, '10.0.0.1', '169.254.169.254', '[fe80::1]', '[::ffff:7f00:1]', '[fd00::1]', '192.168.0.1', '[64:ff9b::a00:1]']) {
    await refused(t, s.resolver.resolve(`https://${host}/c.json`), /not publicly routable/)
  }
  t.same(s.lookups, [], 'literals need no lookup')
  t.equal(s.server.connections, 0)
})

t.test('unsafe loopback hosts: a listed name or literal passes on loopback only; never on a private address', async (t) => {
  const s = await setup(t)
  t.match(s.warnings, [/UNSAFE_LOOPBACK_HOSTS is set.*tests only/], 'the setting is warned about when the resolver is made')
  const literal = `https://127.0.0.1:${s.server.port}/c.json`
  s.server.serve('/c.json', { client_id: literal, redirect_uris: ['https://a.example/cb'] })
  t.equal((await s.resolver.resolve(literal)).host, `127.0.0.1:${s.server.port}`, 'a listed IP literal')
  s.document('/d.json')
  t.ok(await s.resolver.resolve(s.url('/d.json')), 'a listed name on loopback')
  s.names.set('unlisted.test', LOOPBACK)
  await refused(t, s.resolver.resolve(s.url('/d.json', 'unlisted.test')), /not publicly routable/)
  for (const address of ['10.0.0.1', '192.168.1.10', '172.17.0.1', '169.254.169.254']) {
    s.names.set('client.test', [{ address, family: 4 }])
    await refused(t, s.resolver.resolve(s.url(`/x-${address}.json`)), /not publicly routable/)
  }
  s.names.set('client.test', [{ address: 'fd00::1', family: 6 }])
  await refused(t, s.resolver.resolve(s.url('/x-v6.json')), /not publicly routable/)
  t.equal(s.server.connections, 2, 'only the two allowed fetches connected')
})

t.test('DNS rebinding: each connection is checked on the answer its own lookup got', async (t) => {
  const s = await setup(t, { clientDocumentCacheMinMs: 1000, clientDocumentCacheMaxMs: 1000 })
  const id = s.document('/c.json')
  const answers = [LOOPBACK, [{ address: '10.0.0.7', family: 4 as const }], LOOPBACK]
  let calls = 0
  s.names.set('client.test', () => answers[calls++]!)
  t.ok(await s.resolver.resolve(id), 'first connection: loopback, allowed for this listed name')
  await s.clock.advance(1000)
  await refused(t, s.resolver.resolve(id), /not publicly routable/)
  t.equal(calls, 2, 'one lookup per fetch, and it is the one the socket used')
  t.equal(s.server.connections, 1, 'the rebound answer never got a connection')

  await s.clock.advance(s.config.clientDocumentFailureCacheMs)
  t.ok(await s.resolver.resolve(id), 'answering loopback again, it is fetched again')
  t.equal(calls, 3)
  t.equal(s.server.connections, 2)
})

for (const status of [301, 302, 303, 307, 308]) {
  t.test(`a ${status} redirect is a failure, never followed`, async (t) => {
    const s = await setup(t)
    const target = s.document('/real.json')
    s.server.route('/moved.json', (_req, res) => void res.writeHead(status, { location: target }).end())
    await refused(t, s.resolver.resolve(s.url('/moved.json')), new RegExp(`redirected \\(HTTP ${status}\\); redirects are not followed`))
    t.equal(s.server.hits.get('/real.json'), undefined, 'the Location was not fetched')
  })
}

t.test('any status but 200 is refused', async (t) => {
  const s = await setup(t)
  for (const status of [201, 203, 204, 400, 401, 404, 410, 429, 500, 503]) {
    s.server.route(`/s${status}.json`, (_req, res) => void res.writeHead(status, { 'content-type': 'application/json' }).end(status === 204 ? undefined : '{}'))
    await refused(t, s.resolver.resolve(s.url(`/s${status}.json`)), new RegExp(`answered HTTP ${status}, not 200`))
  }
})

t.test('content type: application/json with or without parameters, and nothing else', async (t) => {
  const s = await setup(t)
  for (const type of ['application/json', 'application/json; charset=utf-8', 'Application/JSON;charset=UTF-8']) {
    const path = `/ok-${encodeURIComponent(type)}.json`
    s.document(path, {}, { 'content-type': type })
    t.ok(await s.resolver.resolve(s.url(path)), type)
  }
  for (const type of ['text/html', 'text/plain', 'application/ld+json', 'application/jrd+json', 'application/jsonx', 'application/octet-stream', '']) {
    const path = `/bad-${encodeURIComponent(type) || 'none'}.json`
    s.server.route(path, (_req, res) => {
      if (type !== '') res.setHeader('content-type', type)
      res.writeHead(200).end(JSON.stringify({ client_id: s.url(path), redirect_uris: ['https://a.example/cb'] }))
    })
    await refused(t, s.resolver.resolve(s.url(path)), /must be served as application\/json/)
  }
})

t.test('size: exactly the cap passes, one byte over fails', async (t) => {
  const s = await setup(t)
  for (const [path, size] of [['/at-cap.json', 1024], ['/over-cap.json', 1025]] as const) {
    const json = JSON.stringify({ client_id: s.url(path), redirect_uris: ['https://a.example/cb'] })
    s.server.route(path, (_req, res) => void res.writeHead(200, { 'content-type': 'application/json' }).end(json.padEnd(size, ' ')))
  }
  t.ok(await s.resolver.resolve(s.url('/at-cap.json')), '1024 bytes')
  await refused(t, s.resolver.resolve(s.url('/over-cap.json')), /larger than 1024 bytes/)
})

t.test('size: a chunked body with no length is cut at the cap as it arrives', async (t) => {
  const s = await setup(t)
  let written = 0
  s.server.route('/chunked.json', (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' })
    res.write(`{"client_id":"${s.url('/chunked.json')}","x":"`)
    // Far more than the cap, in chunks: only the cap can stop the read before the end.
    const more = () => {
      if (res.destroyed) return
      if (written > 64 * 1024) return void res.end('"}')
      written += 512
      res.write('a'.repeat(512), () => setImmediate(more))
    }
    more()
  })
  await refused(t, s.resolver.resolve(s.url('/chunked.json')), /larger than 1024 bytes/)
})

t.test('size: a Content-Length over the cap is refused before the body is read', async (t) => {
  const s = await setup(t)
  let reached = false
  const server = await rawTlsServer((socket) => {
    socket.end('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000000\r\n\r\n{')
    reached = true
  })
  t.teardown(() => server.close())
  await refused(t, s.resolver.resolve(`https://client.test:${server.port}/c.json`), /larger than 1024 bytes/)
  t.ok(reached)
})

t.test('size: a Content-Length smaller than what is sent: the declared bytes or nothing, never the rest', async (t) => {
  const s = await setup(t)
  const id = (port: number) => `https://client.test:${port}/c.json`
  const server = await rawTlsServer((socket) => {
    const body = JSON.stringify({ client_id: id(server.port), redirect_uris: ['https://a.example/cb'] }) + ' '.repeat(50_000)
    socket.end(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 40\r\nconnection: close\r\n\r\n${body}`)
  })
  t.teardown(() => server.close())
  // Node's parser ends the body at the declared length (a truncated document) or fails on the bytes after it,
  // whichever it meets first; either way the document is refused.
  await refused(t, s.resolver.resolve(id(server.port)), /not valid JSON|could not be fetched/)
})

t.test('timeout: a server that never answers', async (t) => {
  const s = await setup(t)
  const arrived = held(s.server, '/silent.json')
  const outcome = refused(t, s.resolver.resolve(s.url('/silent.json')), /fetch timed out/)
  await arrived
  await s.clock.advance(s.config.clientDocumentTimeoutMs)
  await outcome
})

t.test('timeout: a body that stalls halfway', async (t) => {
  const s = await setup(t)
  let stalled!: () => void
  const wrote = new Promise<void>((resolve) => (stalled = resolve))
  const server = await rawTlsServer((socket) => {
    socket.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 200\r\n\r\n{"client_id":', () => stalled())
  })
  t.teardown(() => server.close())
  const outcome = refused(t, s.resolver.resolve(`https://client.test:${server.port}/c.json`), /fetch timed out/)
  await wrote
  await s.clock.advance(s.config.clientDocumentTimeoutMs)
  await outcome
})

t.test('timeout: the deadline covers the name lookup too', async (t) => {
  let asked!: () => void
  const lookedUp = new Promise<void>((resolve) => (asked = resolve))
  const s = await setup(t, {}, { resolveHost: () => { asked(); return new Promise<never>(() => {}) } })
  let settled = false
  const outcome = refused(t, s.resolver.resolve(s.url('/c.json')).finally(() => (settled = true)), /fetch timed out/)
  await lookedUp
  await s.clock.advance(s.config.clientDocumentTimeoutMs - 1)
  t.notOk(settled, 'not before the deadline')
  await s.clock.advance(1)
  await outcome
})

t.test('TLS: a certificate we do not trust, or for another name, is refused', async (t) => {
  const untrusting = await setup(t, {}, { ca: false })
  untrusting.document('/c.json')
  await refused(t, untrusting.resolver.resolve(untrusting.url('/c.json')), /did not present a valid TLS certificate/)
  const s = await setup(t, { clientDocumentsUnsafeLoopbackHosts: ['nomatch.test'] })
  s.names.set('nomatch.test', LOOPBACK)
  s.document('/c.json')
  await refused(t, s.resolver.resolve(s.url('/c.json', 'nomatch.test')), /did not present a valid TLS certificate/)
})

t.test('a name that does not resolve', async (t) => {
  const s = await setup(t)
  await refused(t, s.resolver.resolve('https://nowhere.example/c.json'), /host name does not resolve/)
})

t.test('document content: invalid JSON, mismatched client_id, secrets, auth methods, redirect URIs', async (t) => {
  const s = await setup(t)
  s.server.serve('/broken.json', '{"client_id": ')
  await refused(t, s.resolver.resolve(s.url('/broken.json')), /not valid JSON/)
  s.server.serve('/array.json', '[]')
  await refused(t, s.resolver.resolve(s.url('/array.json')), /must be a JSON object/)
  s.server.serve('/slash.json', { client_id: `${s.url('/slash.json')}/`, redirect_uris: ['https://a.example/cb'] })
  await refused(t, s.resolver.resolve(s.url('/slash.json')), /client_id must equal the client_id URL exactly/)
  s.server.serve('/case.json', { client_id: s.url('/CASE.json'), redirect_uris: ['https://a.example/cb'] })
  await refused(t, s.resolver.resolve(s.url('/case.json')), /client_id must equal the client_id URL exactly/)
  s.server.serve('/host.json', { client_id: s.url('/host.json', 'other.test'), redirect_uris: ['https://a.example/cb'] })
  await refused(t, s.resolver.resolve(s.url('/host.json')), /client_id must equal the client_id URL exactly/)
  s.document('/secret.json', { client_secret: 's3cret' })
  await refused(t, s.resolver.resolve(s.url('/secret.json')), /must not contain client_secret/)
  s.document('/expires.json', { client_secret_expires_at: 0 })
  await refused(t, s.resolver.resolve(s.url('/expires.json')), /must not contain client_secret/)
  s.document('/basic.json', { token_endpoint_auth_method: 'client_secret_basic' })
  await refused(t, s.resolver.resolve(s.url('/basic.json')), /token_endpoint_auth_method must be none/)
  s.document('/pkjwt.json', { token_endpoint_auth_method: 'private_key_jwt', jwks_uri: 'https://a.example/jwks' })
  await refused(t, s.resolver.resolve(s.url('/pkjwt.json')), /token_endpoint_auth_method must be none/)
  s.document('/none-jwks.json', { token_endpoint_auth_method: 'none', jwks: { keys: [] } })
  t.ok(await s.resolver.resolve(s.url('/none-jwks.json')), 'keys beside none are ignored')
  s.document('/redirect.json', { redirect_uris: ['https://a.example/cb', 'http://evil.example/cb'] })
  await refused(t, s.resolver.resolve(s.url('/redirect.json')), /redirect_uris\[1\] http is only allowed on localhost/)
  s.document('/no-redirects.json', { redirect_uris: [] })
  await refused(t, s.resolver.resolve(s.url('/no-redirects.json')), /redirect_uris must contain at least one/)
})

t.test('cache: max-age is honoured between the bounds', async (t) => {
  const s = await setup(t)
  const id = s.document('/c.json', {}, { 'cache-control': 'max-age=600' })
  await s.resolver.resolve(id)
  await s.clock.advance(599_999)
  await s.resolver.resolve(id)
  t.equal(s.server.hits.get('/c.json'), 1, 'fresh for 600 s')
  await s.clock.advance(1)
  await s.resolver.resolve(id)
  t.equal(s.server.hits.get('/c.json'), 2, 'fetched again once stale')
})

t.test('cache: a short max-age is raised to the minimum, a long one lowered to the maximum', async (t) => {
  const s = await setup(t, { clientDocumentCacheMinMs: 60_000, clientDocumentCacheMaxMs: 3_600_000 })
  const short = s.document('/short.json', {}, { 'cache-control': 'max-age=1' })
  const long = s.document('/long.json', {}, { 'cache-control': 'max-age=31536000' })
  await s.resolver.resolve(short)
  await s.resolver.resolve(long)
  await s.clock.advance(59_999)
  await s.resolver.resolve(short)
  t.equal(s.server.hits.get('/short.json'), 1, 'max-age=1 still fresh just before the minimum')
  await s.clock.advance(1)
  await s.resolver.resolve(short)
  t.equal(s.server.hits.get('/short.json'), 2, 'and stale at it')
  await s.clock.advance(3_600_000 - 60_000 - 1)
  await s.resolver.resolve(long)
  t.equal(s.server.hits.get('/long.json'), 1, 'a year of max-age is fresh just before the maximum')
  await s.clock.advance(1)
  await s.resolver.resolve(long)
  t.equal(s.server.hits.get('/long.json'), 2, 'and stale at it')
})

t.test('cache: no-store means the minimum; so does a response that says nothing', async (t) => {
  const s = await setup(t, { clientDocumentCacheMinMs: 60_000 })
  const noStore = s.document('/no-store.json', {}, { 'cache-control': 'no-store' })
  const silent = s.document('/silent.json')
  for (const id of [noStore, silent]) await s.resolver.resolve(id)
  await s.clock.advance(59_999)
  for (const id of [noStore, silent]) await s.resolver.resolve(id)
  t.same([s.server.hits.get('/no-store.json'), s.server.hits.get('/silent.json')], [1, 1])
  await s.clock.advance(1)
  for (const id of [noStore, silent]) await s.resolver.resolve(id)
  t.same([s.server.hits.get('/no-store.json'), s.server.hits.get('/silent.json')], [2, 2])
})

t.test('cache: a failed fetch is remembered briefly, then fetched again', async (t) => {
  const s = await setup(t, { clientDocumentFailureCacheMs: 30_000 })
  const id = s.url('/missing.json')
  await refused(t, s.resolver.resolve(id), /answered HTTP 404/)
  await s.clock.advance(29_999)
  await refused(t, s.resolver.resolve(id), /answered HTTP 404/)
  t.equal(s.server.hits.get('/missing.json'), 1, 'the refusal came from memory')
  s.document('/missing.json')
  await s.clock.advance(1)
  t.ok(await s.resolver.resolve(id), 'fetched again after the failure cache time')
  t.equal(s.server.hits.get('/missing.json'), 2)
})

t.test('cache: an invalid document is remembered briefly too', async (t) => {
  const s = await setup(t, { clientDocumentFailureCacheMs: 30_000 })
  const id = s.document('/secret.json', { client_secret: 'x' })
  await refused(t, s.resolver.resolve(id), /client_secret/)
  await refused(t, s.resolver.resolve(id), /client_secret/)
  t.equal(s.server.hits.get('/secret.json'), 1)
})

t.test('cache: concurrent resolves of one URL share one fetch', async (t) => {
  const s = await setup(t)
  const id = s.url('/slow.json')
  const body = JSON.stringify({ client_id: id, redirect_uris: ['https://a.example/cb'] })
  const answer = (res: ServerResponse) => void res.writeHead(200, { 'content-type': 'application/json' }).end(body)
  // Requests are held until all five resolves have started, then every one is answered (however many came).
  const waiting: ServerResponse[] = []
  let released = false
  let first!: () => void
  const arrived = new Promise<void>((resolve) => (first = resolve))
  s.server.route('/slow.json', (_req, res) => {
    if (released) answer(res)
    else waiting.push(res)
    first()
  })
  const resolves = Array.from({ length: 5 }, () => s.resolver.resolve(id))
  await arrived
  released = true
  waiting.forEach(answer)
  const documents = await Promise.all(resolves)
  t.equal(s.server.hits.get('/slow.json'), 1, 'one request for five resolves')
  t.same(documents.map((d) => d.clientId), Array(5).fill(id))
  await s.resolver.resolve(id)
  t.equal(s.server.hits.get('/slow.json'), 1, 'and later ones hit the cache')
})

t.test('cache: concurrent resolves of a failing URL share the one failure', async (t) => {
  const s = await setup(t)
  const resolves = Array.from({ length: 3 }, () => refused(t, s.resolver.resolve(s.url('/gone.json')), /HTTP 404/))
  await Promise.all(resolves)
  t.equal(s.server.hits.get('/gone.json'), 1)
})

t.test('cache: bounded, the least recently used dropped first', async (t) => {
  const s = await setup(t, { clientDocumentCacheEntries: 2 })
  const [a, b, c] = ['/a.json', '/b.json', '/c.json'].map((path) => s.document(path)) as [string, string, string]
  await s.resolver.resolve(a)
  await s.resolver.resolve(b)
  await s.resolver.resolve(a)
  await s.resolver.resolve(c)
  await s.resolver.resolve(a)
  t.same([s.server.hits.get('/a.json'), s.server.hits.get('/b.json')], [1, 1], 'a was used last, so b went')
  await s.resolver.resolve(b)
  t.equal(s.server.hits.get('/b.json'), 2)
})

t.test('the per-host fetch limit: fetches count, cache hits do not, other hosts are apart', async (t) => {
  const s = await setup(t, { clientDocumentFetchLimit: 2, clientDocumentFetchLimitWindowMs: 60_000 })
  const [a, b, c] = ['/a.json', '/b.json', '/c.json'].map((path) => s.document(path)) as [string, string, string]
  await s.resolver.resolve(a)
  for (let i = 0; i < 5; i++) await s.resolver.resolve(a)
  await s.resolver.resolve(b)
  let refusal: unknown
  await s.resolver.resolve(c).catch((err: unknown) => (refusal = err))
  t.ok(isServiceError(refusal) && refusal.code === 'OAUTH_INVALID_CLIENT', 'the third fetch from the host is refused as invalid_client')
  if (isServiceError(refusal)) {
    t.match(refusal.message, /^too many client metadata document fetches from this host; try again in \d+ seconds?$/)
    t.ok(refusal.retryAfter !== undefined && refusal.retryAfter > 0 && refusal.retryAfter <= 60, 'with Retry-After')
  }
  t.equal(s.server.hits.get('/c.json'), undefined, 'nothing was fetched')
  s.server.serve('/o.json', { client_id: s.url('/o.json', 'other.test'), redirect_uris: ['https://a.example/cb'] })
  t.ok(await s.resolver.resolve(s.url('/o.json', 'other.test')), 'another host has its own count')
  await s.clock.advance(60_000)
  t.ok(await s.resolver.resolve(c), 'the rate-limited refusal was not cached: a new window fetches')
})

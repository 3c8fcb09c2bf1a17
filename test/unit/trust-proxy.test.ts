/**
 * SERVICE_TRUST_PROXY: every form it takes (false, true, a hop count, the proxies' addresses) parsed once at start, and
 * the client address Fastify then derives from the peer and X-Forwarded-For, for a request through one proxy, through
 * two, and from a client that reaches the server directly.
 */
import Fastify from 'fastify'
import t from 'tap'
import { trustProxyOption } from '../../src/app.js'
import { ConfigError, loadConfig, type TrustProxy } from '../../src/config.js'

const parse = (value: string) => loadConfig({ env: { SERVICE_TRUST_PROXY: value } }).trustProxy

t.test('the forms it takes', async (t) => {
  t.equal(loadConfig({ env: {} }).trustProxy, false, 'off by default')
  for (const off of ['false', 'no', 'off', '0', ' FALSE ']) t.equal(parse(off), false, `${JSON.stringify(off)}: off`)
  for (const on of ['true', 'yes', 'on', 'True']) t.equal(parse(on), true, `${JSON.stringify(on)}: every hop`)
  t.equal(parse('1'), 1, '"1": one proxy in front (no longer an alias of true)')
  t.equal(parse('2'), 2, '"2": two proxies')
  t.strictSame(parse('127.0.0.1'), ['127.0.0.1'], 'one address')
  t.strictSame(parse(' 127.0.0.1 , 10.0.0.0/8,::1, fd00::/8 ,loopback,uniquelocal,linklocal'), ['127.0.0.1', '10.0.0.0/8', '::1', 'fd00::/8', 'loopback', 'uniquelocal', 'linklocal'], 'addresses, CIDRs and named ranges')
  t.equal(loadConfig({ env: {}, argv: ['--trust-proxy'] }).trustProxy, true, 'the flag alone: true')
  t.strictSame(loadConfig({ env: {}, argv: ['--trust-proxy', '10.1.2.3', '--port', '1'] }).trustProxy, ['10.1.2.3'], 'the flag with a value')
  t.equal(loadConfig({ env: {}, argv: ['--trust-proxy', '--port', '1'] }).trustProxy, true, 'the flag before another flag: true')
  t.equal(loadConfig({ env: {}, overrides: { trustProxy: 1 } }).trustProxy, 1, 'a number from the embedding API or the config file')
  t.equal(loadConfig({ env: {}, overrides: { trustProxy: 0 } }).trustProxy, false, '0 from a config file: off')
  t.strictSame(loadConfig({ env: {}, overrides: { trustProxy: ['10.0.0.0/8'] } }).trustProxy, ['10.0.0.0/8'], 'a list from a config file')
  t.equal(loadConfig({ env: {}, overrides: { trustProxy: [] } }).trustProxy, false, 'an empty list: off')
})

t.test('what it refuses, naming the variable and the entry', async (t) => {
  const cases: Array<[string, RegExp]> = [
    ['maybe', /^SERVICE_TRUST_PROXY must be .*: entry "maybe" is not an IP address/],
    ['127.0.0.1,proxy.internal', /entry "proxy\.internal"/],
    ['10.0.0.0/33', /entry "10\.0\.0\.0\/33"/],
    ['::1/129', /entry "::1\/129"/],
    ['10.0.0.0/8/1', /entry "10\.0\.0\.0\/8\/1"/],
    ['-1', /entry "-1"/],
    ['1.5', /entry "1\.5"/],
  ]
  for (const [value, pattern] of cases) {
    const err = t.throws(() => parse(value), ConfigError, value) as unknown as Error
    t.match(err.message, pattern, `${value}: ${err.message}`)
  }
  t.throws(() => loadConfig({ env: {}, overrides: { trustProxy: -2 } }), /SERVICE_TRUST_PROXY.* got -2/, 'a negative count')
})

/** The address a route sees for a request from `peer` carrying `forwarded` in X-Forwarded-For, under `setting`. */
async function clientAddress(setting: TrustProxy, peer: string, forwarded?: string): Promise<string> {
  const app = Fastify({ trustProxy: trustProxyOption(setting) })
  app.get('/', async (request) => request.ip)
  const res = await app.inject({ method: 'GET', url: '/', remoteAddress: peer, headers: forwarded ? { 'x-forwarded-for': forwarded } : {} })
  await app.close()
  return res.body
}

t.test('the client address each form yields', async (t) => {
  // nginx on this machine overwrote X-Forwarded-For with the client it saw (docs/deploy/nginx.conf).
  const overwritten = ['127.0.0.1', '198.51.100.7'] as const
  // A proxy that appends: the client wrote 203.0.113.66 itself, the proxy added the address it saw.
  const appended = ['127.0.0.1', '203.0.113.66, 198.51.100.7'] as const
  // Two proxies: a load balancer (10.0.0.5) appended the client it saw, nginx (127.0.0.1) appended the balancer.
  const twoHops = ['127.0.0.1', '203.0.113.66, 198.51.100.7, 10.0.0.5'] as const
  // No proxy at all: a client that reaches the server directly and claims an address.
  const direct = ['192.0.2.10', '127.0.0.9'] as const

  t.equal(await clientAddress(false, ...overwritten), '127.0.0.1', 'off: the proxy itself')
  t.equal(await clientAddress(false, ...direct), '192.0.2.10', 'off: a direct client is its peer address')

  t.equal(await clientAddress(['127.0.0.1'], ...overwritten), '198.51.100.7', 'the proxy\'s address: the client it saw')
  t.equal(await clientAddress(['127.0.0.1'], ...appended), '198.51.100.7', 'the proxy\'s address: what the client wrote is skipped')
  t.equal(await clientAddress(['127.0.0.1', '10.0.0.0/8'], ...twoHops), '198.51.100.7', 'both proxies listed: the client the balancer saw')
  t.equal(await clientAddress(['loopback'], ...overwritten), '198.51.100.7', 'a named range')
  t.equal(await clientAddress(['127.0.0.1'], ...direct), '192.0.2.10', 'the proxy\'s address: a direct client\'s claim is not believed')
  t.equal(await clientAddress(['127.0.0.1'], '::ffff:127.0.0.1', '198.51.100.7'), '198.51.100.7', 'an IPv4-mapped peer matches an IPv4 entry')

  t.equal(await clientAddress(1, ...overwritten), '198.51.100.7', 'one hop: the client the proxy saw')
  t.equal(await clientAddress(1, ...appended), '198.51.100.7', 'one hop: what the client wrote is skipped')
  t.equal(await clientAddress(2, ...twoHops), '198.51.100.7', 'two hops: the client the balancer saw')
  t.equal(await clientAddress(1, ...direct), '127.0.0.9', 'one hop believes any peer: why the server must be reachable only through the proxy')

  t.equal(await clientAddress(true, ...overwritten), '198.51.100.7', 'every hop, behind a proxy that overwrites: the client')
  t.equal(await clientAddress(true, ...appended), '203.0.113.66', 'every hop, behind a proxy that appends: whatever the client wrote')
})

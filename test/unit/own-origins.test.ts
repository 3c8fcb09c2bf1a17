import t from 'tap'
import { adoptListeningPort, loadConfig } from '../../src/config.js'
import { LOOPBACK_NAMES, OwnOrigins, ownOrigins } from '../../src/lib/own-origins.js'

// Which origins and Host values name this server (docs/decisions/http-errors.md, "Origins and hosts").

/** Names that start or end like a loopback one, or spell one almost: each a DNS name anyone can point at 127.0.0.1. */
const LOOK_ALIKES = ['localhost.evil.example', '127.0.0.1.nip.io', 'evil.example', 'localhost.', 'localhos', '127.0.0.2', 'localhost.localdomain', 'xn--localhost-', 'sub.localhost']

t.test('a loopback base address: every loopback name with its scheme and port is the base origin', async (t) => {
  for (const base of ['http://127.0.0.1:3000', 'http://localhost:3000', 'http://[::1]:3000']) {
    const own = new OwnOrigins(base, [])
    for (const origin of ['http://localhost:3000', 'http://127.0.0.1:3000', 'http://[::1]:3000']) {
      t.ok(own.isBase(origin), `${base}: ${origin} is the base origin`)
      t.ok(own.isAllowed(origin), `${base}: ${origin} may call /mcp`)
    }
    for (const host of ['localhost:3000', '127.0.0.1:3000', '[::1]:3000']) t.ok(own.acceptsHost(host), `${base}: Host ${host}`)
  }
  t.same(LOOPBACK_NAMES, ['localhost', '127.0.0.1', '[::1]'], 'the three names of the decision')
})

t.test('a loopback base address: parsed as URLs, not compared as strings', async (t) => {
  const own = new OwnOrigins('http://127.0.0.1:3000', [])
  for (const origin of ['HTTP://LOCALHOST:3000', 'http://LocalHost:3000', 'http://[0:0:0:0:0:0:0:1]:3000', 'http://127.1:3000']) {
    t.ok(own.isBase(origin), `${origin}: the same origin by the URL standard`)
  }
  for (const host of ['LOCALHOST:3000', '[0::1]:3000', '127.0.0.1:03000']) t.ok(own.acceptsHost(host), `Host ${host}: the same host`)

  const onDefaultPort = new OwnOrigins('http://localhost', [])
  for (const origin of ['http://localhost', 'http://localhost:80', 'http://127.0.0.1', 'http://[::1]:80']) t.ok(onDefaultPort.isBase(origin), `port 80 written or not: ${origin}`)
  for (const host of ['localhost', 'localhost:80', '127.0.0.1:80', '[::1]']) t.ok(onDefaultPort.acceptsHost(host), `port 80 written or not: Host ${host}`)
  t.notOk(onDefaultPort.isBase('https://localhost'), 'https is another scheme (and port)')
  t.notOk(onDefaultPort.acceptsHost('localhost:443'), 'Host with another port')

  const https = new OwnOrigins('https://localhost:8443', [])
  t.ok(https.isBase('https://127.0.0.1:8443'), 'https: the other names with its port')
  t.notOk(https.isBase('http://127.0.0.1:8443'), 'https base: the same name and port over http is another origin')
  const httpsDefault = new OwnOrigins('https://127.0.0.1', [])
  t.ok(httpsDefault.acceptsHost('localhost'), 'https on 443: a Host without port is on 443')
  t.ok(httpsDefault.acceptsHost('localhost:443'))
  t.notOk(httpsDefault.acceptsHost('localhost:80'), 'port 80 is not 443 there')
})

t.test('a loopback base address: other ports, schemes and names are refused', async (t) => {
  const own = new OwnOrigins('http://127.0.0.1:3000', [])
  const refusedOrigins = [
    'http://localhost:3001', 'http://127.0.0.1:3001', 'http://[::1]:80', 'http://localhost', // another port
    'https://localhost:3000', 'https://127.0.0.1:3000', 'ws://localhost:3000', 'file://localhost', // another scheme
    ...LOOK_ALIKES.map((name) => `http://${name}:3000`),
    'null', '', 'localhost:3000', 'http://', 'http://localhost:3000/', 'http://localhost:3000/mcp', 'http://user@localhost:3000',
    'http://localhost:3000?x', 'http://localhost:3000#x', ' http://localhost:3000', 'http://localhost:3000 ', 'http://localhost\\:3000',
    'http://evil.example@localhost:3000', 'http://localhost:3000@evil.example', 'http://[::1:3000', 'http://localhost:99999',
  ]
  for (const origin of refusedOrigins) {
    t.notOk(own.isBase(origin), `Origin ${JSON.stringify(origin)} is not the base origin`)
    t.notOk(own.isAllowed(origin), `Origin ${JSON.stringify(origin)} may not call /mcp`)
  }
  const refusedHosts = [
    'localhost:3001', '127.0.0.1', 'localhost', '[::1]:80', // another port (80 by default)
    ...LOOK_ALIKES.map((name) => `${name}:3000`),
    '', '::1:3000', 'localhost:3000/x', 'evil.example@localhost:3000', 'localhost:3000@evil.example', 'localhost:3000 ', 'local host:3000',
    'localhost:3000#', 'localhost:3000?', 'http://localhost:3000', 'localhost:99999',
  ]
  for (const host of refusedHosts) t.notOk(own.acceptsHost(host), `Host ${JSON.stringify(host)} is not ours`)
  t.ok(own.acceptsHost(undefined), 'no Host (HTTP/1.0): nothing to check; HTTP/1.1 requires one (plugins/http.ts)')
})

t.test('another loopback address than the three names is compared literally, and its Host is not checked', async (t) => {
  const own = new OwnOrigins('http://127.0.0.2:3000', [])
  t.ok(own.isBase('http://127.0.0.2:3000'))
  t.notOk(own.isBase('http://localhost:3000'), 'localhost does not reach a server on 127.0.0.2')
  t.notOk(own.isBase('http://127.0.0.1:3000'))
  t.ok(own.acceptsHost('evil.example:3000'), 'as before: Host is checked only for the three names')
})

t.test('a public base address: nothing changes', async (t) => {
  const own = new OwnOrigins('https://mcp.example.com', ['https://app.example.com', 'http://localhost:5173'])
  t.ok(own.isBase('https://mcp.example.com'))
  t.ok(own.isBase('https://MCP.example.com:443'), 'the same origin written otherwise')
  for (const origin of ['http://localhost:443', 'http://localhost', 'https://localhost', 'http://127.0.0.1', 'https://127.0.0.1', 'https://[::1]', 'http://mcp.example.com', 'https://mcp.example.com:8443', 'https://mcp.example.com.evil.example']) {
    t.notOk(own.isBase(origin), `${origin} is not the base origin`)
    t.notOk(own.isAllowed(origin), `${origin} may not call /mcp`)
  }
  t.ok(own.isAllowed('https://app.example.com'), 'SERVICE_ALLOWED_ORIGINS may call /mcp')
  t.notOk(own.isBase('https://app.example.com'), 'but is not the base origin (the pages\' forms)')
  t.ok(own.isAllowed('http://localhost:5173'), 'a listed loopback origin')
  t.notOk(own.isAllowed('http://127.0.0.1:5173'), 'is literal: its aliases are not listed')
  for (const host of ['mcp.example.com', 'localhost:3000', '127.0.0.1:3000', 'evil.example', 'internal-name:3000']) {
    t.ok(own.acceptsHost(host), `Host ${host}: a proxy's business, not checked`)
  }
})

t.test('SERVICE_ALLOWED_ORIGINS beside a loopback base address', async (t) => {
  const own = new OwnOrigins('http://127.0.0.1:3000', ['https://app.example.com'])
  t.ok(own.isAllowed('https://app.example.com'))
  t.ok(own.isAllowed('HTTPS://APP.EXAMPLE.COM'), 'compared as parsed')
  t.notOk(own.isBase('https://app.example.com'), 'not the base origin')
  t.notOk(own.acceptsHost('app.example.com'), 'an allowed origin is a caller, not a name of this server')
})

t.test('ownOrigins follows the configuration: a default base address that adopts the port it got', async (t) => {
  const config = loadConfig({ env: {}, overrides: { port: 0 } })
  const before = ownOrigins(config)
  t.equal(ownOrigins(config), before, 'built once per base origin')
  adoptListeningPort(config, 43210, false)
  t.ok(ownOrigins(config).isBase('http://localhost:43210'), 'the new port, by another loopback name')
  t.notOk(ownOrigins(config).isBase('http://localhost:0'), 'not the old one')
  t.ok(ownOrigins(config).acceptsHost('[::1]:43210'))
  const listed = { ...config, allowedOrigins: ['https://app.example.com'] }
  t.ok(ownOrigins(listed).isAllowed('https://app.example.com'), 'another configuration, its own origins')
})

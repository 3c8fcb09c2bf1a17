import t from 'tap'
import { resourceAudience } from '../../src/oauth/resource.js'

t.test('root base URL: the three accepted forms', async (t) => {
  const base = 'http://127.0.0.1:3000'
  for (const raw of ['http://127.0.0.1:3000', 'http://127.0.0.1:3000/', 'http://127.0.0.1:3000/mcp']) {
    t.equal(resourceAudience(raw, base), base, raw)
  }
  const https = 'https://mcp.example.com'
  for (const raw of ['https://mcp.example.com', 'https://mcp.example.com/', 'https://mcp.example.com/mcp']) {
    t.equal(resourceAudience(raw, https), https, raw)
  }
})

t.test('scheme and host are case-insensitive, the path is not', async (t) => {
  const base = 'https://mcp.example.com'
  t.equal(resourceAudience('HTTPS://MCP.Example.COM/mcp', base), base)
  t.equal(resourceAudience('Https://mcp.example.com', base), base)
  t.equal(resourceAudience('https://mcp.example.com/MCP', base), null)
  t.equal(resourceAudience('https://mcp.example.com/Mcp', base), null)
  t.equal(resourceAudience('http://MCP.example.com/mcp', 'http://mcp.example.com'), 'http://mcp.example.com')
})

t.test('default ports are treated as the bare host', async (t) => {
  t.equal(resourceAudience('https://mcp.example.com:443/mcp', 'https://mcp.example.com'), 'https://mcp.example.com')
  t.equal(resourceAudience('http://localhost:80/mcp', 'http://localhost'), 'http://localhost')
  t.equal(resourceAudience('https://mcp.example.com:8443/mcp', 'https://mcp.example.com'), null, 'other port')
  t.equal(resourceAudience('https://mcp.example.com:80/mcp', 'https://mcp.example.com'), null, "http's default port on https")
  t.equal(resourceAudience('https://mcp.example.com:0443/mcp', 'https://mcp.example.com'), null)
  t.equal(resourceAudience('https://mcp.example.com:/mcp', 'https://mcp.example.com'), null, 'empty port')
  t.equal(resourceAudience('http://127.0.0.1/mcp', 'http://127.0.0.1:3000'), null, 'port missing')
  t.equal(resourceAudience('http://127.0.0.1:3001/mcp', 'http://127.0.0.1:3000'), null, 'port differs')
})

t.test('base URL with a path prefix', async (t) => {
  const base = 'https://example.com/base'
  for (const raw of ['https://example.com/base', 'https://example.com/base/', 'https://example.com/base/mcp', 'HTTPS://EXAMPLE.COM/base/mcp']) {
    t.equal(resourceAudience(raw, base), base, raw)
  }
  for (const raw of ['https://example.com', 'https://example.com/', 'https://example.com/mcp', 'https://example.com/BASE/mcp', 'https://example.com/base/mcp/', 'https://example.com/basemcp', 'https://example.com/base//mcp']) {
    t.equal(resourceAudience(raw, base), null, raw)
  }
  t.equal(resourceAudience('https://example.com/base/mcp', 'https://example.com/base/'), 'https://example.com/base/', 'a trailing slash on the base is tolerated')
})

t.test('everything else is refused', async (t) => {
  const base = 'https://mcp.example.com'
  for (const raw of [
    'https://mcp.example.com/mcp/',
    'https://mcp.example.com/mcp/x',
    'https://mcp.example.com/other',
    'https://mcp.example.com//',
    'https://mcp.example.com//mcp',
    'https://mcp.example.com/./mcp',
    'https://mcp.example.com/x/../mcp',
    'https://mcp.example.com/%6Dcp',
    'https://mcp.example.com\\mcp',
    'https://mcp.example.com/mcp?',
    'https://mcp.example.com/mcp?x=1',
    'https://mcp.example.com?',
    'https://mcp.example.com/mcp#',
    'https://mcp.example.com#',
    'https://mcp.example.com/mcp#frag',
    'https://user@mcp.example.com/mcp',
    'https://@mcp.example.com/mcp',
    'https://user:pw@mcp.example.com',
    'https://mcp.example.com.evil.example/mcp',
    'https://evil.example/mcp',
    'https://mcp.example.com./mcp',
    'https://%6Dcp.example.com/mcp',
    'http://mcp.example.com/mcp',
    'wss://mcp.example.com/mcp',
    '//mcp.example.com/mcp',
    '/mcp',
    'mcp.example.com/mcp',
    'https:mcp.example.com/mcp',
    'https:///mcp',
    'https://',
    'https://mcp.example.com:99999/mcp',
    ' https://mcp.example.com/mcp',
    'https://mcp.example.com/mcp ',
    'https://mcp.example.com/m\tcp',
    'https://mcp.example.com/m\ncp',
    'https://mcp.exämple.com/mcp',
    '',
    'https://mcp.example.com/' + 'a'.repeat(3000),
  ]) {
    t.equal(resourceAudience(raw, base), null, JSON.stringify(raw).slice(0, 60))
  }
  t.equal(resourceAudience(undefined as unknown as string, base), null, 'not a string')
  t.equal(resourceAudience(['https://mcp.example.com'] as unknown as string, base), null, 'an array (repeated parameter)')
})

t.test('IPv4 shorthand and IPv6 hosts compare literally', async (t) => {
  t.equal(resourceAudience('http://127.1:3000/mcp', 'http://127.0.0.1:3000'), null)
  t.equal(resourceAudience('http://localhost:3000/mcp', 'http://127.0.0.1:3000'), null)
  t.equal(resourceAudience('http://[::1]:3000/mcp', 'http://[::1]:3000'), 'http://[::1]:3000')
  t.equal(resourceAudience('http://[0:0:0:0:0:0:0:1]:3000/mcp', 'http://[::1]:3000'), null)
})

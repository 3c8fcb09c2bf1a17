import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { adoptListeningPort, ConfigError, loadConfig, parseFlags, SETTINGS } from '../../src/config.js'
import { hashPassword, verifyPassword } from '../../src/lib/crypto.js'

const GOOD_KEY = 'service_mcp_' + 'A'.repeat(43)

/** Runs fn and returns the ConfigError it throws (fails the test when it throws something else or nothing). */
function configError(t: Test, fn: () => unknown): ConfigError {
  try {
    fn()
  } catch (err) {
    if (err instanceof ConfigError) t.pass('throws a ConfigError')
    else t.fail(`expected a ConfigError, got ${(err as Error)?.name}: ${(err as Error)?.message}`)
    return err as ConfigError
  }
  t.fail('expected a ConfigError')
  return new ConfigError('(none thrown)')
}

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'service-mcp-config-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

function configFile(t: Test, content: string): string {
  const path = join(tempDir(t), 'config.json')
  writeFileSync(path, content)
  return path
}

t.test('defaults', async (t) => {
  const c = loadConfig({ env: {} })
  t.equal(c.host, '127.0.0.1')
  t.equal(c.port, 3000)
  t.equal(c.baseUrl, 'http://127.0.0.1:3000')
  t.equal(c.baseOrigin, 'http://127.0.0.1:3000')
  t.equal(c.database, './data/service.db')
  t.equal(c.heartbeatMs, 25_000)
  t.equal(c.sessionIdleMs, 3_600_000)
  t.equal(c.maxBodyBytes, 1_048_576)
  t.equal(c.logLevel, 'info')
  t.equal(c.configFile, '')
  t.equal(c.bootstrapApiKey, '')
  t.equal(c.trustProxy, false)
  t.same(c.allowedOrigins, [])
})

t.test('defaults are not shared between loads', async (t) => {
  const a = loadConfig({ env: {} })
  a.allowedOrigins.push('https://mutated.example.com')
  t.same(loadConfig({ env: {} }).allowedOrigins, [], 'mutating one config leaves the defaults alone')
})

t.test('loadConfig reads process.env when no env is given', async (t) => {
  const saved = process.env.SERVICE_PORT
  process.env.SERVICE_PORT = '4567'
  t.teardown(() => {
    if (saved === undefined) delete process.env.SERVICE_PORT
    else process.env.SERVICE_PORT = saved
  })
  t.equal(loadConfig().port, 4567)
})

t.test('environment variables', async (t) => {
  t.test('SERVICE_PORT and the default base URL follow it', async (t) => {
    const c = loadConfig({ env: { SERVICE_PORT: '4100' } })
    t.equal(c.port, 4100)
    t.equal(c.baseUrl, 'http://127.0.0.1:4100')
  })

  t.test('SERVICE_HOST shapes the default base URL', async (t) => {
    t.equal(loadConfig({ env: { SERVICE_HOST: 'localhost' } }).baseUrl, 'http://localhost:3000')
    t.equal(loadConfig({ env: { SERVICE_HOST: '::1' } }).baseUrl, 'http://[::1]:3000')
    // The wildcard address is not a usable base URL, and 127.0.0.1 would send remote OAuth clients to themselves.
    t.throws(() => loadConfig({ env: { SERVICE_HOST: '0.0.0.0' } }), /SERVICE_HOST "0\.0\.0\.0" is not a loopback address.*set SERVICE_BASE_URL/, 'a public host needs SERVICE_BASE_URL')
    t.equal(loadConfig({ env: { SERVICE_HOST: '0.0.0.0', SERVICE_BASE_URL: 'https://mcp.example.com' } }).baseUrl, 'https://mcp.example.com')
  })

  t.test('SERVICE_DATABASE', async (t) => {
    t.equal(loadConfig({ env: { SERVICE_DATABASE: '/tmp/x/y.db' } }).database, '/tmp/x/y.db')
    t.equal(loadConfig({ env: { SERVICE_DATABASE: ':memory:' } }).database, ':memory:')
    // This build of SQLite reads no URI: `file:x.db?mode=memory` would be a file of that name in the working folder.
    t.throws(() => loadConfig({ env: { SERVICE_DATABASE: 'file:x.db?mode=memory' } }), /SERVICE_DATABASE "file:x\.db\?mode=memory" is a file: URI, which this server's SQLite does not read as one/, 'a SQLite file: URI')
    t.equal(loadConfig({ env: { SERVICE_DATABASE: 'data/a:b.db' } }).database, 'data/a:b.db', 'a colon in a file name')
    // PostgreSQL's URLs name a database; any other URL used to become folders named after its scheme (./mysql:/host/db).
    const key = Buffer.alloc(32, 1).toString('base64')
    t.equal(loadConfig({ env: { SERVICE_DATABASE: 'postgres://user:secret@db.example.com/mcp', SERVICE_ENV_KEY: key } }).database, 'postgres://user:secret@db.example.com/mcp')
    t.equal(loadConfig({ env: { SERVICE_DATABASE: 'postgresql://localhost/mcp', SERVICE_ENV_KEY_FILE: '/etc/service-mcp/env.key' } }).database, 'postgresql://localhost/mcp')
    // No folder beside a URL for the default env.key (it used to become ./postgres:/…/env.key).
    t.throws(() => loadConfig({ env: { SERVICE_DATABASE: 'postgresql://localhost/mcp' } }), /SERVICE_DATABASE is a PostgreSQL database: set SERVICE_ENV_KEY \(or SERVICE_ENV_KEY_FILE\)/)
    t.throws(() => loadConfig({ env: { SERVICE_DATABASE: 'mysql://user:secret@db.example.com/mcp' } }), /SERVICE_DATABASE "mysql:\/\/user:…@db\.example\.com\/mcp" is a URL of a database this server cannot use/)
    const err = (() => { try { loadConfig({ env: { SERVICE_DATABASE: 'mysql://u:hunter2@h/d' } }) } catch (e) { return String(e) } return '' })()
    t.notMatch(err, /hunter2/, 'the password is not repeated')
  })

  t.test('SERVICE_BASE_URL: trailing slash stripped, origin derived', async (t) => {
    const c = loadConfig({ env: { SERVICE_BASE_URL: 'https://mcp.example.com/' } })
    t.equal(c.baseUrl, 'https://mcp.example.com')
    t.equal(c.baseOrigin, 'https://mcp.example.com')
    const p = loadConfig({ env: { SERVICE_BASE_URL: 'https://example.com/prefix//', SERVICE_PORT: '9000' } })
    t.equal(p.baseUrl, 'https://example.com/prefix')
    t.equal(p.baseOrigin, 'https://example.com')
    t.equal(p.port, 9000, 'an explicit base URL does not depend on the port')
  })

  t.test('SERVICE_BASE_URL is validated', async (t) => {
    for (const bad of ['not a url', 'ftp://example.com', 'https://example.com/?q=1', 'https://example.com/#x', 'https://user:pw@example.com']) {
      const e = configError(t, () => loadConfig({ env: { SERVICE_BASE_URL: bad } }))
      t.match(e.message, /SERVICE_BASE_URL/, bad)
    }
  })

  t.test('an empty variable counts as unset', async (t) => {
    const c = loadConfig({ env: { SERVICE_PORT: '', SERVICE_HOST: '' } })
    t.equal(c.port, 3000)
    t.equal(c.host, '127.0.0.1')
  })

  t.test('other kinds: level, bool, int', async (t) => {
    const c = loadConfig({ env: { SERVICE_LOG_LEVEL: 'DEBUG', SERVICE_TRUST_PROXY: 'yes', SERVICE_HEARTBEAT_MS: ' 50 ', SERVICE_SESSION_IDLE_MS: '1' } })
    t.equal(c.logLevel, 'debug')
    t.equal(c.trustProxy, true)
    t.equal(c.heartbeatMs, 50)
    t.equal(c.sessionIdleMs, 1)
    t.equal(loadConfig({ env: { SERVICE_TRUST_PROXY: 'off' } }).trustProxy, false)
  })

  t.test('SERVICE_BOOTSTRAP_API_KEY is validated', async (t) => {
    t.equal(loadConfig({ env: { SERVICE_BOOTSTRAP_API_KEY: GOOD_KEY } }).bootstrapApiKey, GOOD_KEY)
    for (const bad of ['service_mcp_short', 'sk_' + 'A'.repeat(43), 'service_mcp_' + 'A'.repeat(40) + '!!!', 'SERVICE_MCP_' + 'A'.repeat(43)]) {
      const e = configError(t, () => loadConfig({ env: { SERVICE_BOOTSTRAP_API_KEY: bad } }))
      t.match(e.message, /SERVICE_BOOTSTRAP_API_KEY/)
      t.notMatch(e.message, bad, 'the secret is not echoed')
    }
  })

  t.test('bootstrap password and email are validated', async (t) => {
    t.match(configError(t, () => loadConfig({ env: { SERVICE_BOOTSTRAP_PASSWORD: 'short' } })).message, /SERVICE_BOOTSTRAP_PASSWORD/)
    t.match(configError(t, () => loadConfig({ env: { SERVICE_BOOTSTRAP_EMAIL: 'not-an-email' } })).message, /SERVICE_BOOTSTRAP_EMAIL.*not-an-email/)
    t.equal(loadConfig({ env: { SERVICE_BOOTSTRAP_PASSWORD: 'longenough' } }).bootstrapPassword, 'longenough')
  })

  t.test('a bootstrap password hash: as strong as the server\'s own, and never together with a password', async (t) => {
    const hash = await hashPassword('a password of the operator')
    t.equal(loadConfig({ env: { SERVICE_BOOTSTRAP_PASSWORD_HASH: hash } }).bootstrapPasswordHash, hash)
    t.ok(await verifyPassword('a password of the operator', hash))
    t.match(configError(t, () => loadConfig({ env: { SERVICE_BOOTSTRAP_PASSWORD_HASH: hash, SERVICE_BOOTSTRAP_PASSWORD: 'longenough' } })).message, /both set: set one/)
    const weaker = hash.replace(/^scrypt\$16384\$/, 'scrypt$1024$')
    t.match(configError(t, () => loadConfig({ env: { SERVICE_BOOTSTRAP_PASSWORD_HASH: weaker } })).message, /SERVICE_BOOTSTRAP_PASSWORD_HASH must be a scrypt hash/)
    for (const bad of ['plain text', 'scrypt$16384$8$1$short$short', 'scrypt$16385$8$1$' + 'a'.repeat(22) + '$' + 'b'.repeat(43)]) {
      t.throws(() => loadConfig({ env: { SERVICE_BOOTSTRAP_PASSWORD_HASH: bad } }), /SERVICE_BOOTSTRAP_PASSWORD_HASH/, bad)
    }
  })
})

t.test('invalid values name the variable and the value', async (t) => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ SERVICE_PORT: 'abc' }, /SERVICE_PORT.*integer.*"abc"/],
    [{ SERVICE_PORT: '70000' }, /SERVICE_PORT.*at most 65535.*70000/],
    [{ SERVICE_PORT: '-1' }, /SERVICE_PORT.*at least 0.*-1/],
    [{ SERVICE_PORT: '3000.5' }, /SERVICE_PORT.*integer.*"3000\.5"/],
    [{ SERVICE_PORT: '1e3' }, /SERVICE_PORT.*integer/],
    [{ SERVICE_SESSION_IDLE_MS: '-5' }, /SERVICE_SESSION_IDLE_MS.*at least 1.*-5/],
    [{ SERVICE_SESSION_IDLE_MS: '0' }, /SERVICE_SESSION_IDLE_MS.*at least 1.*0/],
    [{ SERVICE_MAX_BODY_BYTES: '10' }, /SERVICE_MAX_BODY_BYTES.*at least 1024.*10/],
    [{ SERVICE_HEARTBEAT_MS: 'soon' }, /SERVICE_HEARTBEAT_MS.*"soon"/],
    [{ SERVICE_LOG_LEVEL: 'loud' }, /SERVICE_LOG_LEVEL.*"loud"/],
    [{ SERVICE_TRUST_PROXY: 'maybe' }, /SERVICE_TRUST_PROXY.*"maybe"/],
  ]
  for (const [env, pattern] of cases) {
    const e = configError(t, () => loadConfig({ env }))
    t.match(e.message, pattern, JSON.stringify(env))
    t.notMatch(e.message, /(SERVICE_\w+) \(\1\)/, 'the variable is named once, not twice')
  }
})

t.test('client identification: registration on or off, the metadata-document policy, never both off', async (t) => {
  const d = loadConfig({ env: {} })
  t.equal(d.registration, true, 'registration on by default')
  t.equal(d.clientDocuments, 'all', 'documents from any host by default')
  t.strictSame(d.clientDocumentHosts, [])
  const listed = loadConfig({ env: { SERVICE_REGISTRATION: 'off', SERVICE_CLIENT_DOCUMENTS: 'listed', SERVICE_CLIENT_DOCUMENT_HOSTS: 'claude.ai, vscode.dev' } })
  t.equal(listed.registration, false, 'SERVICE_REGISTRATION=off')
  t.equal(listed.clientDocuments, 'listed')
  t.strictSame(listed.clientDocumentHosts, ['claude.ai', 'vscode.dev'])
  t.equal(loadConfig({ env: {}, argv: ['--client-documents', 'off'] }).clientDocuments, 'off', 'the flag')
  t.match(configError(t, () => loadConfig({ env: { SERVICE_CLIENT_DOCUMENTS: 'some' } })).message, /SERVICE_CLIENT_DOCUMENTS must be all, listed, off, got "some"/)
  const both = configError(t, () => loadConfig({ env: { SERVICE_REGISTRATION: 'off', SERVICE_CLIENT_DOCUMENTS: 'off' } }))
  t.match(both.message, /SERVICE_REGISTRATION=off with SERVICE_CLIENT_DOCUMENTS=off leaves OAuth clients no way to identify themselves: turn one of them on/)
})

t.test('flags', async (t) => {
  t.test('override the environment, both spellings', async (t) => {
    t.equal(loadConfig({ env: { SERVICE_PORT: '5000' }, argv: ['--port', '4000'] }).port, 4000)
    t.equal(loadConfig({ env: { SERVICE_PORT: '5000' }, argv: ['--port=4000'] }).port, 4000)
    t.equal(loadConfig({ env: {}, argv: ['--database', '/tmp/f.db', '--host=::1'] }).database, '/tmp/f.db')
    t.equal(loadConfig({ env: {}, argv: ['--base-url=https://x.example.com/'] }).baseUrl, 'https://x.example.com')
  })

  t.test('override overrides too', async (t) => {
    t.equal(loadConfig({ env: {}, overrides: { port: 4500 }, argv: ['--port', '4000'] }).port, 4000)
    t.equal(loadConfig({ env: { SERVICE_PORT: '5000' }, overrides: { port: 4500 } }).port, 4500, 'override beats env')
    t.equal(loadConfig({ env: { SERVICE_PORT: '5000' }, overrides: { port: undefined } }).port, 5000, 'an undefined override is absent')
  })

  t.test('boolean flags need no value', async (t) => {
    t.equal(loadConfig({ env: {}, argv: ['--trust-proxy'] }).trustProxy, true)
    t.equal(loadConfig({ env: {}, argv: ['--trust-proxy', '--port', '1'] }).trustProxy, true)
    t.equal(loadConfig({ env: {}, argv: ['--trust-proxy=false'] }).trustProxy, false)
  })

  t.test('unknown flag is a ConfigError', async (t) => {
    const e = configError(t, () => loadConfig({ env: {}, argv: ['--prot', '4000'] }))
    t.match(e.message, /--prot/)
    configError(t, () => parseFlags(['positional']))
  })

  t.test('a flag without its value is a ConfigError', async (t) => {
    t.match(configError(t, () => loadConfig({ env: {}, argv: ['--port'] })).message, /--port/)
  })

  t.test('invalid flag values name the flag and the value', async (t) => {
    const e = configError(t, () => loadConfig({ env: {}, argv: ['--port', 'abc'] }))
    t.match(e.message, /--port/)
    t.match(e.message, /"abc"/)
    t.match(configError(t, () => loadConfig({ env: {}, argv: ['--port=70000'] })).message, /--port.*70000/)
  })

  t.test('every setting has a distinct env name and flag', async (t) => {
    t.equal(new Set(SETTINGS.map((s) => s.env)).size, SETTINGS.length)
    t.equal(new Set(SETTINGS.map((s) => s.flag)).size, SETTINGS.length)
    for (const s of SETTINGS) {
      t.match(s.env, /^SERVICE_[A-Z_]+$/)
      t.match(s.flag, /^--[a-z-]+$/)
    }
  })
})

t.test('config file', async (t) => {
  t.test('provides values below the environment and flags', async (t) => {
    const path = configFile(t, JSON.stringify({ port: 4100, host: 'localhost', heartbeatMs: 10, allowedOrigins: ['https://a.example.com'] }))
    const fromFile = loadConfig({ env: { SERVICE_CONFIG: path } })
    t.equal(fromFile.port, 4100)
    t.equal(fromFile.host, 'localhost')
    t.equal(fromFile.heartbeatMs, 10)
    t.same(fromFile.allowedOrigins, ['https://a.example.com'])
    t.equal(fromFile.configFile, path)
    t.equal(fromFile.baseUrl, 'http://localhost:4100')
    t.equal(loadConfig({ env: { SERVICE_CONFIG: path, SERVICE_PORT: '4200' } }).port, 4200, 'env beats file')
    t.equal(loadConfig({ env: { SERVICE_CONFIG: path, SERVICE_PORT: '4200' }, argv: ['--port', '4300'] }).port, 4300, 'flag beats env')
    t.equal(loadConfig({ env: {}, argv: ['--config', path] }).port, 4100, '--config names the file too')
    t.equal(loadConfig({ env: {}, overrides: { configFile: path } }).port, 4100, 'so does an override')
  })

  t.test('a key that is no setting is refused, with the closest one (a misspelt key was ignored silently)', async (t) => {
    const path = configFile(t, JSON.stringify({ port: 4100, heartbeatMS: 10 }))
    t.throws(() => loadConfig({ env: { SERVICE_CONFIG: path } }), ConfigError)
    t.throws(() => loadConfig({ env: { SERVICE_CONFIG: path } }), /\(SERVICE_CONFIG\) has an unknown key "heartbeatMS"; did you mean "heartbeatMs"\?/)
  })

  t.test('a file named by flag or override wins over SERVICE_CONFIG', async (t) => {
    const a = configFile(t, JSON.stringify({ port: 1111 }))
    const b = configFile(t, JSON.stringify({ port: 2222 }))
    t.equal(loadConfig({ env: { SERVICE_CONFIG: a }, argv: [`--config=${b}`] }).port, 2222)
    t.equal(loadConfig({ env: { SERVICE_CONFIG: a }, overrides: { configFile: b } }).port, 2222)
  })

  t.test('file values are validated with the key named', async (t) => {
    const path = configFile(t, JSON.stringify({ port: 'abc' }))
    const e = configError(t, () => loadConfig({ env: { SERVICE_CONFIG: path } }))
    t.match(e.message, /port/)
    t.match(e.message, /"abc"/)
    const host = configFile(t, JSON.stringify({ host: 5 }))
    t.match(configError(t, () => loadConfig({ env: { SERVICE_CONFIG: host } })).message, /host/)
  })

  t.test('missing file is a ConfigError naming the path', async (t) => {
    const path = join(tempDir(t), 'absent.json')
    const e = configError(t, () => loadConfig({ env: { SERVICE_CONFIG: path } }))
    t.match(e.message, path)
    t.match(e.message, /SERVICE_CONFIG/)
  })

  t.test('invalid JSON is a ConfigError', async (t) => {
    const path = configFile(t, '{ "port": 4100, ')
    t.match(configError(t, () => loadConfig({ env: { SERVICE_CONFIG: path } })).message, path)
  })

  t.test('a top level that is not an object is a ConfigError', async (t) => {
    for (const body of ['[1,2]', 'null', '42', '"x"']) {
      const path = configFile(t, body)
      t.match(configError(t, () => loadConfig({ env: { SERVICE_CONFIG: path } })).message, /object/, body)
    }
  })

  t.test('an unreadable file is a ConfigError', { skip: process.getuid?.() === 0 ? 'root reads everything' : false }, async (t) => {
    const path = configFile(t, '{}')
    chmodSync(path, 0o000)
    t.match(configError(t, () => loadConfig({ env: { SERVICE_CONFIG: path } })).message, path)
  })

  t.test('a directory is a ConfigError', async (t) => {
    const dir = tempDir(t)
    t.match(configError(t, () => loadConfig({ env: { SERVICE_CONFIG: dir } })).message, /SERVICE_CONFIG/)
  })
})

t.test('allowedOrigins', async (t) => {
  t.same(loadConfig({ env: { SERVICE_ALLOWED_ORIGINS: 'https://a.example.com, http://localhost:5173,,' } }).allowedOrigins, ['https://a.example.com', 'http://localhost:5173'])
  t.same(loadConfig({ env: {}, argv: ['--allowed-origins=https://b.example.com'] }).allowedOrigins, ['https://b.example.com'])
  t.same(loadConfig({ env: {}, overrides: { allowedOrigins: ['https://c.example.com'] } }).allowedOrigins, ['https://c.example.com'])
  for (const bad of ['https://a.example.com/', 'https://a.example.com/path', 'a.example.com', 'null', '*', 'HTTPS://A.EXAMPLE.COM']) {
    const e = configError(t, () => loadConfig({ env: { SERVICE_ALLOWED_ORIGINS: bad } }))
    t.match(e.message, /SERVICE_ALLOWED_ORIGINS/, bad)
    t.ok(e.message.includes(JSON.stringify(bad)), `the entry is quoted: ${bad}`)
  }
})

t.test('adoptListeningPort', async (t) => {
  t.test('a default base URL follows the real port', async (t) => {
    const c = loadConfig({ env: { SERVICE_PORT: '0' } })
    t.equal(c.baseUrl, 'http://127.0.0.1:0')
    adoptListeningPort(c, 43210, false)
    t.equal(c.port, 43210)
    t.equal(c.baseUrl, 'http://127.0.0.1:43210')
    t.equal(c.baseOrigin, 'http://127.0.0.1:43210')
  })

  t.test('an explicit base URL is kept; the port is still the real one', async (t) => {
    const c = loadConfig({ env: { SERVICE_PORT: '0', SERVICE_BASE_URL: 'https://mcp.example.com/' } })
    adoptListeningPort(c, 43211, true)
    t.equal(c.baseUrl, 'https://mcp.example.com')
    t.equal(c.baseOrigin, 'https://mcp.example.com')
    t.equal(c.port, 43211)
  })

  t.test('same port: nothing changes', async (t) => {
    const c = loadConfig({ env: { SERVICE_PORT: '3000' } })
    adoptListeningPort(c, 3000, false)
    t.equal(c.baseUrl, 'http://127.0.0.1:3000')
  })

  t.test('IPv6 host', async (t) => {
    const c = loadConfig({ env: { SERVICE_PORT: '0', SERVICE_HOST: '::1' } })
    adoptListeningPort(c, 5001, false)
    t.equal(c.baseUrl, 'http://[::1]:5001')
  })
})

t.test('redirect schemes are private-use scheme names only', async (t) => {
  t.same(loadConfig({ env: { SERVICE_REDIRECT_SCHEMES: 'cursor, com.example.app' } }).redirectSchemes, ['cursor', 'com.example.app'])
  for (const bad of ['https', 'javascript', 'Cursor', 'cursor://', 'data']) {
    t.throws(() => loadConfig({ env: { SERVICE_REDIRECT_SCHEMES: bad } }), ConfigError, bad)
  }
})

t.test('pipelines come from the config file or SERVICE_PIPELINES, with a default example', async (t) => {
  const byDefault = loadConfig({ env: {} }).pipelines
  t.same(Object.keys(byDefault), ['default'])
  t.match(byDefault.default!.argv.at(-1), /scripts[/\\]pipelines[/\\]example\.mjs$/)
  const path = configFile(t, JSON.stringify({ pipelines: { web: { argv: ['./deploy.sh', '--fast'], cwd: '/srv/web' } } }))
  t.same(loadConfig({ env: { SERVICE_CONFIG: path } }).pipelines, { web: { argv: ['./deploy.sh', '--fast'], cwd: '/srv/web' } })
  t.same(loadConfig({ env: { SERVICE_PIPELINES: '{"x":{"argv":["true"]}}' } }).pipelines, { x: { argv: ['true'] } })
  for (const bad of ['[]', '{"x":{"argv":[]}}', '{"x":{"argv":"true"}}', '{"Bad Name":{"argv":["true"]}}', 'not json']) {
    t.throws(() => loadConfig({ env: { SERVICE_PIPELINES: bad } }), ConfigError, bad)
  }
})

t.test('the env-var key must be 32 bytes of base64', async (t) => {
  const key = Buffer.alloc(32, 7)
  t.equal(loadConfig({ env: { SERVICE_ENV_KEY: key.toString('base64') } }).envKey, key.toString('base64'))
  t.equal(loadConfig({ env: { SERVICE_ENV_KEY: key.toString('base64url') } }).envKey, key.toString('base64url'))
  t.throws(() => loadConfig({ env: { SERVICE_ENV_KEY: Buffer.alloc(16).toString('base64') } }), ConfigError)
  t.throws(() => loadConfig({ env: { SERVICE_ENV_KEY: 'not a key' } }), ConfigError)
})

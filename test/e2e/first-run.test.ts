// test-backends: sqlite-only (a first start on a SQLite file, and files it cannot open)
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer as createNetServer, type Server } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import t, { type Test } from 'tap'
import { ConfigError, loadConfig } from '../../src/config.js'
import { createServer } from '../../src/index.js'
import { SERVICE_MCP_VERSION } from '../../src/version.js'
import { cli, cliWithoutOverride, startServe, type Run } from '../helpers/cli.js'
import { answerOf, modernCall } from '../helpers/modern.js'
import { OWNER_KEY, startServer } from '../helpers/server.js'

/**
 * The first-run wrinkles of issue 12: a port in use prints no credentials and leaves them for the next start; a
 * misspelt config-file key, a public host without a base address, a pipeline folder that does not exist and a database
 * path under /proc stop the start in one line (exit 2); --version, -h and an area alone answer; a pipeline command that
 * is not there fails its deployment with a sentence, not `spawn ./deploy.sh ENOENT`.
 */

t.setTimeout(180_000)

const KEY_LINE = /^ {2}API key: {2}(service_mcp_[A-Za-z0-9_-]{43})$/m

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'service-mcp-first-run-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** Exit code 2 and exactly one line on stderr matching `message` (plus the usage pointer of a usage error). */
function refused(t: Test, run: Run, message: RegExp, what: string): void {
  t.equal(run.code, 2, `${what}: exit code 2${run.code === 2 ? '' : `\n${run.stdout}\n${run.stderr}`}`)
  const lines = run.stderr.split('\n').filter(Boolean)
  t.equal(lines.length, 1, `${what}: one line on stderr`)
  t.match(lines[0], message, `${what}: ${message}`)
  t.notMatch(run.stderr, /\n\s+at /, `${what}: no stack trace`)
}

function occupy(t: Test): Promise<number> {
  return new Promise((resolve, reject) => {
    const server: Server = createNetServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      t.teardown(() => new Promise<void>((r) => server.close(() => r())))
      resolve((server.address() as { port: number }).port)
    })
  })
}

function userCount(db: string): number {
  const sqlite = new Database(db, { readonly: true, fileMustExist: true })
  try {
    return (sqlite.prepare('SELECT count(*) AS n FROM users').get() as { n: number }).n
  } finally {
    sqlite.close()
  }
}

t.test('a port in use: no credentials printed, exit 2 naming the settings; the next start prints them', async (t) => {
  const dir = tempDir(t)
  const db = join(dir, 'service.db')
  const port = await occupy(t)
  const taken = await cli(['serve'], { SERVICE_DATABASE: db, SERVICE_PORT: String(port), SERVICE_LOG_LEVEL: 'info' })
  refused(t, taken, new RegExp(`^service-mcp: Cannot listen on SERVICE_HOST 127\\.0\\.0\\.1, SERVICE_PORT ${port}: the address is in use by another process$`), 'serve on a taken port')
  t.notMatch(taken.stdout, /First start|password:|API key:|service_mcp_/, 'no credentials were printed')
  t.equal(userCount(db), 0, 'the database has no owner yet')

  const next = await startServe({ SERVICE_DATABASE: db, SERVICE_PORT: '0', SERVICE_LOG_LEVEL: 'info' })
  t.teardown(() => void next.child.kill('SIGKILL'))
  const out = next.stdout()
  t.equal(out.match(/First start/g)?.length, 1, 'the next start prints the first-start block')
  t.ok(out.indexOf('First start') < out.indexOf('"MCP server listening"'), 'before the listening line')
  const key = KEY_LINE.exec(out)?.[1]
  t.ok(key, 'with a generated API key')
  const whoami = answerOf(await modernCall(next.url, key!, 'service_whoami', {}, { id: 'w' }), 'w')
  t.equal(whoami?.result?.isError, false, 'which works')
  next.child.kill('SIGTERM')
  t.equal((await next.exited).code, 0)
})

t.test('embedded: listen() on a taken port throws the ConfigError and bootstraps nothing', async (t) => {
  const dir = tempDir(t)
  const port = await occupy(t)
  const bootstrapped: unknown[] = []
  const server = await createServer({ env: {}, logger: false, config: { database: join(dir, 'service.db'), port }, onBootstrap: (r) => bootstrapped.push(r) })
  t.teardown(() => server.close())
  const err = await server.listen().then(() => null, (e: unknown) => e)
  t.ok(err instanceof ConfigError, 'a ConfigError')
  t.match((err as Error).message, `Cannot listen on SERVICE_HOST 127.0.0.1, SERVICE_PORT ${port}: the address is in use by another process`)
  t.equal((err as Error).cause && ((err as Error).cause as NodeJS.ErrnoException).code, 'EADDRINUSE', 'the cause is kept')
  t.same(bootstrapped, [], 'onBootstrap was not called')
  t.equal(await server.app.repos.users.count(), 0, 'no owner was written')
})

t.test('config file: a misspelt key stops the start, naming it and the closest setting', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'config.json')
  writeFileSync(file, JSON.stringify({ port: 0, pipeline: { default: { argv: ['./deploy.sh'] } } }))
  refused(t, await cli(['serve'], { SERVICE_CONFIG: file, SERVICE_DATABASE: join(dir, 'service.db') }),
    new RegExp(`^service-mcp: Config file ${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} \\(SERVICE_CONFIG\\) has an unknown key "pipeline"; did you mean "pipelines"\\? \\(keys are the settings' names in camelCase\\)$`), 'serve')
  t.notOk(existsSync(join(dir, 'service.db')), 'nothing was created')
  const suggestion = (key: string) => {
    writeFileSync(file, JSON.stringify({ [key]: 1 }))
    try {
      loadConfig({ env: { SERVICE_CONFIG: file } })
      return 'accepted'
    } catch (err) {
      return /did you mean "([^"]+)"/.exec((err as Error).message)?.[1] ?? (err as Error).message
    }
  }
  t.equal(suggestion('prot'), 'port')
  t.equal(suggestion('SERVICE_PORT'), 'port', 'an environment variable name')
  t.equal(suggestion('heartbeat-ms'), 'heartbeatMs', 'a flag name')
  t.equal(suggestion('heartbeat_ms'), 'heartbeatMs')
  t.equal(suggestion('sessionIdelMs'), 'sessionIdleMs')
  t.equal(suggestion('heartbeatMs'), 'accepted', 'a known key is fine')
})

t.test('--version, -v, -h, and an area alone', async (t) => {
  const env = { SERVICE_DATABASE: join(tempDir(t), 'never.db') }
  const [version, v, h, keys, users, frob] = await Promise.all([
    cli(['--version'], env), cli(['-v'], env), cli(['-h'], env), cli(['keys'], env), cli(['users', 'frob'], env), cli(['signing-keys'], env),
  ])
  const expected = `service-mcp 0.1.0 (build ${SERVICE_MCP_VERSION})\n`
  for (const [run, what] of [[version, '--version'], [v, '-v']] as const) {
    t.equal(run.code, 0, `${what}: exit 0`)
    t.equal(run.stdout, expected, `${what}: the package version and the build date`)
    t.equal(run.stderr, '')
  }
  t.equal(h.code, 0)
  t.match(h.stdout, /^Usage: service-mcp <command>/, '-h is the help')
  t.match(h.stdout, /backup <file> \[--force\]/, 'which lists backup')
  t.match(h.stdout, /restore <file> \[--force\]/, 'and restore')

  t.equal(keys.code, 2, 'keys alone: exit 2')
  t.equal(keys.stdout, '')
  t.equal(keys.stderr, [
    'service-mcp: keys needs a command: create, list, revoke',
    'Usage:',
    '  keys create <email> [--org <slug>] [--name <name>] [--scopes "mcp:read mcp:write"] [--expires-days <n>]',
    '                                          A new API key for a member of an organization. Prints only the new key on',
    '                                          stdout; it is not shown again',
    '  keys list [--org <slug>]                Every API key, shown by its prefix only',
    '  keys revoke <key-id>                    Revoke a key; sessions bound to it end at their next request',
    '',
  ].join('\n'), 'names its commands and prints its usage lines')
  t.equal(users.code, 2)
  t.match(users.stderr, /^service-mcp: users has no command frob; its commands are: list, create, set-password, disable, enable\nUsage:\n {2}users list {2,}The users\n/)
  t.equal(frob.code, 2)
  t.match(frob.stderr, /^service-mcp: signing-keys needs a command: list, rotate\n/)
  t.notOk(existsSync(env.SERVICE_DATABASE), 'no database was opened for a usage error')
})

t.test('a host that is not loopback needs SERVICE_BASE_URL', async (t) => {
  refused(t, await cli(['serve'], { SERVICE_HOST: '0.0.0.0', SERVICE_DATABASE: join(tempDir(t), 'never.db') }),
    /^service-mcp: SERVICE_HOST "0\.0\.0\.0" is not a loopback address, so clients reach the server by another address: set SERVICE_BASE_URL to the address they use \(e\.g\. https:\/\/mcp\.example\.com, or http:\/\/<this machine's name>:3000\); it is the address OAuth discovery and the pages advertise$/,
    'serve on 0.0.0.0')
  for (const host of ['::', '192.168.1.10', 'mcp.internal', '10.0.0.1']) {
    t.throws(() => loadConfig({ env: { SERVICE_HOST: host } }), new RegExp(`SERVICE_HOST "${host.replace(/\./g, '\\.')}" is not a loopback address`), host)
  }
  for (const host of ['127.0.0.1', '127.0.0.2', 'localhost', '::1']) t.doesNotThrow(() => loadConfig({ env: { SERVICE_HOST: host } }), `${host} is loopback`)
  t.equal(loadConfig({ env: { SERVICE_HOST: '::1' } }).baseUrl, 'http://[::1]:3000')
  t.equal(loadConfig({ env: { SERVICE_HOST: '0.0.0.0', SERVICE_BASE_URL: 'https://mcp.example.com' } }).baseUrl, 'https://mcp.example.com', 'with a base address it is fine')

  const server = await startServer(t, { config: { host: '0.0.0.0', baseUrl: 'https://mcp.example.com' } })
  const port = server.config.port
  const meta = await fetch(`http://127.0.0.1:${port}/.well-known/oauth-protected-resource/mcp`).then((r) => r.json() as Promise<{ resource: string }>)
  t.equal(meta.resource, 'https://mcp.example.com/mcp', 'listening on every interface, it advertises the base address')
})

t.test('database paths under /proc, and a folder it cannot write: one line, exit 2, at once', async (t) => {
  const runs: Array<{ db: string; args: string[]; env: Record<string, string> }> = [
    ...['/proc/foo.db', '/proc/self/foo.db', '/proc/sys/foo.db', '/proc/foo/bar.db'].map((db) => ({ db, args: ['serve'], env: { SERVICE_DATABASE: db, SERVICE_PORT: '0' } })),
    ...['/proc/self/x/y.db', '/proc/sys/x/y.db'].map((db) => ({ db, args: ['migrate'], env: { SERVICE_DATABASE: db } })),
  ]
  const started = Date.now()
  // Bounded: the bug was an endless loop at 97 % CPU (Node's recursive mkdir under /proc); each run gets 40 s, however
  // loaded the machine (a run takes a second alone).
  const results = await Promise.all(runs.map((r) => cli(r.args, r.env, 40_000)))
  for (const [i, r] of runs.entries()) {
    refused(t, results[i]!, new RegExp(`^service-mcp: Database ${r.db.replace(/[./]/g, '\\$&')} \\(SERVICE_DATABASE\\) cannot be (opened|created)`), `${r.args[0]} ${r.db}`)
  }
  t.comment(`${runs.length} runs in ${Date.now() - started} ms`)
  t.match(results[3]!.stderr, /cannot be created: its folder \/proc\/foo cannot be made \(ENOENT: no such file or directory, mkdir '\/proc\/foo'\)/, 'a folder that cannot be made is named')

  const dir = tempDir(t)
  const locked = join(dir, 'locked')
  mkdirSync(locked)
  chmodSync(locked, 0o500)
  const [inLocked, belowLocked] = await Promise.all([
    cliWithoutOverride(['migrate'], { SERVICE_DATABASE: join(locked, 'service.db') }),
    cliWithoutOverride(['migrate'], { SERVICE_DATABASE: join(locked, 'sub', 'service.db') }),
  ])
  refused(t, inLocked, /^service-mcp: Database .*locked\/service\.db \(SERVICE_DATABASE\) cannot be opened for writing: permission denied/, 'a folder it cannot write')
  refused(t, belowLocked, /^service-mcp: Database .*locked\/sub\/service\.db \(SERVICE_DATABASE\) cannot be created: its folder .*locked\/sub cannot be made \(EACCES/, 'a folder it cannot create')
})

t.test('a pipeline folder that does not exist stops the start, naming SERVICE_PIPELINES and the pipeline', async (t) => {
  const dir = tempDir(t)
  const db = join(dir, 'service.db')
  const pipelines = JSON.stringify({ default: { argv: ['./deploy.sh'], cwd: join(dir, 'app') } })
  refused(t, await cli(['serve'], { SERVICE_DATABASE: db, SERVICE_PORT: '0', SERVICE_PIPELINES: pipelines }),
    new RegExp(`^service-mcp: SERVICE_PIPELINES: pipeline default has "cwd" "${join(dir, 'app').replace(/[./]/g, '\\$&')}", which does not exist$`), 'a missing folder')
  t.notOk(existsSync(db), 'nothing was created')

  writeFileSync(join(dir, 'file'), '')
  const notFolder = await createServer({ env: {}, logger: false, config: { database: db, port: 0, pipelines: { web: { argv: ['./x'], cwd: join(dir, 'file') } } } }).then(() => null, (e: unknown) => e)
  t.ok(notFolder instanceof ConfigError, 'embedded: a ConfigError')
  t.match((notFolder as Error).message, /^SERVICE_PIPELINES: pipeline web has "cwd" ".*file", which is not a folder$/)
  const relative = await createServer({ env: {}, logger: false, config: { database: db, port: 0, pipelines: { web: { argv: ['./x'], cwd: 'no/such/folder' } } } }).then(() => null, (e: unknown) => e)
  t.match((relative as Error).message, new RegExp(`"no/such/folder" \\(${join(process.cwd(), 'no/such/folder').replace(/[./]/g, '\\$&')}\\), which does not exist`), 'a relative folder is shown resolved')
})

t.test('a pipeline command that is not there: the deployment fails with a sentence', async (t) => {
  const dir = tempDir(t)
  const app = join(dir, 'app')
  mkdirSync(app)
  writeFileSync(join(app, 'not-executable.sh'), '#!/bin/sh\necho hi\n', { mode: 0o644 })
  mkdirSync(join(app, 'a-folder'))
  const later = join(dir, 'removed-later')
  mkdirSync(later)
  const logs: string[] = []
  const server = await startServer(t, {
    config: {
      pipelines: {
        default: { argv: ['./deploy.sh'], cwd: app },
        plain: { argv: ['./not-executable.sh'], cwd: app },
        folder: { argv: ['./a-folder'], cwd: app },
        bare: { argv: ['no-such-tool-for-service-mcp'], cwd: app },
        gone: { argv: ['./deploy.sh'], cwd: later },
        works: { argv: ['sh', '-c', 'echo deployed'], cwd: app },
      },
    },
    logger: { level: 'error', stream: { write: (line: string) => void logs.push(line) } },
  })
  rmSync(later, { recursive: true })
  const repos = server.app.repos
  const organizationId = (await repos.organizations.bySlug('default'))!.id
  const run = async (pipeline: string) => {
    const created = await repos.apps.create({ organizationId, name: `app-${pipeline}`, pipeline })
    const final = await (await server.app.pipelines.start({ organizationId, appId: created.id, kind: 'deploy', createdBy: null })).done
    return { final, lines: (await repos.deployments.lines(final.id, 100)).items.map((l) => l.line) }
  }
  const cases: Array<[string, string]> = [
    ['default', `pipeline default: command ./deploy.sh not found in ${app} (cwd)`],
    ['plain', `pipeline plain: command ./not-executable.sh in ${app} (cwd) is not executable (chmod +x)`],
    ['folder', `pipeline folder: command ./a-folder in ${app} (cwd) is a folder`],
    ['bare', `pipeline bare: command no-such-tool-for-service-mcp not found on the PATH (run from ${app})`],
    ['gone', `pipeline gone: working directory ${later} does not exist`],
  ]
  for (const [pipeline, sentence] of cases) {
    const { final, lines } = await run(pipeline)
    t.equal(final.status, 'failed', `${pipeline}: failed`)
    t.equal(final.outcome, `failed: ${sentence}`, `${pipeline}: the outcome says why`)
    t.same(lines, [`failed: ${sentence}`], `${pipeline}: and so does the deployment log`)
    t.notOk(lines.some((l) => /ENOENT|spawn/.test(l)), `${pipeline}: not a bare ENOENT`)
    const logged = logs.map((l) => JSON.parse(l)).find((l) => l.msg === `pipeline ${pipeline} cannot run: ${sentence.replace(/^pipeline \S+: /, '')}`)
    t.ok(logged, `${pipeline}: one error line in the server log`)
    t.equal(logged?.deployment, final.id, `${pipeline}: naming the deployment`)
  }
  const ok = await run('works')
  t.equal(ok.final.status, 'succeeded', 'a command found on the PATH runs')
  t.ok(ok.lines.includes('deployed'))
})

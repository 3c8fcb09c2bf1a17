/**
 * The deployment recipes checked as far as this machine allows without a container engine or systemd as PID 1:
 * the Dockerfile statically (it is not built here) and its health check command run for real, the systemd unit by
 * `systemd-analyze verify`, the nginx and Caddy files by `nginx -t` (TLS included, with a throwaway certificate) and
 * `caddy validate`, and every file's settings against the server's own settings table. LICENSE and CHANGELOG too.
 * The proxies in front of a real server: test/e2e/proxy-nginx.test.ts and proxy-caddy.test.ts.
 */
import { execFile, spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, posix } from 'node:path'
import t from 'tap'
import { ConfigError, loadConfig, SETTINGS } from '../../src/config.js'
import { SERVER_VERSION, SERVICE_MCP_VERSION } from '../../src/version.js'
import { freePort } from '../helpers/ports.js'
import { findBinary, listeningPort, swap, writeNginxMain } from '../helpers/proxy.js'
import { startServer } from '../helpers/server.js'
import { pathToFileURL } from 'node:url'
import { ROOT } from '../helpers/root.js'

const root = pathToFileURL(ROOT + '/')
const read = (path: string) => readFileSync(new URL(path, root), 'utf8')
const defaultOf = (key: string) => SETTINGS.find((s) => s.key === key)!.default as number

function tempDir(t: { teardown(fn: () => void): void }, prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** `KEY=value` lines of a recipe's header comment (`#   SERVICE_X=…`): the settings it tells the operator to use. */
function documentedSettings(text: string): Record<string, string> {
  return Object.fromEntries([...text.matchAll(/^#\s+(SERVICE_[A-Z_]+)=(\S+)$/gm)].map((m) => [m[1]!, m[2]!]))
}

// --- Dockerfile ------------------------------------------------------------------------------------------------

interface Instruction { stage: number; name: string; args: string }

/** The instructions of a Dockerfile, continuation lines joined, comments dropped, each with the stage it is in. */
function instructions(text: string): Instruction[] {
  const joined = text.split('\n').filter((line) => !/^\s*#/.test(line)).join('\n').replace(/\\\n/g, ' ')
  const out: Instruction[] = []
  let stage = -1
  for (const line of joined.split('\n')) {
    const m = /^\s*([A-Za-z]+)\s+(.*)$/.exec(line)
    if (!m) continue
    const name = m[1]!.toUpperCase()
    if (name === 'FROM') stage++
    out.push({ stage, name, args: m[2]!.trim() })
  }
  return out
}

/** ENV instructions as one map (both `ENV A=1 B=2` and `ENV A 1`). */
function envOf(list: Instruction[]): Record<string, string> {
  const env: Record<string, string> = {}
  for (const i of list.filter((x) => x.name === 'ENV')) {
    if (!i.args.includes('=')) {
      const [k, ...v] = i.args.split(/\s+/)
      env[k!] = v.join(' ')
      continue
    }
    for (const m of i.args.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|\S*)/g)) env[m[1]!] = m[2]!.replace(/^"|"$/g, '')
  }
  return env
}

t.test('Dockerfile (not built here: checked statically)', async (t) => {
  const all = instructions(read('Dockerfile'))
  const froms = all.filter((i) => i.name === 'FROM')
  t.ok(froms.length >= 2, 'multi-stage')
  t.match(froms[0]!.args, / AS build$/i, 'the first stage is the build')
  const last = froms.length - 1
  t.equal(froms[last]!.args.split(/\s+/)[0], froms[0]!.args.split(/\s+/)[0], 'build and runtime from the same image: the addon compiled in one runs in the other')
  const build = all.filter((i) => i.stage === 0)
  const runtime = all.filter((i) => i.stage === last)
  const buildRuns = build.filter((i) => i.name === 'RUN').map((i) => i.args).join('\n')
  for (const step of [/apt-get install .*python3 make g\+\+/, /npm ci\b/, /npm rebuild better-sqlite3/, /npm run build/, /npm prune --omit=dev/]) {
    t.match(buildRuns, step, `build stage runs ${step}`)
  }

  const users = runtime.filter((i) => i.name === 'USER').map((i) => i.args)
  t.ok(users.length > 0, 'the runtime stage names its user')
  t.match(users.at(-1), /^[1-9]\d*(:[1-9]\d*)?$/, 'a numeric user and group, not root')
  t.strictSame(runtime.filter((i) => i.name === 'VOLUME').map((i) => i.args), ['/data'], 'one volume, /data')
  t.strictSame(runtime.filter((i) => i.name === 'EXPOSE').map((i) => i.args), ['3000'])
  const cmd = runtime.filter((i) => i.name === 'CMD').at(-1)?.args
  t.strictSame(JSON.parse(cmd ?? 'null'), ['node', 'dist/src/cli.js', 'serve'], 'CMD runs the built CLI')
  const pkg = JSON.parse(read('package.json'))
  t.equal(pkg.bin['service-mcp'], 'dist/src/cli.js', 'the same file package.json names as the program')
  t.strictSame(JSON.parse(runtime.find((i) => i.name === 'ENTRYPOINT')?.args ?? 'null'), ['/usr/bin/tini', '--'], 'tini as PID 1')
  t.match(runtime.filter((i) => i.name === 'RUN').map((i) => i.args).join('\n'), /apt-get install .*\btini\b/, 'tini installed')
  // The image runs the newest Node line the project tests, and what its binaries need (libatomic from Node 25 on).
  const tested = readdirSync(new URL('scripts/node-versions/installs/', root)).map((d) => Number(d.replace(/^node/, '')))
  const arg = all.find((i) => i.name === 'ARG' && i.args.startsWith('NODE_VERSION='))?.args
  t.equal(arg, `NODE_VERSION=${Math.max(...tested)}`, 'the image\'s Node is the newest tested line')
  t.match(froms[0]!.args, /^node:\$\{NODE_VERSION\}-/, 'the build stage\'s image takes that Node')
  for (const [stage, runs] of [['build', buildRuns], ['runtime', runtime.filter((i) => i.name === 'RUN').map((i) => i.args).join('\n')]] as const) {
    t.match(runs, /apt-get install .*\blibatomic1\b/, `libatomic1 installed in the ${stage} stage`)
  }

  // Settings: the database (and env.key beside it) in the volume, every interface, the public address left to the
  // operator, and no secret of any kind.
  const env = envOf(runtime)
  t.equal(env.SERVICE_DATABASE, '/data/service.db')
  t.equal(env.SERVICE_HOST, '0.0.0.0')
  t.equal(env.SERVICE_PORT, '3000')
  t.notOk('SERVICE_BASE_URL' in env, 'SERVICE_BASE_URL is the operator\'s')
  const names = all.filter((i) => i.name === 'ENV' || i.name === 'ARG').flatMap((i) => Object.keys(envOf([{ ...i, name: 'ENV' }])))
  t.strictSame(names.filter((n) => /PASSWORD|API_KEY|ENV_KEY|SECRET|TOKEN/i.test(n)), [], 'no secret in ENV or ARG')
  const config = loadConfig({ env: { ...env, SERVICE_BASE_URL: 'https://mcp.example.com' } })
  t.equal(dirname(config.database), '/data', 'the database lives in the volume, and env.key (by default beside it) with it')
  t.equal(config.envKeyFile, '', 'env.key at its default place')
  t.throws(() => loadConfig({ env }), ConfigError, 'without SERVICE_BASE_URL the image refuses to start, as its comment says')

  // Everything copied from the build context exists, and .dockerignore lets it through.
  const ignore = read('.dockerignore').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'))
  t.equal(ignore[0], '*', '.dockerignore starts by excluding everything')
  t.ok(ignore.slice(1).every((l) => l.startsWith('!')), '.dockerignore then only lets things in')
  const allowed = ignore.slice(1).map((l) => l.slice(1))
  const sources = all
    .filter((i) => i.name === 'COPY' && !/--from=/.test(i.args))
    .flatMap((i) => i.args.split(/\s+/).filter((w) => !w.startsWith('--')).slice(0, -1))
  t.ok(sources.length >= 8, `COPY sources found (${sources.length})`)
  for (const source of sources) {
    t.ok(existsSync(new URL(source, root)), `${source} exists`)
    t.ok(allowed.some((a) => source === a || source.startsWith(a + '/')), `${source} is let into the build`)
  }
  // What the server reads at run time beside dist/: package.json and drizzle/ (package root), the pipeline supervisor.
  const runtimeCopies = runtime.filter((i) => i.name === 'COPY').map((i) => i.args).join('\n')
  for (const needed of ['package.json', 'node_modules', 'dist', 'drizzle', 'scripts/pipelines']) {
    t.match(runtimeCopies, new RegExp(`(^|\\s|/)${needed.replace('/', '\\/')}(\\s|$)`, 'm'), `the runtime stage has ${needed}`)
  }
  t.ok(existsSync(new URL('scripts/pipelines/supervise.mjs', root)), 'the supervisor is in scripts/pipelines')
  for (const never of ['node_modules', 'dist', 'data', '.git', 'env.key']) t.notOk(allowed.includes(never), `${never} stays out of the build`)
})

t.test('the Dockerfile\'s health check, run as written', async (t) => {
  const runtime = instructions(read('Dockerfile')).filter((i, _, all) => i.stage === Math.max(...all.map((x) => x.stage)))
  const healthcheck = runtime.find((i) => i.name === 'HEALTHCHECK')?.args ?? ''
  const argv = JSON.parse(healthcheck.slice(healthcheck.indexOf('CMD ') + 4)) as string[]
  t.equal(argv[0], 'node', 'node, as the slim image has no curl')
  t.match(argv.join(' '), /\/healthz/, 'it asks /healthz')
  // Not spawnSync: the server answering it runs in this process.
  const run = (port: number) => new Promise<number | null>((resolve) => {
    const child = execFile(process.execPath, argv.slice(1), { env: { PATH: process.env.PATH, SERVICE_PORT: String(port) }, timeout: 10_000 })
    child.on('close', (code) => resolve(code))
  })
  const server = await startServer(t)
  t.equal(await run(listeningPort(server)), 0, 'healthy while the server runs')
  await server.close()
  t.equal(await run(await freePort()), 1, 'unhealthy when nothing answers')
})

// --- systemd ---------------------------------------------------------------------------------------------------

/** A unit file as section → key → values (a key may repeat). */
function unitFile(text: string): Map<string, Map<string, string[]>> {
  const sections = new Map<string, Map<string, string[]>>()
  let current: Map<string, string[]> | undefined
  for (const line of text.split('\n')) {
    if (/^\s*[#;]/.test(line) || line.trim() === '') continue
    const section = /^\[(.+)\]$/.exec(line.trim())
    if (section) {
      current = new Map()
      sections.set(section[1]!, current)
      continue
    }
    const eq = line.indexOf('=')
    const key = line.slice(0, eq).trim()
    current!.set(key, [...(current!.get(key) ?? []), line.slice(eq + 1).trim()])
  }
  return sections
}

const SYSTEMD_ANALYZE = findBinary('systemd-analyze')

t.test('systemd unit: systemd-analyze verify', { skip: SYSTEMD_ANALYZE ? false : 'systemd-analyze is not installed' }, async (t) => {
  const dir = tempDir(t, 'service-mcp-unit-')
  // verify checks that ExecStart's program exists: this machine's node stands in for /usr/bin/node.
  const text = swap(read('docs/deploy/service-mcp.service'), /^ExecStart=\/usr\/bin\/node /gm, `ExecStart=${process.execPath} `)
  const verify = (content: string) => {
    const file = join(dir, 'service-mcp.service')
    writeFileSync(file, content)
    return spawnSync(SYSTEMD_ANALYZE!, ['verify', file], { encoding: 'utf8', timeout: 30_000 })
  }
  const good = verify(text)
  t.equal(good.status, 0, 'verify succeeds')
  t.equal(good.stderr.trim(), '', 'without a warning (unknown keys and bad values are warnings)')
  // The check has teeth here: a misspelled key and a bad value are reported.
  const bad = verify(text.replace(/^KillMode=mixed$/m, 'KillMod=mixed').replace(/^Restart=on-failure$/m, 'Restart=sometimes'))
  t.match(bad.stderr, /Unknown key.*KillMod/, 'a misspelled key is reported')
  t.match(bad.stderr, /sometimes/, 'a bad value is reported')
})

t.test('systemd unit: what it promises', async (t) => {
  const service = unitFile(read('docs/deploy/service-mcp.service')).get('Service')!
  const one = (key: string) => service.get(key)?.at(-1)
  t.ok(one('User') && one('User') !== 'root', 'a dedicated user')
  t.equal(one('StateDirectory'), 'service-mcp')
  const env = Object.fromEntries((service.get('Environment') ?? []).map((e) => e.split(/=(.*)/s).slice(0, 2)))
  t.equal(dirname(env.SERVICE_DATABASE ?? ''), '/var/lib/service-mcp', 'the database (and env.key beside it) in the state directory')
  t.ok(service.get('ReadWritePaths')?.join(' ').split(/\s+/).includes('/var/lib/service-mcp'), 'which is writable')
  t.ok(service.get('EnvironmentFile')?.length, 'an environment file for SERVICE_BASE_URL and the rest')
  const config = loadConfig({ env: { ...env, SERVICE_BASE_URL: 'https://mcp.example.com' } })
  t.equal(config.host, '127.0.0.1', 'loopback only: the proxy is in front')
  t.strictSame(config.trustProxy, ['127.0.0.1'], 'trusting the proxy on this machine only')
  t.equal(config.maxConnectionsPerAddress, 0, 'the proxy bounds connections per client')
  t.match(one('ExecStart'), /^\/usr\/bin\/node \/opt\/service-mcp\/dist\/src\/cli\.js serve$/)
  t.equal(one('KillSignal'), 'SIGTERM')
  t.equal(one('KillMode'), 'mixed', 'SIGTERM to the server alone: it stops its deployments itself')
  const stopSeconds = Number(/^(\d+)s?$/.exec(one('TimeoutStopSec') ?? '')?.[1])
  t.ok(stopSeconds * 1000 >= defaultOf('stopSettleMs') + defaultOf('pipelineGraceMs') + 10_000, `TimeoutStopSec ${stopSeconds}s leaves the settle period, the pipeline grace period and the drain time`)
  t.equal(one('Restart'), 'on-failure')
  t.ok(one('RestartPreventExitStatus')?.split(/\s+/).includes('2'), 'exit code 2 (bad settings) is not retried')
  for (const [key, value] of [['NoNewPrivileges', 'yes'], ['ProtectSystem', 'strict'], ['ProtectHome', 'yes'], ['PrivateTmp', 'yes']]) {
    t.equal(one(key!), value, `${key}=${value}`)
  }
  t.match(one('RestrictAddressFamilies'), /AF_INET AF_INET6/, 'only the address families it uses')
})

// --- nginx and Caddy -------------------------------------------------------------------------------------------

/** Directive lines of an nginx or Caddy file, comments removed. */
const directives = (text: string) => text.split('\n').map((l) => l.replace(/#.*$/, '').trim()).filter(Boolean)

t.test('nginx recipe: what it promises', async (t) => {
  const text = read('docs/deploy/nginx.conf')
  const lines = directives(text)
  t.ok(lines.includes('proxy_set_header X-Forwarded-For $remote_addr;'), 'X-Forwarded-For overwritten with the address nginx saw')
  t.notOk(lines.some((l) => l.includes('$proxy_add_x_forwarded_for')), 'never appended to what a client sent')
  t.ok(lines.includes('proxy_set_header X-Forwarded-Proto $scheme;'))
  t.ok(lines.includes('proxy_buffering off;'), 'SSE unbuffered')
  t.ok(lines.includes('proxy_http_version 1.1;') && lines.includes('proxy_set_header Connection "";'), 'HTTP/1.1 kept-alive to the server')
  const readTimeout = Number(/^proxy_read_timeout (\d+)s;$/m.exec(lines.join('\n'))?.[1])
  t.ok(readTimeout * 1000 > 2 * defaultOf('heartbeatMs'), `proxy_read_timeout ${readTimeout}s well above the heartbeat`)
  const bodyMiB = Number(/^client_max_body_size (\d+)m;$/m.exec(lines.join('\n'))?.[1])
  t.ok(bodyMiB * 1_048_576 > defaultOf('maxBodyBytes'), `client_max_body_size ${bodyMiB}m above SERVICE_MAX_BODY_BYTES: the server answers in its own shape`)

  const settings = documentedSettings(text)
  const config = loadConfig({ env: settings })
  t.equal(config.baseUrl, 'https://mcp.example.com', 'SERVICE_BASE_URL is the server_name, over https')
  t.ok(lines.some((l) => l.startsWith(`server ${config.host}:${config.port} `) || l === `server ${config.host}:${config.port};`), 'the upstream is where the settings make the server listen')
  // A rolling restart (test/e2e/rolling-restart.test.ts runs it): what the server refused with 503 (nothing ran) or
  // never received (a refused connection) goes to another process, a POST included; nothing that may have run does.
  t.ok(lines.includes('proxy_next_upstream error timeout http_503;'), 'refused connections, timeouts and 503s go to the next process')
  t.notOk(lines.some((l) => l.includes('non_idempotent')), 'never a POST that was sent and then failed')
  t.ok(lines.includes('error_page 503 = @service_mcp_retry;') && lines.includes('location @service_mcp_retry {'), 'a POST answered 503 is sent again')
  t.ok(lines.includes('recursive_error_pages on;'), 'and again, when the retry lands on a stopping process too')
  t.ok(lines.includes('limit_conn_status 429;'), 'nginx\'s own refusals are no 503, which would be sent on anyway')
  const failTimeout = Number(/ fail_timeout=(\d+)s;$/m.exec(lines.join('\n'))?.[1])
  t.ok(failTimeout > 0 && failTimeout <= 5, `a restarted process is tried again within ${failTimeout} s`)
  t.strictSame(config.trustProxy, [config.host], 'nginx connects from the loopback address it proxies to, the one trusted')
  t.equal(config.maxConnectionsPerAddress, 0)
})

const NGINX = findBinary('nginx')
const OPENSSL = findBinary('openssl')

t.test('nginx -t accepts the recipe as written, TLS included', { skip: !NGINX ? 'nginx is not installed' : !OPENSSL ? 'openssl is not installed' : false }, async (t) => {
  const dir = tempDir(t, 'service-mcp-nginx-t-')
  const made = spawnSync(OPENSSL!, ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1',
    '-subj', '/CN=mcp.example.com', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { encoding: 'utf8' })
  t.equal(made.status, 0, `a throwaway certificate${made.status ? ': ' + made.stderr : ''}`)
  let site = swap(read('docs/deploy/nginx.conf'), '/etc/letsencrypt/live/mcp.example.com/fullchain.pem', join(dir, 'cert.pem'))
  site = swap(site, '/etc/letsencrypt/live/mcp.example.com/privkey.pem', join(dir, 'key.pem'))
  writeFileSync(join(dir, 'site.conf'), site)
  const main = writeNginxMain(dir, join(dir, 'site.conf'))
  const test = spawnSync(NGINX!, ['-t', '-p', dir, '-c', main, '-e', 'stderr'], { encoding: 'utf8', timeout: 30_000 })
  t.equal(test.status, 0, `nginx -t: ${test.stderr.trim()}`)
  t.match(test.stderr, /test is successful/)
  t.notMatch(test.stderr, /\[warn\]/, 'without a warning')
})

t.test('Caddy recipe: what it promises', async (t) => {
  const text = read('docs/deploy/Caddyfile')
  const lines = directives(text)
  t.ok(lines.includes('mcp.example.com {'), 'a site by name: automatic HTTPS')
  t.ok(lines.includes('flush_interval -1'), 'SSE flushed at once')
  const maxSize = /^max_size (\d+)MB$/m.exec(lines.join('\n'))?.[1]
  t.ok(Number(maxSize) * 1_000_000 > defaultOf('maxBodyBytes'), `max_size ${maxSize}MB above SERVICE_MAX_BODY_BYTES: the server answers in its own shape`)
  const config = loadConfig({ env: documentedSettings(text) })
  t.equal(config.baseUrl, 'https://mcp.example.com')
  t.ok(lines.includes(`reverse_proxy ${config.host}:${config.port} {`), 'the upstream is where the settings make the server listen')
  t.ok(lines.includes('health_uri /readyz'), 'a stopping or unready process is taken out by its readiness')
  t.ok(lines.includes('keepalive off'), 'no kept connection reaches a stopping process, whose 503 Caddy could not retry')
  t.ok(lines.some((l) => l.startsWith('lb_try_duration ')), 'a refused connection is tried on another process')
  // Caddy 2.6 gives a buffered body back to a pool at the first try: a retry may carry another request's body.
  t.notOk(lines.some((l) => l.startsWith('buffer_requests') || l.startsWith('request_buffers')), 'no request buffering, which Caddy 2.6 mixes up between requests on a retry')
  t.strictSame(config.trustProxy, [config.host])
  t.equal(config.maxConnectionsPerAddress, 0)
})

const CADDY = findBinary('caddy')

t.test('caddy validate accepts the recipe as written', { skip: CADDY ? false : 'caddy is not installed' }, async (t) => {
  const dir = tempDir(t, 'service-mcp-caddy-v-')
  const env = { PATH: process.env.PATH ?? '', HOME: dir, XDG_CONFIG_HOME: join(dir, 'config'), XDG_DATA_HOME: join(dir, 'data') }
  const file = new URL('docs/deploy/Caddyfile', root).pathname
  const run = spawnSync(CADDY!, ['validate', '--config', file, '--adapter', 'caddyfile'], { encoding: 'utf8', env, timeout: 30_000 })
  t.equal(run.status, 0, `caddy validate: ${run.stderr.trim().split('\n').at(-1)}`)
  t.match(run.stdout + run.stderr, /Valid configuration/)
  const fmt = spawnSync(CADDY!, ['fmt', file], { encoding: 'utf8', env })
  t.equal(fmt.stdout, read('docs/deploy/Caddyfile'), 'formatted as caddy fmt formats it')
})

// --- the deploy README, LICENSE, CHANGELOG ---------------------------------------------------------------------

t.test('docs/deploy/README.md links only to files that exist', async (t) => {
  const text = read('docs/deploy/README.md')
  const links = [...text.matchAll(/\]\(([^)#]+)(#[^)]*)?\)/g)].map((m) => m[1]!).filter((l) => !/^[a-z]+:/.test(l))
  t.ok(links.length >= 5, `links found (${links.length})`)
  for (const link of links) t.ok(existsSync(new URL(posix.join('docs/deploy/', link), root)), `${link} exists`)
  for (const file of ['service-mcp.service', 'nginx.conf', 'Caddyfile', '../../Dockerfile']) t.ok(links.includes(file), `${file} is linked`)
})

t.test('LICENSE and CHANGELOG', async (t) => {
  const pkg = JSON.parse(read('package.json'))
  t.equal(pkg.license, 'MIT')
  const license = read('LICENSE')
  t.match(license, /^MIT License\n\nCopyright \(c\) 2026 service-mcp contributors\n/)
  t.match(license, /THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND/)

  const changelog = read('CHANGELOG.md')
  t.match(changelog, /^## \[Unreleased\]$/m, 'an Unreleased section')
  t.match(changelog, /^## Upgrading$/m, 'upgrade notes')
  const released = [...changelog.matchAll(/^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$/gm)]
  t.ok(released.length >= 1, 'released versions, with their dates')
  t.equal(released[0]?.[1], pkg.version, 'the newest release is package.json\'s version')
  t.equal(released[0]?.[1], SERVER_VERSION, 'and the version the server reports')
  t.equal(released[0]?.[2], SERVICE_MCP_VERSION, 'released on the date it sends as X-Service-MCP-Version')

  // Both ship with the package (npm pack lists what a tarball would hold; no script runs).
  const pack = spawnSync('npm', ['pack', '--dry-run', '--ignore-scripts', '--json'], { cwd: new URL('.', root).pathname, encoding: 'utf8', timeout: 60_000 })
  t.equal(pack.status, 0, 'npm pack --dry-run')
  const files = (JSON.parse(pack.stdout)[0].files as Array<{ path: string }>).map((f) => f.path)
  for (const file of ['LICENSE', 'CHANGELOG.md', 'README.md']) t.ok(files.includes(file), `${file} is in the package`)
  // The README is short and sends readers to docs/: every page it links ships too, and exists.
  const linked = [...read('README.md').matchAll(/\]\((docs\/[^)#\s]+\.md)[^)]*\)/g)].map((m) => m[1]!).filter((p) => !p.startsWith('docs/decisions/'))
  t.ok(linked.length >= 8, `the README links its docs pages (${linked.length})`)
  for (const page of new Set(linked)) {
    t.ok(existsSync(new URL(page, root)), `${page} exists`)
    t.ok(files.includes(page), `${page} is in the package`)
  }
})

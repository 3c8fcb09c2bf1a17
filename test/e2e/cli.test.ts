// test-backends: sqlite-only (the command line on SQLite files it makes; postgres.test.ts and hardening-oauth.test.ts run migrate, orgs and the membership commands on PostgreSQL)
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { request } from 'undici'
import { COMMANDS } from '../../src/cli/commands.js'
import { openDatabase } from '../../src/db/sqlite/client.js'
import { createRepos } from '../../src/db/sqlite/repos.js'
import { cli, startServe, type Served } from '../helpers/cli.js'

// About 30 CLI processes, each loading TypeScript through tsx: allow more than the default per-file limit, still bounded.
t.setTimeout(180_000)
const KEY_LINE = /^service_mcp_[A-Za-z0-9_-]{43}$/

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'service-mcp-cli-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** The first column of a table row whose cells include `needle`. */
function rowWith(table: string, needle: string): string[] | undefined {
  return table.split('\n').map((l) => l.trim().split(/\s{2,}/)).find((cells) => cells.includes(needle))
}

t.test('admin commands against a temporary database', async (t) => {
  const db = join(tempDir(t), 'db.sqlite')
  const env = { SERVICE_DATABASE: db }
  const ok = async (args: string[], extraEnv: Record<string, string> = {}) => {
    const r = await cli(args, { ...env, ...extraEnv })
    t.equal(r.code, 0, `service-mcp ${args.join(' ')} exits 0${r.stderr ? `\n${r.stderr}` : ''}`)
    t.equal(r.stderr, '', `service-mcp ${args.join(' ')}: nothing on stderr`)
    return r
  }

  const migrate = await ok(['migrate'])
  t.match(migrate.stdout, /migrations applied/)
  t.match(migrate.stdout, db)

  const [orgCreated, user] = await Promise.all([
    ok(['orgs', 'create', 'acme', '--name', 'Acme']),
    ok(['users', 'create', 'dev@example.com', '--password', 'longenough1']),
  ])
  t.match(orgCreated.stdout, /created organization acme \(org_/)
  const orgs = await ok(['orgs', 'list'])
  const acme = rowWith(orgs.stdout, 'acme')
  t.ok(acme, 'acme is listed')
  t.match(acme?.[0], /^org_/)
  t.ok(acme?.includes('Acme'), 'with its name')

  t.match(user.stdout, /created user dev@example\.com \(usr_/)
  t.notMatch(user.stdout, /longenough1|password:/, 'a given password is not printed')
  t.match((await ok(['users', 'list'])).stdout, /dev@example\.com/)

  t.match((await ok(['members', 'set', 'dev@example.com', 'acme', 'developer'])).stdout, /dev@example\.com is developer of acme/)
  const members = await ok(['members', 'list', '--org', 'acme'])
  const member = rowWith(members.stdout, 'dev@example.com')
  t.ok(member, 'the member is listed')
  t.ok(member?.includes('acme') && member.includes('developer'), 'with organization and role')

  // --database flag works as well as SERVICE_DATABASE.
  const viaFlag = await cli(['orgs', 'list', '--database', db], {})
  t.equal(viaFlag.code, 0)
  t.ok(rowWith(viaFlag.stdout, 'acme'), '--database names the same file')

  const created = await ok(['keys', 'create', 'dev@example.com', '--org', 'acme', '--scopes', 'mcp:read'])
  const lines = created.stdout.split('\n')
  t.equal(lines.length, 2, 'one line and its newline')
  t.equal(lines[1], '', 'ends with a newline')
  t.match(lines[0], KEY_LINE, 'stdout holds exactly the key')
  const key = lines[0]!

  const [list, listAcme, listDefault] = await Promise.all([ok(['keys', 'list']), ok(['keys', 'list', '--org', 'acme']), ok(['keys', 'list', '--org', 'default'])])
  t.notOk(list.stdout.includes(key), 'the full key is never listed')
  t.notOk(list.stdout.includes(key.slice(0, 30)), 'not even most of it')
  const row = rowWith(list.stdout, 'dev@example.com')
  t.ok(row, 'the key is listed')
  t.match(row?.[0], /^key_/)
  t.ok(row?.some((c) => c.startsWith('service_mcp_') && c.endsWith('…') && c.length < key.length), 'shown masked')
  t.ok(row?.some((c) => c === 'mcp:read'), 'with its scopes')
  const id = row![0]!
  t.match(listAcme.stdout, id)
  t.notMatch(listDefault.stdout, id, '--org filters')

  t.match((await ok(['keys', 'revoke', id])).stdout, new RegExp(`revoked ${id}`))
  const timestamps = (cells: string[] | undefined) => (cells ?? []).filter((c) => /^\d{4}-\d{2}-\d{2}T[\d:.]+Z$/.test(c)).length
  const revokedRow = rowWith((await ok(['keys', 'list'])).stdout, id)
  t.equal(timestamps(row), 1, 'before: only the creation time')
  t.equal(timestamps(revokedRow), 2, 'after: a revocation time is shown too')
  t.match((await ok(['keys', 'revoke', id])).stdout, /already revoked/, 'revoking twice is harmless')

  // The operator's key changes are audited in the key's organization, as the account page's are; never the key itself.
  const handle = openDatabase(db, { migrate: false })
  try {
    const entries = (await createRepos(handle.db).audit.page(acme![0]!, 50)).items.filter((e) => e.targetId === id)
    t.strictSame(entries.map((e) => [e.action, e.credentialKind, e.userId, e.outcome]).sort(), [
      ['api_key.create', 'cli', null, 'succeeded'],
      ['api_key.revoke', 'cli', null, 'succeeded'],
    ], 'one create and one revoke entry, by the cli; the repeated revoke writes nothing')
    t.notOk(JSON.stringify(entries).includes(key), 'the key is not in the audit log')
  } finally {
    handle.close()
  }

  t.test('errors exit 2 with a clear message', async (t) => {
    const cases: Array<{ args: string[]; env?: Record<string, string>; message: RegExp }> = [
      { args: ['frobnicate'], message: /unknown command: frobnicate/ },
      { args: ['keys', 'create', 'nobody@example.com', '--org', 'acme'], message: /no user with email nobody@example\.com/ },
      { args: ['members', 'set', 'dev@example.com', 'acme', 'superuser'], message: /role must be one of viewer, developer, admin, owner/ },
      { args: ['members', 'set', 'dev@example.com', 'nope', 'viewer'], message: /no organization with slug nope/ },
      { args: ['keys', 'create', 'dev@example.com', '--org', 'default'], message: /not a member of default/ },
      { args: ['keys', 'revoke', 'key_doesnotexist'], message: /no API key key_doesnotexist/ },
      { args: ['users', 'create', 'dev@example.com', '--password', 'longenough1'], message: /already exists/ },
      { args: ['users', 'create', 'x@example.com', '--password', 'short'], message: /at least 8 characters/ },
      { args: ['orgs', 'create', 'Bad Slug'], message: /slug must be/ },
      { args: ['orgs', 'list', '--prot', '1'], message: /unknown option --prot; did you mean --port\?\nSee service-mcp orgs list --help\.\n$/ },
      { args: ['serve'], env: { SERVICE_PORT: 'abc' }, message: /SERVICE_PORT.*"abc"/ },
      { args: ['serve', '--port', '70000'], message: /--port.*70000/ },
    ]
    const runs = await Promise.all(cases.map((c) => cli(c.args, { ...env, ...(c.env ?? {}) })))
    for (const [i, c] of cases.entries()) {
      const r = runs[i]!
      const label = `service-mcp ${c.args.join(' ')}`
      t.equal(r.code, 2, `${label}: exit code 2`)
      t.match(r.stderr, /^service-mcp: /, `${label}: prefixed message`)
      t.match(r.stderr, c.message, `${label}: ${c.message}`)
      t.notMatch(r.stderr, /\n\s+at /, `${label}: no stack trace`)
      t.equal(r.stdout, '', `${label}: nothing on stdout`)
    }
  })

  t.test('help', async (t) => {
    const r = await cli(['help'], env)
    t.equal(r.code, 0)
    t.match(r.stdout, /Usage: service-mcp <command>/)
    t.match(r.stdout, /keys create/)
  })
})

t.test('signing keys: rotate, list; clients list', async (t) => {
  const env = { SERVICE_DATABASE: join(tempDir(t), 'db.sqlite') }
  const first = await cli(['signing-keys', 'rotate'], env)
  t.equal(first.code, 0, first.stderr)
  const firstKid = /new signing key (\S+);/.exec(first.stdout)?.[1]
  t.ok(firstKid, 'prints the new kid')
  const second = await cli(['signing-keys', 'rotate'], env)
  const secondKid = /new signing key (\S+);/.exec(second.stdout)?.[1]
  t.not(secondKid, firstKid)
  const list = await cli(['signing-keys', 'list'], env)
  t.equal(list.code, 0)
  t.equal(rowWith(list.stdout, secondKid!)?.at(-1), 'signing', 'the newest key signs')
  t.equal(rowWith(list.stdout, firstKid!)?.at(-1), 'verifying', 'the retired key still verifies')
  const handle = openDatabase(env.SERVICE_DATABASE, { migrate: false })
  try {
    const repos = createRepos(handle.db)
    await repos.oauthClients.create({ name: 'Registered', redirectUris: ['http://127.0.0.1:9/cb'], grantTypes: ['authorization_code'], scope: 'mcp:read' })
    await repos.oauthClients.saveDocument({ id: 'https://app.example.com/client.json', name: 'By document', redirectUris: ['https://app.example.com/cb'], grantTypes: ['authorization_code'], scope: 'mcp:read' }, Date.now())
  } finally {
    handle.close()
  }
  const clients = await cli(['clients', 'list'], env)
  t.equal(clients.code, 0)
  t.equal(clients.stderr, '')
  t.equal(rowWith(clients.stdout, 'https://app.example.com/client.json')?.[1], 'metadata_document', 'a document client says so')
  t.equal(rowWith(clients.stdout, 'Registered')?.[1], 'registration', 'a registered one too')
})

async function stop(t: Test, served: Served): Promise<void> {
  served.child.kill('SIGTERM')
  const killer = setTimeout(() => served.child.kill('SIGKILL'), 15_000)
  const { code, signal } = await served.exited
  clearTimeout(killer)
  t.equal(signal, null, 'not killed by a signal')
  t.equal(code, 0, 'SIGTERM shuts down with exit code 0')
}

t.test('serve: bootstrap once, then never again', async (t) => {
  const db = join(tempDir(t), 'db.sqlite')
  const env = { SERVICE_DATABASE: db, SERVICE_PORT: '0', SERVICE_LOG_LEVEL: 'info' }

  const first = await startServe(env)
  t.teardown(() => void first.child.kill('SIGKILL'))
  t.match(first.url, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/, 'the real URL, not port 0')
  t.notMatch(first.url, /:0\//)
  const out1 = first.stdout()
  t.equal(out1.match(/First start/g)?.length, 1, 'the bootstrap block is printed once')
  const password = /^ {2}password: (\S+)$/m.exec(out1)?.[1]
  const key = /^ {2}API key: {2}(\S+)$/m.exec(out1)?.[1]
  t.ok(password && password.length >= 16, 'a generated password is shown')
  t.match(key, KEY_LINE, 'a generated API key is shown')
  t.match(out1, /email: {4}owner@example\.com/)

  // The server is real: the printed key authenticates at the printed URL.
  const init = await request(first.url, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'cli-test', version: '1' } } }),
  })
  t.equal(init.statusCode, 200, 'the bootstrap key works')
  t.ok(init.headers['mcp-session-id'], 'a session was created')
  await init.body.text()

  await stop(t, first)
  const logLines = first.stdout().split('\n').filter((l) => l.startsWith('{'))
  t.ok(logLines.some((l) => /"msg":"shutting down"/.test(l)), 'the shutdown is logged')
  t.notOk(first.stdout().split('\n').filter((l) => l.startsWith('{')).some((l) => l.includes(key!) || l.includes(password!)), 'secrets never reach the log lines')

  const second = await startServe(env)
  t.teardown(() => void second.child.kill('SIGKILL'))
  t.notMatch(second.stdout(), /First start|password:|API key:/, 'no bootstrap block on a database that has users')
  const again = await request(second.url, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'cli-test', version: '1' } } }),
  })
  t.equal(again.statusCode, 200, 'the key from the first start still works')
  await again.body.text()
  await stop(t, second)

  // The CLI sees the bootstrapped owner in the same database.
  const users = await cli(['users', 'list'], { SERVICE_DATABASE: db })
  t.match(users.stdout, /owner@example\.com/)
})

/** An argument of the right shape for each `<…>` of a usage line (what it names need not exist). */
function placeholder(name: string, dir: string): string {
  const values: Record<string, string> = { '<email>': 'nobody@example.com', '<slug>': 'acme', '<org-slug>': 'acme', '<role>': 'viewer', '<key-id>': 'key_nothing', '<quota>': 'apps', '<value>': '5', '<file>': join(dir, 'backup.db') }
  const value = values[name]
  if (value === undefined) throw new Error(`no placeholder for ${name}: add one`)
  return value
}

t.test('a command that works on an existing database refuses one that does not exist, and creates nothing', async (t) => {
  // Every command the table declares so, with its arguments: a new one is covered by declaring it.
  const existing = COMMANDS.filter((c) => c.database === 'existing')
  t.ok(existing.some((c) => c.name === 'keys list') && existing.some((c) => c.name === 'users list'), 'the lists are among them')
  const runs = await Promise.all(existing.map(async (command) => {
    const dir = tempDir(t)
    const db = join(dir, 'mistyped', 'service.db')
    const args = [...command.name.split(' '), ...(command.args?.match(/<[^>]+>/g) ?? []).map((name) => placeholder(name, dir))]
    return { command, dir, db, run: await cli(args, { SERVICE_DATABASE: db }) }
  }))
  for (const { command, dir, db, run } of runs) {
    const label = `service-mcp ${command.name}`
    t.equal(run.code, 2, `${label}: exit code 2${run.code === 2 ? '' : `\n${run.stdout}${run.stderr}`}`)
    t.equal(run.stdout, '', `${label}: nothing on stdout`)
    t.match(run.stderr, new RegExp(`^service-mcp: Database ${db.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} \\(SERVICE_DATABASE\\) does not exist[,:] `), `${label}: names the file and the setting`)
    t.equal(run.stderr.split('\n').filter(Boolean).length, 1, `${label}: one line`)
    t.same(readdirSync(dir), [], `${label}: no file, folder or lock file was created`)
  }

  // What works on an empty database still creates it.
  const dir = tempDir(t)
  const created = await cli(['users', 'create', 'dev@example.com', '--password', 'longenough1'], { SERVICE_DATABASE: join(dir, 'new', 'service.db') })
  t.equal(created.code, 0, created.stderr)
  t.ok(existsSync(join(dir, 'new', 'service.db')), 'users create creates the database')
  t.ok(COMMANDS.filter((c) => c.database === 'create').map((c) => c.name).includes('migrate'), 'as migrate and serve do')
})

t.test('help: a command\'s or an area\'s, asked for in any of the ways', async (t) => {
  const env = { SERVICE_DATABASE: join(tempDir(t), 'never.db') }
  const asked = async (forms: string[][]) => {
    const runs = await Promise.all(forms.map((args) => cli(args, env)))
    for (const [i, run] of runs.entries()) {
      t.equal(run.code, 0, `${forms[i]!.join(' ')}: exit 0`)
      t.equal(run.stderr, '', `${forms[i]!.join(' ')}: nothing on stderr`)
      t.equal(run.stdout, runs[0]!.stdout, `${forms[i]!.join(' ')}: the same help as ${forms[0]!.join(' ')}`)
    }
    return runs[0]!.stdout
  }
  const global = (await cli(['--help'], env)).stdout

  const keys = await asked([['keys', '--help'], ['keys', '-h'], ['help', 'keys'], ['keys', 'help']])
  t.match(keys, /^Usage: service-mcp keys <command>/)
  for (const verb of ['create', 'list', 'revoke']) t.match(keys, new RegExp(`^ {2}keys ${verb}`, 'm'), `lists keys ${verb}`)
  t.notMatch(keys, /users list/, 'and no other area')

  const create = await asked([['keys', 'create', '--help'], ['keys', 'create', '-h'], ['help', 'keys', 'create'], ['keys', 'create', 'dev@example.com', '--help']])
  t.match(create, /^Usage: service-mcp keys create <email> \[--org <slug>\]/)
  for (const flag of ['--org <slug>', '--name <name>', '--scopes "mcp:read mcp:write"', '--expires-days <n>']) t.match(create, `\n  ${flag} `, `its option ${flag}`)
  t.match(create, /--database <value> +SERVICE_DATABASE/, 'and the settings it reads')
  t.equal(await asked([['keys', 'list', 'help'], ['keys', 'list', '--help']]) === create, false, 'another command, another help')

  const serve = await asked([['serve', '--help'], ['serve', '-h'], ['help', 'serve'], ['serve', 'help']])
  t.match(serve, /^Usage: service-mcp serve\n/)
  t.match(serve, /serve --profile conformance/)
  t.match(serve, /\n {2}--port <n> +SERVICE_PORT\n/, 'the settings it reads, one a line')
  for (const help of [keys, create, serve]) t.not(help, global, 'not the global help')
  t.notOk(existsSync(env.SERVICE_DATABASE), 'asking for help opens no database')
})

t.test('an unknown option: a short error naming it, a close match, and the command\'s help to see', async (t) => {
  const env = { SERVICE_DATABASE: join(tempDir(t), 'never.db') }
  const cases: Array<[string[], string]> = [
    [['keys', 'list', '--databse', 'x.db'], 'unknown option --databse; did you mean --database?\nSee service-mcp keys list --help.'],
    [['keys', 'create', 'dev@example.com', '--scope', 'mcp:read'], 'unknown option --scope; did you mean --scopes?\nSee service-mcp keys create --help.'],
    [['serve', '--prot', '3000'], 'unknown option --prot; did you mean --port?\nSee service-mcp serve --help.'],
    [['serve', '--frobnicate'], 'unknown option --frobnicate\nSee service-mcp serve --help.'],
    [['keys', '--helpp'], 'unknown option --helpp; did you mean --help?\nSee service-mcp keys --help.'],
    [['--prot', '1'], 'unknown option --prot; did you mean --port?\nSee service-mcp --help.'],
    [['keys', 'list', '--force'], 'keys list takes no option --force\nSee service-mcp keys list --help.'],
    [['keys', 'list', 'extra'], 'keys list takes no argument, got extra\nSee service-mcp keys list --help.'],
  ]
  const runs = await Promise.all(cases.map(([args]) => cli(args, env)))
  for (const [i, [args, message]] of cases.entries()) {
    const run = runs[i]!
    t.equal(run.code, 2, `${args.join(' ')}: exit 2`)
    t.equal(run.stdout, '', `${args.join(' ')}: nothing on stdout`)
    t.equal(run.stderr, `service-mcp: ${message}\n`, `${args.join(' ')}: ${message}`)
  }
  t.notOk(existsSync(env.SERVICE_DATABASE), 'nothing was opened')
})

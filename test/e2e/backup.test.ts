// test-backends: sqlite-only (SQLite's backups; PostgreSQL is backed up with pg_dump)
import { spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import t, { type Test } from 'tap'
import { backupDatabase, restoreDatabase } from '../../src/db/sqlite/backup.js'
import { openDatabase } from '../../src/db/sqlite/client.js'
import { createRepos } from '../../src/db/sqlite/repos.js'
import { cli, startServe, type Run, type Served } from '../helpers/cli.js'
import { answerOf, modernCall } from '../helpers/modern.js'
import { OWNER_PASSWORD, startServer } from '../helpers/server.js'
import { ROOT } from '../helpers/root.js'

/**
 * `service-mcp backup` and `restore` (issue 12): an online backup taken while a real server takes writes holds every
 * write acknowledged before it began; a restore into a fresh place (with the env key carried separately) serves them;
 * the refusals (a server on the database, a file that is not a database of this service, a newer one, a key that does
 * not open it) touch nothing; a replaced database is kept with its write-ahead log.
 * About SQLite's files (PostgreSQL is backed up with pg_dump), so on SQLite in every pass: each server gets its file (dbPath).
 */

t.setTimeout(180_000)

const API_KEY = 'service_mcp_' + 'B'.repeat(43)
const LIFTED = { SERVICE_RATE_LIMIT_API_KEY_MEMBER: '1000000', SERVICE_RATE_LIMIT_ORGANIZATION: '1000000', SERVICE_RATE_LIMIT_TOOL_FACTOR: '1000000' }

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'service-mcp-backup-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

function serveEnv(db: string, extra: Record<string, string> = {}): Record<string, string> {
  return { SERVICE_DATABASE: db, SERVICE_PORT: '0', SERVICE_LOG_LEVEL: 'info', SERVICE_BOOTSTRAP_API_KEY: API_KEY, SERVICE_BOOTSTRAP_PASSWORD: OWNER_PASSWORD, ...LIFTED, ...extra }
}

async function stop(served: Served): Promise<void> {
  served.child.kill('SIGTERM')
  const killer = setTimeout(() => served.child.kill('SIGKILL'), 15_000)
  await served.exited
  clearTimeout(killer)
}

async function tool(url: string, name: string, args: Record<string, unknown>, id: number | string): Promise<any> {
  const reply = await modernCall(url, API_KEY, name, args, { id })
  const answer = answerOf(reply, id)
  if (reply.status !== 200 || !answer?.result || answer.result.isError) throw new Error(`${name}: ${reply.status} ${reply.text}`)
  return answer.result.structuredContent
}

function appNames(db: string): Set<string> {
  const sqlite = new Database(db, { readonly: true, fileMustExist: true })
  try {
    return new Set((sqlite.prepare('SELECT name FROM apps').all() as Array<{ name: string }>).map((r) => r.name))
  } finally {
    sqlite.close()
  }
}

/** One line on stderr (and, for a usage error, the pointer to the help of `usage`, its command), exit code 2, no stack trace. */
function refused(t: Test, run: Run, message: RegExp, what: string, usage?: string): void {
  t.equal(run.code, 2, `${what}: exit code 2${run.code === 2 ? '' : `\n${run.stdout}\n${run.stderr}`}`)
  const lines = run.stderr.split('\n').filter(Boolean)
  t.same(lines.slice(1), usage ? [`See service-mcp ${usage} --help.`] : [], `${what}: one line on stderr`)
  t.match(lines[0], message, `${what}: ${message}`)
  t.notMatch(run.stderr, /\n\s+at /, `${what}: no stack trace`)
}

/** The files of a folder that look like leftovers of a backup or restore (temporary copies). */
function leftovers(dir: string): string[] {
  return readdirSync(dir).filter((f) => f.endsWith('.tmp') || f.endsWith('.tmp-wal') || f.endsWith('.tmp-shm'))
}

t.test('a backup taken under write load restores every acknowledged write', async (t) => {
  const dir = tempDir(t)
  mkdirSync(join(dir, 'live'))
  const db = join(dir, 'live', 'service.db')
  const served = await startServe(serveEnv(db))
  t.teardown(() => void served.child.kill('SIGKILL'))
  const url = served.url

  // An app with a sealed env var: what the env key must open after the restore.
  const keyed = await tool(url, 'service_apps_create', { name: 'keyed' }, 'keyed')
  await tool(url, 'service_env_set', { app_id: keyed.app.id, name: 'TOKEN', value: 'backup-secret' }, 'env')

  // Writers: each acknowledged write is recorded with the time its answer arrived.
  const acknowledged: Array<{ name: string; at: number }> = []
  const attempted = new Set<string>()
  let writing = true
  let next = 0
  const writer = async (w: number) => {
    while (writing) {
      const name = `w${w}-${next++}`
      attempted.add(name)
      await tool(url, 'service_apps_create', { name }, name)
      acknowledged.push({ name, at: performance.now() })
    }
  }
  const writers = [0, 1, 2].map((w) => writer(w))
  const waitFor = async (n: number) => {
    const deadline = Date.now() + 20_000
    while (acknowledged.length < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10))
    if (acknowledged.length < n) throw new Error(`only ${acknowledged.length} writes acknowledged`)
  }
  await waitFor(30)

  const backupFile = join(dir, 'service-backup.db')
  const began = performance.now()
  const backup = await cli(['backup', backupFile], { SERVICE_DATABASE: db })
  const ended = performance.now()
  const countAtEnd = acknowledged.length
  await waitFor(countAtEnd + 10) // and on after it
  writing = false
  await Promise.all(writers)

  t.equal(backup.code, 0, `backup exits 0${backup.stderr ? `\n${backup.stderr}` : ''}`)
  t.equal(backup.stderr, '', 'nothing on stderr')
  t.match(backup.stdout, new RegExp(`written to ${backupFile.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} \\(\\d+ bytes, mode 600\\)`), 'says where it wrote and its size')
  t.match(backup.stdout, new RegExp(`The env key is NOT in the backup: keep the env key file ${join(dir, 'live', 'env.key').replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} \\(SERVICE_ENV_KEY_FILE`), 'and that the env key, named by its path, is not in it')
  t.equal((statSync(backupFile).mode & 0o777).toString(8), '600', 'the backup is owner-only')
  t.same(leftovers(dir), [], 'no temporary file is left')
  t.notOk(existsSync(`${backupFile}-wal`), 'the backup is one standalone file')

  const before = acknowledged.filter((a) => a.at < began).map((a) => a.name)
  const during = acknowledged.filter((a) => a.at >= began && a.at <= ended)
  t.ok(before.length >= 30, `${before.length} writes acknowledged before the backup began`)
  t.ok(during.length > 0, `the server kept taking writes while the backup ran (${during.length} acknowledged meanwhile)`)

  // Restored into a fresh place, with the env key carried separately, as on another machine.
  mkdirSync(join(dir, 'fresh'))
  const fresh = join(dir, 'fresh', 'service.db')
  copyFileSync(join(dir, 'live', 'env.key'), join(dir, 'fresh', 'env.key'))
  const restore = await cli(['restore', backupFile], { SERVICE_DATABASE: fresh })
  t.equal(restore.code, 0, `restore exits 0${restore.stderr ? `\n${restore.stderr}` : ''}`)
  t.match(restore.stdout, /restored .* into .*fresh\/service\.db \(SERVICE_DATABASE, \d+ bytes\)/)
  t.match(restore.stdout, /the env key file .*fresh\/env\.key .* opens it \(1 env var value\)/, 'the carried key opens it')
  t.notMatch(restore.stdout, /kept as/, 'nothing was replaced')

  const restored = appNames(fresh)
  const missing = before.filter((name) => !restored.has(name))
  t.same(missing, [], `every write acknowledged before the backup began is in the restored database (${before.length})`)
  t.ok(restored.has('keyed'), 'the app with an env var too')
  t.same([...restored].filter((name) => name !== 'keyed' && !attempted.has(name)), [], 'and nothing that was never written')
  // One consistent snapshot: each writer's writes in it are a prefix of what it wrote (a write is sent only after the
  // previous one was acknowledged), so the backup holds no write without every earlier one of the same writer.
  for (const w of [0, 1, 2]) {
    const mine = acknowledged.filter((a) => a.name.startsWith(`w${w}-`)).map((a) => restored.has(a.name))
    const firstMissing = mine.indexOf(false)
    t.ok(firstMissing === -1 || mine.slice(firstMissing).every((present) => !present), `writer ${w}: the backup holds a prefix of its writes (${firstMissing === -1 ? mine.length : firstMissing} of ${mine.length})`)
  }
  t.comment(`${during.filter((a) => restored.has(a.name)).length} of the ${during.length} writes acknowledged while the backup command ran are in it`)
  t.ok(restored.size < attempted.size + 1, 'writes after the backup are not in it')

  // The restored database serves with the carried key: the key check passes, the data is there.
  const again = await startServer(t, { dbPath: fresh, config: { bootstrapApiKey: API_KEY } })
  t.equal(await again.app.repos.envVars.count(), 1, 'the restored server started: its env key opens the database')
  const list = await tool(again.mcpUrl, 'service_apps_list', { limit: 100 }, 'list')
  t.ok(list.apps.length > 0, 'and lists the apps')
  await again.close()

  // Restoring onto the database of a running server is refused, and changes nothing.
  const onLive = await cli(['restore', backupFile], { SERVICE_DATABASE: db })
  refused(t, onLive, /^service-mcp: Database .*live\/service\.db \(SERVICE_DATABASE.*\) is in use by another server \(pid \d+/, 'restore onto a running server\'s database')
  t.same(leftovers(join(dir, 'live')), [], 'no temporary file beside it')
  t.notOk(readdirSync(join(dir, 'live')).some((f) => f.includes('before-restore')), 'nothing was moved')
  await stop(served)
})

t.test('backup refusals: an existing file without --force, a missing folder, :memory:', async (t) => {
  const dir = tempDir(t)
  const db = join(dir, 'service.db')
  openDatabase(db).close()
  const file = join(dir, 'b.db')
  writeFileSync(file, 'precious')
  refused(t, await cli(['backup', file], { SERVICE_DATABASE: db }), /^service-mcp: The backup file .*b\.db exists: name a new file, or add --force to replace it$/, 'an existing file')
  t.equal(readFileSync(file, 'utf8'), 'precious', 'it is left as it was')
  const forced = await backupDatabase(db, file, { force: true })
  t.equal(forced.file, file)
  t.equal(forced.bytes, statSync(file).size, 'the size it reports')
  t.equal(appNamesOrError(file), 'ok', '--force replaced it with a database')
  const fails = async (database: string, target: string, message: RegExp, what: string) => {
    await t.rejects(backupDatabase(database, target), message, what)
  }
  await fails(db, join(dir, 'nope', 'b.db'), /its folder .*nope does not exist/, 'a missing folder')
  await fails(':memory:', join(dir, 'm.db'), /only a database file can be backed up/, ':memory:')
  await fails(db, db, /is the database itself/, 'the database itself')
  await fails(db, `${db}-wal`, /is the database itself \(or one of its files\)/, 'its -wal')
  await fails(db, dir, /is a folder/, 'a folder')
  await fails(join(dir, 'absent.db'), join(dir, 'x.db'), /absent\.db \(SERVICE_DATABASE.*\) does not exist: there is nothing to back up/, 'no database')
  t.notOk(existsSync(join(dir, 'absent.db')), 'and it is not created')
  t.same(leftovers(dir), [], 'no temporary file is left')
})

function appNamesOrError(file: string): string {
  try {
    appNames(file)
    return 'ok'
  } catch (err) {
    return (err as Error).message
  }
}

t.test('restore refuses what is not a restorable database of this service, before touching anything', async (t) => {
  const dir = tempDir(t)
  const db = join(dir, 'service.db')
  const handle = openDatabase(db)
  await createRepos(handle.db).organizations.create({ slug: 'current', name: 'Current' })
  handle.close()
  const backupFile = join(dir, 'good.db')
  await backupDatabase(db, backupFile)

  const garbage = join(dir, 'garbage.db')
  writeFileSync(garbage, 'not a database at all, '.repeat(300))
  const foreign = join(dir, 'foreign.db')
  const f = new Database(foreign)
  f.exec('CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)')
  f.close()
  const newer = join(dir, 'newer.db')
  copyFileSync(backupFile, newer)
  const n = new Database(newer)
  n.prepare('INSERT INTO __drizzle_migrations (hash, created_at) VALUES (?, ?)').run('f'.repeat(64), 4_102_444_800_000)
  n.pragma('journal_mode = DELETE')
  n.close()
  const other = join(dir, 'other.db')
  copyFileSync(backupFile, other)
  const o = new Database(other)
  o.prepare('UPDATE __drizzle_migrations SET created_at = created_at + 1 WHERE rowid = 2').run()
  o.pragma('journal_mode = DELETE')
  o.close()
  const live = join(dir, 'live.db')
  copyFileSync(backupFile, live)
  writeFileSync(`${live}-wal`, '')

  const config = { database: db, envKey: '', envKeyFile: '' }
  const cases: Array<[string, RegExp, string]> = [
    [join(dir, 'absent.db'), /The backup file .*absent\.db does not exist/, 'a missing file'],
    [dir, /is not a file/, 'a folder'],
    [db, /is the database itself/, 'the database itself'],
    [garbage, /garbage\.db is not a SQLite database, or it is corrupt .*; nothing was restored/, 'a file that is not SQLite'],
    [foreign, /foreign\.db is a SQLite database but not one of service-mcp \(it has no migrations table\); nothing was restored/, 'another program\'s database'],
    [newer, /newer\.db was written by a newer version of service-mcp \(\d+ migrations applied; this version knows \d+\): upgrade service-mcp, then restore it; nothing was restored/, 'a newer version\'s database'],
    [other, /other\.db has a migration history this version does not know \(migration 2 differs\)/, 'another build\'s database'],
    [live, /live\.db has a live\.db-wal beside it: it is a database in use .* not a backup/, 'a live database with its -wal'],
  ]
  const before = readdirSync(dir).sort()
  for (const [file, message, what] of cases) await t.rejects(restoreDatabase(config, file), message, what)
  refused(t, await cli(['restore', garbage], { SERVICE_DATABASE: db }), /^service-mcp: .*garbage\.db is not a SQLite database, or it is corrupt/, 'the command line says so in one line')
  t.same(readdirSync(dir).filter((f) => f !== 'service.db.lock').sort(), before.filter((f) => f !== 'service.db.lock'), 'no file was added or moved (the lock file aside)')
  const after = openDatabase(db)
  t.ok(await createRepos(after.db).organizations.bySlug('current'), 'the database is unchanged')
  after.close()
})

t.test('restore replaces a database and keeps the old one, with what its write-ahead log held', async (t) => {
  const dir = tempDir(t)
  const db = join(dir, 'service.db')
  const handle = openDatabase(db)
  await createRepos(handle.db).organizations.create({ slug: 'in-backup', name: 'In the backup' })
  handle.close()
  const backupFile = join(dir, 'backup.db')
  await backupDatabase(db, backupFile)

  // A process writes after the backup and dies with SIGKILL: its last write is only in the -wal.
  const crash = spawnSync(process.execPath, ['-e', `
    const Database = require('better-sqlite3')
    const db = new Database(${JSON.stringify(db)})
    db.pragma('journal_mode = WAL')
    db.prepare("INSERT INTO organizations (id, slug, name, created_at) VALUES ('org_after', 'after-backup', 'After', 1)").run()
    process.kill(process.pid, 'SIGKILL')
  `], { cwd: ROOT, encoding: 'utf8' })
  t.equal(crash.signal, 'SIGKILL', `the writer died${crash.stderr ? `\n${crash.stderr}` : ''}`)
  t.ok(existsSync(`${db}-wal`) && statSync(`${db}-wal`).size > 0, 'and left a -wal')

  const restore = await cli(['restore', backupFile], { SERVICE_DATABASE: db })
  t.equal(restore.code, 0, restore.stderr)
  const kept = /kept as (\S+);/.exec(restore.stdout)?.[1]
  t.match(kept, /service\.db\.before-restore-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$/, 'the old database is kept, and the restore says where')
  t.match(restore.stdout, /it holds no env var value yet: any env key will do/)
  t.notOk(existsSync(`${db}-wal`), 'no -wal of the old database is left beside the new one')
  t.notOk(existsSync(`${db}-shm`), 'nor its -shm')
  t.equal((statSync(db).mode & 0o777).toString(8), '600', 'the restored database is owner-only')
  t.same(leftovers(dir), [], 'no temporary file is left')
  const slugs = (file: string) => {
    const sqlite = new Database(file, { fileMustExist: true })
    try {
      return (sqlite.prepare('SELECT slug FROM organizations ORDER BY slug').all() as Array<{ slug: string }>).map((r) => r.slug)
    } finally {
      sqlite.close()
    }
  }
  t.same(slugs(db), ['in-backup'], 'the database is the backup')
  t.same(slugs(kept!), ['after-backup', 'in-backup'], 'the kept one holds everything the old one had, its -wal included')
})

t.test('restore without the matching env key: refused; forced, the server refuses to start until the key is reset', async (t) => {
  const dir = tempDir(t)
  const db = join(dir, 'a', 'service.db')
  const server = await startServer(t, { dbPath: db, config: { bootstrapApiKey: API_KEY } })
  const app = await tool(server.mcpUrl, 'service_apps_create', { name: 'keyed' }, 'keyed')
  await tool(server.mcpUrl, 'service_env_set', { app_id: app.app.id, name: 'TOKEN', value: 'secret' }, 'env')
  await server.close()
  const backupFile = join(dir, 'backup.db')
  await backupDatabase(db, backupFile)

  // Another machine: no env.key at all.
  mkdirSync(join(dir, 'b'))
  const target = join(dir, 'b', 'service.db')
  const keyFile = join(dir, 'b', 'env.key')
  refused(t, await cli(['restore', backupFile], { SERVICE_DATABASE: target }),
    /^service-mcp: The env key file .*b\/env\.key \(SERVICE_ENV_KEY_FILE, by default env\.key beside SERVICE_DATABASE\) does not exist, but the backup .*backup\.db already holds 1 env var value sealed with its own key; a new key would not open them\. The env key here is not the one of the server that wrote it\. Put the env\.key that belongs to this backup at .*b\/env\.key \(or set SERVICE_ENV_KEY to its content\) and try again; if that key is lost, add --force to restore it anyway, then run `service-mcp env-key reset --force`, which deletes the 1 env var value it sealed; nothing was restored\.$/,
    'restore without a key')
  t.notOk(existsSync(target), 'no database was put in place')
  t.notOk(existsSync(keyFile), 'no key was created')
  t.same(leftovers(join(dir, 'b')), [], 'no temporary copy is left')

  // Another key, in the file or in SERVICE_ENV_KEY.
  writeFileSync(keyFile, randomBytes(32).toString('base64') + '\n', { mode: 0o600 })
  const config = { database: target, envKey: '', envKeyFile: '' }
  await t.rejects(restoreDatabase(config, backupFile), /^The env key file .*b\/env\.key .* does not match the backup .*backup\.db: its key check \(and its 1 env var value\) was sealed with another key/, 'another key file')
  await t.rejects(restoreDatabase({ ...config, envKey: randomBytes(32).toString('base64') }, backupFile), /^The env key SERVICE_ENV_KEY does not match the backup/, 'another SERVICE_ENV_KEY')
  t.notOk(existsSync(target), 'no database was put in place')

  // Restored anyway: the server refuses to start with the message, until the key is reset.
  const forced = await cli(['restore', backupFile, '--force'], { SERVICE_DATABASE: target })
  t.equal(forced.code, 0, forced.stderr)
  t.match(forced.stdout, /the env key does not open it \(restored anyway, --force\): run service-mcp env-key reset --force before serve/)
  const start = await cli(['serve'], serveEnv(target))
  refused(t, start, /^service-mcp: The env key file .*b\/env\.key \(SERVICE_ENV_KEY_FILE, by default env\.key beside SERVICE_DATABASE\) does not match database .*b\/service\.db \(SERVICE_DATABASE\): its key check \(and its 1 env var value\) was sealed with another key\. The database was probably restored or moved without its env\.key\. Put the env\.key that belongs to this database at .*b\/env\.key \(or set SERVICE_ENV_KEY to its content\) and try again; if that key is lost, `service-mcp env-key reset --force` deletes the 1 env var value it sealed \(nothing can read them without it\) and binds the database to the current key\.$/, 'serve on the restored database')
  t.equal(start.stdout, '', 'it printed nothing else and never listened')

  refused(t, await cli(['env-key', 'reset'], { SERVICE_DATABASE: target }), /env-key reset deletes the 1 env var value sealed with the lost key .* add --force if that key is really lost/, 'reset without --force', 'env-key reset')
  const reset = await cli(['env-key', 'reset', '--force'], { SERVICE_DATABASE: target })
  t.equal(reset.code, 0, reset.stderr)
  t.match(reset.stdout, /deleted 1 env var value; the database is now bound to the env key file .*b\/env\.key/)
  const again = await startServer(t, { dbPath: target, config: { bootstrapApiKey: API_KEY } })
  t.equal(await again.app.repos.envVars.count(), 0, 'after the reset it starts, without the values nobody could read')
  await again.close()
})

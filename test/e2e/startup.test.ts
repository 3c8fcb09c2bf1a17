// test-backends: sqlite-only (SQLite's files and their lock)
import { execFileSync } from 'node:child_process'
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { ConfigError } from '../../src/config.js'
import { createServer } from '../../src/index.js'
import { whileServed } from '../helpers/attack.js'
import { cli, cliWithoutOverride, startServe, type Run, type Served } from '../helpers/cli.js'
import { confirmCall, elicitingSession, readToEnd } from '../helpers/confirm.js'
import { callTool, openSession, post } from '../helpers/mcp.js'
import { OWNER_PASSWORD, startServer } from '../helpers/server.js'
import { callToEnd } from '../helpers/tools.js'
import { fill, NO_SMALL_DISK, smallDisk } from '../helpers/small-disk.js'
import { messagesOf } from '../helpers/stream.js'

/**
 * Start-up (issue 10, items 8 and 12): a database the server cannot use stops `serve` and `migrate` with exit code 2
 * and one line naming the file and SERVICE_DATABASE; the database and its companions are owner-only; one server per
 * database file, the admin commands working beside it, and a lock left by a server killed with SIGKILL taken over.
 * About SQLite's files and their lock, so on SQLite in every pass: each server gets a file of its own (dbPath).
 */

t.setTimeout(180_000)

const API_KEY = 'service_mcp_' + 'U'.repeat(43)

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'service-mcp-startup-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

function serveEnv(db: string, extra: Record<string, string> = {}): Record<string, string> {
  return { SERVICE_DATABASE: db, SERVICE_PORT: '0', SERVICE_LOG_LEVEL: 'info', SERVICE_BOOTSTRAP_API_KEY: API_KEY, SERVICE_BOOTSTRAP_PASSWORD: OWNER_PASSWORD, ...extra }
}

/** The contract for a database that cannot be used: exit code 2, one line naming the file and the setting, no stack. */
function refused(t: Test, run: Run, db: string, problem: RegExp, what: string): void {
  t.equal(run.code, 2, `${what}: exit code 2${run.code === 2 ? '' : `\n${run.stderr}`}`)
  const lines = run.stderr.split('\n').filter(Boolean)
  t.equal(lines.length, 1, `${what}: one line on stderr`)
  t.ok(lines[0]?.startsWith(`service-mcp: Database ${db} (SERVICE_DATABASE)`), `${what}: names the file and SERVICE_DATABASE (${lines[0]})`)
  t.match(lines[0], problem, `${what}: says what is wrong`)
  t.notMatch(run.stderr, /\n\s+at /, `${what}: no stack trace`)
  t.notMatch(run.stdout, /MCP server listening/, `${what}: never listened`)
}

/** `serve`, then `migrate`, on `db` (one after the other: the first may hold the file's lock while it fails). */
async function serveThenMigrate(db: string, env: Record<string, string> = {}): Promise<{ serve: Run; migrate: Run }> {
  const serve = await cli(['serve'], { ...serveEnv(db), ...env })
  return { serve, migrate: await cli(['migrate'], { SERVICE_DATABASE: db, ...env }) }
}

/** The two runs of serveThenMigrate, both refused. */
function bothRefusedIn(t: Test, runs: { serve: Run; migrate: Run }, db: string, problem: RegExp, what: string): void {
  refused(t, runs.serve, db, problem, `serve, ${what}`)
  refused(t, runs.migrate, db, problem, `migrate, ${what}`)
}

/** `serve` and `migrate` on `db`, both refused. */
async function bothRefused(t: Test, db: string, problem: RegExp, what: string, env: Record<string, string> = {}): Promise<void> {
  bothRefusedIn(t, await serveThenMigrate(db, env), db, problem, what)
}

t.test('serve and migrate refuse a database they cannot use: exit 2, one line naming the file and SERVICE_DATABASE', async (t) => {
  const dir = tempDir(t)
  const folder = join(dir, 'a-folder')
  mkdirSync(folder)
  const corrupt = join(dir, 'corrupt.db')
  writeFileSync(corrupt, 'this is not a SQLite database, '.repeat(200))
  // A database this user can read but not write (mode 400: owner-only, so nothing to tighten, and not writable).
  const readOnly = join(dir, 'read-only.db')
  const cannotWrite = async () => {
    const migrated = await cli(['migrate'], { SERVICE_DATABASE: readOnly })
    if (migrated.code === 0) chmodSync(readOnly, 0o400)
    const serve = await cliWithoutOverride(['serve'], serveEnv(readOnly))
    return { migrated, serve, migrate: await cliWithoutOverride(['migrate'], { SERVICE_DATABASE: readOnly }) }
  }
  // Three files, each with its own commands one after another; the files at once (each command is a process to start).
  const [onFolder, onCorrupt, onReadOnly] = await Promise.all([serveThenMigrate(folder), serveThenMigrate(corrupt), cannotWrite()])

  bothRefusedIn(t, onFolder, folder, /is a folder, not a file/, 'a folder')
  t.notOk(existsSync(`${folder}.lock`), 'nothing was created beside it')

  bothRefusedIn(t, onCorrupt, corrupt, /is not a SQLite database, or it is corrupt/, 'a corrupt file')

  t.equal(onReadOnly.migrated.code, 0, onReadOnly.migrated.stderr)
  for (const command of ['serve', 'migrate'] as const) {
    refused(t, onReadOnly[command], readOnly, /cannot be written: the file, its folder or its file system is read-only/, `${command}, a file it cannot write`)
  }
})

t.test('a read-only file system and a full disk: exit 2 with the reason', { skip: NO_SMALL_DISK ?? false }, async (t) => {
  {
    const disk = smallDisk(t, '4m')
    const db = join(disk, 'service.db')
    t.equal((await cli(['migrate'], { SERVICE_DATABASE: db })).code, 0, 'a database on the small disk')

    const filler = fill(disk)
    t.equal(statSync(filler).size > 0, true, 'the disk is full')
    await bothRefused(t, db, /cannot be written: the disk is full/, 'a full disk')
    rmSync(filler)

    const served = await startServe(serveEnv(db))
    t.teardown(() => void served.child.kill('SIGKILL'))
    served.child.kill('SIGTERM')
    t.equal((await served.exited).code, 0, 'once space is freed, it starts (and stops cleanly)')

    execFileSync('mount', ['-o', 'remount,ro', disk])
    await bothRefused(t, db, /cannot be (written: the file, its folder or its file system is read-only|opened: its file system is read-only)/, 'a read-only file system')
  }
  {
    const disk = smallDisk(t, '256k')
    // Too small for the schema: the migrations fail part-way (SQLite's own error is hidden by the migrator's ROLLBACK).
    const db = join(disk, 'service.db')
    refused(t, await cli(['migrate'], { SERVICE_DATABASE: db }), db, /cannot be written: the disk is full/, 'migrate, a nearly full disk')
  }
})

t.test('embedding: createServer throws a ConfigError naming the file, and lets go of it', async (t) => {
  const dir = tempDir(t)
  const folder = join(dir, 'folder.db')
  mkdirSync(folder)
  const options = (database: string) => ({ env: {}, logger: false as const, config: { host: '127.0.0.1', port: 0, database, logLevel: 'silent' as const } })
  const err = await createServer(options(folder)).then(() => null, (e: unknown) => e)
  t.ok(err instanceof ConfigError, 'a ConfigError')
  t.match((err as Error).message, `Database ${folder} (SERVICE_DATABASE) is a folder, not a file`)

  // Two servers of one process on one file: the second is refused, and starts once the first has stopped.
  const db = join(dir, 'one.db')
  const first = await createServer(options(db))
  const second = await createServer(options(db)).then(() => null, (e: unknown) => e)
  t.ok(second instanceof ConfigError, 'a second server on the same file is refused')
  t.match((second as Error).message, new RegExp(`is in use by another server \\(pid ${process.pid},`))
  const stillHeld = await createServer(options(db)).then(() => null, (e: unknown) => e)
  t.ok(stillHeld instanceof ConfigError, 'the refused attempt did not release the first server\'s lock')
  await first.close()
  const third = await createServer(options(db))
  t.pass('after a clean stop the lock is free')
  await third.close()
})

t.test('the database, its -wal and -shm, its lock and its new folder are owner-only; looser ones are tightened', async (t) => {
  const dir = tempDir(t)
  const db = join(dir, 'data', 'nested', 'service.db')
  const server = await startServer(t, { dbPath: db })
  // A write, so that the write-ahead log holds something.
  await openSession(server.mcpUrl, server.apiKey)
  const mode = (p: string) => (statSync(p).mode & 0o777).toString(8)
  t.equal(mode(join(dir, 'data')), '700', 'the folder the server created')
  t.equal(mode(join(dir, 'data', 'nested')), '700', 'every level of it')
  for (const suffix of ['', '-wal', '-shm', '.lock']) t.equal(mode(db + suffix), '600', `service.db${suffix}`)
  t.equal(mode(join(dir, 'data', 'nested', 'env.key')), '600', 'env.key, as before')
  await server.close()

  // A database made looser by hand (a copy, a restore from backup) is tightened at start, with a warning.
  chmodSync(db, 0o644)
  if (existsSync(`${db}-wal`)) chmodSync(`${db}-wal`, 0o666)
  const served = await startServe(serveEnv(db))
  t.teardown(() => void served.child.kill('SIGKILL'))
  t.equal(mode(db), '600', 'the database is owner-only again')
  t.match(served.stdout(), new RegExp(`"msg":"${db.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} could be read by other users of this machine \\(mode 644\\); its mode is now 600"`), 'with a warning naming the file')
  served.child.kill('SIGTERM')
  await served.exited
})

t.test('a second serve on the same database is refused while the first serves on; admin commands work beside it', async (t) => {
  const dir = tempDir(t)
  const db = join(dir, 'service.db')
  const runs = join(dir, 'runs')
  const configPath = join(dir, 'config.json')
  // A run that takes a while: the second server must not mark it interrupted.
  writeFileSync(configPath, JSON.stringify({ pipelines: { slow: { argv: [process.execPath, '-e', `setTimeout(() => { require('fs').appendFileSync(${JSON.stringify(runs)}, 'run\\n'); console.log('done') }, 2500)`] } } }))
  const env = serveEnv(db, { SERVICE_CONFIG: configPath })
  const first = await startServe(env)
  t.teardown(() => void first.child.kill('SIGKILL'))
  const base = first.url.replace(/\/mcp$/, '')

  const { headers } = await openSession(first.url, API_KEY)
  const app = await callToEnd(first.url, headers, 'service_apps_create', { name: 'slow', pipeline: 'slow' }, 1)
  const eliciting = await elicitingSession({ mcpUrl: first.url, apiKey: API_KEY })
  const { live } = await confirmCall(t, first.url, eliciting.headers, callTool('service_deployments_create', { app_id: app.result.structuredContent.app.id }, 'deploy-1'))
  await live.waitFor(() => messagesOf(live).some((m) => m.params?.data?.line?.startsWith?.('started deploy')), 5000, 'the run to start')

  const second = await whileServed(t, base, () => cli(['serve'], { ...env, SERVICE_PORT: '0' }), { label: 'a second serve on the same database' })
  refused(t, second, db, new RegExp(`is in use by another server \\(pid ${first.child.pid}, started .*\\): one server per database file \\(lock ${db.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}\\.lock\\)`), 'a second serve')

  // The admin commands take no lock.
  const keys = await cli(['keys', 'list'], { SERVICE_DATABASE: db })
  t.equal(keys.code, 0, `keys list works beside the server${keys.stderr ? `\n${keys.stderr}` : ''}`)
  const org = await cli(['orgs', 'create', 'acme'], { SERVICE_DATABASE: db })
  t.equal(org.code, 0, 'orgs create works beside the server')

  // The first server's run was left alone: it ends normally, and the first server answers on.
  const { responses } = await readToEnd(live, 'deploy-1', 8000)
  t.equal(responses[0]?.result?.isError, false, 'the first server\'s deployment ran to its end, not interrupted')
  t.equal((await post(first.url, { jsonrpc: '2.0', id: 9, method: 'ping' }, headers)).status, 200, 'the first server serves on')
  first.child.kill('SIGTERM')
  t.equal((await first.exited).code, 0)

  // A clean stop released the lock.
  const again = await startServe(env)
  t.teardown(() => void again.child.kill('SIGKILL'))
  again.child.kill('SIGTERM')
  t.equal((await again.exited).code, 0, 'after a clean stop the next server starts')
})

t.test('the lock of a server killed with SIGKILL is taken over', async (t) => {
  const dir = tempDir(t)
  const db = join(dir, 'service.db')
  const env = serveEnv(db)
  const killed: Served = await startServe(env)
  t.teardown(() => void killed.child.kill('SIGKILL'))
  killed.child.kill('SIGKILL')
  await killed.exited
  t.ok(existsSync(`${db}.lock`), 'the lock file is left behind')

  const next = await startServe(env)
  t.teardown(() => void next.child.kill('SIGKILL'))
  t.pass('the next server starts')
  const third = await cli(['serve'], env)
  refused(t, third, db, new RegExp(`is in use by another server \\(pid ${next.child.pid},`), 'a third serve, while the second runs')
  next.child.kill('SIGTERM')
  t.equal((await next.exited).code, 0)
})

t.test('three serves started at the same instant on one database: exactly one runs', async (t) => {
  const dir = tempDir(t)
  const db = join(dir, 'service.db')
  t.equal((await cli(['migrate'], { SERVICE_DATABASE: db })).code, 0)
  const env = serveEnv(db)
  const attempts = await Promise.all([0, 1, 2].map(() => startServe(env).then((served) => served, (err: Error) => err)))
  const running = attempts.filter((a): a is Served => !(a instanceof Error))
  for (const served of running) t.teardown(() => void served.child.kill('SIGKILL'))
  t.equal(running.length, 1, 'one server listens')
  const others = attempts.filter((a): a is Error => a instanceof Error)
  t.equal(others.length, 2, 'the others exit')
  for (const err of others) t.match(err.message, /serve exited with 2 before listening[\s\S]*is in use by another server/, 'refused: the database is in use')
  running[0]?.child.kill('SIGTERM')
  t.equal((await running[0]?.exited)?.code, 0)
})

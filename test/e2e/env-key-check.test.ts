// test-backends: sqlite-only (env.key beside a SQLite file)
import { randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import t, { type Test } from 'tap'
import { ConfigError } from '../../src/config.js'
import { createConformanceServer } from '../../src/conformance/profile.js'
import { cli } from '../helpers/cli.js'
import { answerOf, modernCall } from '../helpers/modern.js'
import { OWNER_KEY, OWNER_PASSWORD, startServer, type TestServer } from '../helpers/server.js'

/**
 * The env-var key belongs to its database (issue 12): a database restored or moved without its env.key no longer gets a
 * new key silently (deployments of apps with env vars then failed with "Unsupported state or unable to authenticate
 * data"); a start with a key that does not open it is refused with what to do, and no key is ever created for a
 * database that already holds sealed values or a key check.
 * About env.key beside a SQLite file, so on SQLite in every pass: each server gets a file of its own (dbPath).
 */

t.setTimeout(120_000)

const ECHO_TOKEN = { default: { argv: [process.execPath, '-e', 'console.log(`token=${process.env.TOKEN}`)'] } }

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'service-mcp-env-key-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** A start that must be refused: the ConfigError it throws. */
async function refusedStart(t: Test, db: string, config: Record<string, unknown> = {}): Promise<ConfigError> {
  const err = await startServer(t, { dbPath: db, config: { pipelines: ECHO_TOKEN, ...config } }).then(() => null, (e: unknown) => e)
  t.ok(err instanceof ConfigError, `a ConfigError (exit code 2 from the command line)${err instanceof ConfigError ? '' : `: ${String(err)}`}`)
  return err as ConfigError
}

async function setToken(server: TestServer, value: string): Promise<string> {
  const create = answerOf(await modernCall(server.mcpUrl, OWNER_KEY, 'service_apps_create', { name: 'keyed' }, { id: 'c' }), 'c')
  const appId = create.result.structuredContent.app.id
  const set = answerOf(await modernCall(server.mcpUrl, OWNER_KEY, 'service_env_set', { app_id: appId, name: 'TOKEN', value }, { id: 's' }), 's')
  if (set.result?.isError !== false) throw new Error(JSON.stringify(set))
  return appId
}

/** The pipeline's view of TOKEN: proves the runner opens the sealed value with the server's key. */
async function deployedToken(server: TestServer, appId: string): Promise<string | undefined> {
  const organizationId = (await server.app.repos.organizations.bySlug('default'))!.id
  const run = await server.app.pipelines.start({ organizationId, appId, kind: 'deploy', createdBy: null })
  const final = await run.done
  return (await server.app.repos.deployments.lines(final.id, 100)).items.map((l) => l.line).find((l) => l.startsWith('token='))
}

function keyCheck(db: string): string | undefined {
  const sqlite = new Database(db, { fileMustExist: true })
  try {
    return (sqlite.prepare(`SELECT value FROM service_meta WHERE name = 'env_key_check'`).get() as { value: string } | undefined)?.value
  } finally {
    sqlite.close()
  }
}

function dropKeyCheck(db: string): void {
  const sqlite = new Database(db, { fileMustExist: true })
  sqlite.prepare(`DELETE FROM service_meta WHERE name = 'env_key_check'`).run()
  sqlite.close()
}

const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')

t.test('a database with env vars refuses another key and a lost key file, and never gets a new key', async (t) => {
  const dir = tempDir(t)
  const db = join(dir, 'service.db')
  const keyFile = join(dir, 'env.key')
  const first = await startServer(t, { dbPath: db, config: { pipelines: ECHO_TOKEN } })
  t.ok(existsSync(keyFile), 'the first start created env.key beside the database')
  t.equal((statSync(keyFile).mode & 0o777).toString(8), '600', 'owner-only')
  t.match(await first.app.repos.serviceMeta.get('env_key_check'), /^v1\./, 'and recorded the key check, sealed with it')
  const appId = await setToken(first, 'kept-secret')
  t.equal(await deployedToken(first, appId), 'token=kept-secret')
  await first.close()
  const key = readFileSync(keyFile, 'utf8')

  // Another key: SERVICE_ENV_KEY wins over the file, and does not open this database.
  const other = await refusedStart(t, db, { envKey: randomBytes(32).toString('base64') })
  t.match(other.message, new RegExp(`^The env key SERVICE_ENV_KEY does not match database ${esc(db)} \\(SERVICE_DATABASE\\): its key check \\(and its 1 env var value\\) was sealed with another key\\. The database was probably restored or moved without its env\\.key\\. Set SERVICE_ENV_KEY to the key that belongs to this database \\(the content of its env\\.key\\) and try again; if that key is lost, \`service-mcp env-key reset --force\` deletes the 1 env var value it sealed`))

  // The key file lost (a restore without it): refused, and no new key is written.
  renameSync(keyFile, `${keyFile}.saved`)
  const lost = await refusedStart(t, db)
  t.match(lost.message, new RegExp(`^The env key file ${esc(keyFile)} \\(SERVICE_ENV_KEY_FILE, by default env\\.key beside SERVICE_DATABASE\\) does not exist, but database ${esc(db)} \\(SERVICE_DATABASE\\) already holds 1 env var value sealed with its own key; a new key would not open them\\. The database was probably restored or moved without its env\\.key\\. Put the env\\.key that belongs to this database at ${esc(keyFile)} \\(or set SERVICE_ENV_KEY to its content\\) and try again`))
  t.notOk(existsSync(keyFile), 'no new key file was created')

  // Another key file.
  const otherFile = join(dir, 'other.key')
  await import('node:fs').then((fs) => fs.writeFileSync(otherFile, randomBytes(32).toString('base64url') + '\n'))
  const wrongFile = await refusedStart(t, db, { envKeyFile: otherFile })
  t.match(wrongFile.message, new RegExp(`^The env key file ${esc(otherFile)} \\(SERVICE_ENV_KEY_FILE\\) does not match database`))

  // The right key, from the file or as SERVICE_ENV_KEY: the database serves and its values open.
  renameSync(`${keyFile}.saved`, keyFile)
  const back = await startServer(t, { dbPath: db, config: { pipelines: ECHO_TOKEN } })
  t.equal(await deployedToken(back, appId), 'token=kept-secret', 'with its own key back, the deployment gets the value')
  await back.close()
  const viaSetting = await startServer(t, { dbPath: db, config: { pipelines: ECHO_TOKEN, envKey: key.trim(), envKeyFile: join(dir, 'absent.key') } })
  t.equal(await deployedToken(viaSetting, appId), 'token=kept-secret', 'SERVICE_ENV_KEY holding the same key works too')
  await viaSetting.close()
  t.notOk(existsSync(join(dir, 'absent.key')), 'and no key file is created when SERVICE_ENV_KEY is set')
})

t.test('a database from before the key check gets one once its values open; a wrong key is still refused', async (t) => {
  const dir = tempDir(t)
  const db = join(dir, 'service.db')
  const first = await startServer(t, { dbPath: db, config: { pipelines: ECHO_TOKEN } })
  const appId = await setToken(first, 'old-secret')
  await first.close()

  dropKeyCheck(db)
  const wrong = await refusedStart(t, db, { envKey: randomBytes(32).toString('base64') })
  t.match(wrong.message, /^The env key SERVICE_ENV_KEY does not match database .* \(SERVICE_DATABASE\): its 1 env var value was sealed with another key\. The database was probably restored or moved/, 'the values themselves are tried')
  t.equal(keyCheck(db), undefined, 'no check was written for the wrong key')

  const right = await startServer(t, { dbPath: db, config: { pipelines: ECHO_TOKEN } })
  t.match(keyCheck(db), /^v1\./, 'its own key opens the values: the check is written')
  t.equal(await deployedToken(right, appId), 'token=old-secret')
  await right.close()
  const again = await refusedStart(t, db, { envKey: randomBytes(32).toString('base64') })
  t.match(again.message, /its key check \(and its 1 env var value\) was sealed with another key/, 'from now on the check decides')
})

t.test('a database without env vars keeps its key too; env-key reset binds it to a new one, nothing lost', async (t) => {
  const dir = tempDir(t)
  const db = join(dir, 'service.db')
  const keyFile = join(dir, 'env.key')
  const first = await startServer(t, { dbPath: db })
  await first.close()
  rmSync(keyFile)

  // From the command line: exit code 2, one line, nothing printed and nothing created.
  const serve = await cli(['serve'], { SERVICE_DATABASE: db, SERVICE_PORT: '0', SERVICE_BOOTSTRAP_PASSWORD: OWNER_PASSWORD })
  t.equal(serve.code, 2, `exit code 2\n${serve.stderr}`)
  t.same(serve.stderr.split('\n').filter(Boolean).length, 1, 'one line on stderr')
  t.match(serve.stderr, new RegExp(`^service-mcp: The env key file ${esc(keyFile)} \\(SERVICE_ENV_KEY_FILE, by default env\\.key beside SERVICE_DATABASE\\) does not exist, but database ${esc(db)} \\(SERVICE_DATABASE\\) already holds a key check sealed with its own key; a new key would not open them\\. .* if that key is lost, \`service-mcp env-key reset --force\` binds the database to the current key \\(it holds no env var value, so nothing is lost\\)\\.\\n$`))
  t.equal(serve.stdout, '', 'nothing on stdout: no credentials, no listening')
  t.notOk(existsSync(keyFile), 'no key was created')

  // Nothing sealed would be lost: reset needs no --force.
  const reset = await cli(['env-key', 'reset'], { SERVICE_DATABASE: db })
  t.equal(reset.code, 0, reset.stderr)
  t.match(reset.stdout, new RegExp(`deleted 0 env var values; the database is now bound to the env key file ${esc(keyFile)}`))
  t.ok(existsSync(keyFile), 'a new key was created')
  const check = await cli(['env-key', 'check'], { SERVICE_DATABASE: db })
  t.equal(check.code, 0, check.stderr)
  t.match(check.stdout, new RegExp(`the env key file ${esc(keyFile)} .* opens this database \\(0 env var values\\)`))
  const after = await startServer(t, { dbPath: db })
  t.pass('the server starts with the new key')
  await after.close()
})

t.test('in-memory databases: a throwaway key, checked like any other (the conformance profile keeps working)', async (t) => {
  const memory = await startServer(t, { config: { database: ':memory:' } })
  t.match(await memory.app.repos.serviceMeta.get('env_key_check'), /^v1\./)
  await memory.close()
  const profile = await createConformanceServer({ env: {}, argv: ['--port', '0'], logger: false })
  t.teardown(() => profile.close())
  await profile.listen()
  t.match(await profile.app.repos.serviceMeta.get('env_key_check'), /^v1\./, 'the profile starts, its random key bound to its in-memory database')
})

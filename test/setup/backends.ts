import { execFile, execFileSync, spawn } from 'node:child_process'
import {
  accessSync,
  appendFileSync,
  chownSync,
  constants,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'
import { freePort } from '../helpers/ports.js'
import { ROOT } from '../helpers/root.js'

/**
 * Throwaway PostgreSQL 15 and Redis servers for one tap run, started by tap's `before` (backends-before.ts) and stopped
 * by its `after` (backends-after.ts). Everything they write lives in one temporary folder; both listen on 127.0.0.1 only,
 * on free ports. The run's state is written to .tap/backends/<runner pid>.json: `before`, `after` and every test file
 * are children of the same tap process, so each run finds its own servers and two runs in one checkout (or a crashed
 * run's leftovers) never meet. test/helpers/backends.ts reads it.
 */

export { ROOT }
export const STATE_DIR = join(ROOT, '.tap', 'backends')
const TEMP_PREFIX = 'service-mcp-backends-'
/** The role the tests use: login and createdb, no superuser. */
export const PG_ROLE = 'service_mcp'
/** A database with every committed migration applied, copied for each test server (test/helpers/backends.ts). */
export const MIGRATED_TEMPLATE = 'service_mcp_migrated'
const PG_SUPERUSER = 'postgres'
const DEBIAN_PG_BIN = '/usr/lib/postgresql/15/bin'

export interface BackendsState {
  /** The `postgres` database as service_mcp, for CREATE/DROP DATABASE. */
  postgresUrl: string
  redisUrl: string
  pgDataDir: string
  redisPid: number
  /** The temporary folder holding everything: data, sockets, logs. */
  dir: string
  /** The tap process whose run these servers serve. */
  runnerPid: number
  pgBin: string
  /** Milliseconds per step, for whoever wonders where the time goes. */
  timings: Record<string, number>
}

export function stateFile(runnerPid: number): string {
  return join(STATE_DIR, `${runnerPid}.json`)
}

export function readState(runnerPid: number): BackendsState | undefined {
  try {
    return JSON.parse(readFileSync(stateFile(runnerPid), 'utf8')) as BackendsState
  } catch {
    return undefined
  }
}

/** Raised for what the person running the tests must fix; its message is the one line they see. */
export class BackendsError extends Error {}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK)
    return true
  } catch {
    return false
  }
}

function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter).filter(Boolean)) {
    if (executable(join(dir, name))) return join(dir, name)
  }
  return undefined
}

/** Debian's PostgreSQL 15 binaries, else a PostgreSQL 15 pg_ctl on PATH (another system's packages). */
function findPgBin(): string | undefined {
  const complete = (dir: string) => ['initdb', 'pg_ctl', 'postgres'].every((name) => executable(join(dir, name)))
  if (complete(DEBIAN_PG_BIN)) return DEBIAN_PG_BIN
  const pgCtl = onPath('pg_ctl')
  if (!pgCtl) return undefined
  const dir = pgCtl.slice(0, -'/pg_ctl'.length)
  try {
    const version = execFileSync(pgCtl, ['--version'], { encoding: 'utf8' })
    return complete(dir) && /\b15\.\d+/.test(version) ? dir : undefined
  } catch {
    return undefined
  }
}

/** The binaries, or one line naming the Debian packages that hold the missing ones. */
export function findBinaries(): { pgBin: string; redisServer: string } {
  const pgBin = findPgBin()
  const redisServer = onPath('redis-server') ?? (executable('/usr/bin/redis-server') ? '/usr/bin/redis-server' : undefined)
  const missing = [...(pgBin ? [] : ['postgresql-15']), ...(redisServer ? [] : ['redis-server'])]
  if (!pgBin || !redisServer) {
    throw new BackendsError(
      `the tests need PostgreSQL 15 and Redis: install Debian's ${missing.join(' and ')} ` +
        `(apt-get install ${missing.join(' ')}, as .ci/run does; their services need not run)`,
    )
  }
  return { pgBin, redisServer }
}

let pgUserIds: { uid: number; gid: number } | undefined

/** initdb, pg_ctl and postgres refuse root: as root they run as the `postgres` user the Debian package creates. */
function pgUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined
  if (pgUserIds) return pgUserIds
  try {
    const uid = Number(execFileSync('id', ['-u', PG_SUPERUSER], { encoding: 'utf8' }).trim())
    const gid = Number(execFileSync('id', ['-g', PG_SUPERUSER], { encoding: 'utf8' }).trim())
    pgUserIds = { uid, gid }
    return pgUserIds
  } catch {
    throw new BackendsError(
      'the tests run as root, which PostgreSQL refuses, and there is no `postgres` user to run it as ' +
        '(Debian\'s postgresql-15 package creates it)',
    )
  }
}

/** Runs a PostgreSQL binary (as `postgres` when root) with a minimal environment; rejects with its output. */
function runPg(pgBin: string, name: string, args: string[], dir: string): Promise<void> {
  const user = pgUser()
  return new Promise((resolve, reject) => {
    execFile(
      join(pgBin, name),
      args,
      {
        cwd: dir,
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, LC_ALL: 'C', TZ: 'UTC' },
        timeout: 60_000,
        ...user,
      },
      (error, stdout, stderr) => {
        if (!error) return resolve()
        reject(new Error(`${name} ${args.join(' ')}: ${error.message.trim()}\n${stdout}${stderr}`.trim()))
      },
    )
  })
}


/** Whether a process runs (a zombie waiting for a parent that never reaps it counts as gone). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z'
  } catch {
    return existsSync('/proc/self/stat') ? false : true
  }
}

/** Whether `pid` is a redis-server (so a recycled pid of a crashed run's Redis is never signalled). */
function isRedis(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('redis-server')
  } catch {
    return !existsSync('/proc/self/cmdline') && alive(pid)
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Resolves once `PING` on 127.0.0.1:port answers `+PONG`. */
function redisPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port })
    let answer = ''
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(1000, () => done(false))
    socket.once('error', () => done(false))
    socket.on('connect', () => socket.write('PING\r\n'))
    socket.on('data', (chunk) => {
      answer += chunk.toString('latin1')
      if (answer.includes('\r\n')) done(answer.startsWith('+PONG'))
    })
  })
}

async function startPostgres(pgBin: string, dir: string, timings: Record<string, number>): Promise<{ port: number; dataDir: string }> {
  const dataDir = join(dir, 'data')
  let start = performance.now()
  await runPg(pgBin, 'initdb', [
    '-D', dataDir, '-U', PG_SUPERUSER, '--auth=trust', '--no-sync', '--no-instructions', '-E', 'UTF8', '--locale=C',
  ], dir)
  timings.initdb = Math.round(performance.now() - start)
  // Trust, on loopback only: no TCP address but 127.0.0.1 is listened on, and the socket is in the temporary folder.
  writeFileSync(join(dataDir, 'pg_hba.conf'), 'local all all trust\nhost all all 127.0.0.1/32 trust\n')
  appendFileSync(join(dataDir, 'postgresql.conf'), [
    '',
    '# Throwaway server of one test run (test/setup/backends.ts): durability traded for speed.',
    "listen_addresses = '127.0.0.1'",
    `unix_socket_directories = '${dir}'`,
    'fsync = off',
    'synchronous_commit = off',
    'full_page_writes = off',
    // Two parallel test files, each possibly with several servers holding pools: room beyond the default 100.
    'max_connections = 300',
    '',
  ].join('\n'))
  start = performance.now()
  // A free port is only free until someone takes it: a start that lost the race tries another.
  for (let attempt = 1; ; attempt++) {
    const port = await freePort()
    try {
      await runPg(pgBin, 'pg_ctl', ['start', '-w', '-s', '-t', '30', '-D', dataDir, '-l', join(dir, 'postgres.log'), '-o', `-p ${port}`], dir)
      timings.pgStart = Math.round(performance.now() - start)
      return { port, dataDir }
    } catch (error) {
      const log = existsSync(join(dir, 'postgres.log')) ? readFileSync(join(dir, 'postgres.log'), 'utf8') : ''
      if (attempt < 3 && /could not bind|already in use/i.test(log)) continue
      throw new Error(`PostgreSQL did not start: ${(error as Error).message}\n${log.split('\n').slice(-10).join('\n')}`)
    }
  }
}

async function createRole(port: number): Promise<void> {
  const { Client } = await pgClient()
  const client = new Client({ host: '127.0.0.1', port, user: PG_SUPERUSER, database: 'postgres' })
  await client.connect()
  try {
    await client.query(`CREATE ROLE ${PG_ROLE} LOGIN CREATEDB`)
    // DROP DATABASE … WITH (FORCE) at a test's teardown terminates what is still connected, which can be an autovacuum
    // worker (a process of no role): without this, that drop fails now and then after a test that wrote a lot.
    await client.query(`GRANT pg_signal_backend TO ${PG_ROLE}`)
  } finally {
    await client.end()
  }
}

async function startRedis(redisServer: string, dir: string): Promise<{ port: number; pid: number }> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort()
    const log = join(dir, `redis-${port}.log`)
    // Detached, nothing of this process inherited: it outlives `before`, and `after` stops it by its pid.
    const child = spawn(redisServer, [
      '--bind', '127.0.0.1', '--port', String(port), '--save', '', '--appendonly', 'no', '--daemonize', 'no',
      '--dir', dir, '--logfile', log,
    ], { cwd: dir, detached: true, stdio: 'ignore', env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } })
    const pid = child.pid
    let exited = false
    child.once('exit', () => { exited = true })
    child.once('error', () => { exited = true })
    child.unref()
    if (pid !== undefined) {
      writeFileSync(join(dir, 'redis.pid'), String(pid))
      const deadline = Date.now() + 10_000
      while (!exited && Date.now() < deadline) {
        if (await redisPing(port)) return { port, pid }
        await sleep(20)
      }
      if (!exited) process.kill(pid, 'SIGKILL')
    }
    const text = existsSync(log) ? readFileSync(log, 'utf8') : ''
    if (attempt < 3 && /already in use|Could not create server TCP/i.test(text)) continue
    throw new Error(`Redis did not start on port ${port}\n${text.split('\n').slice(-10).join('\n')}`)
  }
}

/** Stops what a temporary folder's servers are, and removes the folder. Quiet and best effort: for leftovers too. */
export async function stopFolder(dir: string, pgBin: string, mode: 'fast' | 'immediate'): Promise<void> {
  const dataDir = join(dir, 'data')
  const stops: Promise<unknown>[] = []
  if (existsSync(join(dataDir, 'postmaster.pid'))) {
    stops.push(runPg(pgBin, 'pg_ctl', ['stop', '-s', '-w', '-t', '30', '-m', mode, '-D', dataDir], dir).catch(() =>
      runPg(pgBin, 'pg_ctl', ['stop', '-s', '-w', '-m', 'immediate', '-D', dataDir], dir).catch(() => undefined)))
  }
  let redisPid = NaN
  try {
    redisPid = Number(readFileSync(join(dir, 'redis.pid'), 'utf8'))
  } catch {
    // never started
  }
  if (Number.isInteger(redisPid) && redisPid > 0 && isRedis(redisPid) && alive(redisPid)) {
    stops.push((async () => {
      process.kill(redisPid, 'SIGTERM')
      const deadline = Date.now() + 5000
      while (alive(redisPid) && Date.now() < deadline) await sleep(20)
      if (alive(redisPid)) process.kill(redisPid, 'SIGKILL')
    })().catch(() => undefined))
  }
  await Promise.all(stops)
  rmSync(dir, { recursive: true, force: true })
}

/**
 * Leftovers of runs whose tap process is gone (killed, crashed, interrupted before `after`): their servers are stopped
 * and their folders and state files removed. Runs still going, in this checkout or another, are left alone.
 */
export async function cleanStale(pgBin: string | undefined, currentRunner: number): Promise<void> {
  const owner = (dir: string) => Number(readFileSync(join(dir, 'owner'), 'utf8'))
  const folders = new Set<string>()
  try {
    for (const name of readdirSync(STATE_DIR)) {
      const runner = Number(name.replace(/\.json$/, ''))
      if (!name.endsWith('.json') || runner === currentRunner || alive(runner)) continue
      const state = readState(runner)
      if (state?.dir) folders.add(state.dir)
      rmSync(join(STATE_DIR, name), { force: true })
    }
  } catch {
    // no state folder yet
  }
  try {
    for (const name of readdirSync(tmpdir())) if (name.startsWith(TEMP_PREFIX)) folders.add(join(tmpdir(), name))
  } catch {
    // unreadable temporary folder: nothing of ours to find there
  }
  await Promise.all([...folders].map(async (dir) => {
    try {
      const runner = owner(dir)
      if (runner === currentRunner || alive(runner)) return
      await stopFolder(dir, pgBin ?? DEBIAN_PG_BIN, 'immediate')
    } catch {
      // not ours after all (no owner file) or not ours to stop (another user's): harmless, left alone
    }
  }))
}

/** Starts both servers for the tap run `runnerPid` and writes its state file. Leaves nothing behind when it fails. */
export async function startBackends(runnerPid: number): Promise<BackendsState> {
  const began = performance.now()
  const { pgBin, redisServer } = findBinaries()
  const user = pgUser()
  await cleanStale(pgBin, runnerPid)
  const timings: Record<string, number> = {}
  const dir = mkdtempSync(join(tmpdir(), TEMP_PREFIX))
  try {
    writeFileSync(join(dir, 'owner'), String(runnerPid))
    if (user) chownSync(dir, user.uid, user.gid)
    const [postgres, redis] = await Promise.all([
      startPostgres(pgBin, dir, timings).then(async (started) => {
        const start = performance.now()
        await createRole(started.port)
        timings.pgRole = Math.round(performance.now() - start)
        return started
      }),
      (async () => {
        const start = performance.now()
        const started = await startRedis(redisServer, dir)
        timings.redisStart = Math.round(performance.now() - start)
        return started
      })(),
    ])
    timings.total = Math.round(performance.now() - began)
    const state: BackendsState = {
      postgresUrl: `postgres://${PG_ROLE}@127.0.0.1:${postgres.port}/postgres`,
      redisUrl: `redis://127.0.0.1:${redis.port}`,
      pgDataDir: postgres.dataDir,
      redisPid: redis.pid,
      dir,
      runnerPid,
      pgBin,
      timings,
    }
    mkdirSync(STATE_DIR, { recursive: true })
    const file = stateFile(runnerPid)
    writeFileSync(`${file}.tmp`, JSON.stringify(state, null, 2) + '\n')
    renameSync(`${file}.tmp`, file)
    return state
  } catch (error) {
    await stopFolder(dir, pgBin, 'immediate')
    throw error
  }
}

/** Stops the run's servers and removes its folder and state file. */
export async function stopBackends(runnerPid: number): Promise<Record<string, number> | undefined> {
  const state = readState(runnerPid)
  const start = performance.now()
  if (state) await stopFolder(state.dir, state.pgBin, 'fast')
  rmSync(stateFile(runnerPid), { force: true })
  await cleanStale(state?.pgBin, runnerPid)
  return state ? { stop: Math.round(performance.now() - start) } : undefined
}

/**
 * Creates MIGRATED_TEMPLATE, the committed migrations applied, once per run: a test server's database is copied from it
 * (about 30 ms) rather than created empty and migrated by the server (about 85 ms more per server, hundreds of servers
 * in the suite's PostgreSQL pass). The server still runs its migrations at start, which find nothing left to apply.
 */
export async function createMigratedTemplate(postgresUrl: string): Promise<void> {
  const { openPostgres } = await import('../../src/db/postgres/client.js')
  const { Client } = await pgClient()
  const admin = new Client({ connectionString: postgresUrl })
  await admin.connect()
  try {
    await admin.query(`CREATE DATABASE ${MIGRATED_TEMPLATE} OWNER ${PG_ROLE}`)
  } finally {
    await admin.end()
  }
  const url = new URL(postgresUrl)
  url.pathname = `/${MIGRATED_TEMPLATE}`
  // Closed before any copy: PostgreSQL copies a database only while nobody is connected to it.
  const handle = await openPostgres(url.href)
  await handle.close()
}

/**
 * pg, loaded when a PostgreSQL server is set up: this module is also read by every test file for the run's state
 * (readState), and most of them never talk to PostgreSQL (pg and ioredis are about 280 ms of each process's start).
 */
export async function pgClient(): Promise<typeof import('pg').default> {
  return (await import('pg')).default
}

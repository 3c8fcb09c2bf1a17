import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { ConfigError, loadConfig } from '../../src/config.js'
import { openDatabase } from '../../src/db/sqlite/client.js'
import { lockDatabase } from '../../src/db/sqlite/lock.js'
import { openRepos } from '../../src/db/open-repos.js'

/**
 * Regression: a PostgreSQL URL that lost a slash (`postgres:/user@host:port/db`, what path normalisation makes of
 * `postgres://…`) was opened as a SQLite path, and an empty database named `postgres:/service_mcp@127.0.0.1:40077/t_…`
 * was created in the working tree (and committed). Storage refuses any setting that looks like a URL it cannot use,
 * before creating anything. Each attempt runs in an empty scratch folder, which must stay empty.
 */

const REFUSED = [
  'postgres:/service_mcp@127.0.0.1:40077/t_0123',
  'postgresql:/localhost/mcp',
  'mysql://user:secret@db.example.com/mcp',
  'sqlite:/var/lib/service.db',
]

/** Runs with an empty scratch folder as the working directory; returns what was created in it. */
async function inScratchFolder(t: Test, fn: () => unknown): Promise<string[]> {
  const dir = mkdtempSync(join(tmpdir(), 'service-mcp-url-'))
  const before = process.cwd()
  process.chdir(dir)
  try {
    await fn()
  } finally {
    process.chdir(before)
  }
  const created = readdirSync(dir, { recursive: true }) as string[]
  rmSync(dir, { recursive: true, force: true })
  return created
}

for (const database of REFUSED) {
  t.test(`${database} is refused, and creates nothing`, async (t) => {
    const named = new RegExp(`is a URL of a database this server cannot use`)
    t.same(await inScratchFolder(t, () => t.throws(() => openDatabase(database), named)), [], 'the SQLite opener')
    t.same(await inScratchFolder(t, () => t.throws(() => lockDatabase(database), named)), [], "the server's database lock")
    t.same(await inScratchFolder(t, () => t.rejects(openRepos({ database, redisUrl: '', redisPrefix: '', leaseMs: 15_000 }), named)), [], 'the command line')
    t.same(await inScratchFolder(t, () => t.throws(() => loadConfig({ env: { SERVICE_DATABASE: database } }), ConfigError)), [], 'the settings')
  })
}

t.test('a password in a refused URL is not repeated, and a PostgreSQL URL with one slash is pointed at', async (t) => {
  let refused: Error | undefined
  const created = await inScratchFolder(t, () => {
    try {
      openDatabase('postgres:/user:hunter2@db/mcp').close()
    } catch (err) {
      refused = err as Error
    }
  })
  t.same(created, [])
  t.type(refused, ConfigError)
  t.notMatch(refused?.message, /hunter2/)
  t.match(refused?.message, /"postgres:\/user:…@db\/mcp".*two slashes/)
})

t.test('file names with a colon, file: URIs and :memory: still open', async (t) => {
  const created = await inScratchFolder(t, () => {
    openDatabase(':memory:').close()
    openDatabase('file:scratch-memory?mode=memory').close()
    openDatabase(join('data', 'a:b.db')).close()
  })
  t.ok(created.includes(join('data', 'a:b.db')), 'a colon inside a file name is a file name')
})

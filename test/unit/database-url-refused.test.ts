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

const A_URL = /is a URL of a database this server cannot use/
/** better-sqlite3 reads no URI: `file:x.db` would be a file named so, in the working folder. */
const A_FILE_URI = /is a file: URI, which this server's SQLite does not read as one/
const REFUSED: Array<[string, RegExp]> = [
  ['postgres:/service_mcp@127.0.0.1:40077/t_0123', A_URL],
  ['postgresql:/localhost/mcp', A_URL],
  ['mysql://user:secret@db.example.com/mcp', A_URL],
  ['sqlite:/var/lib/service.db', A_URL],
  ['file:scratch?mode=memory', A_FILE_URI],
  ['file:data/service.db', A_FILE_URI],
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

for (const [database, named] of REFUSED) {
  t.test(`${database} is refused, and creates nothing`, async (t) => {
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

t.test('file names with a colon and :memory: still open', async (t) => {
  const created = await inScratchFolder(t, () => {
    openDatabase(':memory:').close()
    openDatabase(join('data', 'a:b.db')).close()
  })
  t.ok(created.includes(join('data', 'a:b.db')), 'a colon inside a file name is a file name')
})

t.test('the SQLite opener and lock refuse a PostgreSQL URL, and create nothing for it', async (t) => {
  // Taken as a path, `postgres://u:p@h/db` is the folders `postgres:/u:p@h` (path normalisation drops a slash).
  const url = 'postgres://service_mcp:hunter2@127.0.0.1:40077/t_0123'
  const refusals: Error[] = []
  const created = await inScratchFolder(t, () => {
    for (const open of [() => openDatabase(url), () => lockDatabase(url)]) {
      try {
        open()
      } catch (err) {
        refusals.push(err as Error)
      }
    }
  })
  t.same(created, [])
  t.equal(refusals.length, 2, 'both refuse')
  for (const err of refusals) {
    t.type(err, ConfigError)
    t.match(err.message, /is PostgreSQL's: SQLite's storage cannot open it/)
    t.notMatch(err.message, /hunter2/, 'without its password')
  }
})

import { readdirSync } from 'node:fs'
import t from 'tap'
import { openDatabase } from '../../src/db/sqlite/client.js'
import { commitWatch } from '../../src/db/sqlite/commit-watch.js'
import { createRepos } from '../../src/db/sqlite/repos.js'
import { tempDatabase } from '../helpers/server.js'

// The commit watch lets the credential cache skip asking SQLite when nothing was committed. If it ever said "nothing"
// after a commit, a revoked key would keep working: every commit must move it.

const openFiles = () => readdirSync('/proc/self/fd').length

t.test('every commit by another connection moves the watch, and nothing else does', async (t) => {
  const path = tempDatabase(t)
  const server = openDatabase(path)
  const other = openDatabase(path, { migrate: false })
  t.teardown(() => { other.close(); server.close() })
  const watch = commitWatch(server.sqlite as never)
  if (!watch) return t.fail('a WAL database on disk has a commit watch')
  t.equal(watch.moved(), false, 'nothing committed since it was made')
  server.sqlite.prepare('SELECT count(*) FROM users').get()
  t.equal(watch.moved(), false, 'reads commit nothing')

  const write = other.sqlite.prepare("INSERT INTO organizations (id, slug, name, created_at) VALUES (?, ?, 'x', 0)")
  for (let i = 0; i < 200; i++) {
    write.run(`org_${i}`, `slug-${i}`)
    t.equal(watch.moved(), true, `commit ${i} moves it`)
    t.equal(watch.moved(), false, 'once')
    if (t.passing() === false) break
  }
  other.sqlite.exec('PRAGMA wal_checkpoint(TRUNCATE)')
  other.sqlite.prepare("UPDATE organizations SET name = 'after the log was reset' WHERE id = 'org_0'").run()
  t.equal(watch.moved(), true, 'a commit after a checkpoint restarted the log moves it too')
})

t.test('no watch where SQLite keeps no -shm file: the caller asks SQLite every time', async (t) => {
  const memory = openDatabase(':memory:')
  t.teardown(() => memory.close())
  t.equal(commitWatch(memory.sqlite as never), null)
  const repos = createRepos(memory.db)
  await repos.organizations.create({ slug: 'acme' })
  const user = await repos.users.create({ email: 'a@example.com', passwordHash: null })
  t.equal(repos.credentialChanges.takeChanged(), false)
  await repos.users.setDisabled(user.id, true)
  t.equal(repos.credentialChanges.takeChanged(), true, 'changes in this process are still seen')
})

t.test('watches of one file share one descriptor, which closing a connection leaves open', async (t) => {
  const path = tempDatabase(t)
  const server = openDatabase(path)
  t.teardown(() => server.close())
  const connectAndWatch = () => {
    const cli = openDatabase(path, { migrate: false })
    t.ok(commitWatch(cli.sqlite as never))
    cli.close()
  }
  connectAndWatch() // SQLite may keep a descriptor of a closed connection for reuse: counted from here
  const before = openFiles()
  for (let i = 0; i < 5; i++) connectAndWatch()
  t.equal(openFiles(), before, 'no descriptor per watch (and none closed: closing one would drop SQLite\'s locks)')
  const watch = commitWatch(server.sqlite as never)!
  await createRepos(openDatabase(path, { migrate: false }).db).organizations.create({ slug: 'late' })
  t.equal(watch.moved(), true, 'the shared descriptor still reads the live header')
})

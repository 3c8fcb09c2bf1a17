// test-backends: both (the page's fast path of each dialect; on PostgreSQL in the suite's second pass)
import { asc, eq } from 'drizzle-orm'
import t from 'tap'
import { openDatabase } from '../../src/db/sqlite/client.js'
import { createRepos } from '../../src/db/sqlite/repos.js'
import { apps } from '../../src/db/sqlite/schema.js'
import { onPostgres } from '../helpers/server.js'
import { unitRepos } from '../helpers/unit-repos.js'

// apps.page() makes its rows itself from arrays (faster than Drizzle's mapping). They must be exactly Drizzle's rows:
// a column added to the table, or one with a decoder, would show here.
t.test('pages are the rows Drizzle reads, in order, with every column', async (t) => {
  const handle = openDatabase(':memory:')
  t.teardown(() => handle.close())
  const repos = createRepos(handle.db)
  const org = await repos.organizations.create({ slug: 'acme' })
  const other = await repos.organizations.create({ slug: 'other' })
  const user = await repos.users.create({ email: 'a@example.com', passwordHash: null })
  for (let i = 0; i < 7; i++) await repos.apps.create({ organizationId: org.id, name: `app-${i}`, description: i % 2 ? `d ${i} "é"` : '', ...(i === 3 ? { createdBy: user.id, pipeline: 'other' } : {}) })
  await repos.apps.create({ organizationId: other.id, name: 'elsewhere' })
  const drizzleRows = handle.db.select().from(apps).where(eq(apps.organizationId, org.id)).orderBy(asc(apps.id)).all()

  const first = await repos.apps.page(org.id, 3)
  t.strictSame(first.items, drizzleRows.slice(0, 3), 'first page')
  t.equal(first.more, true)
  const second = await repos.apps.page(org.id, 3, first.items.at(-1)!.id)
  t.strictSame(second.items, drizzleRows.slice(3, 6), 'next page, the app with a creator and a pipeline included')
  const last = await repos.apps.page(org.id, 3, second.items.at(-1)!.id)
  t.strictSame(last.items, drizzleRows.slice(6), 'last page')
  t.equal(last.more, false)
  t.strictSame((await repos.apps.page(org.id, 100)).items, drizzleRows, 'all at once')
  t.strictSame(Object.keys(first.items[0]!), Object.keys(drizzleRows[0]!), 'the same keys in the same order')
})

// On PostgreSQL, pages are read on the pool as arrays, by a named statement (the fast path); inside a transaction the
// repository has no pool and reads them through Drizzle's query builder: both must give the same rows.
t.test('PostgreSQL: pages read on the pool are the rows Drizzle reads', { skip: !onPostgres() && 'on PostgreSQL only (the suite\'s second pass)' }, async (t) => {
  const repos = await unitRepos(t)
  const org = await repos.organizations.create({ slug: 'acme' })
  const other = await repos.organizations.create({ slug: 'other' })
  const user = await repos.users.create({ email: 'a@example.com', passwordHash: null })
  for (let i = 0; i < 7; i++) await repos.apps.create({ organizationId: org.id, name: `app-${i}`, description: i % 2 ? `d ${i} "é"` : '', ...(i === 3 ? { createdBy: user.id, pipeline: 'other' } : {}) })
  await repos.apps.create({ organizationId: other.id, name: 'elsewhere' })
  const drizzleRows = (await repos.transaction((tx) => tx.apps.page(org.id, 100))).items
  t.equal(drizzleRows.length, 7)
  t.type(drizzleRows[0]!.createdAt, 'number', 'Drizzle reads the bigint times as numbers')

  // Several times over: each pooled connection prepares the named statements once, then reuses them.
  for (let round = 0; round < 3; round++) {
    const first = await repos.apps.page(org.id, 3)
    t.strictSame(first.items, drizzleRows.slice(0, 3), `first page (${round})`)
    t.equal(first.more, true)
    const second = await repos.apps.page(org.id, 3, first.items.at(-1)!.id)
    t.strictSame(second.items, drizzleRows.slice(3, 6), `next page, the app with a creator and a pipeline included (${round})`)
    const last = await repos.apps.page(org.id, 3, second.items.at(-1)!.id)
    t.strictSame(last.items, drizzleRows.slice(6), `last page (${round})`)
    t.equal(last.more, false)
  }
  const all = await Promise.all(Array.from({ length: 12 }, () => repos.apps.page(org.id, 100)))
  for (const page of all) t.strictSame(page.items, drizzleRows, 'all at once, on several connections in parallel')
  t.strictSame(Object.keys(all[0]!.items[0]!), Object.keys(drizzleRows[0]!), 'the same keys in the same order')
  t.strictSame((await repos.apps.page(other.id, 20)).items.map((a) => a.name), ['elsewhere'], 'another organization\'s page')
  // PostgreSQL's refusal (a negative LIMIT) is the page's rejection, and the connections serve on.
  await t.rejects(repos.apps.page(org.id, -5), /LIMIT must not be negative/)
  await t.rejects(repos.apps.page(org.id, -5, drizzleRows[0]!.id), /LIMIT must not be negative/)
  for (let i = 0; i < 4; i++) t.strictSame((await repos.apps.page(org.id, 2)).items, drizzleRows.slice(0, 2), `served on after the refusals (${i})`)
})

// Callers never see a driver's codes: a taken name, slug or email is the catalog's CONFLICT (issue 14: one error for
// every storage backend).
t.test('a taken name, slug or email is CONFLICT, nothing written', async (t) => {
  const handle = openDatabase(':memory:')
  t.teardown(() => handle.close())
  const repos = createRepos(handle.db)
  const org = await repos.organizations.create({ slug: 'acme' })
  await t.rejects(() => repos.organizations.create({ slug: 'acme' }), { code: 'CONFLICT', message: 'An organization with the slug acme already exists' })
  await repos.users.create({ email: 'a@example.com', passwordHash: null })
  await t.rejects(() => repos.users.create({ email: ' A@example.com', passwordHash: null }), { code: 'CONFLICT', message: 'A user with the email a@example.com already exists' })
  const a = await repos.apps.create({ organizationId: org.id, name: 'web' })
  const b = await repos.apps.create({ organizationId: org.id, name: 'api' })
  await t.rejects(() => repos.apps.create({ organizationId: org.id, name: 'web' }), { code: 'CONFLICT', message: 'An app named web already exists in your organization' })
  await t.rejects(() => repos.apps.update(org.id, b.id, { name: 'web' }), { code: 'CONFLICT' })
  t.equal((await repos.apps.byId(org.id, b.id))?.name, 'api', 'the refused update changed nothing')
  t.equal(await repos.organizations.count(), 1)
  t.equal(await repos.users.count(), 1)
  t.equal((await repos.apps.page(org.id, 10)).items.length, 2)
  t.equal((await repos.apps.byId(org.id, a.id))?.name, 'web')
})

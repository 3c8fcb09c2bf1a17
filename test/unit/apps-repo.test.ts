import { asc, eq } from 'drizzle-orm'
import t from 'tap'
import { openDatabase } from '../../src/db/client.js'
import { createRepos } from '../../src/db/repos/index.js'
import { apps } from '../../src/db/schema.js'

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

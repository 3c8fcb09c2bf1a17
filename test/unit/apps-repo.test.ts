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
  const org = repos.organizations.create({ slug: 'acme' })
  const other = repos.organizations.create({ slug: 'other' })
  const user = repos.users.create({ email: 'a@example.com', passwordHash: null })
  for (let i = 0; i < 7; i++) repos.apps.create({ organizationId: org.id, name: `app-${i}`, description: i % 2 ? `d ${i} "é"` : '', ...(i === 3 ? { createdBy: user.id, pipeline: 'other' } : {}) })
  repos.apps.create({ organizationId: other.id, name: 'elsewhere' })
  const drizzleRows = handle.db.select().from(apps).where(eq(apps.organizationId, org.id)).orderBy(asc(apps.id)).all()

  const first = repos.apps.page(org.id, 3)
  t.strictSame(first.items, drizzleRows.slice(0, 3), 'first page')
  t.equal(first.more, true)
  const second = repos.apps.page(org.id, 3, first.items.at(-1)!.id)
  t.strictSame(second.items, drizzleRows.slice(3, 6), 'next page, the app with a creator and a pipeline included')
  const last = repos.apps.page(org.id, 3, second.items.at(-1)!.id)
  t.strictSame(last.items, drizzleRows.slice(6), 'last page')
  t.equal(last.more, false)
  t.strictSame(repos.apps.page(org.id, 100).items, drizzleRows, 'all at once')
  t.strictSame(Object.keys(first.items[0]!), Object.keys(drizzleRows[0]!), 'the same keys in the same order')
})

// Callers never see a driver's codes: a taken name, slug or email is the catalog's CONFLICT (issue 14: one error for
// every storage backend).
t.test('a taken name, slug or email is CONFLICT, nothing written', async (t) => {
  const handle = openDatabase(':memory:')
  t.teardown(() => handle.close())
  const repos = createRepos(handle.db)
  const org = repos.organizations.create({ slug: 'acme' })
  t.throws(() => repos.organizations.create({ slug: 'acme' }), { code: 'CONFLICT', message: 'An organization with the slug acme already exists' })
  repos.users.create({ email: 'a@example.com', passwordHash: null })
  t.throws(() => repos.users.create({ email: ' A@example.com', passwordHash: null }), { code: 'CONFLICT', message: 'A user with the email a@example.com already exists' })
  const a = repos.apps.create({ organizationId: org.id, name: 'web' })
  const b = repos.apps.create({ organizationId: org.id, name: 'api' })
  t.throws(() => repos.apps.create({ organizationId: org.id, name: 'web' }), { code: 'CONFLICT', message: 'An app named web already exists in your organization' })
  t.throws(() => repos.apps.update(org.id, b.id, { name: 'web' }), { code: 'CONFLICT' })
  t.equal(repos.apps.byId(org.id, b.id)?.name, 'api', 'the refused update changed nothing')
  t.equal(repos.organizations.count(), 1)
  t.equal(repos.users.count(), 1)
  t.equal(repos.apps.page(org.id, 10).items.length, 2)
  t.equal(repos.apps.byId(org.id, a.id)?.name, 'web')
})

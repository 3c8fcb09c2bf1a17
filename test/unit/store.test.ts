import t, { type Test } from 'tap'
import { openDatabase } from '../../src/db/sqlite/client.js'
import { createRepos } from '../../src/db/sqlite/repos.js'

/**
 * SQLite's store (src/db/sqlite/store.ts): one connection shared by every request, so a transaction whose body awaits must
 * not let another request's statement land inside it (it would be rolled back with it, or see its uncommitted rows).
 */

function open(t: Test) {
  const handle = openDatabase(':memory:')
  t.teardown(() => handle.close())
  return createRepos(handle.db)
}

t.test('a call made while a transaction is open waits for it, and is not rolled back with it', async (t) => {
  const repos = open(t)
  let outside: Promise<unknown> | undefined
  let seenInside: unknown
  const failed = repos.transaction(async (tx) => {
    await tx.organizations.create({ slug: 'inside' })
    // Another request, in the middle of the transaction.
    outside = repos.organizations.create({ slug: 'outside' })
    // The body yields to the event loop (real bodies only await their own queries; this gives the other call every
    // chance to run inside the transaction if nothing held it back).
    await new Promise((resolve) => setImmediate(resolve))
    seenInside = await tx.organizations.bySlug('outside')
    throw new Error('the transaction fails')
  })
  await t.rejects(failed, /the transaction fails/)
  await outside
  t.equal(seenInside, undefined, 'the other call had not run inside the transaction')
  t.equal(await repos.organizations.bySlug('inside'), undefined, 'the transaction rolled back')
  t.ok(await repos.organizations.bySlug('outside'), 'the other call ran after it, and its write stayed')
})

t.test('a repository transaction inside a caller\'s transaction joins it', async (t) => {
  const repos = open(t)
  const org = await repos.organizations.create({ slug: 'acme' })
  const user = await repos.users.create({ email: 'a@example.com', passwordHash: null })
  await t.rejects(repos.transaction(async (tx) => {
    const membership = await tx.memberships.upsert({ userId: user.id, organizationId: org.id, role: 'owner' })
    // apiKeys.create runs its own transaction (key and audit entry): here it is part of this one.
    await tx.apiKeys.create({ membershipId: membership.id, name: 'joined', scopes: ['mcp:read'] })
    throw new Error('undo everything')
  }), /undo everything/)
  t.equal(await repos.memberships.find(user.id, org.id), undefined, 'the membership was rolled back')
  t.strictSame(await repos.apiKeys.listAll(), [], 'and so was the key its nested transaction created')
})

t.test('calls waiting for the lock are served in the order they were made', async (t) => {
  const repos = open(t)
  const order: string[] = []
  const busy = repos.transaction(async (tx) => {
    await tx.organizations.create({ slug: 'first' })
    await new Promise((resolve) => setImmediate(resolve))
  })
  const waiting = ['a', 'b', 'c', 'd'].map((slug) => repos.organizations.create({ slug }).then(() => order.push(slug)))
  await Promise.all([busy, ...waiting])
  t.strictSame(order, ['a', 'b', 'c', 'd'])
  t.strictSame((await repos.organizations.list()).map((o) => o.slug), ['a', 'b', 'c', 'd', 'first'])
})

// test-backends: both (the chain's append holds a per-organization lock, which each dialect takes its own way)
import t from 'tap'
import { GENESIS, verifyChain, type ChainEntry } from '../../src/audit/chain.js'
import type { NewAuditEntry } from '../../src/db/repos/audit.js'
import { openDatabase } from '../../src/db/sqlite/client.js'
import { createRepos } from '../../src/db/sqlite/repos.js'
import { unitRepos } from '../helpers/unit-repos.js'

/** The audit repository keeps each organization's chain (docs/decisions/audit-chain.md), under concurrent appends too. */

const entry = (organizationId: string, n: number): NewAuditEntry => ({
  organizationId, userId: null, membershipId: null, credentialKind: 'cli', credentialId: null, clientId: null,
  action: 'test.append', targetType: 'n', targetId: String(n), outcome: 'succeeded', details: { n },
})

const noSignatures = async () => 'unknown' as const

t.test('appends chain per organization, concurrent ones included, and the chain verifies', async (t) => {
  const repos = await unitRepos(t)
  const a = await repos.organizations.create({ slug: 'a' })
  const b = await repos.organizations.create({ slug: 'b' })
  await Promise.all(Array.from({ length: 40 }, (_, i) => repos.audit.add(entry(i % 2 ? a.id : b.id, i))))
  for (const org of [a, b]) {
    const chain = await repos.audit.chain(org.id, 1, 100)
    t.same(chain.map((e) => e.seq), Array.from({ length: 20 }, (_, i) => i + 1), `${org.slug}: seq 1..20 with no gap`)
    t.equal(chain[0]!.prevHash, GENESIS)
    const report = await verifyChain(chain as ChainEntry[], [], noSignatures)
    t.notOk(report.problem, `${org.slug}: the chain holds`)
    t.same(await repos.audit.head(org.id), { seq: 20, hash: chain[19]!.hash })
  }
})

t.test('an append inside a transaction joins it: rolled back, it leaves no hole in the chain', async (t) => {
  const repos = await unitRepos(t)
  const org = await repos.organizations.create({ slug: 'tx' })
  await repos.audit.add(entry(org.id, 1))
  await t.rejects(repos.transaction(async (tx) => {
    await tx.audit.add(entry(org.id, 2))
    throw new Error('the change it records failed')
  }))
  await repos.audit.add(entry(org.id, 3))
  const chain = await repos.audit.chain(org.id, 1, 10)
  t.same(chain.map((e) => [e.seq, e.targetId]), [[1, '1'], [2, '3']])
  t.notOk((await verifyChain(chain as ChainEntry[], [], noSignatures)).problem)
})

t.test('entries written before the chain existed are chained in id order, after what is already chained', async (t) => {
  const handle = openDatabase(':memory:')
  t.teardown(() => handle.close())
  const repos = createRepos(handle.db)
  const org = await repos.organizations.create({ slug: 'old' })
  await repos.audit.add(entry(org.id, 0))
  // As a version without the chain wrote them: no seq, no hashes.
  const insert = handle.sqlite.prepare(`INSERT INTO audit_log (id, organization_id, credential_kind, action, outcome, details, at) VALUES (?, ?, 'cli', 'old.entry', 'succeeded', ?, ?)`)
  for (const n of [3, 1, 2]) insert.run(`aud_old_${n}`, org.id, JSON.stringify({ n }), 1_700_000_000_000 + n)
  const before = [...await repos.audit.chain(org.id, 1, 10), ...await repos.audit.unchained(org.id, 10)]
  t.match((await verifyChain(before as ChainEntry[], [], noSignatures)).problem, { kind: 'inserted', id: 'aud_old_1' }, 'until chained, verify reports them')
  t.equal(await repos.audit.chainUnchained(2), 3, 'in batches')
  t.equal(await repos.audit.chainUnchained(), 0, 'nothing left')
  const chain = await repos.audit.chain(org.id, 1, 10)
  t.same(chain.map((e) => e.id.startsWith('aud_old_') ? e.id : e.seq), [1, 'aud_old_1', 'aud_old_2', 'aud_old_3'])
  t.notOk((await verifyChain(chain as ChainEntry[], [], noSignatures)).problem)
})

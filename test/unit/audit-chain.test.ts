import t from 'tap'
import { entryHash, GENESIS, verifyChain, type ChainEntry, type Checkpoint } from '../../src/audit/chain.js'
import { checkCheckpoint, signCheckpoint } from '../../src/audit/checkpoint.js'
import { generateSigningKey } from '../../src/oauth/keyring.js'

/** The audit chain's walk and checkpoints (docs/decisions/audit-chain.md), on entries made here. */

const ORG = 'org_1'
const key = generateSigningKey()
const keys = [key.publicJwk as unknown as Record<string, unknown>]
const check = (c: Checkpoint) => checkCheckpoint(c, keys)

function chain(n: number, from = { seq: 1, prevHash: GENESIS }): ChainEntry[] {
  const out: ChainEntry[] = []
  let prev = from.prevHash
  for (let i = 0; i < n; i++) {
    const seq = from.seq + i
    const base = {
      id: `aud_${String(seq).padStart(4, '0')}`, organizationId: ORG, seq, prevHash: prev, at: 1_790_000_000_000 + seq,
      userId: 'usr_1', membershipId: 'mem_1', credentialKind: 'oauth', credentialId: 'jti', clientId: 'mcp_c',
      action: 'service_apps_create', targetType: 'app', targetId: `app_${seq}`, outcome: 'succeeded', details: { request_id: seq, name: `app ${seq}` },
    }
    const e = { ...base, hash: entryHash(base) }
    out.push(e)
    prev = e.hash
  }
  return out
}

/** Recomputes every hash from `from` on, as someone who knows the scheme but not the key would. */
function rehash(entries: ChainEntry[]): ChainEntry[] {
  let prev = entries[0]!.prevHash
  return entries.map((e) => {
    const linked = { ...e, prevHash: prev }
    const hash = entryHash(linked)
    prev = hash
    return { ...linked, hash }
  })
}

const at = (entries: ChainEntry[], seq: number) => entries.find((e) => e.seq === seq)!
const sign = (entries: ChainEntry[], seq: number) => signCheckpoint({ organizationId: ORG, seq, hash: at(entries, seq).hash!, at: 1_790_000_100_000 + seq }, key)

t.test('an intact chain: no problem, proven up to its newest checkpoint', async (t) => {
  const entries = chain(10)
  const report = await verifyChain(entries, [await sign(entries, 4), await sign(entries, 8)], check)
  t.same(report, { entries: 10, signedThrough: 8, unsigned: 2 })
  t.notOk(report.problem)
})

t.test('an edited entry is named', async (t) => {
  const entries = chain(10)
  const checkpoints = [await sign(entries, 8)]
  at(entries, 4).outcome = 'denied'
  const report = await verifyChain(entries, checkpoints, check)
  t.match(report.problem, { kind: 'edited', seq: 4, id: 'aud_0004' })
  at(entries, 4).outcome = 'succeeded'
  ;(at(entries, 6).details as Record<string, unknown>).name = 'other'
  t.match((await verifyChain(entries, checkpoints, check)).problem, { kind: 'edited', seq: 6, id: 'aud_0006' }, 'a change deep in the details too')
})

t.test('a deleted entry is named by its place, and by the entry after it', async (t) => {
  const entries = chain(10).filter((e) => e.seq !== 5)
  t.match((await verifyChain(entries, [], check)).problem, { kind: 'deleted', seq: 5, id: 'aud_0006' })
  const last = chain(10).slice(1)
  t.match((await verifyChain(last, [], check)).problem, { kind: 'deleted', seq: 1, id: 'aud_0002' }, 'the first entry too')
})

t.test('an inserted entry is named: outside the chain, or at a place another entry holds', async (t) => {
  const entries = chain(6)
  const stray = { ...at(entries, 3), id: 'aud_0003a', seq: null, prevHash: null, hash: null }
  t.match((await verifyChain([...entries, stray], [], check)).problem, { kind: 'inserted', seq: null, id: 'aud_0003a' })
  const twin = { ...at(entries, 3), id: 'aud_0002z', action: 'service_members_remove', hash: 'f'.repeat(64) }
  t.match((await verifyChain([...entries, twin], [], check)).problem, { kind: 'inserted', seq: 3, id: 'aud_0002z' }, 'named even when its id sorts first')
})

t.test('a chain rewritten after an edit is caught by the checkpoint that covers it', async (t) => {
  const entries = chain(10)
  const checkpoints = [await sign(entries, 2), await sign(entries, 7)]
  at(entries, 5).outcome = 'denied'
  const rewritten = rehash(entries)
  const report = await verifyChain(rewritten, checkpoints, check)
  t.match(report.problem, { kind: 'rewritten', seq: 7 })
  t.match(report.problem!.message, /between seq 3 and 7/)
  t.equal(report.signedThrough, 2)
})

t.test('checkpoints: an altered one is a problem, one of an unknown key proves nothing', async (t) => {
  const entries = chain(5)
  const good = await sign(entries, 5)
  t.equal(await check(good), true)
  const altered = { ...good, at: good.at + 1 }
  t.match((await verifyChain(entries, [altered], check)).problem, { kind: 'bad_signature', seq: 5 })
  const other = generateSigningKey()
  const foreign = await signCheckpoint({ organizationId: ORG, seq: 5, hash: at(entries, 5).hash!, at: 1 }, { ...other, kid: key.kid })
  t.equal(await check(foreign), false, 'signed by another key under our key id')
  const unknown = await signCheckpoint({ organizationId: ORG, seq: 5, hash: at(entries, 5).hash!, at: 1 }, other)
  t.same(await verifyChain(entries, [unknown], check), { entries: 5, signedThrough: null, unsigned: 5 })
})

t.test('after a purge the chain starts at its anchor', async (t) => {
  const entries = chain(10)
  const kept = entries.filter((e) => e.seq! >= 4)
  const anchor = { seq: 4, prevHash: at(entries, 3).hash! }
  t.same(await verifyChain(kept, [await sign(entries, 9)], check, anchor), { entries: 7, signedThrough: 9, unsigned: 1 })
  t.match((await verifyChain(kept.slice(1), [], check, anchor)).problem, { kind: 'deleted', seq: 4 }, 'an entry deleted after the anchor is still found')
})

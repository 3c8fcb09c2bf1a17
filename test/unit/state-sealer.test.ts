// test-backends: both (repositories on SQLite, and on PostgreSQL in the suite's second pass; the file-sharing test stays on SQLite)
import { createCipheriv, randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { openDatabase } from '../../src/db/sqlite/client.js'
import { createRepos } from '../../src/db/sqlite/repos.js'
import { type Repos } from '../../src/db/repos/index.js'
import { generateStateKey, RequestStateSealer } from '../../src/mrtr/state-sealer.js'
import { unitRepos } from '../helpers/unit-repos.js'

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
const FORMAT = /^v1\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]{16})\.([A-Za-z0-9_-]+)$/
const PAYLOAD = { op: 'op-1', member: 'm-1', org: 'o-1', tool: 'service_apps_delete', args: 'digest', exp: 1_700_000_000_000, nested: { list: [1, 'two', null] } }


async function newSealer(t: Test): Promise<{ sealer: RequestStateSealer; repos: Repos }> {
  const repos = await unitRepos(t)
  const sealer = new RequestStateSealer(repos)
  await sealer.ensureKey()
  return { sealer, repos }
}

function parts(state: string): [string, string, string, string] {
  const p = state.split('.')
  if (p.length !== 4) throw new Error(`not four parts: ${state}`)
  return p as [string, string, string, string]
}

/** The same character set, another character whose top bit differs (so the decoded bytes always change). */
function flipped(c: string): string {
  const i = ALPHABET.indexOf(c)
  if (i === -1) return c === 'v' ? 'w' : 'v'
  return ALPHABET[i ^ 32]!
}

/** Seals like the sealer does, with a chosen plaintext, to check the documented format from the outside. */
function sealByHand(kid: string, secret: string, plaintext: string): string {
  const iv = randomBytes(12)
  const cipher = createCipheriv('aes-256-gcm', Buffer.from(secret, 'base64url'), iv)
  cipher.setAAD(Buffer.from(`service-mcp requestState v1 ${kid}`))
  const sealed = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()])
  return `v1.${kid}.${iv.toString('base64url')}.${sealed.toString('base64url')}`
}

t.test('ensureKey creates one key on an empty database, once; seal without a key throws', async (t) => {
  const repos = await unitRepos(t)
  const sealer = new RequestStateSealer(repos)
  await t.rejects(() => sealer.seal({ a: 1 }), /no requestState key/, 'no key yet')
  t.equal(await sealer.open('v1.abc.AAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAAAA'), null, 'nothing opens without keys')
  await sealer.ensureKey()
  const first = await repos.requestStateKeys.current()
  t.ok(first, 'a key exists')
  t.equal(Buffer.from(first!.secret, 'base64url').length, 32, '256-bit secret')
  await sealer.ensureKey()
  t.equal((await repos.requestStateKeys.all()).length, 1, 'ensureKey does not add a second key')
})

t.test('seal/open round trip; every seal is fresh; the payload cannot be read', async (t) => {
  const { sealer, repos } = await newSealer(t)
  const state = await sealer.seal(PAYLOAD)
  const m = FORMAT.exec(state)
  t.ok(m, `format v1.<kid>.<iv>.<ciphertext+tag>: ${state}`)
  t.equal(m![1], (await repos.requestStateKeys.current())!.kid, 'the current kid')
  t.same(await sealer.open(state), PAYLOAD, 'round trip')
  t.same(await sealer.open(state), PAYLOAD, 'opening twice works (no single use here)')
  const again = await sealer.seal(PAYLOAD)
  t.not(again, state, 'a fresh IV each time')
  t.not(parts(again)[2], parts(state)[2])
  t.same(await sealer.open(again), PAYLOAD)
  t.notMatch(Buffer.from(parts(state)[3], 'base64url').toString('latin1'), /service_apps_delete|op-1/, 'the payload is not readable')
  t.same(await sealer.open(await sealer.seal({})), {}, 'empty payload')
  t.same(await sealer.open(await sealer.seal({ text: 'Hello, 世界' })), { text: 'Hello, 世界' }, 'UTF-8 payload')
  // Another sealer over the same repositories (another request, a restarted process) opens it too.
  t.same(await new RequestStateSealer(repos).open(state), PAYLOAD, 'keys come from the database')
})

t.test('flipping any character of any part → null', async (t) => {
  const { sealer } = await newSealer(t)
  const state = await sealer.seal(PAYLOAD)
  const p = parts(state)
  let refused = 0
  let tried = 0
  for (let part = 0; part < 4; part++) {
    for (let i = 0; i < p[part]!.length; i++) {
      const copy = [...p] as string[]
      const s = copy[part]!
      copy[part] = s.slice(0, i) + flipped(s[i]!) + s.slice(i + 1)
      tried++
      if (await sealer.open(copy.join('.')) === null) refused++
      else t.fail(`part ${part}, character ${i} flipped, still opened`)
    }
  }
  t.equal(refused, tried, `all ${tried} single-character alterations refused`)
  // Truncations, extensions and dropped parts.
  t.equal(await sealer.open(state.slice(0, -1)), null, 'last character dropped')
  t.equal(await sealer.open(`${state}A`), null, 'a character appended')
  t.equal(await sealer.open(`${p[0]}.${p[1]}.${p[2]}.${p[3].slice(0, -4)}`), null, 'ciphertext shortened')
  t.equal(await sealer.open(`${p[0]}.${p[1]}.${p[2]}.${p[3].slice(4)}`), null, 'ciphertext start dropped')
  const other = parts(await sealer.seal(PAYLOAD))
  t.equal(await sealer.open(`${p[0]}.${p[1]}.${other[2]}.${p[3]}`), null, 'IV of another state')
  t.equal(await sealer.open(`${p[0]}.${p[1]}.${p[2]}.${other[3]}`), null, 'ciphertext of another state')
  t.same(await sealer.open(state), PAYLOAD, 'the original still opens')
})

t.test('the kid is authenticated: a state re-labelled with another kid → null', async (t) => {
  const { sealer, repos } = await newSealer(t)
  const original = (await repos.requestStateKeys.current())!
  const state = await sealer.seal(PAYLOAD)
  const [v, kid, iv, ct] = parts(state)
  t.equal(kid, original.kid)
  // A second key with THE SAME secret under another kid: only the additional data can tell them apart.
  await repos.requestStateKeys.rotate({ kid: 'sameSecretKid', secret: original.secret, createdAt: original.createdAt + 1 })
  t.equal(await sealer.open(`${v}.sameSecretKid.${iv}.${ct}`), null, 'same secret, other kid: refused')
  // And a key with another secret.
  const third = generateStateKey(original.createdAt + 2)
  await repos.requestStateKeys.rotate(third)
  t.equal(await sealer.open(`${v}.${third.kid}.${iv}.${ct}`), null, 'other secret, other kid: refused')
  // The other way round: a state sealed under the same-secret kid cannot be moved back to the original kid.
  const moved = sealByHand('sameSecretKid', original.secret, JSON.stringify(PAYLOAD))
  t.same(await sealer.open(moved), PAYLOAD, 'sealed by hand under sameSecretKid, it opens as such')
  const [, , iv2, ct2] = parts(moved)
  t.equal(await sealer.open(`v1.${original.kid}.${iv2}.${ct2}`), null, '…and not under the original kid')
  t.same(await sealer.open(state), PAYLOAD, 'the original state is untouched')
})

t.test('unknown kid → null', async (t) => {
  const { sealer } = await newSealer(t)
  const [v, , iv, ct] = parts(await sealer.seal(PAYLOAD))
  t.equal(await sealer.open(`${v}.unknownKid00.${iv}.${ct}`), null)
  t.equal(await sealer.open(`${v}.${'k'.repeat(64)}.${iv}.${ct}`), null, '64-character kid')
})

t.test('malformed strings → null, never a throw', async (t) => {
  const { sealer } = await newSealer(t)
  const state = await sealer.seal(PAYLOAD)
  const [v, kid, iv, ct] = parts(state)
  const malformed: Array<[string, string]> = [
    ['empty', ''],
    ['version only', 'v1'],
    ['three parts', `${v}.${kid}.${iv}`],
    ['five parts', `${state}.x`],
    ['version v2', `v2.${kid}.${iv}.${ct}`],
    ['version V1', `V1.${kid}.${iv}.${ct}`],
    ['empty kid', `${v}..${iv}.${ct}`],
    ['kid over 64 characters', `${v}.${'k'.repeat(65)}.${iv}.${ct}`],
    ['kid with a dot', `${v}.a.b.${iv}.${ct}`],
    ['IV of 15 characters', `${v}.${kid}.${iv.slice(1)}.${ct}`],
    ['IV of 17 characters', `${v}.${kid}.${iv}A.${ct}`],
    ['ciphertext of 21 characters', `${v}.${kid}.${iv}.${ct.slice(0, 21)}`],
    ['ciphertext of exactly a tag (22 characters = 16 bytes)', `${v}.${kid}.${iv}.${ct.slice(0, 22)}`],
    ['standard base64 padding', `${state}==`],
    ['standard base64 characters', `${v}.${kid}.${iv}.${ct.slice(0, -1)}+`],
    ['leading space', ` ${state}`],
    ['trailing newline', `${state}\n`],
    ['JSON instead of a state', JSON.stringify(PAYLOAD)],
    ['unicode', `${v}.${kid}.${iv}.${ct}é`],
  ]
  for (const [what, value] of malformed) {
    let result: unknown
    await t.resolves(async () => { result = await sealer.open(value) }, `${what}: no throw`)
    t.equal(result, null, `${what}: null`)
  }
})

t.test('a well-sealed payload that is not a JSON object → null', async (t) => {
  const { sealer, repos } = await newSealer(t)
  const { kid, secret } = (await repos.requestStateKeys.current())!
  t.same(await sealer.open(sealByHand(kid, secret, JSON.stringify({ ok: true }))), { ok: true }, 'hand-sealed object: the format is as documented')
  for (const plaintext of ['[1,2]', '"text"', '42', 'null', 'true', 'not json']) {
    t.equal(await sealer.open(sealByHand(kid, secret, plaintext)), null, plaintext)
  }
})

t.test('after rotation old states still open and new ones use the new kid', async (t) => {
  const { sealer, repos } = await newSealer(t)
  const oldKid = (await repos.requestStateKeys.current())!.kid
  const before = await sealer.seal({ n: 1 })
  const next = generateStateKey()
  await repos.requestStateKeys.rotate(next)
  t.equal((await repos.requestStateKeys.current())!.kid, next.kid, 'the new key seals')
  t.ok((await repos.requestStateKeys.byKid(oldKid))!.retiredAt !== null, 'the old one is retired')
  t.same(await sealer.open(before), { n: 1 }, 'a state of the retired key still opens')
  const after = await sealer.seal({ n: 2 })
  t.equal(parts(after)[1], next.kid, 'new states use the new kid')
  t.same(await sealer.open(after), { n: 2 })
  t.same(await new RequestStateSealer(repos).open(before), { n: 1 }, 'a fresh sealer opens the old one too')
  // Twice more: every generation stays readable.
  const third = generateStateKey()
  await repos.requestStateKeys.rotate(third)
  t.equal(parts(await sealer.seal({})).at(1), third.kid)
  t.same(await sealer.open(before), { n: 1 })
  t.same(await sealer.open(after), { n: 2 })
  // Pruned keys no longer open anything (for a sealer that never saw them).
  t.equal(await repos.requestStateKeys.pruneRetiredBefore(Date.now() + 1000), 2, 'both retired keys pruned')
  t.equal(await new RequestStateSealer(repos).open(before), null, 'a pruned key opens nothing')
})

t.test('a key rotated through another Repos on the same database file is found by the first sealer', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'state-sealer-test-'))
  const path = join(dir, 'db.sqlite')
  const a = openDatabase(path)
  const b = openDatabase(path)
  t.teardown(() => {
    a.close()
    b.close()
    rmSync(dir, { recursive: true, force: true })
  })
  const reposA = createRepos(a.db)
  const reposB = createRepos(b.db)
  const sealerA = new RequestStateSealer(reposA)
  await sealerA.ensureKey()
  const sealerB = new RequestStateSealer(reposB)
  const first = await sealerA.seal({ from: 'A' })
  t.same(await sealerB.open(first), { from: 'A' }, 'B opens what A sealed')
  // "Another process" rotates.
  const rotated = generateStateKey()
  await reposB.requestStateKeys.rotate(rotated)
  const fromB = await sealerB.seal({ from: 'B' })
  t.equal(parts(fromB)[1], rotated.kid)
  t.same(await sealerA.open(fromB), { from: 'B' }, 'A looks the unknown kid up and opens it')
  t.equal(parts(await sealerA.seal({})).at(1), rotated.kid, 'A now seals with the rotated key too')
  t.same(await sealerA.open(first), { from: 'A' }, 'and still opens its old states')
  t.same(await sealerB.open(first), { from: 'A' })
})

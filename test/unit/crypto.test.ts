import { createHash } from 'node:crypto'
import t from 'tap'
import { constantTimeEqual, hashPassword, newId, newSessionId, randomSecret, sha256Hex, verifyPassword } from '../../src/lib/crypto.js'

const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz'

function decodeTime(id: string): number {
  const time = id.slice(id.indexOf('_') + 1).slice(0, 10)
  let n = 0
  for (const ch of time) n = n * 32 + CROCKFORD.indexOf(ch)
  return n
}

function saltOf(stored: string): string {
  return stored.split('$')[4]!
}

t.test('hashPassword / verifyPassword', async (t) => {
  const stored = await hashPassword('correct horse battery staple')
  t.match(stored, /^scrypt\$16384\$8\$1\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/, 'scrypt$N$r$p$salt$hash')
  t.notMatch(stored, /correct|horse/, 'the password is not in the hash')
  t.equal(await verifyPassword('correct horse battery staple', stored), true, 'right password')
  t.equal(await verifyPassword('correct horse battery stapl', stored), false, 'wrong password')
  t.equal(await verifyPassword('Correct horse battery staple', stored), false, 'case matters')
  t.equal(await verifyPassword('', stored), false, 'empty password')

  const again = await hashPassword('correct horse battery staple')
  t.not(again, stored, 'a fresh salt each time')
  t.equal(await verifyPassword('correct horse battery staple', again), true)

  // NFKC: the ligature "ﬁ" and "fi" are the same password.
  const lig = await hashPassword('\uFB01ne password')
  t.equal(await verifyPassword('fine password', lig), true, 'passwords are NFKC-normalized')

  for (const bad of ['', 'plain', 'bcrypt$10$abc', 'scrypt$16384$8$1$salt', stored.replace(/^scrypt/, 'argon2')]) {
    t.equal(await verifyPassword('correct horse battery staple', bad), false, `malformed stored value: ${JSON.stringify(bad.slice(0, 20))}`)
  }
  // Stored values with the right shape but unusable parts never verify and never throw.
  const salt = saltOf(stored)
  for (const bad of [
    `scrypt$16384$8$1$${salt}$`, // empty hash: would equal an empty derived key
    `scrypt$16384$8$1$${salt}$AAAA`, // truncated hash
    `scrypt$abc$8$1$${salt}$${'A'.repeat(43)}`, // N not a number
    `scrypt$3$8$1$${salt}$${'A'.repeat(43)}`, // N not a power of two
    `scrypt$1048576$8$1$${salt}$${'A'.repeat(43)}`, // over the memory limit
  ]) {
    t.equal(await verifyPassword('anything at all', bad).catch((e: Error) => `threw ${e.message}`), false, `unusable stored value: ${bad.slice(0, 32)}`)
  }
  // A stored hash whose last part was altered no longer verifies.
  const parts = stored.split('$')
  const key = Buffer.from(parts[5]!, 'base64url')
  key[0] = key[0]! ^ 1
  parts[5] = key.toString('base64url')
  t.equal(await verifyPassword('correct horse battery staple', parts.join('$')), false, 'tampered hash')
})

t.test('constantTimeEqual', async (t) => {
  t.equal(constantTimeEqual('abc', 'abc'), true)
  t.equal(constantTimeEqual('', ''), true)
  t.equal(constantTimeEqual('abc', 'abd'), false)
  t.equal(constantTimeEqual('abc', 'abcd'), false, 'different lengths')
  t.equal(constantTimeEqual('abcd', 'abc'), false)
  t.equal(constantTimeEqual('abc', 'abc\0'), false, 'zero padding is not equality')
  t.equal(constantTimeEqual('', '\0'), false)
  const long = 'x'.repeat(100)
  t.equal(constantTimeEqual(long, long), true, 'longer than the 32-byte floor')
  t.equal(constantTimeEqual(long, long.slice(0, 99) + 'y'), false)
  t.equal(constantTimeEqual(long, long + 'x'), false)
  t.equal(constantTimeEqual('é', 'é'), true, 'multi-byte')
  t.equal(constantTimeEqual('é', 'e'), false)
})

t.test('sha256Hex', async (t) => {
  t.equal(sha256Hex(''), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855')
  t.equal(sha256Hex('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad')
  t.equal(sha256Hex('service_mcp_x'), createHash('sha256').update('service_mcp_x').digest('hex'))
  t.match(sha256Hex('anything'), /^[0-9a-f]{64}$/)
})

t.test('newId format', async (t) => {
  const ids = Array.from({ length: 500 }, () => newId('app'))
  t.ok(ids.every((id) => /^app_[0-9a-hjkmnp-tv-z]{26}$/.test(id)), 'prefix, underscore and 26 Crockford base32 characters')
  t.equal(new Set(ids).size, ids.length, 'unique')
  t.match(newId('key'), /^key_/)
  const before = Date.now()
  const id = newId('usr')
  const after = Date.now()
  const time = decodeTime(id)
  t.ok(time >= before && time <= after, 'the first ten characters encode the creation time in ms')
  // The random part uses the whole alphabet (not stuck on a few characters).
  const randomChars = new Set(ids.flatMap((x) => [...x.slice(14)]))
  t.equal(randomChars.size, 32, 'all 32 symbols appear in the random part')
})

t.test('newId is time-ordered', async (t) => {
  const ids: string[] = []
  for (let i = 0; i < 5; i++) {
    ids.push(newId('dep'))
    const start = Date.now()
    while (Date.now() === start) await new Promise((r) => setTimeout(r, 1))
  }
  t.same([...ids].sort(), ids, 'ids created in later milliseconds sort after earlier ones')
  for (let i = 1; i < ids.length; i++) t.ok(decodeTime(ids[i]!) > decodeTime(ids[i - 1]!))
})

t.test('randomSecret and newSessionId', async (t) => {
  t.match(randomSecret(), /^[A-Za-z0-9_-]{43}$/, '32 bytes, base64url')
  t.match(randomSecret(18), /^[A-Za-z0-9_-]{24}$/)
  t.not(randomSecret(), randomSecret())
  t.match(newSessionId(), /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
})

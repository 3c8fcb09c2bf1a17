/**
 * The sign-in throttle on its own clock: free failures, then a doubling wait up to the cap, per account and per
 * address; a refused attempt is not counted; a success clears the account; concurrent attempts are counted from the
 * moment they start; old failures are forgotten and the memory is bounded.
 */
import t from 'tap'
import { clientAddressKey } from '../../src/limits/client-address.js'
import { SignInThrottle, type SignInGate } from '../../src/limits/sign-in-throttle.js'

const SETTINGS = { freeAttempts: 3, addressFreeAttempts: 5, delayMs: 1000, maxDelayMs: 8000 }

function allowed(gate: SignInGate) {
  if (!gate.allowed) throw new Error(`refused by ${gate.by} for ${gate.retryAfterMs} ms`)
  return gate.attempt
}

t.test('free failures, then a wait that doubles per failure up to the cap', async (t) => {
  const throttle = new SignInThrottle({ ...SETTINGS, addressFreeAttempts: 1000 })
  let now = 0
  for (let i = 1; i <= 3; i++) t.equal(allowed(throttle.begin('a@x', 'ip', now)).accountFailures, i, `failure ${i} is free`)
  t.strictSame(throttle.begin('a@x', 'ip', now), { allowed: false, by: 'account', retryAfterMs: 1000 }, 'the 4th attempt must wait 1 s')
  t.strictSame(throttle.begin('a@x', 'ip', now + 999), { allowed: false, by: 'account', retryAfterMs: 1 }, 'refused attempts do not extend the wait')
  const waits: number[] = []
  for (let i = 0; i < 6; i++) {
    const gate = throttle.begin('a@x', 'ip', now)
    if (gate.allowed) throw new Error('expected a wait')
    waits.push(gate.retryAfterMs)
    now += gate.retryAfterMs
    allowed(throttle.begin('a@x', 'ip', now))
  }
  t.strictSame(waits, [1000, 2000, 4000, 8000, 8000, 8000], 'each failure doubles the wait, capped at maxDelayMs')
  t.equal(throttle.begin('b@x', 'ip', now).allowed, true, 'another account is not held by this one')
})

t.test('a success clears the account, not the address', async (t) => {
  const throttle = new SignInThrottle({ ...SETTINGS, addressFreeAttempts: 6 })
  for (let i = 0; i < 3; i++) allowed(throttle.begin('a@x', 'ip', 0))
  t.equal(throttle.begin('a@x', 'ip', 0).allowed, false)
  const attempt = allowed(throttle.begin('a@x', 'ip', 1000))
  throttle.succeeded(attempt)
  for (let i = 1; i <= 3; i++) t.equal(allowed(throttle.begin('a@x', 'ip', 1000)).accountFailures, i, `after the success, free failure ${i} again`)
  // The address saw 3 + 1 + 3 attempts, the successful one forgiven: 6 failures, all its free ones.
  t.match(throttle.begin('c@x', 'ip', 1000), { allowed: false, by: 'address' }, 'the address keeps its failures')
})

t.test('per address: other accounts share its free failures', async (t) => {
  const throttle = new SignInThrottle(SETTINGS)
  for (let i = 0; i < 5; i++) allowed(throttle.begin(`user${i}@x`, '10.0.0.1', 0))
  t.strictSame(throttle.begin('fresh@x', '10.0.0.1', 0), { allowed: false, by: 'address', retryAfterMs: 1000 }, 'a 6th account from the address waits')
  t.equal(throttle.begin('fresh@x', '10.0.0.2', 0).allowed, true, 'the same account from another address does not')
  t.match(throttle.begin(null, '10.0.0.1', 0), { allowed: false, by: 'address' }, 'an attempt without an email is limited by its address')
})

t.test('the longer wait decides which one the refusal names', async (t) => {
  const throttle = new SignInThrottle({ ...SETTINGS, freeAttempts: 1, addressFreeAttempts: 2 })
  allowed(throttle.begin('a@x', 'ip', 0))
  allowed(throttle.begin('b@x', 'ip', 0))
  t.match(throttle.begin('a@x', 'ip', 0), { allowed: false, by: 'account', retryAfterMs: 1000 }, 'equal waits: the account')
  allowed(throttle.begin('c@x', 'ip2', 0))
  t.match(throttle.begin('d@x', 'ip', 500), { allowed: false, by: 'address', retryAfterMs: 500 })
})

t.test('concurrent attempts are counted when they start, before any password is checked', async (t) => {
  const throttle = new SignInThrottle(SETTINGS)
  const started = [0, 1, 2].map(() => throttle.begin('a@x', 'ip', 0))
  t.ok(started.every((g) => g.allowed), 'three in flight')
  t.equal(throttle.begin('a@x', 'ip', 0).allowed, false, 'a fourth started before any of them ended is refused')
})

t.test('failures are forgotten once the wait plus maxDelayMs has passed', async (t) => {
  const throttle = new SignInThrottle(SETTINGS)
  for (let i = 0; i < 4; i++) allowed(throttle.begin('a@x', 'ip', i * 1000))
  // 4 failures: the last at 3000 asks a 2000 ms wait; forgotten from 3000 + 2000 + 8000.
  t.equal(throttle.begin('a@x', 'ip', 12_999).allowed, true, 'still counted just before')
  throttle.sweep(100_000)
  t.strictSame(throttle.size, { accounts: 0, addresses: 0 }, 'the sweep drops forgotten keys')
  for (let i = 1; i <= 3; i++) t.equal(allowed(throttle.begin('a@x', 'ip', 100_000)).accountFailures, i, `free failure ${i} again`)
})

t.test('memory is bounded: the key with the oldest failure goes first', async (t) => {
  const throttle = new SignInThrottle({ ...SETTINGS, addressFreeAttempts: 1_000_000, maxKeys: 3 })
  for (const a of ['a', 'b', 'c']) allowed(throttle.begin(a, 'ip', 0))
  for (let i = 0; i < 2; i++) allowed(throttle.begin('a', 'ip', 0))
  t.equal(throttle.begin('a', 'ip', 0).allowed, false, 'a waits')
  allowed(throttle.begin('d', 'ip', 0))
  t.equal(throttle.size.accounts, 3, 'never more than maxKeys')
  t.equal(throttle.begin('a', 'ip', 0).allowed, false, 'a, failed most recently, is kept; b went')
})

t.test('client address keys: IPv4 as is, IPv4-mapped as IPv4, IPv6 by /64', async (t) => {
  t.equal(clientAddressKey('203.0.113.7'), '203.0.113.7')
  t.equal(clientAddressKey('::ffff:203.0.113.7'), '203.0.113.7')
  t.equal(clientAddressKey('2001:db8:1:2:3:4:5:6'), '2001:db8:1:2::/64')
  t.equal(clientAddressKey('2001:db8:1:2:ffff::1'), '2001:db8:1:2::/64', 'any address of the /64: the same key')
  t.equal(clientAddressKey('2001:DB8:0001:0002::'), '2001:db8:1:2::/64', 'case and leading zeros do not matter')
  t.equal(clientAddressKey('2001:db8::1'), '2001:db8:0:0::/64')
  t.equal(clientAddressKey('::1'), '0:0:0:0::/64')
  t.equal(clientAddressKey('fe80::1%eth0'), 'fe80:0:0:0::/64')
  t.not(clientAddressKey('2001:db8:1:3::1'), clientAddressKey('2001:db8:1:2::1'), 'another /64: another key')
})

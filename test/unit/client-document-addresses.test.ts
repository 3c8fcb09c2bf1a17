/**
 * Which addresses a client metadata document may be fetched from (src/oauth/client-documents/addresses.ts): every
 * special-purpose IPv4 range at its first, a middle and its last address, every refused IPv6 range, and each form that
 * embeds an IPv4 address (mapped, NAT64, 6to4) judged by the address it leads to. Global neighbours of each range pass,
 * so a range drawn too wide fails here as well as one drawn too narrow.
 */
import t, { type Test } from 'tap'
import { addressRefusal, ipv6Groups, isLoopbackAddress } from '../../src/oauth/client-documents/addresses.js'
import { addressRuleRefusal } from '../../src/oauth/client-documents/lookup.js'

function refused(t: Test, address: string, pattern?: RegExp): void {
  const reason = addressRefusal(address)
  t.not(reason, null, `${address} is refused${reason ? ` (${reason})` : ''}`)
  if (pattern && reason) t.match(reason, pattern)
}

function allowed(t: Test, address: string): void {
  t.equal(addressRefusal(address), null, `${address} is global`)
}

// [range, first, inside, last, what the reason says]
const IPV4_RANGES: Array<[string, string, string, string, RegExp]> = [
  ['0.0.0.0/8', '0.0.0.0', '0.1.2.3', '0.255.255.255', /this network/],
  ['10.0.0.0/8', '10.0.0.0', '10.20.30.40', '10.255.255.255', /private/],
  ['100.64.0.0/10', '100.64.0.0', '100.100.100.100', '100.127.255.255', /shared/],
  ['127.0.0.0/8', '127.0.0.0', '127.0.0.1', '127.255.255.255', /loopback/],
  ['169.254.0.0/16', '169.254.0.0', '169.254.169.254', '169.254.255.255', /link-local/],
  ['172.16.0.0/12', '172.16.0.0', '172.20.1.1', '172.31.255.255', /private/],
  ['192.0.0.0/24', '192.0.0.0', '192.0.0.170', '192.0.0.255', /IETF/],
  ['192.0.2.0/24', '192.0.2.0', '192.0.2.1', '192.0.2.255', /documentation/],
  ['192.88.99.0/24', '192.88.99.0', '192.88.99.1', '192.88.99.255', /6to4 relay/],
  ['192.168.0.0/16', '192.168.0.0', '192.168.1.1', '192.168.255.255', /private/],
  ['198.18.0.0/15', '198.18.0.0', '198.19.0.1', '198.19.255.255', /benchmarking/],
  ['198.51.100.0/24', '198.51.100.0', '198.51.100.7', '198.51.100.255', /documentation/],
  ['203.0.113.0/24', '203.0.113.0', '203.0.113.9', '203.0.113.255', /documentation/],
  ['224.0.0.0/4', '224.0.0.0', '232.1.2.3', '239.255.255.255', /multicast/],
  ['240.0.0.0/4', '240.0.0.0', '250.1.2.3', '255.255.255.254', /reserved/],
]

for (const [range, first, inside, last, what] of IPV4_RANGES) {
  t.test(`IPv4 ${range} is refused, first to last`, async (t) => {
    for (const address of [first, inside, last]) refused(t, address, what)
  })
}

t.test('255.255.255.255 (limited broadcast) is refused', async (t) => {
  refused(t, '255.255.255.255')
})

t.test('the global neighbours of the IPv4 ranges are allowed', async (t) => {
  for (const address of [
    '1.1.1.1', '8.8.8.8', '9.255.255.255', '11.0.0.0', '100.63.255.255', '100.128.0.0', '126.255.255.255', '128.0.0.0',
    '169.253.255.255', '169.255.0.0', '172.15.255.255', '172.32.0.0', '192.0.1.0', '192.0.3.0', '192.88.98.255',
    '192.88.100.0', '192.167.255.255', '192.169.0.0', '198.17.255.255', '198.20.0.0', '198.51.99.255', '198.51.101.0',
    '203.0.112.255', '203.0.114.0', '223.255.255.255', '93.184.216.34',
  ]) allowed(t, address)
})

t.test('IPv6 unspecified, loopback and IPv4-compatible (::/96) are refused', async (t) => {
  for (const address of ['::', '::1', '0:0:0:0:0:0:0:1', '::127.0.0.1', '::8.8.8.8']) refused(t, address, /outside global unicast/)
})

t.test('IPv4-mapped IPv6 (::ffff:0:0/96) is judged by its IPv4 address', async (t) => {
  refused(t, '::ffff:127.0.0.1', /IPv4-mapped loopback/)
  refused(t, '::ffff:7f00:1', /IPv4-mapped loopback/)
  refused(t, '::ffff:10.1.2.3', /IPv4-mapped private/)
  refused(t, '::ffff:169.254.169.254', /IPv4-mapped link-local/)
  refused(t, '0:0:0:0:0:ffff:c0a8:0101', /IPv4-mapped private/)
  allowed(t, '::ffff:8.8.8.8')
  allowed(t, '::ffff:808:808')
})

t.test('NAT64 64:ff9b::/96 is judged by its IPv4 address; local-use 64:ff9b:1::/48 is refused', async (t) => {
  refused(t, '64:ff9b::127.0.0.1', /NAT64 loopback/)
  refused(t, '64:ff9b::a00:1', /NAT64 private/)
  refused(t, '64:ff9b::c0a8:101', /NAT64 private/)
  allowed(t, '64:ff9b::8.8.8.8')
  allowed(t, '64:ff9b::5db8:d822')
  refused(t, '64:ff9b:1::8.8.8.8', /local-use NAT64/)
  refused(t, '64:ff9b:1:ffff::1', /local-use NAT64/)
})

t.test('6to4 2002::/16 is judged by the IPv4 address it embeds', async (t) => {
  refused(t, '2002:7f00:1::', /6to4 loopback/)
  refused(t, '2002:a00:1::1', /6to4 private/)
  refused(t, '2002:c0a8:101::1', /6to4 private/)
  refused(t, '2002:a9fe:a9fe::', /6to4 link-local/)
  allowed(t, '2002:808:808::1')
})

t.test('IPv6 special ranges are refused', async (t) => {
  refused(t, '100::', /outside global unicast/) // discard-only 100::/64
  refused(t, '100::ffff:ffff:ffff:ffff', /outside global unicast/)
  refused(t, '2001::', /IETF/) // 2001::/23, Teredo 2001::/32 included
  refused(t, '2001:0:4136:e378:8000:63bf:3fff:fdd2', /IETF/)
  refused(t, '2001:1ff:ffff::1', /IETF/)
  refused(t, '2001:db8::', /documentation/)
  refused(t, '2001:db8:ffff:ffff:ffff:ffff:ffff:ffff', /documentation/)
  refused(t, '3fff::1', /documentation/)
  refused(t, 'fc00::1', /outside global unicast/) // unique local fc00::/7
  refused(t, 'fd12:3456:789a::1', /outside global unicast/)
  refused(t, 'fe80::1', /outside global unicast/) // link-local fe80::/10
  refused(t, 'febf:ffff::1', /outside global unicast/)
  refused(t, 'fe80::1%eth0', /outside global unicast/)
  refused(t, 'fec0::1', /outside global unicast/) // site-local fec0::/10
  refused(t, 'ff02::1', /outside global unicast/) // multicast ff00::/8
  refused(t, 'ff0e::1', /outside global unicast/)
  refused(t, '4000::1', /outside global unicast/) // unallocated: refused unless global unicast
})

t.test('global IPv6 unicast next to the refused ranges is allowed', async (t) => {
  for (const address of ['2001:200::1', '2001:4860:4860::8888', '2001:db7:ffff::1', '2001:db9::1', '2606:4700:4700::1111', '2a00:1450:4001::1', '3ffe::1', '3fff:1000::1']) {
    allowed(t, address)
  }
})

t.test('what is not an IP address is refused', async (t) => {
  for (const address of ['', 'localhost', '127.1', '0x7f.0.0.1', '2130706433', '1.2.3', '::ffff:1.2.3.999', '[::1]']) refused(t, address, /not an IP/)
})

t.test('ipv6Groups expands every spelling to eight groups', async (t) => {
  t.same(ipv6Groups('::'), [0, 0, 0, 0, 0, 0, 0, 0])
  t.same(ipv6Groups('1::'), [1, 0, 0, 0, 0, 0, 0, 0])
  t.same(ipv6Groups('::ffff:1.2.3.4'), [0, 0, 0, 0, 0, 0xffff, 0x102, 0x304])
  t.same(ipv6Groups('2001:DB8:0:0:1::1'), [0x2001, 0xdb8, 0, 0, 1, 0, 0, 1])
  t.equal(ipv6Groups('1.2.3.4'), null)
})

t.test('the loopback rule (unsafe loopback hosts) allows loopback only, never a private range', async (t) => {
  for (const address of ['127.0.0.1', '127.8.9.10', '::1', '::ffff:127.0.0.1']) {
    t.ok(isLoopbackAddress(address), `${address} is loopback`)
    t.equal(addressRuleRefusal(address, 'loopback'), null)
    t.not(addressRuleRefusal(address, 'global'), null, `${address} stays refused under the global rule`)
  }
  for (const address of ['10.0.0.1', '192.168.1.1', '169.254.169.254', 'fd00::1', 'fe80::1', '::', '0.0.0.0', '8.8.8.8', '::2']) {
    t.notOk(isLoopbackAddress(address), `${address} is not loopback`)
    t.match(addressRuleRefusal(address, 'loopback'), /not a loopback address/)
  }
})

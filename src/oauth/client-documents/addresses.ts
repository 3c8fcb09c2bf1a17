import { isIPv4, isIPv6 } from 'node:net'

/**
 * Which network addresses a client metadata document may be fetched from (docs/decisions/client-metadata-documents.md):
 * globally reachable unicast ones only. IPv4 is refused by a list of the special-purpose ranges (most of IPv4 is
 * global); IPv6 is refused unless it is in 2000::/3, the global unicast block, and outside that block's special ranges,
 * so a range we forgot is refused rather than fetched. Addresses that embed an IPv4 address (mapped, NAT64, 6to4) are
 * judged by the IPv4 address they lead to.
 *
 * The reasons are for the log, never sent to the client.
 */

/** [first address, prefix length, what it is], IANA's IPv4 special-purpose registry and multicast. */
const IPV4_REFUSED: ReadonlyArray<readonly [string, number, string]> = [
  ['0.0.0.0', 8, 'this network'],
  ['10.0.0.0', 8, 'private'],
  ['100.64.0.0', 10, 'shared address space (CGNAT)'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local'],
  ['172.16.0.0', 12, 'private'],
  ['192.0.0.0', 24, 'IETF protocol assignments'],
  ['192.0.2.0', 24, 'documentation'],
  ['192.88.99.0', 24, '6to4 relay anycast'],
  ['192.168.0.0', 16, 'private'],
  ['198.18.0.0', 15, 'benchmarking'],
  ['198.51.100.0', 24, 'documentation'],
  ['203.0.113.0', 24, 'documentation'],
  ['224.0.0.0', 4, 'multicast'],
  // 240.0.0.0/4 holds 255.255.255.255 (limited broadcast) too.
  ['240.0.0.0', 4, 'reserved'],
]

const IPV4_RANGES = IPV4_REFUSED.map(([first, bits, what]) => {
  const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0
  return { base: (ipv4Number(first)! & mask) >>> 0, mask, what }
})

/** The address as an unsigned 32-bit number; null unless it is dotted decimal. */
function ipv4Number(address: string): number | null {
  if (!isIPv4(address)) return null
  return address.split('.').reduce((n, octet) => n * 256 + Number(octet), 0)
}

function ipv4Refusal(n: number): string | null {
  for (const range of IPV4_RANGES) {
    if (((n & range.mask) >>> 0) === range.base) return `${range.what} IPv4 address`
  }
  return null
}

/** The eight 16-bit groups of an IPv6 address (a zone such as `%eth0` dropped); null when it is none. */
export function ipv6Groups(address: string): number[] | null {
  const bare = address.replace(/%.*$/, '')
  if (!isIPv6(bare)) return null
  let text = bare.toLowerCase()
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text)
  if (dotted) {
    const n = ipv4Number(dotted[1]!)
    if (n === null) return null
    text = `${text.slice(0, dotted.index)}${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`
  }
  const [head = '', tail] = text.split('::')
  const left = head === '' ? [] : head.split(':')
  const right = tail === undefined || tail === '' ? [] : tail.split(':')
  const missing = 8 - left.length - right.length
  const groups = [...left, ...Array.from({ length: tail === undefined ? 0 : missing }, () => '0'), ...right]
  return groups.length === 8 ? groups.map((g) => parseInt(g, 16)) : null
}

function embeddedIPv4(high: number, low: number): number {
  return (high * 65536 + low) >>> 0
}

function ipv6Refusal(g: number[]): string | null {
  const [g0 = 0, g1 = 0, g2 = 0, g3 = 0, g4 = 0, g5 = 0, g6 = 0, g7 = 0] = g
  // ::ffff:a.b.c.d reaches a.b.c.d.
  if (g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0xffff) {
    const refusal = ipv4Refusal(embeddedIPv4(g6, g7))
    return refusal && `IPv4-mapped ${refusal}`
  }
  if (g0 === 0x64 && g1 === 0xff9b) {
    // 64:ff9b::/96 is NAT64's well-known prefix: an IPv6-only host reaches every IPv4 server through it (DNS64).
    if (g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) {
      const refusal = ipv4Refusal(embeddedIPv4(g6, g7))
      return refusal && `NAT64 ${refusal}`
    }
    // 64:ff9b:1::/48 is for translators inside one network (RFC 8215): never a public server.
    if (g2 === 1) return 'local-use NAT64 address'
  }
  if ((g0 & 0xe000) !== 0x2000) return 'IPv6 address outside global unicast (2000::/3)'
  if (g0 === 0x2001 && g1 === 0x0db8) return 'documentation IPv6 address'
  if (g0 === 0x2001 && g1 < 0x0200) return 'IETF protocol assignment IPv6 address (2001::/23, Teredo included)'
  if (g0 === 0x2002) {
    // 6to4 tunnels to the IPv4 address in bits 16-47.
    const refusal = ipv4Refusal(embeddedIPv4(g1, g2))
    return refusal && `6to4 ${refusal}`
  }
  if (g0 === 0x3fff && g1 < 0x1000) return 'documentation IPv6 address'
  return null
}

/** Why the address may not be fetched from; null when it is global. Anything that is not an IP address is refused. */
export function addressRefusal(address: string): string | null {
  const v4 = ipv4Number(address)
  if (v4 !== null) return ipv4Refusal(v4)
  const v6 = ipv6Groups(address)
  if (v6 !== null) return ipv6Refusal(v6)
  return 'not an IP address'
}

/** True for 127.0.0.0/8, ::1 and ::ffff:127.0.0.0/104: what an unsafe loopback host may be fetched from. */
export function isLoopbackAddress(address: string): boolean {
  const v4 = ipv4Number(address)
  if (v4 !== null) return v4 >>> 24 === 127
  const g = ipv6Groups(address)
  if (g === null) return false
  const zeros = (n: number) => g.slice(0, n).every((x) => x === 0)
  if (zeros(7) && g[7] === 1) return true
  return zeros(5) && g[5] === 0xffff && (g[6]! >>> 8) === 127
}

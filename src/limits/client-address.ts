import { isIPv4, isIPv6 } from 'node:net'

/**
 * The key of a client address for per-address limits: IPv4 as is (an IPv4-mapped IPv6 address as its IPv4), IPv6 by
 * its /64 prefix, since one subscriber usually holds a whole /64 and could otherwise rotate through it.
 */
export function clientAddressKey(ip: string): string {
  const bare = ip.split('%')[0] ?? ip
  if (isIPv4(bare)) return bare
  if (!isIPv6(bare)) return bare
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(bare)
  if (mapped && isIPv4(mapped[1]!)) return mapped[1]!
  return `${ipv6Groups(bare).slice(0, 4).join(':')}::/64`
}

/** The eight 16-bit groups of a valid IPv6 address, lower-case hex without leading zeros. */
function ipv6Groups(ip: string): string[] {
  let text = ip.toLowerCase()
  // A trailing dotted quad stands for the last two groups.
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text)
  if (quad) {
    const [a, b, c, d] = quad.slice(1).map(Number) as [number, number, number, number]
    text = text.slice(0, quad.index) + `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const [head = '', tail] = text.split('::')
  const left = head === '' ? [] : head.split(':')
  const right = tail === undefined || tail === '' ? [] : tail.split(':')
  const zeros = tail === undefined ? [] : Array<string>(8 - left.length - right.length).fill('0')
  return [...left, ...zeros, ...right].map((g) => parseInt(g, 16).toString(16))
}

import type { Config } from '../config.js'

/**
 * The one answer to "does this request name us": which browser origins count as the base address's, which are allowed
 * on /mcp besides, and which Host values name this server (docs/decisions/http-errors.md, "Origins and hosts").
 *
 * When the base address's host is a loopback name, every loopback name with the same scheme and port counts as the
 * base origin: the server is reached as `localhost` as often as by the IP address it prints, and a browser or client
 * that typed the other one is the same person on the same machine. The set is exactly the three names below: other
 * addresses of 127.0.0.0/8 reach only a server listening on them, and a name that merely starts like one
 * (`localhost.evil.example`, `127.0.0.1.nip.io`) is a DNS name anyone can point at 127.0.0.1, which is what a DNS
 * rebinding attack does. Values are compared as the URL standard parses them (case, a default port, the spellings of
 * an IP address), never as strings put together.
 */
export const LOOPBACK_NAMES: readonly string[] = ['localhost', '127.0.0.1', '[::1]']

/** An Origin header is `scheme://host[:port]` and nothing more (RFC 6454 §7): no path, query, fragment or userinfo. */
const ORIGIN_SHAPE = /^[a-z][a-z0-9+.-]*:\/\/[^/?#@\\\s]+$/i
/** A Host header is `host[:port]` (RFC 9110 §7.2). */
const HOST_SHAPE = /^[^/?#@\\\s]+$/

export class OwnOrigins {
  /** The base origin and, for a loopback base address, its loopback aliases (serialized origins). */
  readonly #base: ReadonlySet<string>
  /** The base ones and SERVICE_ALLOWED_ORIGINS. */
  readonly #allowed: ReadonlySet<string>
  /** The Host values that name this server; null when the base address is not loopback, and Host is not checked. */
  readonly #hosts: ReadonlySet<string> | null
  readonly #scheme: string

  constructor(baseOrigin: string, allowedOrigins: readonly string[]) {
    const base = new URL(baseOrigin)
    this.#scheme = base.protocol
    const loopback = LOOPBACK_NAMES.includes(base.hostname)
    const names = loopback ? LOOPBACK_NAMES : [base.hostname]
    const bases = names.map((name) => {
      const u = new URL(base.origin)
      u.hostname = name
      return u
    })
    this.#base = new Set(bases.map((u) => u.origin))
    // Entries were checked at start to be serialized origins (config.ts); parsed again so that they compare alike.
    this.#allowed = new Set([...this.#base, ...allowedOrigins.map((o) => originOf(o) ?? o)])
    // A public base address sits behind a proxy or a name the operator chose; the Host it forwards is its business
    // (and nothing changes there). A loopback one is what DNS rebinding reaches, by a name that is not ours.
    this.#hosts = loopback ? new Set(bases.map((u) => u.host)) : null
  }

  /** True when `origin` (an Origin header) is the base address's own: the same site as the pages. */
  isBase(origin: string): boolean {
    // Browsers send the serialized origin: an exact match needs no parse (this runs on every request).
    if (this.#base.has(origin)) return true
    const parsed = originOf(origin)
    return parsed !== null && this.#base.has(parsed)
  }

  /** True when `origin` may call /mcp: the base address's, or listed in SERVICE_ALLOWED_ORIGINS. */
  isAllowed(origin: string): boolean {
    if (this.#allowed.has(origin)) return true
    const parsed = originOf(origin)
    return parsed !== null && this.#allowed.has(parsed)
  }

  /** True when `host` (a Host header) names this server; always for a public base address, or when there is none. */
  acceptsHost(host: string | undefined): boolean {
    if (this.#hosts === null || host === undefined || this.#hosts.has(host)) return true
    const parsed = hostOf(host, this.#scheme)
    return parsed !== null && this.#hosts.has(parsed)
  }
}

/** The serialized origin of an Origin header's value; null when it is no http(s) origin (`null` included). */
function originOf(value: string): string | null {
  if (!ORIGIN_SHAPE.test(value)) return null
  let url: URL
  try {
    url = new URL(value)
  } catch {
    return null
  }
  return url.protocol === 'http:' || url.protocol === 'https:' ? url.origin : null
}

/**
 * The `host[:port]` of a Host header, read with the base address's scheme so that its default port drops; null when
 * the value is none.
 */
function hostOf(value: string, scheme: string): string | null {
  if (!HOST_SHAPE.test(value)) return null
  try {
    return new URL(`${scheme}//${value}`).host
  } catch {
    return null
  }
}

/**
 * Built once per configuration and base origin: a default base address follows the port the server got
 * (config.ts adoptListeningPort), so the origins are read at request time, not at start.
 */
const built = new WeakMap<object, { baseOrigin: string; allowedOrigins: readonly string[]; own: OwnOrigins }>()

/** The origins and hosts of this configuration as it is now. */
export function ownOrigins(config: Pick<Config, 'baseOrigin' | 'allowedOrigins'>): OwnOrigins {
  const known = built.get(config)
  if (known !== undefined && known.baseOrigin === config.baseOrigin && known.allowedOrigins === config.allowedOrigins) return known.own
  const own = new OwnOrigins(config.baseOrigin, config.allowedOrigins)
  built.set(config, { baseOrigin: config.baseOrigin, allowedOrigins: config.allowedOrigins, own })
  return own
}

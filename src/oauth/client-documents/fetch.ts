import type { IncomingHttpHeaders, IncomingMessage } from 'node:http'
import { request } from 'node:https'
import { isIP, type Socket } from 'node:net'
import type { Clock } from '../../lib/clock.js'
import { AddressRefused, addressRuleRefusal, guardedLookup, type AddressRule, type HostResolver } from './lookup.js'

/**
 * One GET of a client metadata document, safe by construction (docs/decisions/client-metadata-documents.md): https
 * only, the address checked in the socket's own lookup (and again once connected), no redirects, status 200 and
 * `application/json` only, a body cap counted while the body arrives, and one deadline for all of it (lookup,
 * connection, TLS, headers, body) on the server's clock.
 */

export interface FetchSettings {
  timeoutMs: number
  maxBytes: number
  userAgent: string
  clock: Clock
  resolve: HostResolver
  rule: AddressRule
  /** Trust for a test's certificate authority (in-process tests); otherwise Node's roots and NODE_EXTRA_CA_CERTS. */
  ca?: string | Buffer | Array<string | Buffer>
}

export interface FetchedDocument {
  body: string
  headers: IncomingHttpHeaders
}

/** Why a fetch gave nothing usable: `description` is for error_description, the message (with its cause) for the log. */
export class FetchRefused extends Error {
  override name = 'FetchRefused'

  constructor(readonly description: string, detail?: string, options?: { cause?: unknown }) {
    super(detail === undefined ? description : `${description}: ${detail}`, options)
  }
}

export function fetchDocument(url: URL, settings: FetchSettings): Promise<FetchedDocument> {
  // net.connect skips the lookup for an IP literal, so the literal is judged here (and again at connect).
  const hostname = url.hostname.replace(/^\[(.*)\]$/, '$1')
  if (isIP(hostname) !== 0) {
    const refusal = addressRuleRefusal(hostname, settings.rule)
    if (refusal !== null) return Promise.reject(addressRefused(new AddressRefused(`${hostname}: ${refusal}`)))
  }
  return new Promise((resolve, reject) => {
    let settled = false
    const finish = (outcome: FetchRefused | FetchedDocument) => {
      if (settled) return
      settled = true
      settings.clock.clearTimer(timer)
      if (outcome instanceof FetchRefused) {
        req.destroy()
        reject(outcome)
      } else {
        resolve(outcome)
      }
    }
    const req = request({
      hostname,
      port: url.port === '' ? 443 : Number(url.port),
      path: url.pathname,
      method: 'GET',
      headers: { accept: 'application/json', 'user-agent': settings.userAgent, 'accept-encoding': 'identity' },
      // A socket of its own, whose lookup is ours: a pooled one could have been connected under other rules.
      agent: false,
      lookup: guardedLookup(settings.resolve, settings.rule),
      ...(settings.ca !== undefined ? { ca: settings.ca } : {}),
    })
    const timer = settings.clock.setTimeout(() => finish(new FetchRefused('client metadata document fetch timed out', `after ${settings.timeoutMs} ms`)), settings.timeoutMs)
    req.on('socket', (socket: Socket) => {
      socket.once('connect', () => {
        // The lookup already judged this address; checking what the socket really reached costs nothing.
        const refusal = addressRuleRefusal(socket.remoteAddress ?? '', settings.rule)
        if (refusal !== null) finish(addressRefused(new AddressRefused(`connected to ${socket.remoteAddress ?? 'no address'}: ${refusal}`)))
      })
    })
    req.on('error', (err) => finish(asRefusal(err)))
    req.on('response', (res) => {
      const refusal = responseRefusal(res, settings.maxBytes)
      if (refusal !== null) {
        finish(refusal)
        return
      }
      readBody(res, settings.maxBytes, finish)
    })
    req.end()
  })
}

/** The status and headers' verdict, before any of the body is read. */
function responseRefusal(res: IncomingMessage, maxBytes: number): FetchRefused | null {
  const status = res.statusCode ?? 0
  if (status >= 300 && status < 400) {
    return new FetchRefused(`client metadata document fetch was redirected (HTTP ${status}); redirects are not followed`)
  }
  if (status !== 200) return new FetchRefused(`client metadata document fetch answered HTTP ${status}, not 200`)
  const type = (res.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase()
  if (type !== 'application/json') return new FetchRefused('client metadata document must be served as application/json')
  const declared = res.headers['content-length']
  if (declared !== undefined && Number(declared) > maxBytes) return tooLarge(maxBytes, `declared ${declared} bytes`)
  return null
}

function readBody(res: IncomingMessage, maxBytes: number, finish: (outcome: FetchRefused | FetchedDocument) => void): void {
  const chunks: Buffer[] = []
  let received = 0
  res.on('data', (chunk: Buffer) => {
    received += chunk.length
    // Counted as it arrives: a body without Content-Length, or with a false one, stops here.
    if (received > maxBytes) finish(tooLarge(maxBytes, `more than ${maxBytes} bytes arrived`))
    else chunks.push(chunk)
  })
  res.on('end', () => finish({ body: Buffer.concat(chunks).toString('utf8'), headers: res.headers }))
  res.on('error', (err) => finish(asRefusal(err)))
  res.on('aborted', () => finish(new FetchRefused('client metadata document fetch failed', 'the connection closed before the body ended')))
}

function tooLarge(maxBytes: number, detail: string): FetchRefused {
  return new FetchRefused(`client metadata document is larger than ${maxBytes} bytes`, detail)
}

function addressRefused(err: AddressRefused): FetchRefused {
  return new FetchRefused('client metadata document host resolves to an address that is not publicly routable', err.message, { cause: err })
}

const TLS_FAILURE = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|HOSTNAME_MISMATCH)/

/** A socket or TLS error as the refusal the client reads. */
function asRefusal(err: unknown): FetchRefused {
  if (err instanceof FetchRefused) return err
  if (err instanceof AddressRefused) return addressRefused(err)
  const code = String((err as NodeJS.ErrnoException | undefined)?.code ?? '')
  const detail = err instanceof Error ? err.message : String(err)
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return new FetchRefused('client metadata document host name does not resolve', detail, { cause: err })
  if (TLS_FAILURE.test(code)) return new FetchRefused('client metadata document host did not present a valid TLS certificate', detail, { cause: err })
  return new FetchRefused('client metadata document could not be fetched', detail, { cause: err })
}

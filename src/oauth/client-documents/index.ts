import type { FastifyBaseLogger } from 'fastify'
import type { Config } from '../../config.js'
import { fail } from '../../errors/service-error.js'
import type { Clock } from '../../lib/clock.js'
import { clientDocumentFetches } from '../../limits/named.js'
import type { LimitsStore } from '../../limits/store.js'
import { SERVER_NAME, SERVER_VERSION } from '../../version.js'
import { ExpiringLru } from './cache.js'
import { checkDocument, type ClientDocument } from './document.js'
import { fetchDocument, FetchRefused } from './fetch.js'
import { freshnessMs } from './freshness.js'
import { systemResolver, type HostResolver } from './lookup.js'
import { addressRule, policyRefusal } from './policy.js'
import { checkDocumentUrl, isDocumentUrl } from './url.js'

/**
 * Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document; docs/decisions/client-metadata-documents.md):
 * a client whose `client_id` is an https URL is described by the JSON document at that URL. This module decides
 * whether such an id may be used and what client it names; /oauth/authorize and /oauth/token ask it. Every refusal is
 * `invalid_client` (OAUTH_INVALID_CLIENT) with an error_description saying why.
 *
 * A resolve runs: the operator's policy (every time, cached documents too) → the URL's form → the cache (documents,
 * and refusals kept briefly) → one fetch per URL at a time, counted against the host's fetch limit → the document's
 * checks → the cache.
 */

export type { ClientDocument } from './document.js'
export { isDocumentUrl } from './url.js'

export interface ClientDocumentResolver {
  /**
   * True when the client_id is meant as a metadata-document URL (it starts with "https://", any case, or "http://"):
   * such ids never go to the registered-client table. Cheap, synchronous, no policy.
   */
  isDocumentUrl(clientId: string): boolean
  /** The validated document, from the cache or fetched now; a ServiceError OAUTH_INVALID_CLIENT saying why not. */
  resolve(clientId: string): Promise<ClientDocument>
}

export interface ClientDocumentDeps {
  config: Config
  clock: Clock
  limits: LimitsStore
  log?: FastifyBaseLogger
  /** Name resolution for the fetch's socket (tests answer what they need); the system's by default. */
  resolveHost?: HostResolver
  /** Certificate authorities to trust instead of Node's (in-process tests with test/fixtures/tls). */
  ca?: string | Buffer | Array<string | Buffer>
}

/**
 * What one URL resolved to: a document, or the reason it cannot be used (`cache`: whether to remember the reason; a
 * rate limit's refusal is not, so the first fetch after its window is not delayed).
 */
type Outcome = { ok: true; document: ClientDocument } | { ok: false; reason: string; cache: boolean; retryAfter?: number }

const USER_AGENT = `${SERVER_NAME}/${SERVER_VERSION} (OAuth client metadata document fetcher)`

export function clientDocumentResolver(deps: ClientDocumentDeps): ClientDocumentResolver {
  const { config, clock, limits, log } = deps
  const cache = new ExpiringLru<Outcome>(config.clientDocumentCacheEntries, clock)
  const inFlight = new Map<string, Promise<Outcome>>()
  const resolveHost = deps.resolveHost ?? systemResolver

  if (config.clientDocumentsUnsafeLoopbackHosts.length > 0) {
    log?.warn(
      { hosts: config.clientDocumentsUnsafeLoopbackHosts },
      'SERVICE_CLIENT_DOCUMENTS_UNSAFE_LOOPBACK_HOSTS is set: client metadata documents of these hosts are fetched from loopback addresses. This is for tests only; never set it on a server others use',
    )
  }

  async function fetchAndCheck(url: URL): Promise<Outcome> {
    const window = clientDocumentFetches(config)
    const decision = await limits.count(window, url.host)
    if (!decision.allowed) {
      const refusal = window.refusal(decision)
      return { ok: false, reason: refusal.message, cache: false, ...(refusal.retryAfter !== undefined ? { retryAfter: refusal.retryAfter } : {}) }
    }
    try {
      const fetched = await fetchDocument(url, {
        timeoutMs: config.clientDocumentTimeoutMs,
        maxBytes: config.clientDocumentMaxBytes,
        userAgent: USER_AGENT,
        clock,
        resolve: resolveHost,
        rule: addressRule(config, url),
        ...(deps.ca !== undefined ? { ca: deps.ca } : {}),
      })
      const checked = checkDocument(fetched.body, url, { privateSchemes: config.redirectSchemes })
      if (!checked.ok) return { ok: false, reason: checked.reason, cache: true }
      const ttl = freshnessMs(fetched.headers, clock.now(), { minMs: config.clientDocumentCacheMinMs, maxMs: config.clientDocumentCacheMaxMs })
      cache.set(url.href, { ok: true, document: checked.document }, ttl)
      return { ok: true, document: checked.document }
    } catch (err) {
      if (!(err instanceof FetchRefused)) throw err
      log?.info({ host: url.host, err: err.message }, 'client metadata document fetch refused')
      return { ok: false, reason: err.description, cache: true }
    }
  }

  /** The shared fetch of `url`: concurrent resolves of one URL wait for the same one. */
  function fetchOnce(url: URL): Promise<Outcome> {
    const key = url.href
    let pending = inFlight.get(key)
    if (pending === undefined) {
      pending = fetchAndCheck(url).then((outcome) => {
        if (!outcome.ok && outcome.cache) cache.set(key, outcome, config.clientDocumentFailureCacheMs)
        return outcome
      }).finally(() => inFlight.delete(key))
      inFlight.set(key, pending)
    }
    return pending
  }

  return {
    isDocumentUrl,
    async resolve(clientId) {
      const early = policyRefusal(config, null)
      if (early !== null) refuse(early)
      const checked = checkDocumentUrl(clientId)
      if (!checked.ok) refuse(checked.reason)
      const { url } = checked
      const notAllowed = policyRefusal(config, url)
      if (notAllowed !== null) refuse(notAllowed)
      const outcome = cache.get(url.href) ?? (await fetchOnce(url))
      if (!outcome.ok) refuse(outcome.reason, outcome.retryAfter)
      // A copy: the cached document is shared by every request that resolves the URL.
      const { document } = outcome
      return { ...document, redirectUris: [...document.redirectUris], grantTypes: [...document.grantTypes] }
    },
  }
}

/** Each refusal is a new error: the outcome behind it may be shared by concurrent resolves and the cache. */
function refuse(reason: string, retryAfter?: number): never {
  fail('OAUTH_INVALID_CLIENT', { message: reason, ...(retryAfter !== undefined ? { retryAfter } : {}) })
}

import type { Config } from '../../config.js'
import type { AddressRule } from './lookup.js'

/**
 * The operator's word on client metadata documents (docs/decisions/client-metadata-documents.md), asked on every
 * resolve, a cached document included: SERVICE_CLIENT_DOCUMENTS (`all`, `listed`, `off`) with
 * SERVICE_CLIENT_DOCUMENT_HOSTS, and the test-only SERVICE_CLIENT_DOCUMENTS_UNSAFE_LOOPBACK_HOSTS.
 */

type PolicySettings = Pick<Config, 'clientDocuments' | 'clientDocumentHosts' | 'clientDocumentsUnsafeLoopbackHosts'>

/** Why the policy refuses the document at `url`; null when it may be resolved. */
export function policyRefusal(config: PolicySettings, url: URL | null): string | null {
  if (config.clientDocuments === 'off') {
    return 'this server does not accept client metadata documents (client_id URLs); register the client at /oauth/register'
  }
  if (url !== null && config.clientDocuments === 'listed' && !config.clientDocumentHosts.includes(url.host)) {
    return 'client_id URL host is not one of the client metadata document hosts this server allows'
  }
  return null
}

/** The addresses the URL's host may be fetched from: loopback ones for a listed unsafe name, else global ones. */
export function addressRule(config: PolicySettings, url: URL): AddressRule {
  return config.clientDocumentsUnsafeLoopbackHosts.includes(url.hostname) ? 'loopback' : 'global'
}

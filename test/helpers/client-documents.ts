/**
 * A test double of the Client ID Metadata Document resolver (src/oauth/client-documents/index.ts), for tests of what
 * the authorization server does with a document. It serves the documents a test puts in `documents` (no network, no
 * fetcher), refuses every other URL with the catalog's invalid_client, and can be made to refuse everything, as the
 * real resolver does once the operator's policy no longer allows a host. Tests only: the real resolver is the safe
 * fetcher.
 */
import { ServiceError } from '../../src/errors/service-error.js'
import type { ClientDocument, ClientDocumentResolver } from '../../src/oauth/client-documents/index.js'
import type { RegisteredClient } from './oauth.js'

export class DocumentsDouble implements ClientDocumentResolver {
  readonly documents = new Map<string, ClientDocument>()
  /** Every URL resolve() was asked for, in order. */
  readonly asked: string[] = []
  /** When set, every resolve() is refused with this description (a policy that stopped allowing the client). */
  refusing: string | undefined

  isDocumentUrl(clientId: string): boolean {
    return /^https?:\/\//i.test(clientId)
  }

  async resolve(clientId: string): Promise<ClientDocument> {
    this.asked.push(clientId)
    if (this.refusing !== undefined) throw new ServiceError('OAUTH_INVALID_CLIENT', { message: this.refusing })
    const document = this.documents.get(clientId)
    if (!document) throw new ServiceError('OAUTH_INVALID_CLIENT', { message: 'The client metadata document could not be fetched: HTTP 404' })
    return document
  }

  /** Serves a document for `clientId` (its host taken from the URL) and returns it as the flow helpers' client. */
  serve(clientId: string, fields: Partial<Omit<ClientDocument, 'clientId' | 'host'>> = {}): RegisteredClient {
    const document: ClientDocument = {
      clientId,
      host: new URL(clientId).host,
      clientName: 'Claude',
      redirectUris: ['http://127.0.0.1:9999/callback'],
      grantTypes: ['authorization_code', 'refresh_token'],
      scope: 'mcp:read mcp:write',
      ...fields,
    }
    this.documents.set(clientId, document)
    return { client_id: clientId, redirect_uris: document.redirectUris, grant_types: document.grantTypes, scope: document.scope }
  }
}

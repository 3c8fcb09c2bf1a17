import type { FastifyBaseLogger } from 'fastify'
import type { Repos, TxRepos } from '../db/repos/index.js'
import type { DocumentClientChange, OAuthClient } from '../db/repos/oauth-clients.js'
import { fail } from '../errors/service-error.js'
import type { Clock } from '../lib/clock.js'
import type { ClientDocument, ClientDocumentResolver } from './client-documents/index.js'

const HTTPS_URL = /^https:\/\//i

/**
 * Clients identified by a Client ID Metadata Document, as the authorization server's endpoints use them
 * (docs/decisions/oauth.md, "Client ID Metadata Documents"). The resolver fetches, checks and caches the document and
 * applies the operator's policy; this module decides what the endpoints do with it: refuse an `http` URL, keep the
 * client's row in step with its document, and resolve the document again on every use of the client.
 */
export class DocumentClients {
  readonly #resolver: ClientDocumentResolver
  readonly #repos: Repos
  readonly #clock: Clock
  readonly #log: FastifyBaseLogger

  constructor(o: { resolver: ClientDocumentResolver; repos: Repos; clock: Clock; log: FastifyBaseLogger }) {
    this.#resolver = o.resolver
    this.#repos = o.repos
    this.#clock = o.clock
    this.#log = o.log
  }

  /** True when `clientId` names a document (a URL) rather than a registered client (`mcp_…`). */
  isDocumentUrl(clientId: string): boolean {
    return this.#resolver.isDocumentUrl(clientId)
  }

  /**
   * The client's checked document, or a ServiceError (`invalid_client`) saying why not. An `http` URL is refused here,
   * whatever the resolver would do: a document anyone on the path can rewrite identifies nobody.
   */
  async document(clientId: string): Promise<ClientDocument> {
    requireHttps(clientId)
    return this.#resolver.resolve(clientId)
  }

  /**
   * Creates or updates the client's row from its document, in the caller's transaction `tx` (GET /oauth/authorize
   * parks its request in the same one). Call `announce` with the change once the transaction has committed.
   */
  async save(tx: TxRepos, document: ClientDocument): Promise<{ client: OAuthClient; change: DocumentClientChange }> {
    return tx.oauthClients.saveDocument(rowFields(document), this.#clock.now())
  }

  /** The operator hears of a client first seen, or of a document that changed (name, redirect URIs, grants, scope). */
  announce(change: DocumentClientChange, document: ClientDocument, log: FastifyBaseLogger = this.#log): void {
    if (change === 'same') return
    const entry = { client: document.clientId, host: document.host, name: document.clientName, redirectUris: document.redirectUris }
    log.info(entry, change === 'new' ? 'OAuth client first seen through its metadata document' : 'OAuth client metadata document changed: the client is updated')
  }

  /**
   * The client of a token or revocation request. Its row must exist: only /oauth/authorize creates it, so a URL that
   * never authorized anything is refused before any fetch (the token endpoint has no rate limit of its own, and must
   * not make this server fetch URLs for anyone). Then the document is resolved again, so the policy and the cache
   * decide on every use (a host dropped from the allow list stops its refreshes), and the row follows the document.
   */
  async forToken(clientId: string, log?: FastifyBaseLogger): Promise<OAuthClient> {
    requireHttps(clientId)
    const row = await this.#repos.oauthClients.byId(clientId)
    if (!row || row.source !== 'metadata_document') {
      throw fail('OAUTH_INVALID_CLIENT', { message: 'Unknown client_id: no authorization was ever started with this metadata document here; start at the authorization endpoint' })
    }
    const document = await this.document(clientId)
    const { client, change } = await this.#repos.oauthClients.saveDocument(rowFields(document), this.#clock.now())
    this.announce(change, document, log)
    return client
  }
}

function requireHttps(clientId: string): void {
  if (!HTTPS_URL.test(clientId)) {
    throw fail('OAUTH_INVALID_CLIENT', { message: 'client_id is an http URL: a client metadata document must be served over https, so client_id must start with https://' })
  }
}

/** The host a document client is shown by (the verified part of its identity); undefined for a registered client. */
export function documentHost(client: Pick<OAuthClient, 'id' | 'source'>): string | undefined {
  if (client.source !== 'metadata_document') return undefined
  try {
    return new URL(client.id).host
  } catch {
    return client.id
  }
}

function rowFields(document: ClientDocument) {
  return { id: document.clientId, name: document.clientName, redirectUris: document.redirectUris, grantTypes: document.grantTypes, scope: document.scope }
}

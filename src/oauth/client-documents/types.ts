import type { GrantType } from '../client-metadata.js'
export interface ClientDocument {
  clientId: string        // the document URL, exactly as the client sent it
  host: string            // the URL's host as shown to people (lowercase; with :port when not 443)
  clientName: string      // checked like registration's client_name; the host when the document has none
  redirectUris: string[]  // checked by checkRedirectUri, same rules as registration
  grantTypes: GrantType[]
  scope: string           // as registration (default: both scopes)
}
export interface ClientDocumentResolver {
  /** True when the client_id is meant as a metadata-document URL (starts with https:// or http://, any case). */
  isDocumentUrl(clientId: string): boolean
  /** The validated document (cached or fetched now), or throws a ServiceError rendered as OAuth `invalid_client`
   *  (description says why: policy off, host not listed, fetch failed, invalid document, ...). Policy is checked on
   *  every call. */
  resolve(clientId: string): Promise<ClientDocument>
}

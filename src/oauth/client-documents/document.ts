import { checkRegistration, type GrantType } from '../client-metadata.js'

/**
 * A fetched client metadata document's content (docs/decisions/client-metadata-documents.md): a JSON object whose
 * `client_id` is the URL it came from, character for character; a public client (no secret, no authentication method
 * but `none`); and otherwise the fields registration accepts, checked by registration's own rules (client-metadata.ts),
 * so a client is held to the same redirect URI, grant type, scope and name rules however it identifies itself.
 * Key material (`jwks`, `jwks_uri`) and display URLs are ignored: a `none` client signs nothing, and the consent page
 * shows the document's host, not links the document chose.
 *
 * Reasons go into error_description: plain ASCII, naming fields and indexes, never repeating the document.
 */

export interface ClientDocument {
  /** The document URL, exactly as the client sent it. */
  clientId: string
  /** The URL's host as shown to people (lowercase; with :port when not 443). */
  host: string
  /** Checked like registration's client_name; the host when the document has none. */
  clientName: string
  /** Each checked as at registration (with the operator's private-use schemes). */
  redirectUris: string[]
  grantTypes: GrantType[]
  scope: string
}

export type DocumentCheck = { ok: true; document: ClientDocument } | { ok: false; reason: string }

const SECRETS = ['client_secret', 'client_secret_expires_at']

function refused(reason: string): DocumentCheck {
  return { ok: false, reason: `client metadata document ${reason}` }
}

export function checkDocument(text: string, url: URL, options: { privateSchemes: readonly string[] }): DocumentCheck {
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    return refused('is not valid JSON')
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return refused('must be a JSON object')
  const fields = body as Record<string, unknown>
  const has = (name: string) => Object.hasOwn(fields, name)
  if (!has('client_id')) return refused('must contain client_id')
  if (fields.client_id !== url.href) return refused('client_id must equal the client_id URL exactly')
  if (SECRETS.some(has)) return refused('must not contain client_secret or client_secret_expires_at: only public clients are supported')
  const registration = checkRegistration(body, options)
  if (!registration.ok) return refused(`is invalid: ${registration.description}`)
  const { redirectUris, grantTypes, scope } = registration.value
  // A name the document does not give is not "Unnamed client": the host is what identifies the client.
  const named = has('client_name') && fields.client_name !== null
  return {
    ok: true,
    document: { clientId: url.href, host: url.host, clientName: named ? registration.value.clientName : url.host, redirectUris, grantTypes, scope },
  }
}

import { checkRedirectUri } from './redirect-uri.js'

/**
 * Dynamic client registration body (RFC 7591), public clients only. Unknown fields are stripped, and a
 * client-supplied `client_id` or `client_secret` is ignored: the server chooses ids and issues no secrets.
 * An optional field sent as JSON `null` counts as absent, since some client libraries serialise unset fields that way.
 *
 * Descriptions go to `error_description`, so they are plain ASCII without `"` or `\` and never echo client input.
 */

export type GrantType = 'authorization_code' | 'refresh_token'
export type Scope = 'mcp:read' | 'mcp:write'

export interface ClientRegistration {
  clientName: string
  redirectUris: string[]
  grantTypes: GrantType[]
  responseTypes: ['code']
  tokenEndpointAuthMethod: 'none'
  scope: string
}

export type RegistrationCheck =
  | { ok: true; value: ClientRegistration }
  | { ok: false; error: 'invalid_redirect_uri' | 'invalid_client_metadata'; description: string }

export const MAX_REDIRECT_URIS = 10
export const MAX_CLIENT_NAME = 200
export const DEFAULT_CLIENT_NAME = 'Unnamed client'
// Canonical orders: outputs are sorted by these so equal registrations always look the same.
const GRANT_TYPES: readonly GrantType[] = ['authorization_code', 'refresh_token']
const SCOPES: readonly Scope[] = ['mcp:read', 'mcp:write']

// C0, DEL, C1, and the invisible format characters that can reorder or hide text on the consent page.
const NAME_FORBIDDEN = /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

function metadataError(description: string): RegistrationCheck {
  return { ok: false, error: 'invalid_client_metadata', description }
}

function redirectError(description: string): RegistrationCheck {
  return { ok: false, error: 'invalid_redirect_uri', description }
}

function field(body: Record<string, unknown>, name: string): unknown {
  // Own properties only: a missing field must not be found on Object.prototype.
  const value = Object.hasOwn(body, name) ? body[name] : undefined
  return value === null ? undefined : value
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false
  const proto: unknown = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

function stringArray(value: unknown): string[] | null {
  return Array.isArray(value) && value.every((v) => typeof v === 'string') ? (value as string[]) : null
}

export function checkRegistration(body: unknown, options: { privateSchemes: readonly string[] }): RegistrationCheck {
  if (!isPlainObject(body)) return metadataError('the registration body must be a JSON object')

  // redirect_uris
  const rawUris = field(body, 'redirect_uris')
  if (rawUris === undefined) return redirectError('redirect_uris is required: at least one redirect URI')
  if (!Array.isArray(rawUris)) return metadataError('redirect_uris must be an array of strings')
  if (rawUris.length === 0) return redirectError('redirect_uris must contain at least one redirect URI')
  if (rawUris.length > MAX_REDIRECT_URIS) return redirectError(`redirect_uris may contain at most ${MAX_REDIRECT_URIS} redirect URIs`)
  const redirectUris: string[] = []
  for (const [i, uri] of rawUris.entries()) {
    if (typeof uri !== 'string') return metadataError(`redirect_uris[${i}] must be a string`)
    const reason = checkRedirectUri(uri, options)
    if (reason !== null) return redirectError(`redirect_uris[${i}] ${reason}`)
    if (!redirectUris.includes(uri)) redirectUris.push(uri)
  }

  // client_name
  let clientName = DEFAULT_CLIENT_NAME
  const rawName = field(body, 'client_name')
  if (rawName !== undefined) {
    if (typeof rawName !== 'string') return metadataError('client_name must be a string')
    if (NAME_FORBIDDEN.test(rawName) || LONE_SURROGATE.test(rawName)) {
      return metadataError('client_name must not contain control or invisible formatting characters')
    }
    clientName = rawName.trim()
    const length = [...clientName].length
    if (length === 0) return metadataError('client_name must not be empty')
    if (length > MAX_CLIENT_NAME) return metadataError(`client_name must be at most ${MAX_CLIENT_NAME} characters`)
  }

  // grant_types
  let grantTypes: GrantType[] = [...GRANT_TYPES]
  const rawGrants = field(body, 'grant_types')
  if (rawGrants !== undefined) {
    const grants = stringArray(rawGrants)
    if (grants === null) return metadataError('grant_types must be an array of strings')
    if (!grants.every((g) => (GRANT_TYPES as readonly string[]).includes(g))) {
      return metadataError('grant_types may only contain authorization_code and refresh_token')
    }
    if (!grants.includes('authorization_code')) return metadataError('grant_types must include authorization_code')
    grantTypes = GRANT_TYPES.filter((g) => grants.includes(g))
  }

  // response_types
  const rawResponses = field(body, 'response_types')
  if (rawResponses !== undefined) {
    const responses = stringArray(rawResponses)
    if (responses === null) return metadataError('response_types must be an array of strings')
    if (responses.length === 0 || responses.some((r) => r !== 'code')) return metadataError('response_types must be exactly [code]')
  }

  // token_endpoint_auth_method
  const rawMethod = field(body, 'token_endpoint_auth_method')
  if (rawMethod !== undefined) {
    if (typeof rawMethod !== 'string') return metadataError('token_endpoint_auth_method must be a string')
    if (rawMethod !== 'none') {
      return metadataError('token_endpoint_auth_method must be none: only public clients are supported; PKCE is required')
    }
  }

  // scope
  let scope = SCOPES.join(' ')
  const rawScope = field(body, 'scope')
  if (rawScope !== undefined) {
    if (typeof rawScope !== 'string') return metadataError('scope must be a space-separated string')
    // Only SP separates scope tokens (RFC 6749 §3.3); a tab or newline stays inside a token and makes it unknown.
    const values = rawScope.split(' ').filter((v) => v !== '')
    if (!values.every((v) => (SCOPES as readonly string[]).includes(v))) {
      return metadataError('scope may only contain mcp:read and mcp:write')
    }
    // An empty scope is read as unspecified, as if the field were absent.
    if (values.length > 0) scope = SCOPES.filter((s) => values.includes(s)).join(' ')
  }

  return {
    ok: true,
    value: { clientName, redirectUris, grantTypes, responseTypes: ['code'], tokenEndpointAuthMethod: 'none', scope },
  }
}

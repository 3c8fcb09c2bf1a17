import { randomBytes } from 'node:crypto'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { OAuthClientMetadata, OAuthClientProvider, StoredOAuthClientInformation, StoredOAuthTokens } from '@modelcontextprotocol/client'

/**
 * The SDK v2 client's OAuth state in memory, for browser tests: whoever drives the browser reads `redirects`. With
 * `clientMetadataUrl`, the SDK sends that URL as its client_id where the server supports metadata documents.
 */
export class MemoryOAuthProvider implements OAuthClientProvider {
  info: StoredOAuthClientInformation | undefined
  stored: StoredOAuthTokens | undefined
  verifier: string | undefined
  readonly redirects: URL[] = []
  readonly clientMetadataUrl?: string

  constructor(readonly redirectUrl: string, readonly clientName: string, options: { clientMetadataUrl?: string } = {}) {
    if (options.clientMetadataUrl !== undefined) this.clientMetadataUrl = options.clientMetadataUrl
  }

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: this.clientName,
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      scope: 'mcp:read mcp:write',
    }
  }

  clientInformation() {
    return this.info
  }

  saveClientInformation(info: StoredOAuthClientInformation) {
    this.info = info
  }

  tokens() {
    return this.stored
  }

  saveTokens(tokens: StoredOAuthTokens) {
    this.stored = tokens
  }

  /** The contract requires state; the SDK sends one when its provider makes it. */
  state() {
    return randomBytes(16).toString('base64url')
  }

  redirectToAuthorization(url: URL) {
    this.redirects.push(url)
  }

  saveCodeVerifier(verifier: string) {
    this.verifier = verifier
  }

  codeVerifier() {
    if (!this.verifier) throw new Error('no code verifier saved')
    return this.verifier
  }
}

/** The MCP client's loopback redirect URI: answers "done" to whatever comes back. Closed at teardown. */
export async function clientCallback(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('done'))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => {
    server.closeAllConnections()
    server.close(() => resolve())
  }))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback`
}

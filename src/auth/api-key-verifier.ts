import type { Repos } from '../db/repos/index.js'
import { API_KEY_PREFIX, apiKeyLookup } from '../db/repos/api-keys.js'
import { fail } from '../errors/service-error.js'
import { systemClock, type Clock } from '../lib/clock.js'
import { constantTimeEqual, sha256Hex } from '../lib/crypto.js'
import { parseScopes, type CredentialVerifier, type Principal } from './principal.js'

/**
 * `service_mcp_…` API keys. Keys are high-entropy, so a SHA-256 (not a slow key derivation) is the right hash: one
 * indexed lookup on a hash prefix, then a constant-time comparison of the full hash.
 */
export function apiKeyVerifier(repos: Repos, onRevoked: (credential: string) => void, clock: Clock = systemClock): CredentialVerifier {
  return {
    accepts: (token) => token.startsWith(API_KEY_PREFIX),
    async verify(token): Promise<Principal> {
      const hash = sha256Hex(token)
      const candidates = await repos.apiKeys.candidatesByLookup(apiKeyLookup(hash))
      const match = candidates.find((c) => constantTimeEqual(c.hash, hash))
      if (!match || match.userDisabledAt !== null) throw fail('INVALID_TOKEN')
      const credential = `key:${match.id}`
      if (match.revokedAt !== null) {
        onRevoked(credential)
        throw fail('TOKEN_REVOKED')
      }
      if (match.expiresAt !== null && match.expiresAt <= clock.now()) throw fail('TOKEN_EXPIRED', { message: 'The API key has expired' })
      return {
        kind: 'api_key',
        credential,
        credentialId: match.id,
        userId: match.userId,
        membershipId: match.membershipId,
        organizationId: match.organizationId,
        role: match.role,
        scopes: parseScopes(match.scopes),
        expiresAt: match.expiresAt,
      }
    },
  }
}

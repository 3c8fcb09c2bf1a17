import type { CredentialVerifier, Principal } from '../auth/principal.js'
import { parseScopes } from '../auth/principal.js'
import type { Repos } from '../db/repos/index.js'
import { fail } from '../errors/service-error.js'
import type { Keyring } from './keyring.js'

const COMPACT_JWS = /^eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/

/**
 * OAuth access tokens on /mcp: the JWT checks of Keyring.verify (signature, ES256, typ, iss, aud, expiry, iat), then
 * the database: the token and its grant not revoked, the membership still there. The role is read now, so scope ∩ role
 * uses the current role.
 */
export function accessTokenVerifier(repos: Repos, keyring: Keyring, onRevoked: (credential: string) => void): CredentialVerifier {
  return {
    accepts: (token) => COMPACT_JWS.test(token),
    async verify(token): Promise<Principal> {
      const claims = await keyring.verify(token)
      const state = await repos.oauthGrants.accessTokenState(claims.jti)
      // Unknown jti: signed by us but never recorded (or purged after expiry). Never trusted.
      if (!state) throw fail('INVALID_TOKEN')
      if (state.membershipId !== claims.mid || state.userId !== claims.sub || state.organizationId !== claims.org || state.clientId !== claims.client_id) {
        throw fail('INVALID_TOKEN')
      }
      const credential = `jwt:${claims.jti}`
      if (state.revokedAt !== null || state.grantRevokedAt !== null) {
        onRevoked(credential)
        throw fail('TOKEN_REVOKED')
      }
      if (state.role === null || state.userDisabledAt !== null) throw fail('INVALID_TOKEN', { message: 'The membership behind this token no longer exists' })
      return {
        kind: 'oauth',
        credential,
        credentialId: claims.jti,
        userId: state.userId,
        membershipId: state.membershipId,
        organizationId: state.organizationId,
        role: state.role,
        scopes: parseScopes(claims.scope),
        expiresAt: claims.exp * 1000,
        clientId: state.clientId,
        grantId: state.grantId,
      }
    },
  }
}

import type { Config } from '../config.js'
import type { MembershipView } from '../db/repos/memberships.js'
import type { OAuthClient } from '../db/repos/oauth-clients.js'
import type { OAuthGrant } from '../db/repos/oauth-grants.js'
import type { Repos, TxRepos } from '../db/repos/index.js'
import { fail } from '../errors/service-error.js'
import type { Clock } from '../lib/clock.js'
import { newId, randomSecret, sha256Hex } from '../lib/crypto.js'
import { noSigningKey, type AccessTokenClaims, type Keyring, type Sign } from './keyring.js'
import type { DocumentClients } from './document-clients.js'
import { checkVerifier, verifyPkce } from './pkce.js'
import { resourceAudience } from './resource.js'
import { narrowScope, normalizeScope } from './scopes.js'

export const REFRESH_TOKEN_PREFIX = 'mcp_rt_'

export interface TokenResponse {
  access_token: string
  token_type: 'Bearer'
  expires_in: number
  refresh_token?: string
  scope: string
}

export interface TokenServiceOptions {
  repos: Repos
  keyring: Keyring
  config: Config
  /** What "now" is for codes, grants and tokens (lib/clock.ts). */
  clock: Clock
  /** Clients whose client_id is the URL of their metadata document. */
  documents: DocumentClients
  /** Ends the sessions bound to a revoked credential (`jwt:<jti>`). */
  onRevoked(credential: string): void
  /** Reuse of a code or refresh token is an attack signal: the operator hears about it. */
  onReuse(event: { kind: 'code' | 'refresh_token'; clientId: string; grantId: string | null }): void
}

/**
 * The token endpoint's grants and the revocation endpoint, without HTTP. Checks run in the order that keeps a replay
 * with a wrong client or verifier from revoking anything (OAuth 2.1 "Reuse of Authorization Codes"), and nothing is
 * consumed or rotated until every check has passed.
 */
export class TokenService {
  readonly #o: TokenServiceOptions

  constructor(options: TokenServiceOptions) {
    this.#o = options
  }

  /**
   * The client a token or revocation request names: a registered one, or one identified by its metadata document, whose
   * document is resolved again on every use (document-clients.ts).
   */
  async client(clientId: string): Promise<OAuthClient> {
    if (this.#o.documents.isDocumentUrl(clientId)) return this.#o.documents.forToken(clientId)
    const client = await this.#o.repos.oauthClients.byId(clientId)
    if (!client) throw fail('OAUTH_INVALID_CLIENT', { message: 'Unknown client_id' })
    return client
  }

  async exchangeCode(p: { client: OAuthClient; code: string; redirectUri: string; codeVerifier: string; resource?: string }, now = this.#o.clock.now()): Promise<TokenResponse> {
    const { repos } = this.#o
    const verifierProblem = checkVerifier(p.codeVerifier)
    if (verifierProblem) throw fail('OAUTH_INVALID_REQUEST', { message: verifierProblem })
    const hash = sha256Hex(p.code)
    const code = await repos.authorizations.code(hash)
    if (!code || code.clientId !== p.client.id) throw fail('OAUTH_INVALID_GRANT', { message: 'The authorization code is invalid' })
    if (code.expiresAt <= now) throw fail('OAUTH_INVALID_GRANT', { message: 'The authorization code has expired' })
    if (!verifyPkce(p.codeVerifier, code.codeChallenge)) {
      throw fail('OAUTH_INVALID_GRANT', { message: 'code_verifier does not match the code_challenge of the authorization request' })
    }
    if (p.redirectUri !== code.redirectUri) throw fail('OAUTH_INVALID_GRANT', { message: 'redirect_uri differs from the one of the authorization request' })
    if (p.resource !== undefined && this.#audience(p.resource) !== code.resource) {
      throw fail('OAUTH_INVALID_TARGET', { message: 'resource names another audience than the authorization request' })
    }
    // The signing key is read before the transaction, whose body awaits only its own queries; the token is signed
    // once it has committed.
    const sign = await this.#o.keyring.signer()
    // Throwing inside a transaction rolls it back, so the outcome is returned and acted on after the commit.
    const outcome = await repos.transaction(async (tx): Promise<{ reused: true } | { membershipGone: true } | { issued: Issued }> => {
      if (!(await tx.authorizations.consumeCode(hash, now))) return { reused: true }
      const membership = await this.#activeMembership(tx, code.membershipId, code.userId)
      // The role may have changed since consent: the grant holds what it can use now, and never more later.
      const scope = membership ? narrowScope(code.scope, membership.role) : ''
      if (scope === '') return { membershipGone: true }
      // No key to sign with: nothing is consumed or issued (rolled back), as when signing failed in here.
      if (!sign) throw noSigningKey()
      const grant = await tx.oauthGrants.createGrant({
        id: newId('grt'),
        clientId: code.clientId,
        userId: code.userId,
        membershipId: code.membershipId,
        organizationId: code.organizationId,
        scope,
        resource: code.resource,
        createdAt: now,
        expiresAt: now + this.#o.config.refreshTokenMaxMs,
      })
      await tx.authorizations.setCodeGrant(hash, grant.id)
      await tx.oauthClients.markUsed(p.client.id, now)
      return { issued: await this.#record(tx, p.client, grant, grant.scope, now) }
    })
    if ('issued' in outcome) return tokenResponse(sign!, outcome.issued)
    if ('membershipGone' in outcome) throw fail('OAUTH_INVALID_GRANT', { message: 'The account or membership that approved this code is no longer active, or its role can no longer use the scope approved' })
    // A second redemption by the rightful client: whoever holds the code, the tokens it produced are revoked.
    const grantId = (await repos.authorizations.code(hash))?.grantId ?? null
    if (grantId) await this.#revokeGrant(grantId, 'authorization code reused', now)
    this.#o.onReuse({ kind: 'code', clientId: code.clientId, grantId })
    throw fail('OAUTH_INVALID_GRANT', { message: 'The authorization code was already used; the tokens issued for it are revoked' })
  }

  async refresh(p: { client: OAuthClient; refreshToken: string; scope?: string; resource?: string }, now = this.#o.clock.now()): Promise<TokenResponse> {
    const { repos } = this.#o
    if (!p.client.grantTypes.includes('refresh_token')) {
      throw fail('OAUTH_UNAUTHORIZED_CLIENT', { message: 'The client did not register the refresh_token grant type' })
    }
    const hash = sha256Hex(p.refreshToken)
    const token = p.refreshToken.startsWith(REFRESH_TOKEN_PREFIX) ? await repos.oauthGrants.refreshToken(hash) : undefined
    const grant = token ? await repos.oauthGrants.grant(token.grantId) : undefined
    if (!token || !grant || grant.clientId !== p.client.id) throw fail('OAUTH_INVALID_GRANT', { message: 'The refresh token is invalid' })
    if (grant.revokedAt !== null) throw fail('OAUTH_INVALID_GRANT', { message: 'The refresh token has been revoked; authorize again' })
    if (token.usedAt !== null) return this.#refreshReused(grant, now)
    if (token.expiresAt <= now || grant.expiresAt <= now) throw fail('OAUTH_INVALID_GRANT', { message: 'The refresh token has expired; authorize again' })
    if (p.resource !== undefined && this.#audience(p.resource) !== grant.resource) {
      throw fail('OAUTH_INVALID_TARGET', { message: 'resource names another audience than the grant' })
    }
    let scope = grant.scope
    if (p.scope !== undefined) {
      const requested = normalizeScope(p.scope)
      const granted = new Set(grant.scope.split(' '))
      if (requested === null || requested.split(' ').some((s) => !granted.has(s))) {
        throw fail('OAUTH_INVALID_SCOPE', { message: `scope must be within the granted scope (${grant.scope})` })
      }
      scope = requested
    }
    // As for a code: the key is read before the transaction, the token signed after it.
    const sign = await this.#o.keyring.signer()
    const outcome = await repos.transaction(async (tx): Promise<{ reused: true } | { membershipGone: true } | { roleTooLow: true } | { issued: Issued }> => {
      const membership = await this.#activeMembership(tx, grant.membershipId, grant.userId)
      if (!membership) return (await tx.oauthGrants.useRefreshToken(hash, now)) ? { membershipGone: true } : { reused: true }
      // A demotion narrows the tokens of the grant from now on (a later promotion gives back no more than the grant).
      // Nothing usable left: refused before the refresh token is used, so a narrower request may still follow.
      const usable = narrowScope(scope, membership.role)
      if (usable === '') return { roleTooLow: true }
      if (!(await tx.oauthGrants.useRefreshToken(hash, now))) return { reused: true }
      // No key to sign with: the refresh token stays unused (rolled back), as when signing failed in here.
      if (!sign) throw noSigningKey()
      await tx.oauthGrants.touchGrant(grant.id, now)
      await tx.oauthClients.markUsed(p.client.id, now)
      return { issued: await this.#record(tx, p.client, grant, usable, now) }
    })
    if ('issued' in outcome) return tokenResponse(sign!, outcome.issued)
    if ('reused' in outcome) return this.#refreshReused(grant, now)
    if ('roleTooLow' in outcome) throw fail('OAUTH_INVALID_SCOPE', { message: `Your role in the organization can no longer use the scope requested (${scope})` })
    await this.#revokeGrant(grant.id, 'membership removed or user disabled', now)
    throw fail('OAUTH_INVALID_GRANT', { message: 'The account or membership behind this grant is no longer active' })
  }

  /**
   * Tokens for a grant no consent page made: an identity assertion (oauth/assertion-grant.ts) decided the member and
   * the scope. In one transaction: `once` claims the assertion (false: already used, nothing is issued), the membership
   * is read again and narrows the scope, the grant is made with an access token and no refresh token (a new assertion
   * replaces refreshing), and `audit` records it. Nothing of it lands when any step refuses.
   */
  async issueWithoutConsent(p: {
    client: OAuthClient
    membershipId: string
    userId: string
    scope: string
    once: (tx: TxRepos) => Promise<boolean>
    audit: (tx: TxRepos, grant: OAuthGrant) => Promise<void>
  }, now = this.#o.clock.now()): Promise<TokenResponse | { refused: 'already_used' | 'membership_gone' }> {
    const { repos, config } = this.#o
    const sign = await this.#o.keyring.signer()
    const outcome = await repos.transaction(async (tx): Promise<{ refused: 'already_used' | 'membership_gone' } | { issued: Issued }> => {
      if (!(await p.once(tx))) return { refused: 'already_used' }
      const membership = await this.#activeMembership(tx, p.membershipId, p.userId)
      const scope = membership ? narrowScope(p.scope, membership.role) : ''
      // Returned, not thrown: the assertion stays unused (rolled back), as for a code whose membership is gone.
      if (!membership || scope === '') return { refused: 'membership_gone' }
      if (!sign) throw noSigningKey()
      const grant = await tx.oauthGrants.createGrant({
        id: newId('grt'),
        clientId: p.client.id,
        userId: p.userId,
        membershipId: p.membershipId,
        organizationId: membership.organizationId,
        scope,
        resource: config.baseUrl,
        createdAt: now,
        // The grant ends with its one access token: without a refresh token nothing else is issued under it.
        expiresAt: now + config.accessTokenTtlMs,
      })
      await tx.oauthClients.markUsed(p.client.id, now)
      await p.audit(tx, grant)
      return { issued: await this.#record(tx, p.client, grant, scope, now, { refresh: false }) }
    })
    if ('issued' in outcome) return tokenResponse(sign!, outcome.issued)
    return outcome
  }

  /**
   * RFC 7009. Unknown tokens, tokens of another client and API keys are ignored (the caller still answers 200). An
   * access token is revoked alone; a refresh token revokes its whole grant with every access token issued under it.
   */
  async revoke(p: { client: OAuthClient; token: string }, now = this.#o.clock.now()): Promise<void> {
    const { repos } = this.#o
    if (p.token.startsWith(REFRESH_TOKEN_PREFIX)) {
      const token = await repos.oauthGrants.refreshToken(sha256Hex(p.token))
      const grant = token ? await repos.oauthGrants.grant(token.grantId) : undefined
      if (grant && grant.clientId === p.client.id) await this.#revokeGrant(grant.id, 'refresh token revoked by the client', now)
      return
    }
    let claims
    try {
      claims = await this.#o.keyring.verify(p.token)
    } catch {
      return // not ours, malformed or expired: nothing to revoke
    }
    if (claims.client_id !== p.client.id) return
    if (await repos.oauthGrants.revokeAccessToken(claims.jti, now)) this.#o.onRevoked(`jwt:${claims.jti}`)
  }

  async #refreshReused(grant: OAuthGrant, now: number): Promise<never> {
    await this.#revokeGrant(grant.id, 'refresh token reused', now)
    this.#o.onReuse({ kind: 'refresh_token', clientId: grant.clientId, grantId: grant.id })
    throw fail('OAUTH_INVALID_GRANT', { message: 'The refresh token was already used; the whole grant is revoked, authorize again' })
  }

  async #revokeGrant(grantId: string, reason: string, now: number): Promise<void> {
    for (const jti of await this.#o.repos.oauthGrants.revokeGrant(grantId, reason, now)) this.#o.onRevoked(`jwt:${jti}`)
  }

  /** The membership, when it still exists, still belongs to the user, and the user is not disabled. */
  async #activeMembership(tx: TxRepos, membershipId: string, userId: string): Promise<MembershipView | undefined> {
    const membership = await tx.memberships.byId(membershipId)
    const user = await tx.users.byId(userId)
    return membership !== undefined && membership.userId === userId && user !== undefined && user.disabledAt === null ? membership : undefined
  }

  #audience(resource: string): string | null {
    return resourceAudience(resource, this.#o.config.baseUrl)
  }

  /**
   * Records the tokens of a grant in the transaction `tx` (the access token's jti, the refresh token's hash when the
   * client uses refresh tokens and the grant has them) and returns what tokenResponse signs and answers once it has committed.
   */
  async #record(tx: TxRepos, client: OAuthClient, grant: OAuthGrant, scope: string, now: number, options = { refresh: true }): Promise<Issued> {
    const { config } = this.#o
    const jti = randomSecret(18)
    const iat = Math.floor(now / 1000)
    const expiresIn = Math.max(1, Math.round(config.accessTokenTtlMs / 1000))
    const exp = Math.floor((now + config.accessTokenTtlMs) / 1000)
    const claims: AccessTokenClaims = {
      iss: config.baseUrl,
      aud: grant.resource,
      sub: grant.userId,
      org: grant.organizationId,
      mid: grant.membershipId,
      scope,
      client_id: grant.clientId,
      jti,
      iat,
      exp,
    }
    await tx.oauthGrants.addAccessToken({ jti, grantId: grant.id, createdAt: now, expiresAt: exp * 1000 })
    const issued: Issued = { claims, expiresIn, scope }
    if (options.refresh && client.grantTypes.includes('refresh_token')) {
      const refreshToken = REFRESH_TOKEN_PREFIX + randomSecret(32)
      await tx.oauthGrants.addRefreshToken({
        hash: sha256Hex(refreshToken),
        grantId: grant.id,
        createdAt: now,
        expiresAt: Math.min(now + config.refreshTokenIdleMs, grant.expiresAt),
      })
      issued.refreshToken = refreshToken
    }
    return issued
  }
}

/** Tokens recorded in a transaction, to be signed and answered once it has committed. */
interface Issued {
  claims: AccessTokenClaims
  expiresIn: number
  scope: string
  refreshToken?: string
}

/** The token response: the access token signed now (the signer was read before the transaction). */
function tokenResponse(sign: Sign, issued: Issued): TokenResponse {
  const response: TokenResponse = { access_token: sign(issued.claims), token_type: 'Bearer', expires_in: issued.expiresIn, scope: issued.scope }
  if (issued.refreshToken !== undefined) response.refresh_token = issued.refreshToken
  return response
}

import type { FastifyBaseLogger } from 'fastify'
import { SCOPES } from '../auth/principal.js'
import type { Config } from '../config.js'
import type { MembershipView } from '../db/repos/memberships.js'
import type { OAuthClient } from '../db/repos/oauth-clients.js'
import type { Repos } from '../db/repos/index.js'
import { fail, ServiceError } from '../errors/service-error.js'
import type { Clock } from '../lib/clock.js'
import type { IdJagVerifier, VerifiedAssertion } from './id-jag.js'
import { resourceAudience } from './resource.js'
import { normalizeScope, scopesForRole } from './scopes.js'
import type { TokenResponse, TokenService } from './token-service.js'

/** The audit action of an exchange, beside the credential changes' (db/repos/audit.ts). */
export const ASSERTION_AUDIT_ACTION = 'oauth_grant.assertion'

export interface AssertionGrantOptions {
  repos: Repos
  config: Config
  clock: Clock
  verifier: IdJagVerifier
  tokens: TokenService
  log: FastifyBaseLogger
}

/**
 * The `jwt-bearer` grant with an identity assertion (ID-JAG) of a trusted issuer: no browser and no consent page, since
 * the enterprise's identity provider decided the client may act for the member
 * (docs/decisions/enterprise-managed-authorization.md). The assertion is verified (id-jag.ts), bound to the requesting
 * client, mapped to a member and one of their organizations, and its scope narrowed; then the tokens are issued in the
 * transaction that uses up its `jti`.
 */
export class AssertionGrant {
  readonly #o: AssertionGrantOptions

  constructor(options: AssertionGrantOptions) {
    this.#o = options
  }

  async exchange(p: { client: OAuthClient; assertion: string; scope?: string; resource?: string }): Promise<TokenResponse> {
    const { log } = this.#o
    try {
      return await this.#exchange(p)
    } catch (err) {
      // The operator's record of a refusal: which check, which client; never the assertion.
      if (err instanceof ServiceError) log.info({ client: p.client.id, reason: err.message, cause: (err.cause as Error | undefined)?.message }, 'identity assertion refused')
      throw err
    }
  }

  async #exchange(p: { client: OAuthClient; assertion: string; scope?: string; resource?: string }): Promise<TokenResponse> {
    const { config, tokens, verifier, log } = this.#o
    if (p.resource !== undefined && resourceAudience(p.resource, config.baseUrl) === null) throw fail('OAUTH_INVALID_TARGET')
    const requested = p.scope === undefined ? SCOPES.join(' ') : normalizeScope(p.scope)
    if (requested === null) throw fail('OAUTH_INVALID_SCOPE', { message: 'scope must name mcp:read and/or mcp:write' })
    const assertion = await verifier.verify(p.assertion)
    if (assertion.clientId !== p.client.id) throw fail('OAUTH_INVALID_GRANT', { message: 'The assertion was issued for another client: its client_id differs from the request\'s' })
    if (assertion.issuer.clients && !assertion.issuer.clients.includes(p.client.id)) {
      throw fail('OAUTH_INVALID_GRANT', { message: 'This issuer is not trusted to assert for this client' })
    }
    const membership = await this.#membership(assertion)
    const scope = grantedScope(requested, assertion.scope, membership)
    const issued = await tokens.issueWithoutConsent({
      client: p.client,
      membershipId: membership.id,
      userId: membership.userId,
      scope,
      once: (tx) => tx.assertions.remember({
        issuer: assertion.issuer.issuer,
        jti: assertion.jti,
        // Kept as long as the assertion could still pass the expiry check, tolerance included.
        expiresAt: assertion.expiresAt + config.assertionClockToleranceMs,
      }),
      audit: async (tx, grant) => {
        await tx.audit.add({
          organizationId: grant.organizationId,
          userId: grant.userId,
          membershipId: grant.membershipId,
          credentialKind: 'id_jag',
          credentialId: null,
          clientId: grant.clientId,
          action: ASSERTION_AUDIT_ACTION,
          targetType: 'oauth_grant',
          targetId: grant.id,
          outcome: 'succeeded',
          details: { issuer: assertion.issuer.issuer, subject: assertion.subject, scope: grant.scope },
          at: grant.createdAt,
        })
      },
    })
    if ('refused' in issued) {
      throw fail('OAUTH_INVALID_GRANT', {
        message: issued.refused === 'already_used'
          ? 'The assertion was already used (its jti): ask the identity provider for a new one'
          : 'The member\'s membership or role changed while the assertion was exchanged; ask for a new one',
      })
    }
    log.info({ client: p.client.id, issuer: assertion.issuer.issuer, membership: membership.id, scope: issued.scope }, 'identity assertion exchanged')
    return issued
  }

  /**
   * The user a single sign-on linked to the assertion's subject: identities are kept per sign-in provider (by its
   * name), so the providers whose issuer is the assertion's are asked (docs/decisions/enterprise-managed-authorization.md).
   */
  async #linkedUser(assertion: VerifiedAssertion): Promise<string | undefined> {
    const { config, repos } = this.#o
    for (const provider of config.signInProviders) {
      if (provider.issuer !== assertion.issuer.issuer) continue
      const identity = await repos.userIdentities.find(provider.name, assertion.subject)
      if (identity) return identity.userId
    }
    return undefined
  }

  /**
   * The member the assertion names: the user linked to the issuer's subject by an earlier single sign-on, else the
   * user with the assertion's email; then their membership in the issuer's organization, or their only one.
   */
  async #membership(assertion: VerifiedAssertion): Promise<MembershipView> {
    const { repos } = this.#o
    const linked = await this.#linkedUser(assertion)
    const user = linked !== undefined ? await repos.users.byId(linked) : assertion.email !== undefined ? await repos.users.byEmail(assertion.email) : undefined
    if (!user || user.disabledAt !== null) throw fail('OAUTH_INVALID_GRANT', { message: 'No active member of this server matches the assertion\'s subject or email' })
    const memberships = await repos.memberships.forUser(user.id)
    const wanted = assertion.issuer.organization
    if (wanted !== undefined) {
      const membership = memberships.find((m) => m.organizationSlug === wanted)
      if (!membership) throw fail('OAUTH_INVALID_GRANT', { message: `The member does not belong to organization ${wanted}, the one this issuer acts in` })
      return membership
    }
    if (memberships.length === 1) return memberships[0]!
    throw fail('OAUTH_INVALID_GRANT', {
      message: memberships.length === 0
        ? 'The member belongs to no organization'
        : 'The member belongs to several organizations and this issuer names none: the operator sets "organization" on the trusted issuer',
    })
  }
}

/**
 * What was asked (all scopes when nothing was), within what the assertion grants (all when it names no scope) and
 * what the member's role can use. Nothing left is invalid_scope, with the three parts named.
 */
function grantedScope(requested: string, asserted: string | undefined, membership: MembershipView): string {
  const allowed = new Set<string>(asserted === undefined ? SCOPES : asserted.split(' '))
  const usable = new Set<string>(scopesForRole(membership.role))
  const scope = requested.split(' ').filter((s) => allowed.has(s) && usable.has(s)).join(' ')
  if (scope === '') {
    throw fail('OAUTH_INVALID_SCOPE', {
      message: `Nothing of the requested scope (${requested}) is granted: the assertion allows ${asserted === undefined ? 'any scope' : `"${asserted}"`}, and a ${membership.role} can use ${scopesForRole(membership.role).join(' ') || 'none'}`,
    })
  }
  return scope
}

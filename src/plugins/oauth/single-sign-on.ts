import { createHash } from 'node:crypto'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Config } from '../../config.js'
import type { Repos } from '../../db/repos/index.js'
import { catalog } from '../../errors/catalog.js'
import { IdTokenRefused } from '../../identity/id-token.js'
import { signInMember, type MemberRefusal, type MembershipChange } from '../../identity/members.js'
import { UpstreamRefused, UpstreamUnavailable, type UpstreamProvider } from '../../identity/upstream.js'
import { randomSecret, sha256Hex } from '../../lib/crypto.js'
import { errorPage, type SignInProviderButton } from '../../web/pages.js'
import type { BrowserState } from './browser.js'
import { answerErrorsWithPages, pageWording, seeOther, sendPage } from './page-replies.js'

/** The CSRF purpose of forms on /account's sign-in page (account.ts uses the same). */
const ACCOUNT_CSRF = 'account'
const ID = /^[A-Za-z0-9_-]{43}$/
const MAX_IDP_TEXT = 200

/** What the sign-in pages offer: one button per provider, and whether the password form is shown. */
export function signInChoices(config: Config, interaction?: string): { providers: SignInProviderButton[]; passwordSignIn: boolean } {
  return {
    providers: config.signInProviders.map((p) => ({
      action: `/oauth/sso/${p.name}`,
      title: p.title,
      ...(interaction !== undefined ? { interaction } : {}),
    })),
    passwordSignIn: config.passwordSignIn !== 'off',
  }
}

/** Where a provider sends the browser back: the redirect URI to register at the provider. */
export function callbackUrl(config: Config, provider: string): string {
  return `${config.baseUrl}/oauth/callback/${provider}`
}

/** The catalog's codes of the refusals a sign-in through a provider ends in. */
type SignInRefusal = MemberRefusal | 'SIGN_IN_PROVIDER_UNKNOWN' | 'SIGN_IN_LINK_UNUSABLE' | 'SIGN_IN_FLOW_UNKNOWN' | 'SIGN_IN_FLOW_ELSEWHERE'
  | 'SIGN_IN_PROVIDER_ERROR' | 'SIGN_IN_PROVIDER_UNREACHABLE' | 'SIGN_IN_TOKEN_REFUSED'

/**
 * Sign-in through an upstream OpenID Connect provider (docs/decisions/single-sign-on.md): a "Sign in with …" button
 * posts here (CSRF-checked); the flow (state, nonce, PKCE verifier, this browser, where to return) goes into
 * sign_in_flows and the browser to the provider; the provider's callback consumes the flow (single use, unexpired,
 * same browser), exchanges the code, checks the ID token, finds or makes the member, and signs the browser in as a
 * password would. Back on our pages every rule stays: our consent page, our tokens.
 */
export async function singleSignOnRoutes(fastify: FastifyInstance, opts: { browser: BrowserState; providers: Map<string, UpstreamProvider> }): Promise<void> {
  const { repos, config, clock } = fastify
  const { browser, providers } = opts
  answerErrorsWithPages(fastify)

  /** A refusal's page: the catalog's entry (status, message, what to do), its page title, and the technical detail. */
  function refuse(reply: FastifyReply, code: SignInRefusal, detail?: string): FastifyReply {
    const spec = catalog[code]
    return sendPage(reply, spec.status, errorPage({
      title: pageWording(code).title,
      message: spec.message,
      next: spec.action,
      ...(detail !== undefined ? { detail } : {}),
    }))
  }


  /** Where the sign-in returns to: the pending authorization it continues (this browser's, still open), or /account. */
  async function returnPath(browserId: string, interaction: string | undefined): Promise<string | null> {
    if (interaction === undefined) return '/account'
    if (!ID.test(interaction)) return null
    const row = await repos.authorizations.request(sha256Hex(interaction))
    if (!row || row.browserBinding !== sha256Hex(browserId) || row.consumedAt !== null || row.expiresAt <= clock.now()) return null
    return `/oauth/interaction/${interaction}`
  }

  fastify.post('/oauth/sso/:provider', async (request, reply) => {
    const provider = providers.get((request.params as { provider: string }).provider)
    if (!provider) return refuse(reply, 'SIGN_IN_PROVIDER_UNKNOWN')
    const body = (request.body ?? {}) as Record<string, unknown>
    const interaction = typeof body.interaction === 'string' && body.interaction !== '' ? body.interaction : undefined
    const browserId = browser.checkForm(request, interaction ?? ACCOUNT_CSRF, body.csrf)
    const returnTo = await returnPath(browserId, interaction)
    if (returnTo === null) return refuse(reply, 'SIGN_IN_LINK_UNUSABLE')
    const state = randomSecret(32)
    const nonce = randomSecret(32)
    const codeVerifier = randomSecret(32)
    let location: string
    try {
      location = await provider.authorizationUrl({
        redirectUri: callbackUrl(config, provider.name),
        state,
        nonce,
        codeChallenge: createHash('sha256').update(codeVerifier).digest('base64url'),
      })
    } catch (err) {
      if (!(err instanceof UpstreamUnavailable)) throw err
      request.log.error({ provider: provider.name, reason: err.message }, 'sign-in provider unavailable')
      return refuse(reply, 'SIGN_IN_PROVIDER_UNREACHABLE', `${provider.config.title}: ${err.message}`)
    }
    const now = clock.now()
    await repos.signInFlows.create({
      id: sha256Hex(state),
      provider: provider.name,
      browserBinding: sha256Hex(browserId),
      nonce,
      codeVerifier,
      returnTo,
      createdAt: now,
      expiresAt: now + config.signInFlowTtlMs,
    })
    request.log.info({ provider: provider.name, address: request.ip }, 'sign-in started at the identity provider')
    return seeOther(reply, location)
  })

  fastify.get('/oauth/callback/:provider', async (request, reply) => {
    const provider = providers.get((request.params as { provider: string }).provider)
    if (!provider) return refuse(reply, 'SIGN_IN_PROVIDER_UNKNOWN')
    const query = request.query as Record<string, unknown>
    const state = typeof query.state === 'string' && query.state.length <= 512 ? query.state : undefined
    // Consumed before anything else is checked: whatever this answer turns out to be, the flow cannot be replayed.
    const flow = state !== undefined ? await repos.signInFlows.consume(sha256Hex(state)) : undefined
    const context = { provider: provider.name, address: request.ip }
    if (!flow || flow.provider !== provider.name || flow.expiresAt <= clock.now()) {
      request.log.warn({ ...context, reason: flow ? 'expired or another provider' : 'unknown state' }, 'sign-in callback refused')
      return refuse(reply, 'SIGN_IN_FLOW_UNKNOWN')
    }
    const browserId = browser.existingBrowserId(request)
    if (!browserId || sha256Hex(browserId) !== flow.browserBinding) {
      request.log.warn({ ...context, reason: 'another browser' }, 'sign-in callback refused')
      return refuse(reply, 'SIGN_IN_FLOW_ELSEWHERE')
    }
    if (typeof query.error === 'string') {
      const description = typeof query.error_description === 'string' ? `: ${query.error_description.slice(0, MAX_IDP_TEXT)}` : ''
      request.log.warn({ ...context, error: query.error.slice(0, MAX_IDP_TEXT) }, 'identity provider answered with an error')
      return refuse(reply, 'SIGN_IN_PROVIDER_ERROR', `${provider.config.title} answered ${query.error.slice(0, MAX_IDP_TEXT)}${description}`)
    }
    // RFC 9207: a provider that names itself in the answer must name itself (a mix-up of providers is refused).
    if (typeof query.iss === 'string' && query.iss.replace(/\/+$/, '') !== provider.config.issuer) {
      request.log.warn({ ...context, reason: 'iss mismatch' }, 'sign-in callback refused')
      return refuse(reply, 'SIGN_IN_TOKEN_REFUSED', 'the answer names another issuer')
    }
    if (typeof query.code !== 'string' || query.code === '') return refuse(reply, 'SIGN_IN_PROVIDER_ERROR', `${provider.config.title} answered without a code`)

    let claims
    try {
      claims = await provider.signIn({ code: query.code, codeVerifier: flow.codeVerifier, redirectUri: callbackUrl(config, provider.name), nonce: flow.nonce })
    } catch (err) {
      if (err instanceof IdTokenRefused) {
        request.log.warn({ ...context, reason: err.message }, 'sign-in refused: ID token')
        return refuse(reply, 'SIGN_IN_TOKEN_REFUSED', err.message)
      }
      if (err instanceof UpstreamRefused || err instanceof UpstreamUnavailable) {
        request.log.error({ ...context, reason: err.message }, 'sign-in failed at the identity provider')
        return refuse(reply, err instanceof UpstreamRefused ? 'SIGN_IN_PROVIDER_ERROR' : 'SIGN_IN_PROVIDER_UNREACHABLE', `${provider.config.title}: ${err.message}`)
      }
      throw err
    }
    const result = await signInMember(repos, provider.config, claims, clock.now(), request.log)
    if ('refused' in result) {
      request.log.warn({ ...context, subject: claims.sub, reason: result.refused }, 'sign-in refused')
      return refuse(reply, result.refused satisfies MemberRefusal)
    }
    await browser.signIn(reply, result.user.id)
    await auditSignIn(repos, { userId: result.user.id, provider: provider.name, found: result.found, changes: result.changes, requestId: String(request.id), at: clock.now() }, request)
    request.log.info({ ...context, form: 'sso', account: result.email, user: result.user.id, found: result.found, memberships: result.changes }, 'signed in')
    return seeOther(reply, flow.returnTo)
  })
}

/**
 * The `sign_in` audit entry, one in each organization the member now belongs to (an entry belongs to one
 * organization, and each organization's admins should see who came in); the membership changes of the sign-in are in
 * its details. A failed write is logged and the sign-in goes on, like a tool call's audit.
 */
async function auditSignIn(
  repos: Repos,
  e: { userId: string; provider: string; found: string; changes: MembershipChange[]; requestId: string; at: number },
  request: FastifyRequest,
): Promise<void> {
  try {
    for (const m of await repos.memberships.forUser(e.userId)) {
      await repos.audit.add({
        organizationId: m.organizationId,
        userId: e.userId,
        membershipId: m.id,
        credentialKind: 'sign_in_provider',
        credentialId: null,
        clientId: null,
        action: 'sign_in',
        targetType: 'user',
        targetId: e.userId,
        outcome: 'succeeded',
        details: { request_id: e.requestId, provider: e.provider, account: e.found, memberships: e.changes },
        at: e.at,
      })
    }
  } catch (err) {
    request.log.error({ err }, 'could not write the audit log')
  }
}

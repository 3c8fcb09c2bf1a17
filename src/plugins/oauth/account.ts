import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { SCOPES } from '../../auth/principal.js'
import { fail } from '../../errors/service-error.js'
import { accountPage, signInPage } from '../../web/pages.js'
import type { BrowserState } from './browser.js'
import { answerErrorsWithPages, refusalHeaders, seeOther, sendPage } from './page-replies.js'

const ACCOUNT_CSRF = 'account'

/**
 * /account: the signed-in member's own API keys (create, shown once; rotate; revoke) and the OAuth clients they
 * authorized (revoke). This is the contract's "authenticated API-key flow". Every change that ends a credential also
 * ends the sessions bound to it.
 */
export async function accountPages(fastify: FastifyInstance, opts: { browser: BrowserState }): Promise<void> {
  const { repos, auth } = fastify
  const { browser } = opts
  answerErrorsWithPages(fastify)

  function signedIn(request: FastifyRequest): { id: string; email: string } {
    const user = browser.user(request)
    if (!user) throw fail('SIGN_IN_REQUIRED')
    return user
  }

  /** Memberships of the user, and the keys of each, for the page and for ownership checks. */
  function ownKeys(userId: string) {
    const memberships = repos.memberships.forUser(userId)
    const keys = memberships.flatMap((m) => repos.apiKeys.listForMembership(m.id).map((k) => ({ ...k, organizationName: m.organizationName })))
    return { memberships, keys }
  }

  function render(request: FastifyRequest, reply: FastifyReply, user: { id: string; email: string }, extra: { newKey?: { name: string; key: string }; notice?: string } = {}, status = 200) {
    const browserId = browser.browserId(request, reply)
    const { memberships, keys } = ownKeys(user.id)
    return sendPage(reply, status, accountPage({
      csrf: browser.csrfToken(browserId, ACCOUNT_CSRF),
      userEmail: user.email,
      memberships: memberships.map((m) => ({ membershipId: m.id, organizationName: m.organizationName, organizationSlug: m.organizationSlug, role: m.role })),
      keys: keys.map((k) => ({ id: k.id, name: k.name, displayPrefix: k.displayPrefix, scopes: k.scopes, organizationName: k.organizationName, createdAt: k.createdAt, lastUsedAt: k.lastUsedAt, expiresAt: k.expiresAt, revokedAt: k.revokedAt })),
      clients: repos.oauthGrants.authorizedClients(user.id, Date.now()),
      ...extra,
    }))
  }

  function signInForm(request: FastifyRequest, reply: FastifyReply, extra: { email?: string; error?: string } = {}, status = 200) {
    const browserId = browser.browserId(request, reply)
    return sendPage(reply, status, signInPage({ action: '/account/signin', csrf: browser.csrfToken(browserId, ACCOUNT_CSRF), ...extra }))
  }

  fastify.get('/account', async (request, reply) => {
    const user = browser.user(request)
    if (!user) return seeOther(reply, '/account/signin')
    return render(request, reply, user)
  })

  fastify.get('/account/signin', async (request, reply) => {
    if (browser.user(request)) return seeOther(reply, '/account')
    return signInForm(request, reply)
  })

  fastify.post('/account/signin', async (request, reply) => {
    const body = (request.body ?? {}) as Record<string, unknown>
    browser.checkForm(request, ACCOUNT_CSRF, body.csrf)
    const result = await browser.signInAttempt(request, body.email, body.password, { form: 'account' })
    if ('refused' in result) {
      refusalHeaders(reply, result.refused)
      return signInForm(request, reply, { email: result.email, error: result.refused.message }, result.refused.status)
    }
    if ('wrong' in result) return signInForm(request, reply, { email: result.email, error: 'Incorrect email or password.' }, 401)
    browser.signIn(reply, result.user.id)
    return seeOther(reply, '/account')
  })

  fastify.post('/account/signout', async (request, reply) => {
    browser.checkForm(request, ACCOUNT_CSRF, (request.body as Record<string, unknown> | undefined)?.csrf)
    browser.signOut(request, reply)
    return seeOther(reply, '/account/signin')
  })

  fastify.post('/account/keys', async (request, reply) => {
    const body = (request.body ?? {}) as Record<string, unknown>
    browser.checkForm(request, ACCOUNT_CSRF, body.csrf)
    const user = signedIn(request)
    const name = typeof body.name === 'string' ? body.name.trim() : ''
    if (name === '' || name.length > 100) return render(request, reply, user, { notice: 'Give the key a name of 1 to 100 characters.' }, 400)
    const membership = typeof body.membership === 'string' ? repos.memberships.byId(body.membership) : undefined
    if (!membership || membership.userId !== user.id) return render(request, reply, user, { notice: 'Choose one of your organizations.' }, 400)
    const requested = Array.isArray(body.scope) ? body.scope : body.scope === undefined ? [] : [body.scope]
    const scopes = SCOPES.filter((s) => requested.includes(s))
    if (scopes.length === 0 || requested.some((s) => !(SCOPES as readonly unknown[]).includes(s))) {
      return render(request, reply, user, { notice: 'Choose at least one scope.' }, 400)
    }
    const { key } = repos.apiKeys.create({ membershipId: membership.id, name, scopes })
    request.log.info({ membership: membership.id }, 'API key created on the account page')
    return render(request, reply, user, { newKey: { name, key } }, 201)
  })

  /** A key of the signed-in user that is still active, or a 404 page (another member's id is indistinguishable). */
  function activeOwnKey(userId: string, id: string) {
    const key = ownKeys(userId).keys.find((k) => k.id === id)
    if (!key || key.revokedAt !== null || (key.expiresAt !== null && key.expiresAt <= Date.now())) {
      throw fail('NOT_FOUND', { message: 'No such active API key in your account' })
    }
    return key
  }

  fastify.post('/account/keys/:id/rotate', async (request, reply) => {
    browser.checkForm(request, ACCOUNT_CSRF, (request.body as Record<string, unknown> | undefined)?.csrf)
    const user = signedIn(request)
    const old = activeOwnKey(user.id, (request.params as { id: string }).id)
    const created = repos.transaction(() => {
      const next = repos.apiKeys.create({ membershipId: old.membershipId, name: old.name, scopes: old.scopes.split(' '), expiresAt: old.expiresAt })
      repos.apiKeys.revoke(old.id)
      return next
    })
    auth.revoked(`key:${old.id}`)
    request.log.info({ key: old.id }, 'API key rotated on the account page')
    return render(request, reply, user, { newKey: { name: old.name, key: created.key }, notice: `The previous key ${old.displayPrefix}… is revoked.` })
  })

  fastify.post('/account/keys/:id/revoke', async (request, reply) => {
    browser.checkForm(request, ACCOUNT_CSRF, (request.body as Record<string, unknown> | undefined)?.csrf)
    const user = signedIn(request)
    const key = activeOwnKey(user.id, (request.params as { id: string }).id)
    repos.apiKeys.revoke(key.id)
    auth.revoked(`key:${key.id}`)
    request.log.info({ key: key.id }, 'API key revoked on the account page')
    return seeOther(reply, '/account')
  })

  fastify.post('/account/clients/:clientId/revoke', async (request, reply) => {
    browser.checkForm(request, ACCOUNT_CSRF, (request.body as Record<string, unknown> | undefined)?.csrf)
    const user = signedIn(request)
    const { clientId } = request.params as { clientId: string }
    const { jtis } = repos.oauthGrants.revokeClientForUser(user.id, clientId, Date.now())
    for (const jti of jtis) auth.revoked(`jwt:${jti}`)
    request.log.info({ client: clientId }, 'client access revoked on the account page')
    return seeOther(reply, '/account')
  })
}

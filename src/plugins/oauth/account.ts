import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { SCOPES } from '../../auth/principal.js'
import { isEnvInputPath } from '../browser-inputs.js'
import { fail } from '../../errors/service-error.js'
import type { CredentialActor } from '../../db/repos/audit.js'
import { documentHost } from '../../oauth/document-clients.js'
import { accountPage, confirmPage, serverLabel, signInPage, type ConfirmPageData } from '../../web/pages.js'
import type { BrowserState } from './browser.js'
import { signInChoices } from './single-sign-on.js'
import { answerErrorsWithPages, refusalHeaders, seeOther, sendPage } from './page-replies.js'
import { ShownOnceStore, type ShownOnce } from './shown-once.js'

const ACCOUNT_CSRF = 'account'

interface SignedIn {
  user: { id: string; email: string }
  /** The browser's sign-in: what the account page shows once is kept under it. */
  signInId: string
}

/**
 * /account: the signed-in member's own API keys (create, shown once; rotate; revoke) and the OAuth clients they
 * authorized (revoke). This is the contract's "authenticated API-key flow". Every change that ends a credential also
 * ends the sessions bound to it.
 *
 * Every change is a form post answered 303 to /account (POST-redirect-GET): what the answer shows (a new key, a
 * notice) waits in ShownOnceStore for the next GET, so reloading shows it no more and changes nothing. Rotating and
 * revoking ask first, on a confirmation page whose form makes the change. Changes are audited by the repositories,
 * with this page as the actor.
 */
export async function accountPages(fastify: FastifyInstance, opts: { browser: BrowserState }): Promise<void> {
  const { repos, auth, config, clock } = fastify
  const { browser } = opts
  const shownOnce = new ShownOnceStore(config.accountNoticeTtlMs)
  answerErrorsWithPages(fastify, { link: { href: '/account', label: 'Back to your account' } })

  async function current(request: FastifyRequest): Promise<SignedIn | undefined> {
    const user = await browser.user(request)
    const signInId = browser.signInId(request)
    return user && signInId ? { user, signInId } : undefined
  }

  async function signedIn(request: FastifyRequest): Promise<SignedIn> {
    const who = await current(request)
    if (!who) throw fail('SIGN_IN_REQUIRED')
    return who
  }

  /** The audit log's actor for a change made on this page. */
  function actor(request: FastifyRequest, who: SignedIn): CredentialActor {
    return { via: 'account_page', userId: who.user.id, requestId: String(request.id) }
  }

  /** Memberships of the user, and the keys of each, for the page and for ownership checks. */
  async function ownKeys(userId: string) {
    const memberships = await repos.memberships.forUser(userId)
    const keys: Array<Awaited<ReturnType<typeof repos.apiKeys.listForMembership>>[number] & { organizationName: string }> = []
    for (const m of memberships) {
      for (const k of await repos.apiKeys.listForMembership(m.id)) keys.push({ ...k, organizationName: m.organizationName })
    }
    return { memberships, keys }
  }

  async function render(request: FastifyRequest, reply: FastifyReply, user: { id: string; email: string }, extra: ShownOnce = {}, status = 200) {
    const browserId = browser.browserId(request, reply)
    const { memberships, keys } = await ownKeys(user.id)
    const now = clock.now()
    const clients = await repos.oauthGrants.authorizedClients(user.id, now)
    return sendPage(reply, status, accountPage({
      csrf: browser.csrfToken(browserId, ACCOUNT_CSRF),
      userEmail: user.email,
      memberships: memberships.map((m) => ({ membershipId: m.id, organizationName: m.organizationName, organizationSlug: m.organizationSlug, role: m.role })),
      keys: keys.map((k) => ({ id: k.id, name: k.name, displayPrefix: k.displayPrefix, scopes: k.scopes, organizationName: k.organizationName, createdAt: k.createdAt, lastUsedAt: k.lastUsedAt, expiresAt: k.expiresAt, revokedAt: k.revokedAt })),
      clients: clients.map(({ clientSource, ...c }) => {
        const host = documentHost({ id: c.clientId, source: clientSource })
        return host !== undefined ? { ...c, clientHost: host } : c
      }),
      now,
      ...extra,
    }))
  }

  /** The answer to every change: what to show once is stored for the next GET, which the 303 leads to. */
  function done(reply: FastifyReply, who: SignedIn, shown: ShownOnce): FastifyReply {
    shownOnce.put(who.signInId, shown, clock.now())
    return seeOther(reply, '/account')
  }

  function confirm(request: FastifyRequest, reply: FastifyReply, page: Omit<ConfirmPageData, 'csrf' | 'cancelHref'>) {
    const browserId = browser.browserId(request, reply)
    return sendPage(reply, 200, confirmPage({ ...page, csrf: browser.csrfToken(browserId, ACCOUNT_CSRF), cancelHref: '/account' }))
  }

  /**
   * Where a sign-in goes on to: /account, or the page that sent the browser here (`?return=`), when it is one of the
   * few of ours that do (never any other address: an open redirect).
   */
  function returnTo(request: FastifyRequest): string {
    const asked = (request.query as Record<string, unknown> | undefined)?.return
    return typeof asked === 'string' && isEnvInputPath(asked) ? asked : '/account'
  }

  function signInForm(request: FastifyRequest, reply: FastifyReply, extra: { email?: string; error?: string } = {}, status = 200) {
    const browserId = browser.browserId(request, reply)
    const back = returnTo(request)
    const action = back === '/account' ? '/account/signin' : `/account/signin?return=${encodeURIComponent(back)}`
    return sendPage(reply, status, signInPage({ action, csrf: browser.csrfToken(browserId, ACCOUNT_CSRF), server: serverLabel(config.baseUrl), ...signInChoices(config), ...extra }))
  }

  fastify.get('/account', async (request, reply) => {
    const who = await current(request)
    if (!who) return seeOther(reply, '/account/signin')
    return render(request, reply, who.user, shownOnce.take(who.signInId, clock.now()))
  })

  fastify.get('/account/signin', async (request, reply) => {
    if (await browser.user(request)) return seeOther(reply, returnTo(request))
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
    await browser.signIn(reply, result.user.id)
    return seeOther(reply, returnTo(request))
  })

  fastify.post('/account/signout', async (request, reply) => {
    browser.checkForm(request, ACCOUNT_CSRF, (request.body as Record<string, unknown> | undefined)?.csrf)
    const signInId = browser.signInId(request)
    if (signInId) shownOnce.drop(signInId)
    await browser.signOut(request, reply)
    return seeOther(reply, '/account/signin')
  })

  fastify.post('/account/keys', async (request, reply) => {
    const body = (request.body ?? {}) as Record<string, unknown>
    browser.checkForm(request, ACCOUNT_CSRF, body.csrf)
    const who = await signedIn(request)
    const { user } = who
    // A refused form is answered in place (400): posting it again changes nothing either.
    const name = typeof body.name === 'string' ? body.name.trim() : ''
    if (name === '' || name.length > 100) return render(request, reply, user, { notice: 'Give the key a name of 1 to 100 characters.' }, 400)
    const membership = typeof body.membership === 'string' ? await repos.memberships.byId(body.membership) : undefined
    if (!membership || membership.userId !== user.id) return render(request, reply, user, { notice: 'Choose one of your organizations.' }, 400)
    const requested = Array.isArray(body.scope) ? body.scope : body.scope === undefined ? [] : [body.scope]
    const scopes = SCOPES.filter((s) => requested.includes(s))
    if (scopes.length === 0 || requested.some((s) => !(SCOPES as readonly unknown[]).includes(s))) {
      return render(request, reply, user, { notice: 'Choose at least one scope.' }, 400)
    }
    const { key } = await repos.apiKeys.create({ membershipId: membership.id, name, scopes, by: actor(request, who) })
    request.log.info({ membership: membership.id }, 'API key created on the account page')
    return done(reply, who, { newKey: { name, key } })
  })

  /**
   * A key of the signed-in user, or a 404 page (another member's id is indistinguishable). `revoked` keys are
   * returned (a second post of a confirmation form finds its key revoked already); expired ones are not.
   */
  async function ownKey(userId: string, id: string) {
    const key = (await ownKeys(userId)).keys.find((k) => k.id === id)
    if (!key || (key.revokedAt === null && key.expiresAt !== null && key.expiresAt <= clock.now())) {
      throw fail('NOT_FOUND', { message: 'No such active API key in your account' })
    }
    return key
  }

  async function activeOwnKey(userId: string, id: string) {
    const key = await ownKey(userId, id)
    if (key.revokedAt !== null) throw fail('NOT_FOUND', { message: 'No such active API key in your account' })
    return key
  }

  const keyLabel = (k: { name: string; displayPrefix: string }) => `key “${k.name}” (${k.displayPrefix}…)`
  const keyId = (request: FastifyRequest) => (request.params as { id: string }).id
  const confirmed = (request: FastifyRequest) => (request.body as Record<string, unknown> | undefined)?.confirm === 'yes'

  function rotateQuestion(request: FastifyRequest, reply: FastifyReply, key: { id: string; name: string; displayPrefix: string }) {
    return confirm(request, reply, {
      question: `Rotate ${keyLabel(key)}?`,
      consequence: 'A new key with the same name, organization and scopes replaces it, shown once. This key is revoked: clients using it are refused from their next request until they are given the new one.',
      action: `/account/keys/${encodeURIComponent(key.id)}/rotate`,
      confirmLabel: 'Rotate',
    })
  }

  function revokeQuestion(request: FastifyRequest, reply: FastifyReply, key: { id: string; name: string; displayPrefix: string }) {
    return confirm(request, reply, {
      question: `Revoke ${keyLabel(key)}?`,
      consequence: 'Clients using it are refused from their next request, and its open sessions end. This cannot be undone.',
      action: `/account/keys/${encodeURIComponent(key.id)}/revoke`,
      confirmLabel: 'Revoke',
    })
  }

  fastify.get('/account/keys/:id/rotate', async (request, reply) => {
    const who = await current(request)
    if (!who) return seeOther(reply, '/account/signin')
    return rotateQuestion(request, reply, await activeOwnKey(who.user.id, keyId(request)))
  })

  fastify.post('/account/keys/:id/rotate', async (request, reply) => {
    browser.checkForm(request, ACCOUNT_CSRF, (request.body as Record<string, unknown> | undefined)?.csrf)
    const who = await signedIn(request)
    const key = await ownKey(who.user.id, keyId(request))
    // Already rotated (a second click): the first answer's new key still waits for the GET; do not replace it.
    if (key.revokedAt !== null) return seeOther(reply, '/account')
    if (!confirmed(request)) return rotateQuestion(request, reply, key)
    const rotated = await repos.apiKeys.rotate(key.id, actor(request, who))
    if (!rotated) return seeOther(reply, '/account')
    auth.revoked(`key:${key.id}`)
    request.log.info({ key: key.id }, 'API key rotated on the account page')
    return done(reply, who, {
      newKey: { name: key.name, key: rotated.key },
      notice: `Key “${key.name}” rotated: the previous key ${key.displayPrefix}… is revoked; clients using it are refused from their next request.`,
    })
  })

  fastify.get('/account/keys/:id/revoke', async (request, reply) => {
    const who = await current(request)
    if (!who) return seeOther(reply, '/account/signin')
    return revokeQuestion(request, reply, await activeOwnKey(who.user.id, keyId(request)))
  })

  fastify.post('/account/keys/:id/revoke', async (request, reply) => {
    browser.checkForm(request, ACCOUNT_CSRF, (request.body as Record<string, unknown> | undefined)?.csrf)
    const who = await signedIn(request)
    const key = await ownKey(who.user.id, keyId(request))
    if (key.revokedAt !== null) return seeOther(reply, '/account')
    if (!confirmed(request)) return revokeQuestion(request, reply, key)
    if (await repos.apiKeys.revoke(key.id, actor(request, who))) {
      auth.revoked(`key:${key.id}`)
      request.log.info({ key: key.id }, 'API key revoked on the account page')
    }
    return done(reply, who, { notice: `Key “${key.name}” (${key.displayPrefix}…) revoked; clients using it are refused from their next request.` })
  })

  /** The user's live authorizations of a client (one per organization), or a 404 page. */
  async function authorizedClient(userId: string, clientId: string) {
    const rows = (await repos.oauthGrants.authorizedClients(userId, clock.now())).filter((c) => c.clientId === clientId)
    const first = rows[0]
    if (!first) throw fail('NOT_FOUND', { message: 'No such authorized application in your account' })
    // A document client is named by its host, the part of its identity that was checked.
    const shown = documentHost({ id: clientId, source: first.clientSource }) ?? first.clientName
    return { clientId, clientName: shown, organizations: rows.map((r) => r.organizationName) }
  }

  function clientQuestion(request: FastifyRequest, reply: FastifyReply, client: Awaited<ReturnType<typeof authorizedClient>>) {
    return confirm(request, reply, {
      question: `Revoke access of “${client.clientName}”?`,
      consequence: `It can no longer act for you in ${client.organizations.join(', ')}: its tokens are refused from its next request, and it must be authorized again to connect.`,
      action: `/account/clients/${encodeURIComponent(client.clientId)}/revoke`,
      confirmLabel: 'Revoke access',
    })
  }

  const clientIdOf = (request: FastifyRequest) => (request.params as { clientId: string }).clientId

  fastify.get('/account/clients/:clientId/revoke', async (request, reply) => {
    const who = await current(request)
    if (!who) return seeOther(reply, '/account/signin')
    return clientQuestion(request, reply, await authorizedClient(who.user.id, clientIdOf(request)))
  })

  fastify.post('/account/clients/:clientId/revoke', async (request, reply) => {
    browser.checkForm(request, ACCOUNT_CSRF, (request.body as Record<string, unknown> | undefined)?.csrf)
    const who = await signedIn(request)
    const clientId = clientIdOf(request)
    if (!confirmed(request)) return clientQuestion(request, reply, await authorizedClient(who.user.id, clientId))
    const name = (await repos.oauthClients.byId(clientId))?.name ?? clientId
    const { grants, jtis } = await repos.oauthGrants.revokeClientForUser(who.user.id, clientId, clock.now(), actor(request, who))
    for (const jti of jtis) auth.revoked(`jwt:${jti}`)
    // Nothing left to revoke: a second post of the form; the first one's notice still waits for the GET.
    if (grants === 0) return seeOther(reply, '/account')
    request.log.info({ client: clientId }, 'client access revoked on the account page')
    return done(reply, who, { notice: `Access of “${name}” revoked; it is refused from its next request and must be authorized again to connect.` })
  })
}

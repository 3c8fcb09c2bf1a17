import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { SCOPES } from '../../auth/principal.js'
import type { AuthorizationRequest } from '../../db/repos/authorizations.js'
import type { TxRepos } from '../../db/repos/index.js'
import type { MembershipView } from '../../db/repos/memberships.js'
import type { OAuthClient } from '../../db/repos/oauth-clients.js'
import { toOAuthBody } from '../../errors/render.js'
import { fail, isServiceError, ServiceError } from '../../errors/service-error.js'
import { randomSecret, sha256Hex } from '../../lib/crypto.js'
import { clientAddressKey } from '../../limits/client-address.js'
import { oauthAuthorize, pendingAuthorizationsRefusal } from '../../limits/named.js'
import { windowHook } from '../../limits/store.js'
import type { ClientDocument } from '../../oauth/client-documents/index.js'
import { documentHost, type DocumentClients } from '../../oauth/document-clients.js'
import { checkChallenge } from '../../oauth/pkce.js'
import { preferredMembership } from '../../oauth/preferred-organization.js'
import { isLoopbackRedirect, redirectUriMatches } from '../../oauth/redirect-uri.js'
import { resourceAudience } from '../../oauth/resource.js'
import { narrowingNotice, narrowScope, normalizeScope, SCOPE_DESCRIPTIONS } from '../../oauth/scopes.js'
import { consentPage, errorPage, serverLabel, signInPage } from '../../web/pages.js'
import { formFields } from './api.js'
import type { BrowserState } from './browser.js'
import { signInChoices } from './single-sign-on.js'
import { answerErrorsWithPages, refusalHeaders, seeOther, sendPage } from './page-replies.js'

const MAX_STATE = 1024
/**
 * The contract requires `state`; some clients (the official SDK's simple provider among them) send none. The refusal
 * says what to send and why, in ASCII (it travels in error_description). Like every error after the client and
 * redirect checks, it goes back to the client's redirect URI (docs/decisions/oauth.md), where its developer will look.
 */
const STATE_REQUIRED =
  'state is required: send a random, unguessable value of at least 22 characters (128 bits, e.g. 16 random bytes base64url-encoded) and check that the redirect brings it back unchanged (RFC 6749 section 10.12)'

/** A parked authorization request, opened by the browser that started it. */
interface Pending {
  id: string
  row: AuthorizationRequest
  client: OAuthClient
  browserId: string
}

/** Why a sign-in link (an interaction URL) can no longer be used; the application is named only to its own browser. */
interface Unusable {
  unusable: 'expired' | 'used' | 'elsewhere'
  clientName?: string
}

/** The client of an authorization request, registered or identified by its metadata document. */
interface RequestClient {
  id: string
  redirectUris: readonly string[]
  scope: string
  /** A document client's document: its row is saved from it when the request is parked. */
  document?: ClientDocument
}

/** What a checked /oauth/authorize request asks for, ready to be parked. */
interface AuthorizeParams {
  scope: string
  state: string
  challenge: string
  audience: string
}

/**
 * Pages answer no CORS preflight (RFC 9700 §2.6: no CORS at the authorization endpoint or the consent pages): an
 * OPTIONS there is a 405 page naming the methods the path serves, without any Access-Control-* header.
 */
const PAGE_METHODS: ReadonlyArray<[path: string, allow: string]> = [
  ['/oauth/authorize', 'GET'],
  ['/oauth/interaction/:id', 'GET'],
  ['/oauth/interaction/:id/signin', 'POST'],
  ['/oauth/interaction/:id/consent', 'POST'],
]

/**
 * The browser side of the code flow: GET /oauth/authorize checks the request and parks it server-side, then the
 * interaction pages sign the user in and ask for consent; the decision redirects (303) to the client.
 */
export async function authorizationPages(fastify: FastifyInstance, opts: { browser: BrowserState; documents: DocumentClients }): Promise<void> {
  const { config, repos, clock } = fastify
  const { browser, documents } = opts
  answerErrorsWithPages(fastify)

  // GET /oauth/authorize per client address.
  const authorizations = windowHook(fastify.limits, oauthAuthorize(config), (request) => clientAddressKey(request.ip))

  for (const [path, allow] of PAGE_METHODS) {
    fastify.options(path, async () => {
      throw fail('METHOD_NOT_ALLOWED', { message: `${path} is a page: it answers ${allow} only, and no cross-origin request`, headers: { allow } })
    })
  }

  function redirectWith(reply: FastifyReply, redirectUri: string, params: Record<string, string>): FastifyReply {
    const url = new URL(redirectUri)
    for (const [k, v] of Object.entries(params)) url.searchParams.append(k, v)
    url.searchParams.append('iss', config.baseUrl)
    return seeOther(reply, url.href)
  }

  function redirectError(reply: FastifyReply, redirectUri: string, state: string | undefined, err: ServiceError): FastifyReply {
    const body = toOAuthBody(err)
    return redirectWith(reply, redirectUri, { error: body.error, error_description: body.error_description, ...(state !== undefined ? { state } : {}) })
  }

  fastify.get('/oauth/authorize', {
    onRequest: authorizations,
  }, async (request, reply) => {
    const query = request.query as Record<string, unknown>
    // Client and redirect problems are shown here and never redirected: the redirect target is not trusted yet.
    let client: RequestClient
    let redirectUri: string
    try {
      ({ client, redirectUri } = await checkClient(query))
    } catch (err) {
      if (!isServiceError(err)) throw err
      // The reader is the person at the browser; the reason itself is for the application's developer.
      return sendPage(reply, 400, errorPage({
        title: 'This sign-in link is not valid',
        message: 'This sign-in link is not valid. Go back to the application and connect again.',
        next: 'If this happens again, the application is misconfigured: tell its developer what is written below.',
        detail: err.message,
      }))
    }
    const stateValue = query.state
    const state = typeof stateValue === 'string' && stateValue !== '' && stateValue.length <= MAX_STATE ? stateValue : undefined
    let params: AuthorizeParams
    try {
      params = checkRequest(query, client.scope)
    } catch (err) {
      if (!isServiceError(err)) throw err
      return redirectError(reply, redirectUri, state, err)
    }
    // Over the bound this is a page (429), not a redirect: the client did nothing wrong, this address has too many.
    const clientAddress = sha256Hex(clientAddressKey(request.ip))
    // The count and the insert in one transaction: no other request from the address gets in between.
    const { requestId, change } = await repos.transaction(async (tx) => {
      await refuseOverPendingBound(tx, request, clientAddress)
      // A document client's row is saved with its first request: the request, code and grant refer to it.
      const saved = client.document ? await documents.save(tx, client.document) : undefined
      const browserId = browser.browserId(request, reply)
      const requestId = randomSecret(32)
      const now = clock.now()
      await tx.authorizations.createRequest({
        id: sha256Hex(requestId),
        browserBinding: sha256Hex(browserId),
        clientId: client.id,
        redirectUri,
        scope: params.scope,
        state: params.state,
        codeChallenge: params.challenge,
        resource: params.audience,
        clientAddress,
        createdAt: now,
        expiresAt: now + config.authRequestTtlMs,
      })
      return { requestId, change: saved?.change }
    })
    if (client.document && change) documents.announce(change, client.document, request.log)
    return seeOther(reply, `/oauth/interaction/${requestId}`)
  })

  /**
   * The client (registered, or by its metadata document) and the exact redirect URI it registered or its document
   * lists; errors here are shown, never redirected.
   */
  async function checkClient(query: Record<string, unknown>): Promise<{ client: RequestClient; redirectUri: string }> {
    const clientId = single(query, 'client_id')
    if (clientId === undefined) throw fail('OAUTH_INVALID_REQUEST', { message: 'client_id is required' })
    const client = documents.isDocumentUrl(clientId) ? documentClient(await documents.document(clientId)) : await registeredClient(clientId)
    const redirectUri = single(query, 'redirect_uri')
    if (redirectUri === undefined) throw fail('OAUTH_INVALID_REQUEST', { message: 'redirect_uri is required' })
    if (!redirectUriMatches(client.redirectUris, redirectUri)) {
      const where = client.document ? 'listed in the redirect_uris of the client metadata document' : 'registered for this client'
      throw fail('OAUTH_INVALID_REQUEST', { message: `redirect_uri is not one of the addresses ${where} (the exact form counts: localhost and 127.0.0.1 differ)` })
    }
    return { client, redirectUri }
  }

  async function registeredClient(clientId: string): Promise<RequestClient> {
    const client = await repos.oauthClients.byId(clientId)
    // A document client's row is not a registration: its id is a URL, which the branch above has taken.
    if (!client || client.source !== 'registration') throw fail('OAUTH_INVALID_CLIENT', { message: 'Unknown client_id: register the client first' })
    return client
  }

  function documentClient(document: ClientDocument): RequestClient {
    return { id: document.clientId, redirectUris: document.redirectUris, scope: document.scope, document }
  }

  /** Every other parameter of the contract; errors here go back to the client's redirect URI. */
  function checkRequest(query: Record<string, unknown>, clientScope: string): AuthorizeParams {
    const stateValue = query.state
    if (Array.isArray(stateValue)) throw fail('OAUTH_INVALID_REQUEST', { message: 'state is repeated' })
    for (const name of ['response_type', 'scope', 'code_challenge', 'code_challenge_method']) single(query, name)
    if (Array.isArray(query.resource)) throw fail('OAUTH_INVALID_TARGET', { message: 'resource must be sent once' })
    const responseType = single(query, 'response_type')
    if (responseType === undefined) throw fail('OAUTH_INVALID_REQUEST', { message: 'response_type is required' })
    if (responseType !== 'code') throw fail('OAUTH_UNSUPPORTED_RESPONSE_TYPE')
    if (typeof stateValue !== 'string' || stateValue === '') throw fail('OAUTH_INVALID_REQUEST', { message: STATE_REQUIRED })
    if (stateValue.length > MAX_STATE) throw fail('OAUTH_INVALID_REQUEST', { message: `state must be at most ${MAX_STATE} characters` })
    // No scope asks for the client's registered scope: the pre-defined default of RFC 6749 §3.3
    // (docs/decisions/oauth.md). The consent page still shows exactly what is granted.
    const scopeParam = single(query, 'scope') ?? clientScope
    const scope = normalizeScope(scopeParam)
    if (scope === null) throw fail('OAUTH_INVALID_SCOPE', { message: `Unknown scope; the scopes are ${SCOPES.join(' and ')}` })
    const registered = new Set(clientScope.split(' '))
    if (scope.split(' ').some((s) => !registered.has(s))) throw fail('OAUTH_INVALID_SCOPE', { message: `The client registered only ${clientScope}` })
    const challenge = single(query, 'code_challenge')
    if (challenge === undefined) throw fail('OAUTH_INVALID_REQUEST', { message: 'code_challenge is required: PKCE with S256' })
    const challengeProblem = checkChallenge(challenge)
    if (challengeProblem) throw fail('OAUTH_INVALID_REQUEST', { message: challengeProblem })
    const method = single(query, 'code_challenge_method')
    if (method === undefined) throw fail('OAUTH_INVALID_REQUEST', { message: 'code_challenge_method is required and must be S256' })
    if (method !== 'S256') throw fail('OAUTH_INVALID_REQUEST', { message: 'code_challenge_method must be S256 (plain is not supported)' })
    const resourceParam = single(query, 'resource')
    if (resourceParam === undefined) throw fail('OAUTH_INVALID_TARGET', { message: `resource is required: send resource=${config.baseUrl}` })
    const audience = resourceAudience(resourceParam, config.baseUrl)
    if (audience === null) throw fail('OAUTH_INVALID_TARGET', { message: `resource must name this server: ${config.baseUrl} (or ${config.baseUrl}/mcp)` })
    return { scope, state: stateValue, challenge, audience }
  }

  /**
   * Each pending request is a row for up to SERVICE_AUTH_REQUEST_TTL_MS, created without signing in: one address may
   * hold only so many unanswered ones. The count and the insert that follows run in one transaction (`tx`).
   */
  async function refuseOverPendingBound(tx: TxRepos, request: FastifyRequest, clientAddress: string): Promise<void> {
    const now = clock.now()
    const pending = await tx.authorizations.pendingFrom(clientAddress, now)
    if (pending.count < config.pendingAuthorizationsPerAddress) return
    const retryAfter = Math.max(1, Math.ceil(((pending.oldestExpiresAt ?? now + config.authRequestTtlMs) - now) / 1000))
    request.log.warn({ address: request.ip, pending: pending.count }, 'authorization refused: too many pending authorizations from this address')
    throw pendingAuthorizationsRefusal(config, retryAfter)
  }

  /**
   * The pending request named in the URL, usable only by the browser that started it; else why not. A request past
   * SERVICE_AUTH_REQUEST_TTL_MS is soon purged, so an unknown id is most likely an expired one, and is called that.
   */
  async function pending(request: FastifyRequest): Promise<Pending | Unusable> {
    const { id } = request.params as { id: string }
    const row = /^[A-Za-z0-9_-]{43}$/.test(id) ? await repos.authorizations.request(sha256Hex(id)) : undefined
    if (!row) return { unusable: 'expired' }
    const browserId = browser.existingBrowserId(request)
    // Another browser learns nothing of the request, not even the application's name.
    if (!browserId || sha256Hex(browserId) !== row.browserBinding) return { unusable: 'elsewhere' }
    const client = await repos.oauthClients.byId(row.clientId)
    if (!client) return { unusable: 'expired' }
    if (row.consumedAt !== null) return { unusable: 'used', clientName: shownName(client) }
    if (row.expiresAt <= clock.now()) return { unusable: 'expired', clientName: shownName(client) }
    return { id, row, client, browserId }
  }

  /** The page of a sign-in link that can no longer be used: what happened and what to do, in the reader's terms. */
  function unusablePage(request: FastifyRequest, reply: FastifyReply, u: Unusable): FastifyReply {
    request.log.info({ reason: u.unusable }, 'authorization link no longer usable')
    const app = u.clientName ?? 'the application'
    const pages: Record<Unusable['unusable'], { title: string; message: string }> = {
      expired: { title: 'This sign-in link has expired', message: `This sign-in link has expired. Go back to ${app} and connect again.` },
      used: { title: 'This sign-in link was already used', message: `This sign-in link was already used. If ${app} is not connected, go back to it and connect again.` },
      elsewhere: {
        title: 'This sign-in link belongs to another browser',
        message: 'This sign-in link was started in another browser. Go back to the application and connect again, then finish in the browser that opens.',
      },
    }
    return sendPage(reply, 400, errorPage(pages[u.unusable]))
  }

  async function showConsent(reply: FastifyReply, p: Pending, user: { id: string; email: string }, status = 200): Promise<FastifyReply> {
    const memberships = await repos.memberships.forUser(user.id)
    const organizations = memberships.map((m) => consentOrganization(m, p.row.scope))
    const preselected = preferredMembership(
      memberships.map((m, i) => ({ id: m.id, createdAt: m.createdAt, grantable: organizations[i]!.grantable })),
      await repos.oauthGrants.lastChosenMembership(user.id, p.client.id),
    )
    const host = documentHost(p.client)
    return sendPage(reply, status, consentPage({
      action: `/oauth/interaction/${p.id}/consent`,
      csrf: browser.csrfToken(p.browserId, p.id),
      clientName: p.client.name,
      clientId: p.client.id,
      // A document client is who its host says; a loopback redirect is where any local program can listen.
      ...(host !== undefined ? { clientHost: host, loopbackRedirect: isLoopbackRedirect(p.row.redirectUri) } : {}),
      redirectHost: redirectHost(p.row.redirectUri),
      scopes: p.row.scope.split(' ').map((name) => ({ name, description: SCOPE_DESCRIPTIONS[name as keyof typeof SCOPE_DESCRIPTIONS] ?? name })),
      organizations,
      ...(preselected !== undefined ? { preselected } : {}),
      userEmail: user.email,
      server: serverLabel(config.baseUrl),
    }))
  }

  function showSignIn(reply: FastifyReply, p: Pending, extra: { email?: string; error?: string } = {}, status = 200): FastifyReply {
    return sendPage(reply, status, signInPage({
      action: `/oauth/interaction/${p.id}/signin`,
      csrf: browser.csrfToken(p.browserId, p.id),
      server: serverLabel(config.baseUrl),
      clientName: shownName(p.client),
      ...signInChoices(config, p.id),
      ...extra,
    }))
  }

  fastify.get('/oauth/interaction/:id', async (request, reply) => {
    const p = await pending(request)
    if ('unusable' in p) return unusablePage(request, reply, p)
    const user = await browser.user(request)
    return user ? showConsent(reply, p, user) : showSignIn(reply, p)
  })

  fastify.post('/oauth/interaction/:id/signin', async (request, reply) => {
    const p = await pending(request)
    if ('unusable' in p) return unusablePage(request, reply, p)
    const body = (request.body ?? {}) as Record<string, unknown>
    browser.checkForm(request, p.id, body.csrf)
    const result = await browser.signInAttempt(request, body.email, body.password, { form: 'oauth', client: p.client.id })
    if ('refused' in result) {
      refusalHeaders(reply, result.refused)
      return showSignIn(reply, p, { email: result.email, error: result.refused.message }, result.refused.status)
    }
    if ('wrong' in result) return showSignIn(reply, p, { email: result.email, error: 'Incorrect email or password.' }, 401)
    await browser.signIn(reply, result.user.id)
    return seeOther(reply, `/oauth/interaction/${p.id}`)
  })

  fastify.post('/oauth/interaction/:id/consent', async (request, reply) => {
    // A consent form left open past its request's lifetime lands here too, and gets the same page.
    const p = await pending(request)
    if ('unusable' in p) return unusablePage(request, reply, p)
    const fields = formFields(request.body, ['csrf', 'decision', 'membership'])
    browser.checkForm(request, p.id, fields.csrf)
    const user = await browser.user(request)
    if (!user) return showSignIn(reply, p, { error: 'Your sign-in has expired. Sign in again.' }, 401)
    const decision = fields.decision
    if (decision !== 'approve' && decision !== 'deny') throw fail('BAD_REQUEST', { message: 'Choose Allow or Deny' })
    let membership
    let scope = ''
    if (decision === 'approve') {
      membership = fields.membership ? await repos.memberships.byId(fields.membership) : undefined
      // The grant claims only what the member's role can use; a role that can use none of it cannot approve.
      scope = membership ? narrowScope(p.row.scope, membership.role) : ''
      if (!membership || membership.userId !== user.id || scope === '') {
        return showConsent(reply, p, user, 400)
      }
    }
    // Single use: a second submission (double click, back button) cannot mint a second code.
    if (!(await repos.authorizations.consumeRequest(p.row.id, clock.now()))) return unusablePage(request, reply, { unusable: 'used', clientName: shownName(p.client) })
    if (decision === 'deny' || !membership) {
      request.log.info({ client: p.client.id }, 'authorization denied')
      return redirectError(reply, p.row.redirectUri, p.row.state, new ServiceError('OAUTH_ACCESS_DENIED', { message: 'The user denied access' }))
    }
    const code = randomSecret(32)
    const now = clock.now()
    await repos.authorizations.createCode({
      hash: sha256Hex(code),
      clientId: p.client.id,
      redirectUri: p.row.redirectUri,
      userId: user.id,
      membershipId: membership.id,
      organizationId: membership.organizationId,
      scope,
      resource: p.row.resource,
      codeChallenge: p.row.codeChallenge,
      createdAt: now,
      expiresAt: now + config.authCodeTtlMs,
    })
    request.log.info({ client: p.client.id, membership: membership.id, scope }, 'authorization approved')
    return redirectWith(reply, p.row.redirectUri, { code, state: p.row.state })
  })
}

/** An organization on the consent page, with what its role does to the requested scope. */
function consentOrganization(m: MembershipView, scope: string) {
  const notice = narrowingNotice(scope, m.role, m.organizationName)
  return {
    membershipId: m.id,
    name: m.organizationName,
    slug: m.organizationSlug,
    role: m.role,
    grantable: narrowScope(scope, m.role) !== '',
    ...(notice !== undefined ? { notice } : {}),
  }
}

/** One value of a query parameter: repeated is invalid_request, empty counts as absent. */
function single(query: Record<string, unknown>, name: string): string | undefined {
  const v = query[name]
  if (Array.isArray(v)) throw fail('OAUTH_INVALID_REQUEST', { message: `${name} is repeated` })
  return typeof v === 'string' && v !== '' ? v : undefined
}

/** How the pages name a client in passing: a document client by its host (verified), a registered one by its name. */
function shownName(client: OAuthClient): string {
  return documentHost(client) ?? client.name
}

/** What the consent page names as the destination: the host, or the scheme of a private-use URI. */
function redirectHost(uri: string): string {
  try {
    const u = new URL(uri)
    return u.host !== '' ? u.host : `${u.protocol}//`
  } catch {
    return uri
  }
}


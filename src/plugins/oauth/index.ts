import type { FastifyInstance, FastifyPluginAsync } from 'fastify'
import formbody from '@fastify/formbody'
import fp from 'fastify-plugin'
import { accessTokenVerifier } from '../../oauth/access-token-verifier.js'
import { clientDocumentResolver, type ClientDocumentResolver } from '../../oauth/client-documents/index.js'
import { DocumentClients } from '../../oauth/document-clients.js'
import { Keyring } from '../../oauth/keyring.js'
import { TokenService } from '../../oauth/token-service.js'
import { PLUGIN } from '../names.js'
import { accountPages } from './account.js'
import { oauthApiRoutes } from './api.js'
import { BrowserState } from './browser.js'
import { authorizationPages } from './pages.js'

const FORM_BODY_LIMIT = 16 * 1024

declare module 'fastify' {
  interface FastifyInstance {
    oauth: { keyring: Keyring; tokens: TokenService; documents: DocumentClients }
  }
}

export interface OAuthPluginOptions {
  /** Resolves Client ID Metadata Documents; default the safe fetcher of oauth/client-documents (tests hand in a double). */
  clientDocuments?: ClientDocumentResolver
}

/**
 * The authorization server: registration, the browser flow (sign-in, consent), the token and revocation endpoints and
 * the account page; and, on /mcp, the verifier for the access tokens it issues.
 */
const oauthPlugin: FastifyPluginAsync<OAuthPluginOptions> = async (fastify, opts) => {
  const { config, repos, auth, clock } = fastify
  // The one place the document resolver is built: the safe fetcher (its address checks, cache and policy), unless given.
  const resolver = opts.clientDocuments ?? clientDocumentResolver({ config, clock, limits: fastify.limits, log: fastify.log })
  const documents = new DocumentClients({ resolver, repos, clock, log: fastify.log })
  const keyring = new Keyring(repos, { issuer: () => config.baseUrl, audience: () => config.baseUrl, accessTokenTtlMs: config.accessTokenTtlMs, clock })
  await keyring.ensureKey()
  const tokens = new TokenService({
    repos,
    keyring,
    config,
    clock,
    documents,
    onRevoked: (credential) => auth.revoked(credential),
    onReuse: (event) => fastify.log.warn(event, 'OAuth credential reuse detected: the grant is revoked'),
  })
  auth.addVerifier(accessTokenVerifier(repos, keyring, (credential) => auth.revoked(credential)))
  fastify.decorate('oauth', { keyring, tokens, documents })

  const browser = new BrowserState(config, repos, fastify.limits.signIn, clock)
  // One encapsulated context for every OAuth route: form bodies are parsed here, nowhere else (not on /mcp).
  await fastify.register(async (routes) => {
    await routes.register(formbody, { bodyLimit: FORM_BODY_LIMIT })
    await routes.register(oauthApiRoutes, { tokens })
    await routes.register(authorizationPages, { browser, documents })
    await routes.register(accountPages, { browser })
  })

  // Expired codes, pending requests, browser sign-ins, token rows and forgotten sign-in failures go on the session
  // sweep's rhythm.
  const purge = async () => {
    const now = clock.now()
    browser.throttle.sweep(now)
    try {
      await repos.authorizations.purge(now)
      await repos.browserSessions.purge(now)
      await repos.oauthGrants.purge(now)
    } catch (err) {
      fastify.log.error({ err }, 'could not purge expired OAuth records')
    }
  }
  // purge reports its own failure: the system clock does not wait for it (a manual one does, lib/clock.ts).
  const timer = clock.setInterval(purge, config.sessionSweepMs)
  timer.unref()
  fastify.addHook('onClose', async () => clock.clearTimer(timer))
}

export default fp(oauthPlugin, { name: PLUGIN.oauth, fastify: '5.x', dependencies: [PLUGIN.db, PLUGIN.auth, PLUGIN.coordination, PLUGIN.rateLimits] })

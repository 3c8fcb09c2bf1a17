import type { FastifyInstance, FastifyPluginAsync } from 'fastify'
import formbody from '@fastify/formbody'
import fp from 'fastify-plugin'
import { accessTokenVerifier } from '../../oauth/access-token-verifier.js'
import { UpstreamProvider } from '../../identity/upstream.js'
import { AssertionGrant } from '../../oauth/assertion-grant.js'
import { IdJagVerifier, remoteIssuerKeys } from '../../oauth/id-jag.js'
import { clientDocumentResolver, type ClientDocumentResolver } from '../../oauth/client-documents/index.js'
import { DocumentClients } from '../../oauth/document-clients.js'
import { Keyring } from '../../oauth/keyring.js'
import { TokenService } from '../../oauth/token-service.js'
import { PLUGIN } from '../names.js'
import { accountPages } from './account.js'
import { envInputPages } from './env-input.js'
import { oauthApiRoutes } from './api.js'
import { BrowserState } from './browser.js'
import { authorizationPages } from './pages.js'
import { singleSignOnRoutes } from './single-sign-on.js'

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
  // The jwt-bearer grant exists only when the operator trusts an identity provider (trustedIssuers).
  const assertions = config.trustedIssuers.length === 0 ? undefined : new AssertionGrant({
    repos,
    config,
    clock,
    tokens,
    log: fastify.log,
    verifier: new IdJagVerifier({
      issuers: config.trustedIssuers,
      issuerId: () => config.baseUrl,
      baseUrl: () => config.baseUrl,
      maxLifetimeMs: config.assertionMaxLifetimeMs,
      clockToleranceMs: config.assertionClockToleranceMs,
      clock,
      keys: remoteIssuerKeys({ timeoutMs: config.jwksTimeoutMs, cooldownMs: config.jwksCooldownMs, cacheMs: config.jwksCacheMs }),
    }),
  })
  auth.addVerifier(accessTokenVerifier(repos, keyring, (credential) => auth.revoked(credential)))
  fastify.decorate('oauth', { keyring, tokens, documents })

  const browser = new BrowserState(config, repos, fastify.limits.signIn, clock)
  // Upstream OpenID Connect providers: only their discovery and keys are kept here, fetched at first use.
  const upstream = { timeoutMs: config.upstreamTimeoutMs, discoveryTtlMs: config.upstreamDiscoveryTtlMs, toleranceMs: config.idTokenClockToleranceMs, flowTtlMs: config.signInFlowTtlMs }
  const providers = new Map(config.signInProviders.map((p) => [p.name, new UpstreamProvider(p, upstream, clock)]))
  // One encapsulated context for every OAuth route: form bodies are parsed here, nowhere else (not on /mcp).
  await fastify.register(async (routes) => {
    await routes.register(formbody, { bodyLimit: FORM_BODY_LIMIT })
    await routes.register(oauthApiRoutes, { tokens, ...(assertions ? { assertions } : {}) })
    await routes.register(authorizationPages, { browser, documents })
    await routes.register(accountPages, { browser })
    // The tools plugin, registered later, holds the env-var key: read when a value is saved.
    await routes.register(envInputPages, { browser, secrets: () => fastify.secrets })
    await routes.register(singleSignOnRoutes, { browser, providers })
  })

  // Expired codes, pending requests, browser sign-ins, token rows, upstream sign-in flows, used assertions, values
  // asked for in the browser and forgotten sign-in failures go on the session sweep's rhythm.
  const purge = async () => {
    const now = clock.now()
    browser.throttle.sweep(now)
    try {
      await repos.authorizations.purge(now)
      await repos.browserSessions.purge(now)
      await repos.oauthGrants.purge(now)
      await repos.signInFlows.purge(now)
      await repos.assertions.purge(now)
      await repos.browserInputs.purge(now)
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

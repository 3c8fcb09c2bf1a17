import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { toOAuthBody, toServiceError } from '../../errors/render.js'
import { fail } from '../../errors/service-error.js'
import { oauthRegister } from '../../limits/named.js'
import { windowHook } from '../../limits/store.js'
import type { AssertionGrant } from '../../oauth/assertion-grant.js'
import { checkRegistration } from '../../oauth/client-metadata.js'
import { JWT_BEARER } from '../../oauth/id-jag.js'
import type { TokenService } from '../../oauth/token-service.js'
import { fromFastifyError, logFailure } from '../http.js'

const REGISTRATION_BODY_LIMIT = 64 * 1024
/** The endpoints a page of another origin may call (RFC 9700 §2.6 allows CORS here, never at /oauth/authorize). */
const CORS_ENDPOINTS = ['/oauth/register', '/oauth/token', '/oauth/revoke'] as const

/** CORS for the machine endpoints (RFC 9700 §2.6, research item 20): any origin, never with credentials. */
export function openCors(reply: FastifyReply): void {
  reply.header('access-control-allow-origin', '*')
  reply.header('access-control-expose-headers', 'WWW-Authenticate, X-Request-Id, X-Service-MCP-Version, Retry-After')
}

function noStore(reply: FastifyReply): void {
  reply.header('cache-control', 'no-store')
  reply.header('pragma', 'no-cache')
}

/**
 * One value per form field: a repeated parameter is an error (OAuth 2.1 §3.1), an empty one counts as absent.
 * Unknown fields are ignored.
 */
export function formFields(body: unknown, names: readonly string[]): Record<string, string | undefined> {
  if (typeof body !== 'object' || body === null) throw fail('OAUTH_INVALID_REQUEST', { message: 'The body must be application/x-www-form-urlencoded' })
  const out: Record<string, string | undefined> = {}
  for (const name of names) {
    const value = (body as Record<string, unknown>)[name]
    if (Array.isArray(value)) throw fail('OAUTH_INVALID_REQUEST', { message: `${name} is repeated` })
    out[name] = typeof value === 'string' && value !== '' ? value : undefined
  }
  return out
}

function requireForm(request: FastifyRequest): void {
  const type = String(request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase()
  if (type !== 'application/x-www-form-urlencoded') throw fail('OAUTH_INVALID_REQUEST', { message: 'The body must be application/x-www-form-urlencoded' })
}

function required(fields: Record<string, string | undefined>, name: string): string {
  const value = fields[name]
  if (value === undefined) throw fail('OAUTH_INVALID_REQUEST', { message: `${name} is required` })
  return value
}

/** Public clients only: any attempt at client authentication is refused with 401 invalid_client (RFC 6749 §5.2). */
function refuseClientSecrets(request: FastifyRequest, fields: Record<string, string | undefined>): void {
  if (request.headers.authorization !== undefined) {
    throw fail('OAUTH_INVALID_CLIENT', { message: 'Clients here are public: send client_id only, no Authorization header', headers: { 'www-authenticate': 'Basic realm="oauth"' } })
  }
  if (fields.client_secret !== undefined) throw fail('OAUTH_INVALID_CLIENT', { message: 'Clients here are public: send no client_secret' })
}

/** POST /oauth/register, /oauth/token and /oauth/revoke: JSON in and out, the OAuth error body on every failure. */
export async function oauthApiRoutes(fastify: FastifyInstance, opts: { tokens: TokenService; assertions?: AssertionGrant }): Promise<void> {
  const { config, repos } = fastify
  const { tokens, assertions } = opts
  // Only registration is limited here (contract: 10 per hour per IP); the token endpoint has no limiter of its own.
  const registrations = windowHook(fastify.limits, oauthRegister(config), (request) => request.ip)
  const registrationOpen = async () => {
    if (!config.registration) throw fail('OAUTH_REGISTRATION_OFF')
  }

  fastify.setErrorHandler((err, request, reply) => {
    const e = fromFastifyError(err as Error)
    logFailure(request, err, e)
    const rendered = toServiceError(e)
    if (rendered.headers) reply.headers(rendered.headers)
    noStore(reply)
    openCors(reply)
    if (rendered.retryAfter !== undefined) reply.header('retry-after', String(rendered.retryAfter))
    // Every answer here is the OAuth shape (docs/decisions/http-errors.md), a 429 too (temporarily_unavailable): OAuth
    // clients, the SDKs' among them, parse nothing else.
    return reply.code(rendered.status).type('application/json; charset=utf-8').send(toOAuthBody(rendered))
  })

  // Preflights for the machine endpoints only, each by name: the authorization and interaction pages answer none.
  for (const path of CORS_ENDPOINTS) {
    fastify.options(path, async (_request, reply) => {
      openCors(reply)
      reply.header('access-control-allow-methods', 'POST, OPTIONS')
      reply.header('access-control-allow-headers', 'Content-Type, Authorization')
      reply.header('access-control-max-age', '600')
      return reply.code(204).send()
    })
  }

  fastify.post('/oauth/register', {
    bodyLimit: REGISTRATION_BODY_LIMIT,
    // SERVICE_REGISTRATION=off: the endpoint stays, so a client that tries it anyway learns what to do instead; the
    // refusal comes before the limiter, whose window it would otherwise use up (and then answer 429 instead).
    onRequest: [registrationOpen, registrations],
  }, async (request, reply) => {
    openCors(reply)
    noStore(reply)
    const type = String(request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase()
    if (type !== 'application/json') throw fail('OAUTH_INVALID_CLIENT_METADATA', { message: 'The registration body must be application/json' })
    const checked = checkRegistration(request.body, { privateSchemes: config.redirectSchemes })
    if (!checked.ok) {
      throw fail(checked.error === 'invalid_redirect_uri' ? 'OAUTH_INVALID_REDIRECT_URI' : 'OAUTH_INVALID_CLIENT_METADATA', { message: checked.description })
    }
    const v = checked.value
    const client = await repos.oauthClients.create({ name: v.clientName, redirectUris: v.redirectUris, grantTypes: v.grantTypes, scope: v.scope })
    request.log.info({ client: client.id }, 'OAuth client registered')
    return reply.code(201).send({
      client_id: client.id,
      client_id_issued_at: Math.floor(client.createdAt / 1000),
      client_name: client.name,
      redirect_uris: client.redirectUris,
      grant_types: client.grantTypes,
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      scope: client.scope,
      pkce_required: true,
    })
  })

  fastify.post('/oauth/token', async (request, reply) => {
    openCors(reply)
    noStore(reply)
    requireForm(request)
    // Two audiences cannot be granted at once: docs/decisions/oauth.md makes that invalid_target, not a mere
    // repetition.
    if (Array.isArray((request.body as Record<string, unknown> | null)?.resource)) throw fail('OAUTH_INVALID_TARGET', { message: 'resource must be sent once' })
    const fields = formFields(request.body, ['grant_type', 'code', 'redirect_uri', 'client_id', 'code_verifier', 'refresh_token', 'scope', 'resource', 'client_secret', 'assertion'])
    refuseClientSecrets(request, fields)
    const grantType = required(fields, 'grant_type')
    const jwtBearer = grantType === JWT_BEARER && assertions !== undefined
    if (grantType !== 'authorization_code' && grantType !== 'refresh_token' && !jwtBearer) {
      throw fail('OAUTH_UNSUPPORTED_GRANT_TYPE', assertions ? { message: `Only the authorization_code, refresh_token and ${JWT_BEARER} grant types are supported` } : {})
    }
    const client = await tokens.client(required(fields, 'client_id'))
    const resource = fields.resource
    if (jwtBearer) {
      return assertions.exchange({
        client,
        assertion: required(fields, 'assertion'),
        ...(fields.scope !== undefined ? { scope: fields.scope } : {}),
        ...(resource !== undefined ? { resource } : {}),
      })
    }
    if (grantType === 'authorization_code') {
      return tokens.exchangeCode({
        client,
        code: required(fields, 'code'),
        redirectUri: required(fields, 'redirect_uri'),
        codeVerifier: required(fields, 'code_verifier'),
        ...(resource !== undefined ? { resource } : {}),
      })
    }
    return tokens.refresh({
      client,
      refreshToken: required(fields, 'refresh_token'),
      ...(fields.scope !== undefined ? { scope: fields.scope } : {}),
      ...(resource !== undefined ? { resource } : {}),
    })
  })

  fastify.post('/oauth/revoke', async (request, reply) => {
    openCors(reply)
    noStore(reply)
    requireForm(request)
    const fields = formFields(request.body, ['token', 'token_type_hint', 'client_id', 'client_secret'])
    refuseClientSecrets(request, fields)
    const client = await tokens.client(required(fields, 'client_id'))
    await tokens.revoke({ client, token: required(fields, 'token') })
    return reply.code(200).send({})
  })
}

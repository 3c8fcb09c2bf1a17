import type { FastifyPluginAsync, FastifyReply } from 'fastify'
import fp from 'fastify-plugin'
import { SCOPES } from '../auth/principal.js'
import { ID_JAG_PROFILE, JWT_BEARER } from '../oauth/id-jag.js'
import { openCors } from './oauth/api.js'
import { PLUGIN } from './names.js'

export const JWKS_PATH = '/.well-known/jwks.json'

/**
 * Discovery documents, all built from configuration: authorization-server metadata (RFC 8414), protected-resource
 * metadata at the root and at /mcp (RFC 9728), and the JWKS. Readable from any origin.
 */
const discoveryPlugin: FastifyPluginAsync = async (fastify) => {
  const { config } = fastify

  function send(reply: FastifyReply, body: unknown, maxAge: number) {
    openCors(reply)
    reply.header('cache-control', `public, max-age=${maxAge}`)
    return reply.type('application/json; charset=utf-8').send(body)
  }

  fastify.get('/.well-known/oauth-authorization-server', async (_request, reply) => {
    const base = config.baseUrl
    const assertionsOn = config.trustedIssuers.length > 0
    return send(reply, {
      issuer: base,
      authorization_endpoint: `${base}/oauth/authorize`,
      token_endpoint: `${base}/oauth/token`,
      ...(config.registration ? { registration_endpoint: `${base}/oauth/register` } : {}),
      revocation_endpoint: `${base}/oauth/revoke`,
      jwks_uri: `${base}${JWKS_PATH}`,
      response_types_supported: ['code'],
      response_modes_supported: ['query'],
      // The identity-assertion grant only while an issuer is trusted; the metadata never names which (the draft's
      // "Metadata Disclosure").
      grant_types_supported: assertionsOn ? ['authorization_code', 'refresh_token', JWT_BEARER] : ['authorization_code', 'refresh_token'],
      ...(assertionsOn ? { authorization_grant_profiles_supported: [ID_JAG_PROFILE] } : {}),
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['none'],
      revocation_endpoint_auth_methods_supported: ['none'],
      scopes_supported: [...SCOPES],
      authorization_response_iss_parameter_supported: true,
      // Clients read this flag (true, never the string) to send their document's URL as client_id instead of registering.
      ...(config.clientDocuments !== 'off' ? { client_id_metadata_document_supported: true } : {}),
    }, 3600)
  })

  const resourceMetadata = (resource: string) => ({
    resource,
    authorization_servers: [config.baseUrl],
    scopes_supported: [...SCOPES],
    bearer_methods_supported: ['header'],
    resource_name: 'MCP server',
  })
  fastify.get('/.well-known/oauth-protected-resource', async (_request, reply) => send(reply, resourceMetadata(config.baseUrl), 3600))
  fastify.get('/.well-known/oauth-protected-resource/mcp', async (_request, reply) => send(reply, resourceMetadata(`${config.baseUrl}/mcp`), 3600))
  // Short cache: a key rotated by the CLI must reach verifiers well within an access token's lifetime.
  fastify.get(JWKS_PATH, async (_request, reply) => send(reply, await fastify.oauth.keyring.jwks(), 300))

  fastify.options('/.well-known/*', async (_request, reply) => {
    openCors(reply)
    reply.header('access-control-allow-methods', 'GET, OPTIONS')
    reply.header('access-control-max-age', '600')
    return reply.code(204).send()
  })
}

export default fp(discoveryPlugin, { name: PLUGIN.discovery, fastify: '5.x', dependencies: [PLUGIN.oauth] })

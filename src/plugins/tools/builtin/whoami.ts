import { fail } from '../../../errors/service-error.js'
import { defineTool } from '../define.js'

export const whoami = defineTool({
  name: 'service_whoami',
  title: 'Who am I',
  description: 'Shows the signed-in user, their organization and role, the scopes of the credential and what kind of credential it is.',
  inputSchema: 'tools/service_whoami.input',
  outputSchema: 'tools/service_whoami.output',
  scope: 'mcp:read',
  role: 'viewer',
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  rateLimitPerMinute: 60,
  async handler(_args, { principal, repos }) {
    const user = await repos.users.byId(principal.userId)
    const org = await repos.organizations.byId(principal.organizationId)
    if (!user || !org) throw fail('RESOURCE_NOT_FOUND', { message: 'Your membership no longer exists' })
    const credential: Record<string, string> = { kind: principal.kind, id: principal.credentialId }
    if (principal.clientId) credential.client_id = principal.clientId
    return {
      user: { id: user.id, email: user.email, name: user.name },
      organization: { id: org.id, slug: org.slug, name: org.name },
      role: principal.role,
      scopes: [...principal.scopes],
      credential,
    }
  },
})

import t from 'tap'
import { PromptRegistry } from '../../src/plugins/prompts/registry.js'
import { ResourceRegistry } from '../../src/plugins/resources/registry.js'
import { ToolRegistry } from '../../src/plugins/tools/registry.js'

// Regression: a tool registered without a scope (an embedder writing JavaScript, or ignoring the types) was accepted
// and every call answered "needs the undefined scope". Who may use a definition is checked when it is registered.
const tool = (extra: Record<string, unknown>) => ({
  name: 'team_probe',
  description: 'probe',
  inputSchema: { type: 'object', properties: {}, additionalProperties: false },
  handler: () => ({}),
  ...extra,
}) as any

t.test('a tool must say who may use it, with known values', async (t) => {
  t.throws(() => new ToolRegistry().add(tool({ role: 'viewer' })), { message: 'Tool team_probe: scope must be one of mcp:read, mcp:write, got undefined' })
  t.throws(() => new ToolRegistry().add(tool({ scope: 'mcp:read' })), { message: 'Tool team_probe: role must be one of viewer, developer, admin, owner, got undefined' })
  t.throws(() => new ToolRegistry().add(tool({ scope: 'mcp:admin', role: 'viewer' })), /scope must be one of/)
  t.throws(() => new ToolRegistry().add(tool({ scope: 'mcp:read', role: 'admn' })), /role must be one of/)
  const registry = new ToolRegistry()
  registry.add(tool({ scope: 'mcp:write', role: 'developer' }))
  t.ok(registry.get('team_probe'), 'a well-declared tool is registered')
})

t.test('resources and prompts read as viewers unless they say otherwise; a typo stops the start', async (t) => {
  const resources = new ResourceRegistry()
  resources.add({ uri: 'team://a', name: 'a', read: () => null })
  t.same(resources.resolve('team://a')?.resource.audience, { scope: 'mcp:read', role: 'viewer' })
  t.throws(() => resources.add({ uri: 'team://b', name: 'b', role: 'boss' as any, read: () => null }), { message: 'Resource b: role must be one of viewer, developer, admin, owner, got "boss"' })
  const prompts = new PromptRegistry()
  prompts.add({ name: 'p', role: 'admin', get: () => ({ messages: [] }) })
  t.same(prompts.get('p')?.audience, { scope: 'mcp:read', role: 'admin' })
  t.throws(() => prompts.add({ name: 'q', scope: 'read' as any, get: () => ({ messages: [] }) }), { message: 'Prompt q: scope must be one of mcp:read, mcp:write, got "read"' })
})

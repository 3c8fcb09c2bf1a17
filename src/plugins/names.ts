/** Plugin names, used for `fastify-plugin` metadata and `dependencies`; never spelled as literals elsewhere. */
export const PLUGIN = {
  http: 'mcp-http',
  db: 'mcp-db',
  rpc: 'mcp-rpc',
  auth: 'mcp-auth',
  sessions: 'mcp-sessions',
  elicitation: 'mcp-elicitation',
  tools: 'mcp-tools',
  transport: 'mcp-transport',
  oauth: 'mcp-oauth',
  discovery: 'mcp-discovery',
  rateLimits: 'mcp-rate-limits',
  serverDiscover: 'mcp-server-discover',
  tasks: 'mcp-tasks',
  subscriptions: 'mcp-subscriptions',
} as const

/** Release date of this build; sent as X-Service-MCP-Version on every response. Bump it with every release. */
export const SERVICE_MCP_VERSION = '2026-11-21'
export const SERVER_NAME = 'service-mcp'
export const SERVER_VERSION = '0.1.0'
export const SERVER_TITLE = 'Service MCP server'
/** What `initialize` and `server/discover` tell a model about this server. */
export const SERVER_INSTRUCTIONS = 'Tools act on the organization of the signed-in member. Call service_whoami to see who and where you are.'

/**
 * The pages' icon is the one the server shows MCP clients (mcp/server-info.ts): linked from every page and served at
 * FAVICON_PATH; SVG, so a few hundred bytes of text rather than a binary file in the repository.
 */
export { ICON_SVG as FAVICON_SVG } from '../mcp/server-info.js'

export const FAVICON_PATH = '/favicon.svg'

import { constantJson } from '../lib/message-json.js'
import { atLeast, type ProtocolVersion } from '../rpc/types.js'
import { SERVER_NAME, SERVER_TITLE, SERVER_VERSION } from '../version.js'
import type { Icon } from './content.js'

/** Where a 2026-07-28 result carries the server's identity. */
export const SERVER_INFO_META_KEY = 'io.modelcontextprotocol/serverInfo'

/** The spec's `Implementation`: how the server names itself to clients. */
export interface Implementation {
  name: string
  version: string
  title?: string
  description?: string
  icons?: Icon[]
}

const DESCRIPTION = 'Apps, env vars, deployments, members and audit of your organization, behind OAuth and API keys.'

// A data: URI rather than a link: a client shows it without fetching anything from anywhere (the spec asks clients to
// be wary of icon URLs from other domains), and it needs no route. An SVG without scripts, 48×48, both themes. The
// pages use it too, as their favicon (web/favicon.ts).
export const ICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 48 48" width="48" height="48">' +
  '<rect width="48" height="48" rx="10" fill="#1f6feb"/>' +
  '<path d="M14 17h20M14 24h20M14 31h12" stroke="#fff" stroke-width="4" stroke-linecap="round"/></svg>'
export const SERVER_ICON: Icon = Object.freeze({
  src: `data:image/svg+xml;base64,${Buffer.from(ICON_SVG).toString('base64')}`,
  mimeType: 'image/svg+xml',
  sizes: ['any'],
}) as Icon

// Constants of every initialize and server/discover answer, and of every 2026-07-28 result: serialized once.
const compact: Implementation = constantJson({ name: SERVER_NAME, version: SERVER_VERSION })
const titled: Implementation = constantJson({ name: SERVER_NAME, title: SERVER_TITLE, version: SERVER_VERSION })
const full: Implementation = constantJson({ ...titled, description: DESCRIPTION, icons: [SERVER_ICON] })

/**
 * The server's identity as `version` defines it: `title` from 2025-06-18, `description` and `icons` from 2025-11-25.
 * `brief` leaves out the description and icons: 2026-07-28 puts the identity on every result, where a few hundred
 * bytes of icon would be paid on each answer; the full one goes where a client looks for it (initialize,
 * server/discover).
 */
export function serverInfoFor(version: ProtocolVersion, brief = false): Implementation {
  if (!atLeast(version, '2025-06-18')) return compact
  if (brief || !atLeast(version, '2025-11-25')) return titled
  return full
}

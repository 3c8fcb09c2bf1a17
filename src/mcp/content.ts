import { atLeast, type ProtocolVersion } from '../rpc/types.js'
import { validatorFor } from '../validation/index.js'

/**
 * MCP content: the blocks of tool results and prompt messages, resource contents, icons. One model (the newest
 * revision's, schemas/mcp/content-block.schema.json) that handlers build with the helpers below; `forRevision`
 * renders it for the revision a request speaks, so a handler never thinks about which client asked:
 *
 * - `resource_link` exists from 2025-06-18: older sessions get a text block naming the link instead;
 * - `title` (of a resource link) from 2025-06-18, `icons` from 2025-11-25, `annotations.lastModified` from 2025-06-18
 *   and `_meta` on blocks from 2025-06-18: dropped before.
 */

export type Role = 'user' | 'assistant'

export interface Annotations {
  audience?: Role[]
  /** 0 (optional) to 1 (effectively required). */
  priority?: number
  /** ISO 8601. */
  lastModified?: string
}

/** An icon a client may show (2025-11-25 and later): an https or data: URI. */
export interface Icon {
  src: string
  mimeType?: string
  /** `WxH` or `any`. */
  sizes?: string[]
  theme?: 'light' | 'dark'
}

type Meta = Record<string, unknown>

export interface TextResourceContents {
  uri: string
  mimeType?: string
  text: string
  _meta?: Meta
}

export interface BlobResourceContents {
  uri: string
  mimeType?: string
  /** Base64. */
  blob: string
  _meta?: Meta
}

export type ResourceContents = TextResourceContents | BlobResourceContents

export interface TextContent {
  type: 'text'
  text: string
  annotations?: Annotations
  _meta?: Meta
}

export interface ImageContent {
  type: 'image'
  /** Base64. */
  data: string
  mimeType: string
  annotations?: Annotations
  _meta?: Meta
}

export interface AudioContent {
  type: 'audio'
  /** Base64. */
  data: string
  mimeType: string
  annotations?: Annotations
  _meta?: Meta
}

/** A resource as resources/list and resource links describe it. */
export interface Resource {
  uri: string
  name: string
  title?: string
  description?: string
  mimeType?: string
  size?: number
  icons?: Icon[]
  annotations?: Annotations
}

/** A link to a resource the client may read (it need not appear in resources/list). */
export interface ResourceLink extends Resource {
  type: 'resource_link'
  _meta?: Meta
}

export interface EmbeddedResource {
  type: 'resource'
  resource: ResourceContents
  annotations?: Annotations
  _meta?: Meta
}

export type ContentBlock = TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource

/** The blocks a prompt message may hold (every block but a resource link before 2025-06-18; see forRevision). */
export interface PromptMessage {
  role: Role
  content: ContentBlock
}

// ---- Helpers for handlers ------------------------------------------------------------------------------------------

export function text(value: string, annotations?: Annotations): TextContent {
  return annotations ? { type: 'text', text: value, annotations } : { type: 'text', text: value }
}

/** An image from base64 data. */
export function image(data: string, mimeType: string, annotations?: Annotations): ImageContent {
  return annotations ? { type: 'image', data, mimeType, annotations } : { type: 'image', data, mimeType }
}

/** Audio from base64 data. */
export function audio(data: string, mimeType: string, annotations?: Annotations): AudioContent {
  return annotations ? { type: 'audio', data, mimeType, annotations } : { type: 'audio', data, mimeType }
}

export function resourceLink(link: Omit<ResourceLink, 'type'>): ResourceLink {
  return { type: 'resource_link', ...link }
}

/** A resource's contents, embedded in a tool result or a prompt message. */
export function embeddedResource(resource: ResourceContents, annotations?: Annotations): EmbeddedResource {
  return annotations ? { type: 'resource', resource, annotations } : { type: 'resource', resource }
}

// ---- Checking what handlers return ---------------------------------------------------------------------------------

const validateBlock = validatorFor('mcp/content-block')
const validateContents = validatorFor('mcp/resource-contents')

/** Why `value` is not a content block, or null when it is one. */
export function contentBlockProblem(value: unknown): string | null {
  return validateBlock(value) === true ? null : ajvProblem(validateBlock.errors)
}

/** Why `value` is not one resource's contents (text or blob), or null when it is. */
export function resourceContentsProblem(value: unknown): string | null {
  return validateContents(value) === true ? null : ajvProblem(validateContents.errors)
}

function ajvProblem(errors: typeof validateBlock.errors): string {
  const e = errors?.[0]
  return e ? `${e.instancePath || '/'} ${e.message ?? 'is invalid'}` : 'is invalid'
}

// ---- Rendering for a revision --------------------------------------------------------------------------------------

function withoutNewerFields<T extends { annotations?: Annotations; _meta?: Meta }>(block: T, version: ProtocolVersion): T {
  if (atLeast(version, '2025-06-18')) return block
  const { _meta: _m, ...rest } = block
  if (rest.annotations?.lastModified === undefined) return rest as T
  const { lastModified: _l, ...annotations } = rest.annotations
  return { ...rest, annotations } as T
}

/** A content block as `version` defines it (see the module comment). Returns the block itself when nothing changes. */
export function forRevision(block: ContentBlock, version: ProtocolVersion): ContentBlock {
  if (block.type === 'resource_link') {
    if (!atLeast(version, '2025-06-18')) {
      const label = block.description ? `${block.name} (${block.description})` : block.name
      return withoutNewerFields(text(`Resource link: ${label} <${block.uri}>`, block.annotations), version)
    }
    if (block.icons !== undefined && !atLeast(version, '2025-11-25')) {
      const { icons: _i, ...rest } = block
      return rest
    }
    return block
  }
  if (block.type === 'resource') {
    const shaped = withoutNewerFields(block, version)
    if (shaped.resource._meta === undefined || atLeast(version, '2025-06-18')) return shaped
    const { _meta: _m, ...resource } = shaped.resource
    return { ...shaped, resource }
  }
  return withoutNewerFields(block, version)
}

/** Annotations as `version` defines them (`lastModified` from 2025-06-18); none when nothing is left. */
export function annotationsFor(annotations: Annotations | undefined, version: ProtocolVersion): { annotations?: Annotations } {
  if (annotations === undefined) return {}
  if (atLeast(version, '2025-06-18') || annotations.lastModified === undefined) return { annotations }
  const { lastModified: _l, ...older } = annotations
  return Object.keys(older).length > 0 ? { annotations: older } : {}
}

/** Icons, when `version` has them (2025-11-25 and later). */
export function iconsFor(icons: readonly Icon[] | undefined, version: ProtocolVersion): { icons?: Icon[] } {
  return icons !== undefined && icons.length > 0 && atLeast(version, '2025-11-25') ? { icons: [...icons] } : {}
}

/** A title, when `version` has titles on this kind of object (2025-06-18 and later). */
export function titleFor(title: string | undefined, version: ProtocolVersion): { title?: string } {
  return title !== undefined && atLeast(version, '2025-06-18') ? { title } : {}
}

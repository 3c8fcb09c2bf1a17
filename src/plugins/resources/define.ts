import type { Scope } from '../../auth/principal.js'
import type { Role } from '../../lib/roles.js'
import type { Completers } from '../../mcp/completion.js'
import type { Annotations, Icon, Resource, ResourceContents } from '../../mcp/content.js'
import type { RequestContext } from '../../rpc/handler-context.js'

/** One entry of resources/list (a template lists the concrete resources the caller may read). */
export type ResourceEntry = Resource

/** What a read returns: the contents of the URI (one item, or several for a resource made of parts). */
export type ReadResult = ResourceContents | ResourceContents[]

interface ResourceBase {
  /** Identifier (unique among resources); shown when there is no title. */
  name: string
  title?: string
  description?: string
  mimeType?: string
  icons?: Icon[]
  annotations?: Annotations
  /** OAuth scope the token must carry to see and read it (default mcp:read). */
  scope?: Scope
  /** Lowest role that may see and read it (default viewer). */
  role?: Role
}

/** A resource at one fixed URI. */
export interface StaticResourceDefinition extends ResourceBase {
  uri: string
  /** Size in bytes, if known. */
  size?: number
  /** Its contents, or null when it does not exist for this caller (answered as not found). */
  read(ctx: RequestContext): Promise<ReadResult | null> | ReadResult | null
}

/**
 * A family of resources named by a URI template (`service://apps/{app_id}`): the variables of the URI read are handed
 * to `read`. Absent and foreign ids must be indistinguishable: return null for both.
 */
export interface TemplateResourceDefinition extends ResourceBase {
  uriTemplate: string
  /** The concrete resources resources/list shows this caller (none when omitted). */
  list?(ctx: RequestContext): Promise<ResourceEntry[]> | ResourceEntry[]
  read(variables: Readonly<Record<string, string>>, uri: string, ctx: RequestContext): Promise<ReadResult | null> | ReadResult | null
  /**
   * Whether the variables name something this caller may read, without reading it: resources/subscribe and the
   * subscriptions/listen acknowledgement ask it (a read may be costly, or ask the client something). It must agree
   * with `read` (share its lookup): false exactly when `read` would return null. When omitted, every URI the template
   * matches counts as present.
   */
  exists?(variables: Readonly<Record<string, string>>, ctx: RequestContext): Promise<boolean> | boolean
  /** Completions of its variables (completion/complete with a ref/resource naming the template). */
  complete?: Completers
}

export type ResourceDefinition = StaticResourceDefinition | TemplateResourceDefinition

/** Identity function that gives a resource definition its types. */
export function defineResource<D extends ResourceDefinition>(def: D): D {
  return def
}

export function isTemplate(def: ResourceDefinition): def is TemplateResourceDefinition {
  return 'uriTemplate' in def
}

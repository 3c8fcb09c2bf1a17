import { canUse, declaredAudience, READER, type Audience, type Principal } from '../../auth/principal.js'
import { annotationsFor, iconsFor, titleFor } from '../../mcp/content.js'
import type { ProtocolVersion } from '../../rpc/types.js'
import { isTemplate, type ResourceDefinition, type ResourceEntry, type StaticResourceDefinition, type TemplateResourceDefinition } from './define.js'
import { UriTemplate } from './uri-template.js'

export interface RegisteredStatic {
  def: StaticResourceDefinition
  audience: Audience
}

export interface RegisteredTemplate {
  def: TemplateResourceDefinition
  audience: Audience
  template: UriTemplate
}

const NAME = /^[A-Za-z0-9_.-]{1,128}$/
const URI = /^[A-Za-z][A-Za-z0-9+.-]*:\S+$/

/**
 * The resources served: static ones by URI, templated ones by their URI template. Definitions are checked when added
 * (server start): a name used twice, a URI that is not one, a template two definitions would both match.
 */
export class ResourceRegistry {
  readonly #statics = new Map<string, RegisteredStatic>()
  #templates: RegisteredTemplate[] = []
  readonly #names = new Set<string>()
  readonly #listeners: Array<() => void> = []

  /** Calls `listener` after every add or remove (the resources plugin announces list changes). */
  onChange(listener: () => void): void {
    this.#listeners.push(listener)
  }

  /** Removes a resource or template by its name (an embedder's, at run time); false when there is none. */
  remove(name: string): boolean {
    if (!this.#names.delete(name)) return false
    for (const [uri, r] of this.#statics) if (r.def.name === name) this.#statics.delete(uri)
    this.#templates = this.#templates.filter((t) => t.def.name !== name)
    for (const l of this.#listeners) l()
    return true
  }

  add(def: ResourceDefinition): void {
    if (!NAME.test(def.name)) throw new Error(`Resource name ${JSON.stringify(def.name)} must be 1-128 characters of A-Z a-z 0-9 _ - .`)
    if (this.#names.has(def.name)) throw new Error(`Resource ${def.name} is already registered`)
    const audience = declaredAudience(`Resource ${def.name}`, def, READER)
    if (isTemplate(def)) {
      const template = new UriTemplate(def.uriTemplate)
      if (this.#templates.some((t) => t.def.uriTemplate === def.uriTemplate)) throw new Error(`Resource template ${def.uriTemplate} is already registered`)
      for (const name of Object.keys(def.complete ?? {})) {
        if (!template.variables.includes(name)) throw new Error(`Resource template ${def.uriTemplate}: completion for {${name}}, which it does not have`)
      }
      this.#templates.push({ def, audience, template })
    } else {
      if (!URI.test(def.uri)) throw new Error(`Resource ${def.name}: ${JSON.stringify(def.uri)} is not a URI`)
      if (this.#statics.has(def.uri)) throw new Error(`Resource ${def.uri} is already registered`)
      this.#statics.set(def.uri, { def, audience })
    }
    this.#names.add(def.name)
    for (const l of this.#listeners) l()
  }

  /** Static resources the principal may see, in registration order. */
  staticsVisibleTo(principal: Principal): RegisteredStatic[] {
    return [...this.#statics.values()].filter((r) => canUse(principal, r.audience))
  }

  templatesVisibleTo(principal: Principal): RegisteredTemplate[] {
    return this.#templates.filter((t) => canUse(principal, t.audience))
  }

  /** The template registered with exactly this URI template (completion/complete names templates so). */
  template(uriTemplate: string): RegisteredTemplate | undefined {
    return this.#templates.find((t) => t.def.uriTemplate === uriTemplate)
  }

  /** What serves `uri`: its static resource, or the first template matching it with the URI's variables. */
  resolve(uri: string): { kind: 'static'; resource: RegisteredStatic } | { kind: 'template'; resource: RegisteredTemplate; variables: Record<string, string> } | undefined {
    const found = this.#statics.get(uri)
    if (found) return { kind: 'static', resource: found }
    for (const t of this.#templates) {
      const variables = t.template.match(uri)
      if (variables) return { kind: 'template', resource: t, variables }
    }
    return undefined
  }

  get size(): number {
    return this.#statics.size + this.#templates.length
  }
}

/** A resources/list entry as `version` defines it. */
export function describeEntry(entry: ResourceEntry, version: ProtocolVersion): Record<string, unknown> {
  const d: Record<string, unknown> = { uri: entry.uri, name: entry.name, ...titleFor(entry.title, version), ...iconsFor(entry.icons, version) }
  if (entry.description !== undefined) d.description = entry.description
  if (entry.mimeType !== undefined) d.mimeType = entry.mimeType
  if (entry.size !== undefined) d.size = entry.size
  return { ...d, ...annotationsFor(entry.annotations, version) }
}

/** A resources/templates/list entry as `version` defines it. */
export function describeTemplate(def: TemplateResourceDefinition, version: ProtocolVersion): Record<string, unknown> {
  const d: Record<string, unknown> = { uriTemplate: def.uriTemplate, name: def.name, ...titleFor(def.title, version), ...iconsFor(def.icons, version) }
  if (def.description !== undefined) d.description = def.description
  if (def.mimeType !== undefined) d.mimeType = def.mimeType
  return { ...d, ...annotationsFor(def.annotations, version) }
}

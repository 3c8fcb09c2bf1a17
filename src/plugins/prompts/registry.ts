import { canUse, declaredAudience, READER, type Audience, type Principal } from '../../auth/principal.js'
import { iconsFor, titleFor } from '../../mcp/content.js'
import type { ProtocolVersion } from '../../rpc/types.js'
import type { PromptDefinition } from './define.js'

export interface RegisteredPrompt {
  def: PromptDefinition<any>
  audience: Audience
}

const NAME = /^[A-Za-z0-9_.-]{1,128}$/

/** The prompts served, checked when added (server start), in registration order. */
export class PromptRegistry {
  readonly #prompts = new Map<string, RegisteredPrompt>()
  readonly #listeners: Array<() => void> = []

  /** Calls `listener` after every add or remove (the prompts plugin announces list changes). */
  onChange(listener: () => void): void {
    this.#listeners.push(listener)
  }

  /** Removes a prompt (an embedder's, at run time); false when there is none by that name. */
  remove(name: string): boolean {
    if (!this.#prompts.delete(name)) return false
    for (const l of this.#listeners) l()
    return true
  }

  add(def: PromptDefinition<any>): void {
    if (!NAME.test(def.name)) throw new Error(`Prompt name ${JSON.stringify(def.name)} must be 1-128 characters of A-Z a-z 0-9 _ - .`)
    if (this.#prompts.has(def.name)) throw new Error(`Prompt ${def.name} is already registered`)
    const names = new Set<string>()
    for (const arg of def.arguments ?? []) {
      if (!NAME.test(arg.name)) throw new Error(`Prompt ${def.name}: argument name ${JSON.stringify(arg.name)} must be 1-128 characters of A-Z a-z 0-9 _ - .`)
      if (names.has(arg.name)) throw new Error(`Prompt ${def.name}: argument ${arg.name} appears twice`)
      names.add(arg.name)
    }
    for (const name of Object.keys(def.complete ?? {})) {
      if (!names.has(name)) throw new Error(`Prompt ${def.name}: completion for ${name}, which is not one of its arguments`)
    }
    this.#prompts.set(def.name, { def, audience: declaredAudience(`Prompt ${def.name}`, def, READER) })
    for (const l of this.#listeners) l()
  }

  get(name: string): RegisteredPrompt | undefined {
    return this.#prompts.get(name)
  }

  visibleTo(principal: Principal): RegisteredPrompt[] {
    return [...this.#prompts.values()].filter((p) => canUse(principal, p.audience))
  }

  get size(): number {
    return this.#prompts.size
  }
}

/** A prompts/list entry as `version` defines it. */
export function describePrompt(def: PromptDefinition<any>, version: ProtocolVersion): Record<string, unknown> {
  const d: Record<string, unknown> = { name: def.name, ...titleFor(def.title, version), ...iconsFor(def.icons, version) }
  if (def.description !== undefined) d.description = def.description
  if (def.arguments !== undefined) {
    d.arguments = def.arguments.map((a) => {
      const arg: Record<string, unknown> = { name: a.name, ...titleFor(a.title, version) }
      if (a.description !== undefined) arg.description = a.description
      if (a.required !== undefined) arg.required = a.required
      return arg
    })
  }
  return d
}

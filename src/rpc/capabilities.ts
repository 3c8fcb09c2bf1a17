import { constantJson } from '../lib/message-json.js'
import type { Era } from './types.js'

/**
 * The server's capabilities, per era. Each plugin declares the part it provides (`tools`, `logging`, an extension);
 * `initialize` (legacy) and `server/discover` (modern) publish the result. Nothing lists them all by hand, and a
 * capability is declared only by the code that honours it.
 */
export class ServerCapabilities {
  readonly #declared: Record<Era, Record<string, unknown>> = { legacy: {}, modern: {} }
  readonly #extensions: Record<Era, Record<string, Record<string, unknown>>> = { legacy: {}, modern: {} }
  readonly #published: Partial<Record<Era, Readonly<Record<string, unknown>>>> = {}

  /** Declares capability `name` (e.g. `tools`) with its settings in each of `eras`. */
  declare(eras: readonly Era[], name: string, settings: Record<string, unknown>): void {
    if (name === 'extensions') throw new Error('declare extensions with declareExtension')
    for (const era of eras) {
      if (this.#published[era]) throw new Error(`capability ${name} declared after the ${era} capabilities were published`)
      if (name in this.#declared[era]) throw new Error(`capability ${name} is already declared for the ${era} era`)
    }
    for (const era of eras) this.#declared[era][name] = settings
  }

  /** Declares an extension (`capabilities.extensions[id]`, e.g. `io.modelcontextprotocol/tasks`) in each of `eras`. */
  declareExtension(eras: readonly Era[], id: string, settings: Record<string, unknown> = {}): void {
    for (const era of eras) {
      if (this.#published[era]) throw new Error(`extension ${id} declared after the ${era} capabilities were published`)
      if (id in this.#extensions[era]) throw new Error(`extension ${id} is already declared for the ${era} era`)
    }
    for (const era of eras) this.#extensions[era][id] = settings
  }

  /** The capabilities object of `era`, built once, frozen and its JSON made (declarations are closed from then on). */
  of(era: Era): Readonly<Record<string, unknown>> {
    let caps = this.#published[era]
    if (caps === undefined) {
      const built: Record<string, unknown> = { ...this.#declared[era] }
      if (Object.keys(this.#extensions[era]).length > 0) built.extensions = { ...this.#extensions[era] }
      caps = constantJson(built)
      this.#published[era] = caps
    }
    return caps
  }

  /** True when `era` declares extension `id`. */
  hasExtension(era: Era, id: string): boolean {
    return id in this.#extensions[era]
  }
}

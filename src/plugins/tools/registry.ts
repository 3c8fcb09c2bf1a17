import { createRequire } from 'node:module'
import type { ValidateFunction } from 'ajv'
import type Ajv2020 from 'ajv/dist/2020.js'
import { declaredAudience, type Principal } from '../../auth/principal.js'
import { roleAllows } from '../../lib/roles.js'
import { iconsFor } from '../../mcp/content.js'
import { atLeast, PROTOCOL_VERSIONS, type ProtocolVersion } from '../../rpc/types.js'
import { schemaDocument, validatorFor, type SchemaId } from '../../validation/index.js'
import type { JsonSchema, ToolDefinition } from './define.js'
import { paramHeadersOf, type ParamHeader } from './param-headers.js'
import { secretPaths } from './audit-arguments.js'

export interface RegisteredTool {
  def: ToolDefinition<any, any>
  validateInput: ValidateFunction
  validateOutput: ValidateFunction | null
  /** The tools/list entry for each protocol revision, built once. */
  descriptors: Record<ProtocolVersion, Record<string, unknown>>
  /** Arguments mirrored into `Mcp-Param-*` headers on 2026-07-28 requests (`x-mcp-header` in the input schema). */
  paramHeaders: readonly ParamHeader[]
  /** Arguments the input schema marks `writeOnly`: never recorded in the audit log (audit-arguments.ts). */
  secretPaths: readonly (readonly string[])[]
}

const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/
const DEFAULT_LIMIT = { read: 60, write: 10 }

/**
 * The catalog. Schemas are compiled when a tool is added (server start), never per request; tools/list entries are
 * rendered once per protocol revision.
 */
export class ToolRegistry {
  private readonly tools = new Map<string, RegisteredTool>()
  private ordered: RegisteredTool[] = []
  private ajv: InstanceType<typeof Ajv2020.default> | null = null
  private readonly changeListeners: Array<() => void> = []

  /** Calls `listener` after every add or remove (the tools plugin announces list changes). */
  onChange(listener: () => void): void {
    this.changeListeners.push(listener)
  }

  /** Removes a tool (an embedder's, at run time); false when there is none by that name. */
  remove(name: string): boolean {
    if (!this.tools.delete(name)) return false
    this.ordered = this.ordered.filter((t) => t.def.name !== name)
    for (const l of this.changeListeners) l()
    return true
  }

  add(def: ToolDefinition<any, any>): void {
    if (!TOOL_NAME.test(def.name)) throw new Error(`Tool name ${JSON.stringify(def.name)} must be 1-128 characters of A-Z a-z 0-9 _ - .`)
    if (this.tools.has(def.name)) throw new Error(`Tool ${def.name} is already registered`)
    declaredAudience(`Tool ${def.name}`, def)
    const [inputDoc, validateInput] = this.compile(def.inputSchema, `${def.name} input`)
    if (inputDoc.type !== 'object') throw new Error(`Tool ${def.name}: inputSchema must have type "object"`)
    let paramHeaders: ParamHeader[]
    try {
      paramHeaders = paramHeadersOf(inputDoc)
    } catch (err) {
      throw new Error(`Tool ${def.name}: ${(err as Error).message}`)
    }
    const output = def.outputSchema === undefined ? null : this.compile(def.outputSchema, `${def.name} output`)
    const entry: RegisteredTool = {
      def,
      validateInput,
      validateOutput: output ? output[1] : null,
      descriptors: Object.fromEntries(PROTOCOL_VERSIONS.map((v) => [v, describe(def, inputDoc, output?.[0], v)])) as RegisteredTool['descriptors'],
      paramHeaders,
      secretPaths: secretPaths(inputDoc),
    }
    this.tools.set(def.name, entry)
    this.ordered.push(entry)
    for (const l of this.changeListeners) l()
  }

  get(name: string): RegisteredTool | undefined {
    return this.tools.get(name)
  }

  /** Tools the principal may see and call: the token's scope covers it AND the member's role allows it. */
  visibleTo(principal: Principal): RegisteredTool[] {
    return this.ordered.filter((t) => principal.scopes.includes(t.def.scope) && roleAllows(principal.role, t.def.role))
  }

  get size(): number {
    return this.ordered.length
  }

  private compile(schema: JsonSchema | SchemaId, what: string): [JsonSchema, ValidateFunction] {
    if (typeof schema === 'string') return [schemaDocument(schema), validatorFor(schema)]
    this.ajv ??= new (loadAjv2020())({ strict: false, allErrors: true })
    try {
      return [schema, this.ajv.compile(schema)]
    } catch (err) {
      throw new Error(`Tool ${what} schema does not compile: ${(err as Error).message}`)
    }
  }
}

/**
 * Ajv's compiler, required on first use: only a tool with a schema of its own (an embedder's) needs it; the server's
 * schemas are compiled ahead of time (src/generated). Ajv is 80 modules, about 80 ms of every start without it.
 */
function loadAjv2020(): typeof Ajv2020.default {
  return (createRequire(import.meta.url)('ajv/dist/2020.js') as typeof Ajv2020).default
}

export function rateLimitOf(def: ToolDefinition<any, any>): number {
  return def.rateLimitPerMinute ?? (def.scope === 'mcp:write' ? DEFAULT_LIMIT.write : DEFAULT_LIMIT.read)
}

function describe(def: ToolDefinition<any, any>, input: JsonSchema, output: JsonSchema | undefined, version: ProtocolVersion): Record<string, unknown> {
  const annotations: Record<string, unknown> = { ...def.annotations }
  const d: Record<string, unknown> = { name: def.name, description: def.description, inputSchema: input }
  if (atLeast(version, '2025-06-18')) {
    d.title = def.title
    if (output) d.outputSchema = output
  } else {
    annotations.title = def.title
  }
  d.annotations = annotations
  Object.assign(d, iconsFor(def.icons, version))
  d._meta = {
    'service/scope': def.scope,
    'service/role': def.role,
    'service/rate_limit': { limit: rateLimitOf(def), window_seconds: 60 },
    'service/confirmation': def.confirm === true,
    'service/long_running': def.longRunning === true,
  }
  return d
}

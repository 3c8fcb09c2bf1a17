import type { ParamHeader } from '../../rpc/header-mirror.js'
import type { JsonSchema } from './define.js'

/**
 * `x-mcp-header` (2026-07-28, Streamable HTTP "Custom Headers from Tool Parameters"): a property of a tool's input
 * schema may ask clients to mirror its value into an `Mcp-Param-{Name}` header, so that gateways can route on it. The
 * server then checks every such header against the body. This module reads the declarations of a schema and refuses
 * the ones the spec calls invalid (clients drop a tool that has one, so a server must never publish it).
 */

export const X_MCP_HEADER = 'x-mcp-header'

export type { ParamHeader }

/** RFC 9110 token: what a header field name may be made of. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/

/** Keywords the chain to an annotated property must not pass through (arrays, composition, conditionals, references). */
const UNREACHABLE = [
  'items', 'prefixItems', 'contains', 'additionalProperties', 'unevaluatedProperties', 'unevaluatedItems', 'propertyNames',
  'patternProperties', 'dependentSchemas', 'oneOf', 'anyOf', 'allOf', 'not', 'if', 'then', 'else', '$defs', 'definitions',
] as const
const MAP_VALUED = new Set(['patternProperties', 'dependentSchemas', '$defs', 'definitions'])

/** The declarations of an input schema; throws with the reason when one breaks the spec's constraints. */
export function paramHeadersOf(schema: JsonSchema): ParamHeader[] {
  const found: ParamHeader[] = []
  const seen = new Map<string, string>()
  const where = (path: readonly string[]) => (path.length === 0 ? 'the schema root' : `property ${path.join('.')}`)

  const visit = (node: unknown, path: readonly string[], reachable: boolean): void => {
    if (typeof node !== 'object' || node === null) return
    const s = node as Record<string, unknown>
    if (X_MCP_HEADER in s) {
      if (!reachable || path.length === 0) {
        throw new Error(`${X_MCP_HEADER} on ${where(path)}: only properties reached through "properties" keys alone may carry it (not under items, composition or conditional keywords, $defs or $ref)`)
      }
      const name = s[X_MCP_HEADER]
      if (typeof name !== 'string' || !TOKEN.test(name)) {
        throw new Error(`${X_MCP_HEADER} on ${where(path)} must be a non-empty HTTP header token, got ${JSON.stringify(name)}`)
      }
      if (s.type !== 'string' && s.type !== 'integer' && s.type !== 'boolean') {
        throw new Error(`${X_MCP_HEADER} on ${where(path)}: only string, integer and boolean properties may carry it, not ${JSON.stringify(s.type)}`)
      }
      const lower = name.toLowerCase()
      const earlier = seen.get(lower)
      if (earlier !== undefined) throw new Error(`${X_MCP_HEADER} "${name}" is declared twice (also as "${earlier}"); names compare case-insensitively`)
      seen.set(lower, name)
      found.push({ path, name, type: s.type })
    }
    if (typeof s.properties === 'object' && s.properties !== null) {
      for (const [key, child] of Object.entries(s.properties as Record<string, unknown>)) visit(child, [...path, key], reachable)
    }
    for (const keyword of UNREACHABLE) {
      const sub = s[keyword]
      if (sub === undefined) continue
      const branches = Array.isArray(sub) ? sub : MAP_VALUED.has(keyword) && typeof sub === 'object' && sub !== null ? Object.values(sub) : [sub]
      for (const branch of branches) visit(branch, [...path, `<${keyword}>`], false)
    }
  }
  visit(schema, [], true)
  return found
}

/** The argument at a declaration's path, or undefined when any step is missing. */
export function valueAt(args: unknown, path: readonly string[]): unknown {
  let node = args
  for (const key of path) {
    if (typeof node !== 'object' || node === null || Array.isArray(node)) return undefined
    node = (node as Record<string, unknown>)[key]
  }
  return node
}

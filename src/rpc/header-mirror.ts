/**
 * A parameter a 2026-07-28 request mirrors into an `Mcp-Param-{Name}` header (a tool's `x-mcp-header`, read by
 * plugins/tools/param-headers.ts). Declared here, where methods say what their era's front-end checks.
 */
export interface ParamHeader {
  /** The chain of `properties` keys from the schema root to the property. */
  path: readonly string[]
  /** The `{Name}` of `Mcp-Param-{Name}`, as declared. */
  name: string
  type: 'string' | 'integer' | 'boolean'
}

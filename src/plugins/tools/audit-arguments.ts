/**
 * The arguments of a tool call as its audit entries record them (docs/decisions/audit-chain.md, "What an entry
 * records"): every argument, except those the tool's input schema marks `writeOnly` (JSON Schema's annotation for a
 * value that is sent and never given back: a secret), which are replaced by REDACTED, at any depth of nested objects.
 * An env var's value is never recorded. Arguments whose JSON passes MAX_BYTES are summarised instead, so one call
 * cannot fill the trail.
 */

export const REDACTED = '[redacted]'
const MAX_BYTES = 8192
const MAX_DEPTH = 16

type Schema = { properties?: Record<string, unknown>; writeOnly?: unknown }

/** The property paths the schema marks writeOnly, found once when the tool is registered. */
export function secretPaths(schema: unknown, prefix: readonly string[] = [], depth = 0): string[][] {
  if (depth > MAX_DEPTH || typeof schema !== 'object' || schema === null) return []
  const properties = (schema as Schema).properties
  if (typeof properties !== 'object' || properties === null) return []
  const paths: string[][] = []
  for (const [name, sub] of Object.entries(properties)) {
    const path = [...prefix, name]
    if (typeof sub === 'object' && sub !== null && (sub as Schema).writeOnly === true) paths.push(path)
    else paths.push(...secretPaths(sub, path, depth + 1))
  }
  return paths
}

/** A copy of `args` with every secret path replaced; the summary when it is too large to record. */
export function auditArguments(args: unknown, secrets: readonly (readonly string[])[]): unknown {
  let recorded = args
  for (const path of secrets) recorded = replaceAt(recorded, path)
  const json = JSON.stringify(recorded) ?? 'null'
  const bytes = Buffer.byteLength(json)
  return bytes > MAX_BYTES ? { omitted: `arguments of ${bytes} bytes, more than the ${MAX_BYTES} an audit entry records` } : recorded
}

function replaceAt(value: unknown, path: readonly string[]): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value) || path.length === 0) return value
  const [head, ...rest] = path as [string, ...string[]]
  if (!Object.hasOwn(value, head)) return value
  const record = value as Record<string, unknown>
  return { ...record, [head]: rest.length === 0 ? REDACTED : replaceAt(record[head], rest) }
}

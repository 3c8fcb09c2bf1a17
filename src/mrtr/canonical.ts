import { createHash } from 'node:crypto'

/**
 * JSON with object keys sorted at every depth, so that two argument objects that mean the same thing (keys in another
 * order) serialise the same way. Arrays keep their order: it is part of their meaning.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`
  if (typeof value === 'object' && value !== null) {
    const entries = Object.keys(value as Record<string, unknown>)
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`)
    return `{${entries.join(',')}}`
  }
  return JSON.stringify(value) ?? 'null'
}

/** SHA-256 (base64url) of the canonical JSON of `value`: what a requestState binds the arguments to. */
export function argumentsDigest(value: unknown): string {
  return createHash('sha256').update(canonicalJson(value ?? {})).digest('base64url')
}

import { createHash } from 'node:crypto'
import { fail } from '../errors/service-error.js'

/** Deeper arguments are refused: recursion over client input must be bounded (a 100,000-deep value overflows the stack). */
export const MAX_DEPTH = 64

/**
 * JSON with object keys sorted at every depth, so that two argument objects that mean the same thing (keys in another
 * order) serialise the same way. Arrays keep their order: it is part of their meaning. Throws INVALID_PARAMS for a
 * value nested deeper than MAX_DEPTH.
 */
export function canonicalJson(value: unknown, depth = 0): string {
  if (depth > MAX_DEPTH) throw fail('INVALID_PARAMS', { message: `The arguments nest deeper than ${MAX_DEPTH} levels` })
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : canonicalJson(v, depth + 1))).join(',')}]`
  if (typeof value === 'object' && value !== null) {
    const entries = Object.keys(value as Record<string, unknown>)
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k], depth + 1)}`)
    return `{${entries.join(',')}}`
  }
  return JSON.stringify(value) ?? 'null'
}

/** SHA-256 (base64url) of the canonical JSON of `value`: what a requestState binds the arguments to. */
export function argumentsDigest(value: unknown): string {
  return createHash('sha256').update(canonicalJson(value ?? {})).digest('base64url')
}

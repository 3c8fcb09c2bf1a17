import type { JsonRpcMessage } from './types.js'

/**
 * The JSON text of the messages the server sends (JSON answers and SSE frames alike): exactly what `JSON.stringify`
 * makes, except that a result's `structuredContent` whose text is already known is spliced in rather than serialized
 * a second time. A tool's output is serialized once for its text content (the spec's backwards-compatible copy), and
 * the same object is its structured content: without this the answer serialized it twice, the larger half of the cost
 * of a tool result.
 */

/** Objects whose JSON text is known, set when the text is made. Weak: nothing here outlives the answer. */
const knownJson = new WeakMap<object, string>()

/**
 * Records that `json` is the JSON text of `value` as it is now. Its maker calls this right after serializing it: a
 * value changed later is simply recorded again when it is next serialized (each tool call renders its own result).
 */
export function rememberJson(value: object, json: string): void {
  knownJson.set(value, json)
}

/** The JSON text of one message or of a batch of them. */
export function messageJson(message: JsonRpcMessage | readonly JsonRpcMessage[]): string {
  if (Array.isArray(message)) return `[${message.map((m) => messageJson(m)).join(',')}]`
  const result = (message as { result?: unknown }).result
  if (typeof result !== 'object' || result === null) return JSON.stringify(message)
  const structured = (result as { structuredContent?: unknown }).structuredContent
  const known = typeof structured === 'object' && structured !== null ? knownJson.get(structured) : undefined
  if (known === undefined) return JSON.stringify(message)
  return objectJson(message as unknown as Record<string, unknown>, (key, value) => (key === 'result' ? objectJson(value as Record<string, unknown>, (k, v) => (k === 'structuredContent' ? known : undefined)) : undefined))
}

/**
 * `JSON.stringify(object)` for a plain object, member by member in the same order, with `splice(key, value)` giving
 * the text of a member when it has one (undefined: serialized as usual). Members that serialize to nothing
 * (undefined, functions) are left out, as JSON.stringify does.
 */
function objectJson(object: Record<string, unknown>, splice: (key: string, value: unknown) => string | undefined): string {
  let out = '{'
  for (const key of Object.keys(object)) {
    const value = object[key]
    const text = splice(key, value) ?? (JSON.stringify(value) as string | undefined)
    if (text === undefined) continue
    out += `${out.length === 1 ? '' : ','}${JSON.stringify(key)}:${text}`
  }
  return `${out}}`
}

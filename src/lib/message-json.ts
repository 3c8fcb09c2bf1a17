import type { JsonRpcMessage } from '../rpc/types.js'

/**
 * The JSON text of the messages the server sends (JSON answers and SSE frames alike): exactly what `JSON.stringify`
 * makes, except that members of a result whose text is already known (a tool's `structuredContent` and `content`) are
 * spliced in rather than serialized again. A tool's output is serialized once for its text content (the spec's
 * backwards-compatible copy), and the same object is its structured content: without this the answer serialized it
 * twice, the larger half of the cost of a tool result.
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

/**
 * A constant part of answers (the capabilities, the server's identity): frozen through and through, so that its JSON
 * text, recorded here once, stays true; answers splice it in rather than serialize it each time.
 */
export function constantJson<T extends object>(value: T): T {
  deepFreeze(value)
  knownJson.set(value, JSON.stringify(value))
  return value
}

function deepFreeze(value: unknown): void {
  if (typeof value !== 'object' || value === null) return
  // Into frozen objects too: a shallow freeze leaves their members open.
  for (const v of Object.values(value)) deepFreeze(v)
  Object.freeze(value)
}

/**
 * The last text a tool answered with and the JSON of its content blocks. Escaping a text for JSON costs about as much
 * as making it; a tool that answers the same text again (a list polled while nothing changes) reuses the JSON of its
 * previous answer, after comparing the two texts character for character. One per tool.
 */
export interface TextMemo {
  text?: string
  json?: string
}

/** Texts longer than this are not kept (the memo would hold two copies of each). */
const MEMO_MAX_TEXT = 64 * 1024

/** `[{ type: 'text', text }]`, with its JSON text known (reused through `memo` when the text is the previous one). */
export function textContent(text: string, memo: TextMemo): Array<{ type: 'text'; text: string }> {
  const blocks = [{ type: 'text' as const, text }]
  let json: string
  if (memo.text === text && memo.json !== undefined) json = memo.json
  else {
    json = `[{"type":"text","text":${JSON.stringify(text)}}]`
    if (text.length <= MEMO_MAX_TEXT) {
      memo.text = text
      memo.json = json
    }
  }
  knownJson.set(blocks, json)
  return blocks
}

/** The JSON text of one message or of a batch of them. */
export function messageJson(message: JsonRpcMessage | readonly JsonRpcMessage[]): string {
  if (Array.isArray(message)) return `[${message.map((m) => messageJson(m)).join(',')}]`
  const result = (message as { result?: unknown }).result
  if (typeof result !== 'object' || result === null || !hasKnownMember(result as Record<string, unknown>)) return JSON.stringify(message)
  return objectJson(message as unknown as Record<string, unknown>, (key, value) => (key === 'result' ? objectJson(value as Record<string, unknown>, knownText) : undefined))
}

/** The known JSON text of a member's value, if any. */
function knownText(_key: string, value: unknown): string | undefined {
  return typeof value === 'object' && value !== null ? knownJson.get(value) : undefined
}

function hasKnownMember(result: Record<string, unknown>): boolean {
  for (const key in result) {
    const value = result[key]
    if (typeof value === 'object' && value !== null && knownJson.has(value)) return true
  }
  return false
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

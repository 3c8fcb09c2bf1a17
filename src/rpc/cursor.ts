import { fail } from '../errors/service-error.js'

/**
 * Opaque cursors: base64url of `<kind>:<position>`. The kind stops a cursor of one list being replayed on another.
 * Cursors carry no organization: every query is scoped by the caller's organization anyway.
 */
export function encodeCursor(kind: string, position: string): string {
  return Buffer.from(`${kind}:${position}`, 'utf8').toString('base64url')
}

export function decodeCursor(kind: string, cursor: string): string | undefined {
  if (!/^[A-Za-z0-9_-]+$/.test(cursor)) return undefined
  const text = Buffer.from(cursor, 'base64url').toString('utf8')
  // Base64 decoding drops stray trailing characters: only the exact encoding of a cursor is one.
  if (Buffer.from(text, 'utf8').toString('base64url') !== cursor) return undefined
  const prefix = `${kind}:`
  if (!text.startsWith(prefix)) return undefined
  const position = text.slice(prefix.length)
  return /^[A-Za-z0-9_.-]{1,128}$/.test(position) ? position : undefined
}

/**
 * One page of a list method (tools/list, prompts/list, resources/list, resources/templates/list): the cursor is the
 * offset of the page's first entry. A cursor that is not this list's, or past its end, is -32602.
 */
export function page<T>(kind: string, items: readonly T[], cursor: string | undefined, pageSize: number): { items: T[]; nextCursor?: string } {
  let offset = 0
  if (cursor !== undefined) {
    const decoded = decodeCursor(kind, cursor)
    offset = decoded !== undefined && /^\d{1,6}$/.test(decoded) ? Number(decoded) : -1
    if (offset < 0 || offset >= items.length) throw fail('INVALID_PARAMS', { message: `Invalid cursor for ${kind}`, details: { param: 'cursor' } })
  }
  const end = offset + pageSize
  return end < items.length ? { items: items.slice(offset, end), nextCursor: encodeCursor(kind, String(end)) } : { items: items.slice(offset) }
}

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
  const prefix = `${kind}:`
  if (!text.startsWith(prefix)) return undefined
  const position = text.slice(prefix.length)
  return /^[A-Za-z0-9_.-]{1,128}$/.test(position) ? position : undefined
}

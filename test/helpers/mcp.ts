import { request as undiciRequest, type Dispatcher } from 'undici'

/** A parsed SSE event: comments are kept separately so heartbeat tests can see them. */
export interface SseEvent {
  id?: string
  event?: string
  data: string
}

/** Parses a complete SSE body (text) into events and comment lines. */
export function parseSse(text: string): { events: SseEvent[]; comments: string[] } {
  const events: SseEvent[] = []
  const comments: string[] = []
  for (const block of text.split(/\r?\n\r?\n/)) {
    if (block.trim() === '') continue
    const ev: SseEvent = { data: '' }
    const data: string[] = []
    let hasField = false
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith(':')) {
        comments.push(line.slice(1).trim())
        continue
      }
      const idx = line.indexOf(':')
      const field = idx === -1 ? line : line.slice(0, idx)
      const value = idx === -1 ? '' : line.slice(idx + 1).replace(/^ /, '')
      hasField = true
      if (field === 'data') data.push(value)
      else if (field === 'id') ev.id = value
      else if (field === 'event') ev.event = value
    }
    if (hasField) {
      ev.data = data.join('\n')
      events.push(ev)
    }
  }
  return { events, comments }
}

export interface RpcReply {
  status: number
  headers: Record<string, string | string[] | undefined>
  /** Raw body text. */
  text: string
  /** JSON body when the answer is JSON, else undefined. */
  json: any
  /** JSON-RPC messages carried by SSE events, when the answer is SSE. */
  messages: any[]
  comments: string[]
}

export const ACCEPT_BOTH = 'application/json, text/event-stream'

/** POSTs to /mcp and reads the whole answer (JSON or a finite SSE stream). */
export async function post(
  mcpUrl: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<RpcReply> {
  const res = await undiciRequest(mcpUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: ACCEPT_BOTH, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  })
  return readReply(res)
}

export async function readReply(res: Dispatcher.ResponseData): Promise<RpcReply> {
  const text = await res.body.text()
  const type = String(res.headers['content-type'] ?? '')
  let json: any
  let messages: any[] = []
  let comments: string[] = []
  if (type.startsWith('application/json') && text) json = JSON.parse(text)
  if (type.startsWith('text/event-stream')) {
    const parsed = parseSse(text)
    messages = parsed.events.filter((e) => e.data !== '').map((e) => JSON.parse(e.data))
    comments = parsed.comments
  }
  return { status: res.statusCode, headers: res.headers as RpcReply['headers'], text, json, messages, comments }
}

export function initializeMessage(protocolVersion = '2025-11-25', capabilities: Record<string, unknown> = {}, id: number | string = 0) {
  return { jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion, capabilities, clientInfo: { name: 'test', version: '1.0.0' } } }
}

/** Initializes a session and sends notifications/initialized; returns the session id and a header set for it. */
export async function openSession(
  mcpUrl: string,
  token: string,
  protocolVersion = '2025-11-25',
  capabilities: Record<string, unknown> = {},
): Promise<{ sessionId: string; headers: Record<string, string>; init: RpcReply }> {
  const init = await post(mcpUrl, initializeMessage(protocolVersion, capabilities), { authorization: `Bearer ${token}` })
  const sessionId = String(init.headers['mcp-session-id'] ?? '')
  if (init.status !== 200 || !sessionId) throw new Error(`initialize failed: ${init.status} ${init.text}`)
  const headers = { authorization: `Bearer ${token}`, 'mcp-session-id': sessionId, 'mcp-protocol-version': protocolVersion }
  const ack = await post(mcpUrl, { jsonrpc: '2.0', method: 'notifications/initialized' }, headers)
  if (ack.status !== 202) throw new Error(`notifications/initialized failed: ${ack.status} ${ack.text}`)
  return { sessionId, headers, init }
}

export function callTool(name: string, args: Record<string, unknown> = {}, id: number | string = 1) {
  return { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } }
}

import type { Test } from 'tap'
import { ACCEPT_BOTH, openSession, post, type RpcReply } from './mcp.js'
import { messagesOf, openLive, type LiveStream } from './stream.js'

/**
 * Confirmation-gated tool calls over a live SSE stream: the tools/call is POSTed and its answer read while it is open,
 * the server's elicitation/create is read off that stream, and the client's answer is POSTed on the same session.
 */

interface Teardown {
  teardown(fn: () => unknown): void
}

export const isElicitation = (m: any) => m.method === 'elicitation/create'

/** The answer to a confirmation: accept with `confirm` (true unless told), or decline / cancel (no content). */
export function decision(action: 'accept' | 'decline' | 'cancel' = 'accept', confirm: unknown = true): Record<string, unknown> {
  return { action, ...(action === 'accept' ? { content: { confirm } } : {}) }
}

/** A session that declares the elicitation capability (so confirmation-gated tools can ask). */
export function elicitingSession(server: { mcpUrl: string; apiKey: string }, key = server.apiKey) {
  return openSession(server.mcpUrl, key, '2025-11-25', { elicitation: {} })
}

/** POSTs `message` (a tools/call) accepting JSON or SSE, and reads the answer live; the stream is closed at teardown. */
export async function openLiveCall(t: Teardown, mcpUrl: string, headers: Record<string, string>, message: unknown): Promise<LiveStream> {
  const live = await openLive(mcpUrl, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json', accept: ACCEPT_BOTH },
    body: JSON.stringify(message),
  })
  t.teardown(() => live.close())
  return live
}

/** Waits for the elicitation/create on a call's stream and returns it. */
export async function elicitationOn(live: LiveStream): Promise<any> {
  await live.waitFor(() => messagesOf(live).some(isElicitation), 5000, 'elicitation/create')
  return messagesOf(live).find(isElicitation)
}

/** POSTs `result` as the client's answer to the server's request `id`. */
export function answerRequest(mcpUrl: string, headers: Record<string, string>, id: unknown, result: unknown): Promise<RpcReply> {
  return post(mcpUrl, { jsonrpc: '2.0', id, result }, headers)
}

/** Waits for the call's elicitation/create and answers it with `result`; returns the request and the answer's reply. */
export async function answerElicitation(
  mcpUrl: string,
  headers: Record<string, string>,
  live: LiveStream,
  result: unknown = decision(),
): Promise<{ request: any; reply: RpcReply }> {
  const request = await elicitationOn(live)
  return { request, reply: await answerRequest(mcpUrl, headers, request.id, result) }
}

/**
 * A confirmation-gated tools/call from start to answer: opened on a live stream, its elicitation/create awaited and
 * answered with `result`. The stream stays open for the caller to read (live.waitFor, live.ended).
 */
export async function confirmCall(
  t: Teardown,
  mcpUrl: string,
  headers: Record<string, string>,
  message: unknown,
  result: unknown = decision(),
): Promise<{ live: LiveStream; request: any; reply: RpcReply }> {
  const live = await openLiveCall(t, mcpUrl, headers, message)
  return { live, ...(await answerElicitation(mcpUrl, headers, live, result)) }
}

/** Answers the call's elicitation/create with `result` and checks the answer is accepted (202); returns the request. */
export async function answerAccepted(t: Test, mcpUrl: string, headers: Record<string, string>, live: LiveStream, result: unknown = decision()): Promise<any> {
  const { request, reply } = await answerElicitation(mcpUrl, headers, live, result)
  t.equal(reply.status, 202, 'the answer is accepted')
  return request
}

export const isAnswerTo = (id: unknown) => (m: any) => m.id === id && ('result' in m || 'error' in m)

/** Waits (bounded) for the server to end the call's stream; returns every message and the responses to the call `id`. */
export async function readToEnd(live: LiveStream, id: unknown, timeoutMs = 5000): Promise<{ messages: any[]; responses: any[] }> {
  await live.ended(timeoutMs)
  const messages = messagesOf(live)
  return { messages, responses: messages.filter(isAnswerTo(id)) }
}

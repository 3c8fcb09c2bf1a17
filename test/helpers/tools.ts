import type { Test } from 'tap'
import { callTool, post, type RpcReply } from './mcp.js'

/** Reading tools/call results: the result of an answer, a success's data, a failure's service error. */

/** A tools/call read to its end (JSON, or SSE for tools that prefer a stream); returns the tool result and every message. */
export async function callToEnd(mcpUrl: string, headers: Record<string, string>, name: string, args: Record<string, unknown>, id: number | string, label = name) {
  const reply = await post(mcpUrl, callTool(name, args, id), headers)
  if (reply.status !== 200) throw new Error(`${label}: HTTP ${reply.status} ${reply.text}`)
  const messages: any[] = reply.json ? [reply.json] : reply.messages
  const response = messages.find((m) => m.id === id)
  if (!response?.result) throw new Error(`${label}: no result: ${reply.text}`)
  return { result: response.result, messages }
}

/** The service error of a failed tool result; throws when the result is not a failure. */
export function toolError(result: any): { code: string; message: string } {
  if (!result?.isError) throw new Error(`expected a tool error, got ${JSON.stringify(result)}`)
  return JSON.parse(result.content[0].text)
}

/** The tools/call result, whether the answer was JSON or an SSE stream. */
export function resultOf(t: Test, reply: RpcReply): any {
  t.equal(reply.status, 200, 'HTTP 200')
  if (reply.json) return reply.json.result
  const answers = reply.messages.filter((m) => 'result' in m || 'error' in m)
  t.equal(answers.length, 1, 'one response on the stream')
  return answers[0]?.result
}

/** The data of a successful tool result, checked to be the same in the text content and structuredContent. */
export function okData(t: Test, result: any): any {
  t.equal(result?.isError, false, 'not a tool failure')
  const data = JSON.parse(result.content[0].text)
  t.strictSame(result.structuredContent, data, 'structuredContent equals the text content')
  return data
}

/** The service error of a tool failure, checked to carry `code` and a message. */
export function failureOf(t: Test, result: any, code: string): { code: string; message: string } {
  t.equal(result?.isError, true, `a tool failure (${code})`)
  const err = JSON.parse(result.content[0].text)
  t.equal(err.code, code)
  t.type(err.message, 'string')
  return err
}

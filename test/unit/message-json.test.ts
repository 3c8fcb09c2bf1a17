import t from 'tap'
import { constantJson, messageJson, rememberJson, textContent } from '../../src/lib/message-json.js'
import type { JsonRpcMessage } from '../../src/rpc/types.js'

// Every answer and SSE frame is serialized by messageJson, which splices a tool's already serialized output in as its
// structuredContent. It must give JSON.stringify's text byte for byte.

const output = () => ({ items: [{ id: 'a', name: 'Ä "quoted" \\ \u2028', n: 1.5, ok: true, none: null }], total: 1, nested: { deep: [1, [2, { x: 'y' }]] } })

function toolAnswer(structured: object, extra: Record<string, unknown> = {}): JsonRpcMessage {
  return { jsonrpc: '2.0', id: 7, result: { content: [{ type: 'text', text: JSON.stringify(structured) }], isError: false, structuredContent: structured, ...extra } } as JsonRpcMessage
}

t.test('the same text as JSON.stringify, spliced or not', async (t) => {
  const messages: JsonRpcMessage[] = [
    { jsonrpc: '2.0', id: 1, result: {} },
    { jsonrpc: '2.0', id: 'x', error: { code: -32601, message: 'Unknown method', data: { code: 'METHOD_NOT_FOUND' } } },
    { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress: 0.5 } },
    { jsonrpc: '2.0', id: 3, method: 'elicitation/create', params: { message: 'Sure?' } },
    toolAnswer(output()),
    toolAnswer(output(), { resultType: 'complete', _meta: { 'io.modelcontextprotocol/serverInfo': { name: 's' } }, skipped: undefined, fn: () => 1 }),
    { jsonrpc: '2.0', id: null, result: { structuredContent: null } } as unknown as JsonRpcMessage,
  ]
  for (const m of messages) {
    const structured = (m as { result?: { structuredContent?: unknown } }).result?.structuredContent
    if (typeof structured === 'object' && structured !== null) rememberJson(structured, JSON.stringify(structured))
    t.equal(messageJson(m), JSON.stringify(m), JSON.stringify(m).slice(0, 60))
  }
  t.equal(messageJson(messages), JSON.stringify(messages), 'a batch')
  t.equal(messageJson([]), '[]')
})

t.test('the known text is what is sent for the structured content', async (t) => {
  const structured = output()
  rememberJson(structured, '{"spliced":true}')
  t.equal(JSON.parse(messageJson(toolAnswer(structured))).result.structuredContent.spliced, true, 'spliced, not serialized again')
  rememberJson(structured, JSON.stringify(structured))
  t.same(JSON.parse(messageJson(toolAnswer(structured))).result.structuredContent, structured, 'recorded again, the new text is used')
})

t.test('a text block reuses the JSON of the previous text only when the text is the same', async (t) => {
  const memo = {}
  const answer = (text: string) => ({ jsonrpc: '2.0', id: 1, result: { content: textContent(text, memo), isError: false } }) as JsonRpcMessage
  for (const text of ['{"a":"x"}', '{"a":"x"}', '{"a":"y"}', '{"a":"x"}', 'quote " and \\ backslash', '']) {
    const m = answer(text)
    t.equal(messageJson(m), JSON.stringify(m), `text ${JSON.stringify(text)}`)
  }
  const big = 'x'.repeat(70 * 1024)
  t.equal(messageJson(answer(big)), JSON.stringify(answer(big)), 'a text too long to keep is right too')
})

t.test('constant parts are frozen through, and spliced as they serialize', async (t) => {
  const icon = Object.freeze({ src: 'data:x', sizes: ['any'] })
  const info = constantJson({ name: 's', icons: [icon], nested: { deep: [1, { x: 'y' }] } })
  t.ok(Object.isFrozen(info.icons[0]!.sizes), 'the members of an already frozen object are frozen too')
  t.ok(Object.isFrozen(info.nested.deep[1]))
  t.throws(() => { (info.nested.deep as unknown[]).push(2) })
  const answer = { jsonrpc: '2.0', id: 1, result: { protocolVersion: '2025-11-25', capabilities: constantJson({ tools: { listChanged: true } }), serverInfo: info, instructions: 'Use "quotes"' } } as JsonRpcMessage
  t.equal(messageJson(answer), JSON.stringify(answer))
})

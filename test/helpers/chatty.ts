import { setTimeout as sleep } from 'node:timers/promises'
import { defineTool } from '../../src/index.js'

/**
 * A test tool that logs `count` numbered lines (`{ line: n }`, logger `chatty`), `gapMs` apart, then answers
 * `{ done: count }`: a call stream with events spread over time, to cut and resume.
 */
export const chatty = defineTool<{ count: number; gapMs: number }, { done: number }>({
  name: 'test_chatty',
  title: 'Chatty',
  description: 'Logs numbered lines, then answers.',
  inputSchema: { type: 'object', properties: { count: { type: 'integer' }, gapMs: { type: 'integer' } }, required: ['count', 'gapMs'] },
  outputSchema: { type: 'object', properties: { done: { type: 'integer' } }, required: ['done'] },
  scope: 'mcp:read',
  role: 'viewer',
  longRunning: true,
  async handler(args, ctx) {
    for (let i = 1; i <= args.count; i++) {
      ctx.log('info', { line: i }, 'chatty')
      await sleep(args.gapMs)
    }
    return { done: args.count }
  },
})

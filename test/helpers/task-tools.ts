import { defineTool, text, toolResult } from '../../src/index.js'

/** An elicitation/create input request asking a yes/no question under `ok`. */
export const askYesNo = (message: string) => ({ method: 'elicitation/create' as const, params: { message, requestedSchema: { type: 'object' as const, properties: { ok: { type: 'boolean' as const } }, required: ['ok'] } } })

/** Asks twice inside its task, and says what it heard: the tests of tasks that ask, in one process or several. */
export const twoQuestions = defineTool({
  name: 'two_questions',
  title: 'Two Questions',
  description: 'Asks two questions, one after the other, while it runs as a task',
  scope: 'mcp:read',
  role: 'viewer',
  inputSchema: { type: 'object', properties: {}, additionalProperties: false },
  longRunning: true,
  async handler(_args, ctx) {
    const first = await ctx.ask({ q: askYesNo('First?') })
    const second = await ctx.ask({ q: askYesNo('Second?') })
    return toolResult([text(`first: ${first.q.action}; second: ${second.q.action}`)])
  },
})

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

/** Asks for a name in a form inside its task, and greets it (a decline or cancel is said, not greeted). */
export const askName = defineTool({
  name: 'ask_name',
  title: 'Ask Name',
  description: 'Asks for a name in a form while it runs as a task, and greets it',
  scope: 'mcp:read',
  role: 'viewer',
  inputSchema: { type: 'object', properties: {}, additionalProperties: false },
  longRunning: true,
  async handler(_args, ctx) {
    const answer = await ctx.elicit('What is your name?', { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] })
    return toolResult([text(answer.action === 'accept' ? `Hello, ${String(answer.content?.name)}!` : `No name (${answer.action})`)])
  },
})

/** Confirms inside its task (ctx.confirm): goes ahead only on a confirmation, else the confirmation's tool error. */
export const confirmInTask = defineTool({
  name: 'confirm_in_task',
  title: 'Confirm In Task',
  description: 'Asks for a confirmation while it runs as a task, and says it went ahead',
  scope: 'mcp:read',
  role: 'viewer',
  inputSchema: { type: 'object', properties: {}, additionalProperties: false },
  longRunning: true,
  async handler(_args, ctx) {
    await ctx.confirm('Go ahead?')
    return toolResult([text('went ahead')])
  },
})

/** Asks two questions at once (one round, two input requests), and says what it heard for each. */
export const twoAtOnce = defineTool({
  name: 'two_at_once',
  title: 'Two At Once',
  description: 'Asks for a colour and a confirmation at once while it runs as a task',
  scope: 'mcp:read',
  role: 'viewer',
  inputSchema: { type: 'object', properties: {}, additionalProperties: false },
  longRunning: true,
  async handler(_args, ctx) {
    const answers = await ctx.ask({
      colour: { method: 'elicitation/create', params: { message: 'Which colour?', requestedSchema: { type: 'object', properties: { colour: { type: 'string' } }, required: ['colour'] } } },
      sure: askYesNo('Sure?'),
    })
    const colour = answers.colour.action === 'accept' ? String(answers.colour.content?.colour) : answers.colour.action
    const sure = answers.sure.action === 'accept' ? String(answers.sure.content?.ok) : answers.sure.action
    return toolResult([text(`colour: ${colour}; sure: ${sure}`)])
  },
})

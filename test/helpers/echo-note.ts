import { defineTool } from '../../src/index.js'

/** A value a client sends that must never show up in metrics, spans or logs. */
export const DISTINCTIVE = 'zebra-quartz-7731'

/** `echo_note`: a viewer's tool answering the length of its `note`, so a test can send DISTINCTIVE and look for it. */
export function echoNoteTool(options: { rateLimitPerMinute?: number } = {}) {
  return defineTool({
    name: 'echo_note',
    title: 'Echo',
    description: 'Answers with the length of a note',
    inputSchema: { type: 'object', properties: { note: { type: 'string' } }, required: ['note'], additionalProperties: false },
    scope: 'mcp:read',
    role: 'viewer',
    ...options,
    handler: (args: { note: string }) => ({ length: args.note.length }),
  })
}

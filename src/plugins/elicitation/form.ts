import type { Repos } from '../../db/repos/index.js'
import { writeAudit } from '../../lib/audit.js'
import type { CallContext } from '../../rpc/dispatcher.js'

/** The confirmation form of docs/decisions/confirmation.md, the same in both eras. */
export const CONFIRM_SCHEMA = {
  type: 'object',
  properties: { confirm: { type: 'boolean', title: 'Confirm', description: 'Check to go ahead; nothing changes otherwise' } },
  required: ['confirm'],
} as const

/** The `elicitation/create` params that ask to confirm `message` (a server request, or an input request of MRTR). */
export function confirmationRequest(message: string): { mode: 'form'; message: string; requestedSchema: typeof CONFIRM_SCHEMA } {
  return { mode: 'form', message, requestedSchema: CONFIRM_SCHEMA }
}

export type Outcome = 'confirmed' | 'declined' | 'timed_out' | 'cancelled'

/** Every outcome of a confirmation is audited as `<tool>.confirmation`, with the message the user saw. Never rejects. */
export function recordOutcome(repos: Repos, ctx: CallContext, toolName: string, message: string, outcome: Outcome, details: Record<string, unknown> = {}): Promise<void> {
  return writeAudit(repos, ctx, toolName, { action: `${toolName}.confirmation`, outcome, details: { message, ...details } })
}

import type { ErrorObject } from 'ajv'
import type { Repos } from '../../db/repos/index.js'
import { writeAudit } from '../../lib/audit.js'
import type { CallContext } from '../../rpc/dispatcher.js'
import { describeDetails, validationDetails, validatorFor } from '../../validation/index.js'

/** The confirmation form of decisions.md §6, the same in both eras. */
export const CONFIRM_SCHEMA = {
  type: 'object',
  properties: { confirm: { type: 'boolean', title: 'Confirm', description: 'Check to go ahead; nothing changes otherwise' } },
  required: ['confirm'],
} as const

/** The `elicitation/create` params that ask to confirm `message` (a server request, or an input request of MRTR). */
export function confirmationRequest(message: string): { mode: 'form'; message: string; requestedSchema: typeof CONFIRM_SCHEMA } {
  return { mode: 'form', message, requestedSchema: CONFIRM_SCHEMA }
}

/** Answers to CONFIRM_SCHEMA: schemas/mcp/elicit-confirm.result.schema.json, precompiled. */
const validateConfirmAnswer = validatorFor('mcp/elicit-confirm.result')

/** Ajv's errors, minus the ones that only repeat others (`must match "then" schema`, the branches of an anyOf). */
function readable(errors: ErrorObject[] | null | undefined): string {
  const kept = (errors ?? []).filter((e) => e.keyword !== 'if' && !e.schemaPath.includes('/anyOf/'))
  return describeDetails(validationDetails(kept).map((d) =>
    d.message === 'must match a schema in anyOf' ? { ...d, message: 'must be a string, a number, a boolean or an array of strings' } : d))
}

/**
 * Why an answer to the confirmation is refused, or null when it is well formed: `action` accept, decline or cancel;
 * with accept, `content.confirm` a boolean.
 */
export function checkConfirmAnswer(result: unknown): string | null {
  return validateConfirmAnswer(result) === true ? null : readable(validateConfirmAnswer.errors)
}

/** True for a well-formed answer that says go ahead. */
export function confirms(answer: Record<string, unknown>): boolean {
  return answer.action === 'accept' && (answer.content as { confirm?: unknown } | undefined)?.confirm === true
}

export type Outcome = 'confirmed' | 'declined' | 'timed_out' | 'cancelled'

/** Every outcome of a confirmation is audited as `<tool>.confirmation`, with the message the user saw. */
export function recordOutcome(repos: Repos, ctx: CallContext, toolName: string, message: string, outcome: Outcome, details: Record<string, unknown> = {}): void {
  writeAudit(repos, ctx, toolName, { action: `${toolName}.confirmation`, outcome, details: { message, ...details } })
}

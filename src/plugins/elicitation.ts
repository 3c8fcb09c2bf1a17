import type { ErrorObject } from 'ajv'
import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { fail } from '../errors/service-error.js'
import { writeAudit } from '../lib/audit.js'
import type { CallContext } from '../rpc/dispatcher.js'
import { OutboundRequestError } from '../sessions/session.js'
import { describeDetails, validationDetails, validatorFor } from '../validation/index.js'
import { PLUGIN } from './names.js'

declare module 'fastify' {
  interface FastifyInstance {
    elicitation: Elicitation
  }
}

export interface Elicitation {
  /**
   * Asks the user to confirm `message` (the exact effect of `toolName`) with `elicitation/create` on the call's own SSE
   * stream, and resolves only on `accept` with `confirm: true`. Throws CAPABILITY_REQUIRED (no elicitation capability,
   * no stream, or before notifications/initialized; nothing is sent), ELICITATION_DENIED (decline, cancel, confirm
   * false, or a JSON-RPC error answer), ELICITATION_TIMEOUT (after `notifications/cancelled` for the request) or
   * OPERATION_CANCELLED (the call was cancelled or its stream went away). Every outcome of a sent request is audited as
   * `<tool>.confirmation`: confirmed, declined, timed_out or cancelled.
   */
  confirm(ctx: CallContext, toolName: string, message: string): Promise<void>
}

/** The confirmation form of decisions.md §6. */
export const CONFIRM_SCHEMA = {
  type: 'object',
  properties: { confirm: { type: 'boolean', title: 'Confirm', description: 'Check to go ahead; nothing changes otherwise' } },
  required: ['confirm'],
} as const

/** Answers to CONFIRM_SCHEMA: schemas/mcp/elicit-confirm.result.schema.json, precompiled. */
const validateConfirmAnswer = validatorFor('mcp/elicit-confirm.result')

/** Ajv's errors, minus the ones that only repeat others (`must match "then" schema`, the branches of an anyOf). */
function readable(errors: ErrorObject[] | null | undefined): string {
  const kept = (errors ?? []).filter((e) => e.keyword !== 'if' && !e.schemaPath.includes('/anyOf/'))
  return describeDetails(validationDetails(kept).map((d) =>
    d.message === 'must match a schema in anyOf' ? { ...d, message: 'must be a string, a number, a boolean or an array of strings' } : d))
}

/**
 * Why a result answer to the confirmation is refused, or null when it is well formed: `action` accept, decline or
 * cancel; with accept, `content.confirm` a boolean. A refused answer leaves the request waiting for a valid one.
 */
export function checkConfirmAnswer(result: Record<string, unknown>): string | null {
  return validateConfirmAnswer(result) === true ? null : readable(validateConfirmAnswer.errors)
}

type Outcome = 'confirmed' | 'declined' | 'timed_out' | 'cancelled'

/** Confirmation of protected tool calls through `elicitation/create` (interface.md, decisions.md §1 and §6). */
const elicitationPlugin: FastifyPluginAsync = async (fastify) => {
  const { rpc, repos, config } = fastify

  async function confirm(ctx: CallContext, toolName: string, message: string): Promise<void> {
    const session = ctx.session
    const record = (outcome: Outcome, details: Record<string, unknown> = {}) =>
      writeAudit(repos, ctx, toolName, { action: `${toolName}.confirmation`, outcome, details: { message, ...details } })
    // Gated only on the declared capability, whatever the revision (decisions.md §1); `{}` means form.
    if (!session?.canElicit) {
      throw fail('CAPABILITY_REQUIRED', { message: `${toolName} asks for confirmation: the client must declare the elicitation capability` })
    }
    // The request goes on the call's own stream (a client waiting on its POST may ignore the GET stream).
    if (!ctx.sink.streaming) {
      throw fail('CAPABILITY_REQUIRED', { message: `${toolName} asks for confirmation on the call's SSE stream: send Accept: application/json, text/event-stream` })
    }
    // No server-initiated request before notifications/initialized (lifecycle).
    if (!session.initialized) {
      throw fail('CAPABILITY_REQUIRED', { message: 'Send notifications/initialized before calling a tool that asks for confirmation' })
    }
    let answer: Record<string, unknown>
    try {
      answer = await rpc.request(session, ctx.principal, ctx.sink, 'elicitation/create', {
        mode: 'form',
        message,
        requestedSchema: CONFIRM_SCHEMA,
      }, { timeoutMs: config.elicitationTimeoutMs, signal: ctx.signal, accept: checkConfirmAnswer })
    } catch (err) {
      if (err instanceof OutboundRequestError && err.reason === 'timeout') {
        record('timed_out')
        throw fail('ELICITATION_TIMEOUT')
      }
      if (err instanceof OutboundRequestError && err.reason === 'error') {
        record('declined', { error: err.message })
        throw fail('ELICITATION_DENIED', { message: 'The client could not show the confirmation; nothing was changed' })
      }
      record('cancelled')
      throw fail('OPERATION_CANCELLED', { message: 'The confirmation was abandoned; nothing was changed' })
    }
    // checkConfirmAnswer let only well-formed answers through: with accept, content.confirm is a boolean.
    const content = answer.content as { confirm?: unknown } | undefined
    if (answer.action === 'accept' && content?.confirm === true) {
      record('confirmed')
      return
    }
    record('declined', { action: answer.action, ...(answer.action === 'accept' ? { confirm: content?.confirm } : {}) })
    throw fail('ELICITATION_DENIED')
  }

  fastify.decorate('elicitation', { confirm } satisfies Elicitation)
}

export default fp(elicitationPlugin, { name: PLUGIN.elicitation, fastify: '5.x', dependencies: [PLUGIN.http, PLUGIN.db, PLUGIN.rpc] })

import type { FastifyInstance } from 'fastify'
import { fail } from '../../errors/service-error.js'
import type { CallContext } from '../../rpc/dispatcher.js'
import { OutboundRequestError } from '../../sessions/session.js'
import { checkConfirmAnswer, confirmationRequest, confirms, recordOutcome } from './form.js'

/**
 * Confirmation in a session (the 2025 revisions): the server sends `elicitation/create` on the call's own SSE stream
 * and waits for the client's answer, posted on the same session by the same member. Throws CAPABILITY_REQUIRED (no
 * elicitation capability, no stream, or before notifications/initialized; nothing is sent), ELICITATION_DENIED
 * (decline, cancel, confirm false, or a JSON-RPC error answer), ELICITATION_TIMEOUT (after `notifications/cancelled`
 * for the request) or OPERATION_CANCELLED (the call was cancelled or its stream went away).
 */
export function serverRequestConfirmation(fastify: FastifyInstance) {
  const { rpc, repos, config } = fastify

  return async function confirm(ctx: CallContext, toolName: string, message: string): Promise<void> {
    const session = ctx.session
    const record = (outcome: Parameters<typeof recordOutcome>[4], details?: Record<string, unknown>) => recordOutcome(repos, ctx, toolName, message, outcome, details)
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
      answer = await rpc.request(session, ctx.principal, ctx.sink, 'elicitation/create', confirmationRequest(message), {
        timeoutMs: config.elicitationTimeoutMs,
        signal: ctx.signal,
        accept: checkConfirmAnswer,
      })
    } catch (err) {
      if (err instanceof OutboundRequestError && err.reason === 'timeout') {
        record('timed_out')
        throw fail('ELICITATION_TIMEOUT')
      }
      if (err instanceof OutboundRequestError && err.reason === 'error') {
        // The client's error message is kept short: the audit log must not grow by what a client chooses to send.
        record('declined', { error: err.message.slice(0, 200) })
        throw fail('ELICITATION_DENIED', { message: 'The client could not show the confirmation; nothing was changed' })
      }
      record('cancelled')
      throw fail('OPERATION_CANCELLED', { message: 'The confirmation was abandoned; nothing was changed' })
    }
    // checkConfirmAnswer let only well-formed answers through: with accept, content.confirm is a boolean.
    if (confirms(answer)) {
      record('confirmed')
      return
    }
    const content = answer.content as { confirm?: unknown } | undefined
    record('declined', { action: answer.action, ...(answer.action === 'accept' ? { confirm: content?.confirm } : {}) })
    throw fail('ELICITATION_DENIED')
  }
}

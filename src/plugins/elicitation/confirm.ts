import type { FastifyInstance } from 'fastify'
import { fail, isServiceError } from '../../errors/service-error.js'
import type { ElicitResult, InputRequests, InputResponses } from '../../mcp/input-requests.js'
import type { CallContext } from '../../rpc/dispatcher.js'
import type { AskTarget } from '../../rpc/handler-context.js'
import type { Exchange } from '../../rpc/exchange.js'
import type { Asked } from './asked.js'
import { confirmationRequest, recordOutcome } from './form.js'

type AskFn = <R extends InputRequests>(ctx: CallContext, about: AskTarget, requests: R) => Promise<Asked<R>>

/** Another way to put the question: a running task's own ask (its input requests, docs/decisions/tasks.md). */
export type AskVia = <R extends InputRequests>(requests: R) => Promise<InputResponses<R>>

/**
 * The confirmation of a destructive tool call (docs/decisions/confirmation.md), the same in both eras: one form
 * question with the exact effect as its message and a required boolean `confirm` (`confirm`, then `confirm_2`… when a
 * tool confirms more than once), asked through the era's asker. It goes ahead only on accept with `confirm: true`;
 * decline, cancel or false → ELICITATION_DENIED; no answer in time → ELICITATION_TIMEOUT; a client that cannot be asked
 * → CAPABILITY_REQUIRED (session) or -32021 (stateless). Every outcome of a question asked is audited as
 * `<tool>.confirmation` once, when the answer arrives (not again when a later round replays it). `via`, when given,
 * asks instead of the era's asker (a task's work asks through its task); its answers are always fresh.
 */
export function confirmer(fastify: FastifyInstance, ask: AskFn, operationOf: (exchange: Exchange) => string | null) {
  const { repos } = fastify
  /** confirm() calls made by each request's run of its tool. */
  const counts = new WeakMap<Exchange, number>()

  return async function confirm(ctx: CallContext, toolName: string, args: unknown, message: string, via?: AskVia): Promise<void> {
    const index = (counts.get(ctx.exchange) ?? 0) + 1
    counts.set(ctx.exchange, index)
    const key = index === 1 ? 'confirm' : `confirm_${index}`
    const record = (outcome: Parameters<typeof recordOutcome>[4], details: Record<string, unknown> = {}) => {
      const operation = operationOf(ctx.exchange)
      return recordOutcome(repos, ctx, toolName, message, outcome, operation === null ? details : { operation_id: operation, ...details })
    }
    let asked: Asked<InputRequests>
    try {
      const requests = { [key]: { method: 'elicitation/create' as const, params: confirmationRequest(message) } }
      asked = via ? { answers: await via(requests), fresh: true } : await ask(ctx, { target: `tools/call ${toolName}`, args }, requests)
    } catch (err) {
      if (!isServiceError(err)) throw err
      switch (err.code) {
        case 'INPUT_TIMEOUT':
          await record('timed_out')
          throw fail('ELICITATION_TIMEOUT')
        case 'INPUT_REFUSED':
          await record('declined', { error: err.message })
          throw fail('ELICITATION_DENIED', { message: 'The client could not show the confirmation; nothing was changed' })
        case 'OPERATION_CANCELLED':
          await record('cancelled')
          throw fail('OPERATION_CANCELLED', { message: 'The confirmation was abandoned; nothing was changed' })
        case 'CAPABILITY_REQUIRED':
          throw fail('CAPABILITY_REQUIRED', { message: `${toolName} asks for confirmation: the client must declare the elicitation capability and read the call's SSE stream (${err.message})` })
        case 'MISSING_CLIENT_CAPABILITY':
          throw fail('MISSING_CLIENT_CAPABILITY', {
            message: `${toolName} asks the user for confirmation: declare the elicitation capability (form) in this request's io.modelcontextprotocol/clientCapabilities`,
            details: { requiredCapabilities: { elicitation: {} } },
          })
        default:
          throw err
      }
    }
    const answer = asked.answers[key] as ElicitResult
    if (answer.action === 'accept' && answer.content?.confirm === true) {
      if (asked.fresh) await record('confirmed')
      return
    }
    if (asked.fresh) await record('declined', { action: answer.action, ...(answer.action === 'accept' ? { confirm: answer.content?.confirm } : {}) })
    throw fail('ELICITATION_DENIED')
  }
}

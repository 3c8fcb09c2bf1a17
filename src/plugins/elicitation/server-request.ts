import type { FastifyInstance } from 'fastify'
import { fail } from '../../errors/service-error.js'
import { capabilityName, checkAnswer, missingCapability, type InputRequests, type InputResponses } from '../../mcp/input-requests.js'
import type { CallContext } from '../../rpc/dispatcher.js'
import type { AskOptions, AskTarget } from '../../rpc/handler-context.js'
import { OutboundRequestError } from '../../rpc/calls.js'
import type { Asked } from './asked.js'

/**
 * Questions in a session (the 2025 revisions): each request is sent as a server request on the call's own SSE stream
 * (a client waiting on its POST may ignore the GET stream), all at once, and the answers are awaited, each checked
 * against its request before it counts (a refused answer is a 400 to its sender, and the wait goes on).
 *
 * Throws CAPABILITY_REQUIRED when nothing can be asked (a capability the client did not declare at initialize, no
 * stream, or before notifications/initialized; nothing is sent), INPUT_TIMEOUT (after `notifications/cancelled` for
 * the unanswered requests), INPUT_REFUSED (the client answered with a JSON-RPC error) or OPERATION_CANCELLED (the call
 * was cancelled, its stream went away, or `options.signal` aborted).
 */
export function sessionAsker(fastify: FastifyInstance) {
  const { rpc, config } = fastify

  return async function ask<R extends InputRequests>(ctx: CallContext, about: AskTarget, requests: R, options: AskOptions = {}): Promise<Asked<R>> {
    const session = ctx.session
    if (!session) throw new Error('a session ask without a session')
    // Gated only on what was declared, whatever the revision (docs/decisions/protocol-revisions.md).
    const required = Object.values(requests).map((r) => missingCapability(r, session.clientCapabilities)).filter((m) => m !== null)
    if (required.length > 0) {
      const names = required.map(capabilityName)
      throw fail('CAPABILITY_REQUIRED', { message: `${about.target} asks the client for input: the client must declare ${names.join(' and ')} at initialize` })
    }
    if (!ctx.sink.streaming) {
      throw fail('CAPABILITY_REQUIRED', { message: `${about.target} asks the client for input on the call's SSE stream: send Accept: application/json, text/event-stream` })
    }
    // No server-initiated request before notifications/initialized (lifecycle).
    if (!session.initialized) {
      throw fail('CAPABILITY_REQUIRED', { message: `Send notifications/initialized before ${about.target}: it asks the client for input` })
    }
    const entries = Object.entries(requests)
    const controller = new AbortController()
    // One failure ends the others: their requests are withdrawn (notifications/cancelled) rather than left open.
    const onAbort = () => controller.abort()
    ctx.signal.addEventListener('abort', onAbort, { once: true })
    options.signal?.addEventListener('abort', onAbort, { once: true })
    if (options.signal?.aborted) controller.abort()
    try {
      const answers = await Promise.all(entries.map(async ([key, request]) => {
        const raw = await rpc.request(session, ctx.principal, ctx.sink, request.method, { ...request.params }, {
          timeoutMs: config.elicitationTimeoutMs,
          signal: controller.signal,
          accept: (result) => {
            const outcome = checkAnswer(request, result)
            return 'problem' in outcome ? outcome.problem : null
          },
        }).catch((err: unknown) => {
          controller.abort()
          throw err
        })
        const outcome = checkAnswer(request, raw)
        if ('problem' in outcome) throw new Error('an accepted answer failed its check')
        return [key, outcome.ok] as const
      }))
      return { answers: Object.fromEntries(answers) as InputResponses<R>, fresh: true }
    } catch (err) {
      if (err instanceof OutboundRequestError && err.reason === 'timeout') throw fail('INPUT_TIMEOUT')
      // The client's own message is kept short: what a client chooses to send is not echoed at length.
      if (err instanceof OutboundRequestError && err.reason === 'error') throw fail('INPUT_REFUSED', { message: `The client refused: ${err.message.slice(0, 200)}` })
      if (err instanceof OutboundRequestError) throw fail('OPERATION_CANCELLED', { message: 'The question to the client was abandoned; nothing was changed' })
      throw err
    } finally {
      ctx.signal.removeEventListener('abort', onAbort)
      options.signal?.removeEventListener('abort', onAbort)
    }
  }
}

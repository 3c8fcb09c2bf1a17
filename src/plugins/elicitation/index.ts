import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import type { Principal } from '../../auth/principal.js'
import { RequestStateSealer } from '../../mrtr/state-sealer.js'
import type { CallContext } from '../../rpc/dispatcher.js'
import type { Exchange } from '../../rpc/exchange.js'
import { PLUGIN } from '../names.js'
import { inputRequiredConfirmation } from './input-required.js'
import { serverRequestConfirmation } from './server-request.js'

export { AnswerRefused, InputRequired } from './input-required.js'
export { CONFIRM_SCHEMA, checkConfirmAnswer } from './form.js'

declare module 'fastify' {
  interface FastifyInstance {
    elicitation: Elicitation
    requestStates: RequestStateSealer
  }
}

export interface Elicitation {
  /**
   * Asks the user to confirm `message` (the exact effect of `toolName` called with `args`) and resolves only on `accept` with
   * `confirm: true`. In a session: `elicitation/create` on the call's stream (server-request.ts). On a stateless
   * request: an `input_required` round trip (input-required.ts), which ends this run of the tool with InputRequired.
   * Every outcome of a question asked is audited as `<tool>.confirmation`.
   */
  confirm(ctx: CallContext, toolName: string, args: unknown, message: string): Promise<void>
  /**
   * Before a tools/call runs: on a stateless request, opens and checks its `requestState` and keeps its
   * `inputResponses` for `confirm` (-32602 when the state is not this server's, or not this call's); in a session,
   * nothing (answers arrive as responses to server requests).
   */
  openRound(ctx: { exchange: Exchange; principal: Principal }, toolName: string, args: unknown, requestState: unknown, inputResponses: unknown): void
  /** The operation a stateless call's accepted requestState names, if any: the key of its at-most-once record. */
  operationOf(exchange: Exchange): string | null
}

/** Confirmation of protected tool calls, one strategy per era (interface.md, decisions.md §1, §6 and §10). */
const elicitationPlugin: FastifyPluginAsync = async (fastify) => {
  const sealer = new RequestStateSealer(fastify.repos)
  sealer.ensureKey()
  fastify.decorate('requestStates', sealer)
  const sessions = serverRequestConfirmation(fastify)
  const stateless = inputRequiredConfirmation(fastify, sealer)

  fastify.decorate('elicitation', {
    confirm: (ctx, toolName, args, message) => (ctx.exchange.era === 'modern' ? stateless.confirm(ctx, toolName, args, message) : sessions(ctx, toolName, message)),
    openRound(ctx, toolName, args, requestState, inputResponses) {
      if (ctx.exchange.era === 'modern') stateless.open(ctx, toolName, args, requestState, inputResponses)
    },
    operationOf: (exchange) => (exchange.era === 'modern' ? stateless.operationOf(exchange) : null),
  } satisfies Elicitation)
}

export default fp(elicitationPlugin, { name: PLUGIN.elicitation, fastify: '5.x', dependencies: [PLUGIN.http, PLUGIN.db, PLUGIN.rpc] })

import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import type { Principal } from '../../auth/principal.js'
import type { InputRequests, InputResponses } from '../../mcp/input-requests.js'
import { RequestStateSealer } from '../../mrtr/state-sealer.js'
import type { CallContext } from '../../rpc/dispatcher.js'
import type { Exchange } from '../../rpc/exchange.js'
import type { Asker, AskOptions, AskTarget } from '../../rpc/handler-context.js'
import { PLUGIN } from '../names.js'
import { confirmer, type AskVia } from './confirm.js'
import { statelessAsker } from './input-required.js'
import { sessionAsker } from './server-request.js'

export { AnswerRefused, InputRequired } from './input-required.js'
export { CONFIRM_SCHEMA } from './form.js'

declare module 'fastify' {
  interface FastifyInstance {
    elicitation: Elicitation
    requestStates: RequestStateSealer
  }
}

export interface Elicitation extends Asker {
  /**
   * Asks the client `requests` on behalf of a handler (`about` names the method's target and arguments). In a session:
   * server requests on the call's stream (server-request.ts). On a stateless request: an `input_required` round trip
   * (input-required.ts), which ends this run of the handler with InputRequired.
   */
  ask<R extends InputRequests>(ctx: CallContext, about: AskTarget, requests: R, options?: AskOptions): Promise<InputResponses<R>>
  /**
   * Asks the user to confirm `message` (the exact effect of `toolName` called with `args`) and resolves only on
   * `accept` with `confirm: true`; every outcome is audited as `<tool>.confirmation` (confirm.ts). `via` asks instead
   * of the era's asker: a running task's work asks through its task.
   */
  confirm(ctx: CallContext, toolName: string, args: unknown, message: string, via?: AskVia): Promise<void>
  /**
   * Before a handler that may ask runs: on a stateless request, opens and checks its `requestState` and keeps its
   * `inputResponses` for `ask` (-32602 when the state is not this server's, or not this request's); in a session,
   * nothing (answers arrive as responses to server requests). `target` is the method's target: `tools/call <name>`,
   * `prompts/get <name>`, `resources/read <uri>`. A promise only when the state names a key this process has not seen
   * yet (it is read from the database first); the caller waits for it.
   */
  openRound(ctx: { exchange: Exchange; principal: Principal }, target: string, args: unknown, requestState: unknown, inputResponses: unknown): void | Promise<void>
  /** The operation a stateless request's accepted requestState names, if any: the key of its at-most-once record. */
  operationOf(exchange: Exchange): string | null
}

/** Questions to the client (elicitation, sampling, roots) and the confirmation of protected tool calls, one strategy per era. */
const elicitationPlugin: FastifyPluginAsync = async (fastify) => {
  const sealer = new RequestStateSealer(fastify.repos)
  await sealer.ensureKey()
  fastify.decorate('requestStates', sealer)
  const inSession = sessionAsker(fastify)
  const stateless = statelessAsker(fastify, sealer)
  const askDetailed = <R extends InputRequests>(ctx: CallContext, about: AskTarget, requests: R, options: AskOptions = {}) =>
    ctx.exchange.era === 'modern' ? stateless.ask(ctx, about, requests, options) : inSession(ctx, about, requests, options)
  const operationOf = (exchange: Exchange) => (exchange.era === 'modern' ? stateless.operationOf(exchange) : null)

  fastify.decorate('elicitation', {
    ask: async (ctx, about, requests, options) => (await askDetailed(ctx, about, requests, options)).answers,
    confirm: confirmer(fastify, askDetailed, operationOf),
    openRound(ctx, target, args, requestState, inputResponses) {
      if (ctx.exchange.era === 'modern') return stateless.open(ctx, target, args, requestState, inputResponses)
    },
    operationOf,
    operation: (ctx, about) => (ctx.exchange.era === 'modern' ? stateless.operation(ctx, about) : null),
  } satisfies Elicitation)
}

export default fp(elicitationPlugin, { name: PLUGIN.elicitation, fastify: '5.x', dependencies: [PLUGIN.http, PLUGIN.db, PLUGIN.rpc] })

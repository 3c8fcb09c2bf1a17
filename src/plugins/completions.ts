import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { canUse } from '../auth/principal.js'
import { fail } from '../errors/service-error.js'
import type { Completer } from '../mcp/completion.js'
import { HandlerContext, handlerDeps } from '../rpc/handler-context.js'
import { validatorFor } from '../validation/index.js'
import { PLUGIN } from './names.js'

interface CompleteParams {
  ref: { type: 'ref/prompt'; name: string } | { type: 'ref/resource'; uri: string }
  argument: { name: string; value: string }
  context?: { arguments?: Record<string, string> }
}

/** The spec's cap on the values of one completion result. */
const MAX_VALUES = 100

/**
 * `completion/complete`: suggestions for an argument of a prompt, or a variable of a resource template, from the
 * completer its definition gives (none: no suggestions). What the caller may not see is unknown to it (-32602), as in
 * the lists. At most 100 values are sent, with the total and whether there were more.
 */
const completionsPlugin: FastifyPluginAsync = async (fastify) => {
  const { rpc, repos, config } = fastify
  const deps = handlerDeps(fastify)
  rpc.capabilities.declare(['legacy', 'modern'], 'completions', {})

  rpc.registerRequest<CompleteParams>({
    method: 'completion/complete',
    eras: ['legacy', 'modern'],
    params: validatorFor('mcp/completion-complete.params'),
    async handle(params, ctx) {
      const { ref, argument } = params
      let completer: Completer | undefined
      if (ref.type === 'ref/prompt') {
        const prompt = fastify.prompts.get(ref.name)
        if (!prompt || !canUse(ctx.principal, prompt.audience)) throw fail('INVALID_PARAMS', { message: `Unknown prompt: ${ref.name}`, details: { name: ref.name } })
        if (!(prompt.def.arguments ?? []).some((a) => a.name === argument.name)) {
          throw fail('INVALID_PARAMS', { message: `Prompt ${ref.name} has no argument ${argument.name}`, details: { argument: argument.name } })
        }
        completer = prompt.def.complete?.[argument.name]
      } else {
        const template = fastify.resources.registry.template(ref.uri)
        if (!template || !canUse(ctx.principal, template.audience)) {
          throw fail('INVALID_PARAMS', { message: `Unknown resource template: ${ref.uri}`, details: { uri: ref.uri } })
        }
        if (!template.template.variables.includes(argument.name)) {
          throw fail('INVALID_PARAMS', { message: `Resource template ${ref.uri} has no variable ${argument.name}`, details: { argument: argument.name } })
        }
        completer = template.def.complete?.[argument.name]
      }
      if (!completer) return { completion: { values: [], total: 0, hasMore: false } }
      const target = ref.type === 'ref/prompt' ? `completion/complete ${ref.name}` : `completion/complete ${ref.uri}`
      const values = await completer(argument.value, new HandlerContext(ctx, { target, args: params }, deps), params.context?.arguments ?? {})
      const unique = [...new Set(values.filter((v) => typeof v === 'string'))]
      return { completion: { values: unique.slice(0, MAX_VALUES), total: unique.length, hasMore: unique.length > MAX_VALUES } }
    },
  })
}

export default fp(completionsPlugin, { name: PLUGIN.completions, fastify: '5.x', dependencies: [PLUGIN.rpc, PLUGIN.elicitation, PLUGIN.prompts, PLUGIN.resources] })

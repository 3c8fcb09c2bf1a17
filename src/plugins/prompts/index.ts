import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { fail, isServiceError } from '../../errors/service-error.js'
import { contentBlockProblem, forRevision, type PromptMessage } from '../../mcp/content.js'
import { listMethod } from '../../rpc/list-method.js'
import type { CallContext } from '../../rpc/dispatcher.js'
import { HandlerContext, handlerDeps } from '../../rpc/handler-context.js'
import { validatorFor } from '../../validation/index.js'
import { AnswerRefused, InputRequired } from '../elicitation/index.js'
import { PLUGIN } from '../names.js'
import type { PromptDefinition, PromptResult } from './define.js'
import { describePrompt, PromptRegistry, type RegisteredPrompt } from './registry.js'

declare module 'fastify' {
  interface FastifyInstance {
    prompts: PromptRegistry
  }
}

export interface PromptsPluginOptions {
  /** The prompts to serve (default: none). */
  prompts?: PromptDefinition<any>[]
}

interface GetParams {
  name: string
  arguments?: Record<string, string>
  inputResponses?: Record<string, unknown>
  requestState?: string
}

/**
 * Prompts: `prompts/list` and `prompts/get`, in both eras (`input_required` on stateless requests when a prompt asks
 * the client something). Visibility is scope ∩ role, as for tools; a prompt the caller may not see is an unknown
 * prompt (-32602). Arguments are checked before the prompt runs: required ones present, no unknown ones.
 */
const promptsPlugin: FastifyPluginAsync<PromptsPluginOptions> = async (fastify, opts) => {
  const { rpc, repos, config } = fastify
  const registry = new PromptRegistry()
  for (const def of opts.prompts ?? []) registry.add(def)
  fastify.decorate('prompts', registry)
  const deps = handlerDeps(fastify)
  // A prompt added or removed at run time (embedding) is announced: on sessions' GET streams and on listen streams.
  registry.onChange(() => fastify.events.emit({ type: 'list.changed', list: 'prompts', organizationId: null }))
  rpc.capabilities.declare(['legacy', 'modern'], 'prompts', { listChanged: true })

  rpc.registerRequest(listMethod(config, {
    method: 'prompts/list',
    field: 'prompts',
    items: (ctx) => registry.visibleTo(ctx.principal),
    describe: (prompt, version) => describePrompt(prompt.def, version),
  }))

  /** The prompt, when the caller may get it: an unknown prompt and one the caller may not see are the same -32602. */
  function visible(name: string, ctx: Pick<CallContext, 'principal'>): RegisteredPrompt {
    const prompt = registry.get(name)
    if (!prompt || !registry.visibleTo(ctx.principal).includes(prompt)) {
      throw fail('INVALID_PARAMS', { message: `Unknown prompt: ${name}`, details: { name } })
    }
    return prompt
  }

  rpc.registerRequest<GetParams>({
    method: 'prompts/get',
    eras: ['legacy', 'modern'],
    mirroredName: 'name',
    params: validatorFor('mcp/prompts-get.params'),
    precheck(params, ctx) {
      const prompt = registry.get(params.name)
      if (prompt && registry.visibleTo(ctx.principal).includes(prompt)) {
        return fastify.elicitation.openRound(ctx, promptTarget(params.name), params.arguments ?? {}, params.requestState, params.inputResponses)
      }
    },
    async handle(params, ctx) {
      const prompt = visible(params.name, ctx)
      const args = checkedArguments(prompt, params.arguments ?? {})
      const handlerCtx = new HandlerContext(ctx, { target: promptTarget(params.name), args }, deps)
      let result: PromptResult
      try {
        result = await prompt.def.get(args, handlerCtx)
      } catch (err) {
        if (err instanceof InputRequired) return err.result
        if (err instanceof AnswerRefused) throw err.error
        if (!isServiceError(err)) ctx.log.error({ err, prompt: params.name }, 'prompt failed')
        throw err
      }
      const version = ctx.exchange.protocolVersion
      const messages = result.messages.map((m, i) => checkedMessage(m, i, params.name, ctx))
      return {
        ...(result.description !== undefined ? { description: result.description } : {}),
        messages: messages.map((m) => ({ role: m.role, content: forRevision(m.content, version) })),
      }
    },
  })

  /** What a prompt returned must be messages of content blocks; anything else is the server's failure, never sent. */
  function checkedMessage(message: PromptMessage, index: number, name: string, ctx: CallContext): PromptMessage {
    const problem = message.role !== 'user' && message.role !== 'assistant' ? '/role must be user or assistant' : contentBlockProblem(message.content)
    if (problem === null) return message
    ctx.log.error({ prompt: name, index, problem }, 'a prompt returned a message that is not one')
    throw fail('INTERNAL_ERROR')
  }
}

/** Required arguments present, no unknown ones: -32602 otherwise, before the prompt runs. */
function checkedArguments(prompt: RegisteredPrompt, args: Record<string, string>): Record<string, string> {
  const declared = prompt.def.arguments ?? []
  const unknown = Object.keys(args).filter((name) => !declared.some((a) => a.name === name))
  if (unknown.length > 0) {
    throw fail('INVALID_PARAMS', { message: `Prompt ${prompt.def.name} has no argument ${unknown.join(', ')}`, details: { unknown } })
  }
  const missing = declared.filter((a) => a.required === true && (args[a.name] === undefined || args[a.name] === '')).map((a) => a.name)
  if (missing.length > 0) {
    throw fail('INVALID_PARAMS', { message: `Prompt ${prompt.def.name} needs ${missing.join(', ')}`, details: { missing } })
  }
  return args
}

/** What a prompt's questions are about, in a stateless requestState. */
function promptTarget(name: string): string {
  return `prompts/get ${name}`
}

export default fp(promptsPlugin, { name: PLUGIN.prompts, fastify: '5.x', dependencies: [PLUGIN.rpc, PLUGIN.elicitation] })

import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { roleAllows } from '../../auth/principal.js'
import { toToolResult } from '../../errors/render.js'
import { fail, isServiceError } from '../../errors/service-error.js'
import { sendLog, type CallContext } from '../../rpc/dispatcher.js'
import { atLeast, type RequestId } from '../../rpc/types.js'
import { describeDetails, validationDetails, validatorFor } from '../../validation/index.js'
import { PLUGIN } from '../names.js'
import { builtinTools } from './builtin/index.js'
import { decodeCursor, encodeCursor } from './cursor.js'
import type { ToolContext, ToolDefinition } from './define.js'
import { ToolRegistry } from './registry.js'

declare module 'fastify' {
  interface FastifyInstance {
    tools: ToolRegistry
  }
}

export interface ToolsPluginOptions {
  /** The catalog to serve; defaults to the built-in tools. */
  tools?: ToolDefinition<any, any>[]
}

interface CallParams {
  name: string
  arguments?: Record<string, unknown>
  _meta?: { progressToken?: RequestId }
}

/** tools/list and tools/call over the registry. Tool failures are tool results, rendered by the error catalog. */
const toolsPlugin: FastifyPluginAsync<ToolsPluginOptions> = async (fastify, opts) => {
  const { rpc, repos, config } = fastify
  const registry = new ToolRegistry()
  for (const def of opts.tools ?? builtinTools) registry.add(def)
  fastify.decorate('tools', registry)

  rpc.registerRequest<{ cursor?: string }>({
    method: 'tools/list',
    params: validatorFor('mcp/tools-list.params'),
    handle(params, ctx) {
      const visible = registry.visibleTo(ctx.principal)
      let offset = 0
      if (params.cursor !== undefined) {
        const decoded = decodeCursor('tools', params.cursor)
        offset = decoded !== undefined && /^\d{1,6}$/.test(decoded) ? Number(decoded) : -1
        if (offset < 0 || offset >= visible.length) throw fail('INVALID_PARAMS', { message: 'Invalid cursor for tools/list' })
      }
      const version = ctx.session!.protocolVersion
      const end = offset + config.toolsPageSize
      const result: Record<string, unknown> = { tools: visible.slice(offset, end).map((t) => t.descriptors[version]) }
      if (end < visible.length) result.nextCursor = encodeCursor('tools', String(end))
      return result
    },
  })

  rpc.registerRequest<CallParams>({
    method: 'tools/call',
    params: validatorFor('mcp/tools-call.params'),
    precheck(params, { principal }) {
      const tool = registry.get(params.name)
      if (tool && !principal.scopes.includes(tool.def.scope)) {
        const wanted = [...new Set([...principal.scopes, tool.def.scope])].join(' ')
        throw fail('INSUFFICIENT_SCOPE', {
          message: `Tool ${tool.def.name} needs the ${tool.def.scope} scope`,
          details: { required_scope: tool.def.scope, scope: wanted },
        })
      }
    },
    prefersStream(params) {
      const tool = registry.get(params.name)
      return params._meta?.progressToken !== undefined || tool?.def.longRunning === true || tool?.def.confirm === true
    },
    async handle(params, ctx) {
      const tool = registry.get(params.name)
      if (!tool) throw fail('INVALID_PARAMS', { message: `Unknown tool: ${params.name}`, details: { name: params.name } })
      const session = ctx.session!
      const version = session.protocolVersion
      const args = params.arguments ?? {}
      try {
        if (!roleAllows(ctx.principal.role, tool.def.role)) {
          throw fail('PERMISSION_DENIED', { message: `Your role (${ctx.principal.role}) cannot call ${tool.def.name}; it needs ${tool.def.role} or above` })
        }
        if (tool.validateInput(args) !== true) {
          const details = validationDetails(tool.validateInput.errors)
          throw fail('INVALID_ARGUMENTS', { message: `Invalid arguments for ${tool.def.name}: ${describeDetails(details)}`, details })
        }
        const output = await tool.def.handler(args, toolContext(ctx, params._meta?.progressToken))
        if (tool.validateOutput && tool.validateOutput(output) !== true) {
          ctx.log.error({ tool: tool.def.name, details: validationDetails(tool.validateOutput.errors) }, 'tool output does not match its outputSchema')
          throw fail('INTERNAL_ERROR')
        }
        const result: Record<string, unknown> = { content: [{ type: 'text', text: JSON.stringify(output) }], isError: false }
        if (atLeast(version, '2025-06-18') && tool.validateOutput) result.structuredContent = output
        return result
      } catch (err) {
        // Before 2025-11-25, invalid arguments are a protocol error (-32602); from then on a tool result.
        if (isServiceError(err) && err.code === 'INVALID_ARGUMENTS' && !atLeast(version, '2025-11-25')) throw err
        if (!isServiceError(err)) ctx.log.error({ err, tool: tool.def.name }, 'tool failed')
        return toToolResult(err)
      }
    },
  })

  function toolContext(ctx: CallContext, progressToken: RequestId | undefined): ToolContext {
    let lastProgress = -Infinity
    return {
      principal: ctx.principal,
      session: ctx.session!,
      protocolVersion: ctx.session!.protocolVersion,
      repos,
      get signal() {
        return ctx.signal // made on first use (CallAbort)
      },
      requestId: ctx.requestId,
      logger: ctx.log,
      progress(progress, total, message) {
        // The spec requires strictly increasing progress; anything else is dropped rather than sent.
        if (progressToken === undefined || !(progress > lastProgress)) return
        lastProgress = progress
        const p: Record<string, unknown> = { progressToken, progress }
        if (total !== undefined) p.total = total
        if (message !== undefined) p.message = message
        ctx.sink.send({ jsonrpc: '2.0', method: 'notifications/progress', params: p })
      },
      log: (level, data, logger = 'tool') => sendLog(ctx, level, logger, data),
    }
  }
}

export default fp(toolsPlugin, { name: PLUGIN.tools, fastify: '5.x', dependencies: [PLUGIN.db, PLUGIN.rpc, PLUGIN.sessions] })

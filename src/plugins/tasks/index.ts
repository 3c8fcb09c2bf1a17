import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { roleAllows } from '../../lib/roles.js'
import { fail } from '../../errors/service-error.js'
import type { CallContext } from '../../rpc/dispatcher.js'
import { validatorFor } from '../../validation/index.js'
import { interruptedResult } from '../tools/idempotency.js'
import { PLUGIN } from '../names.js'
import { TASKS_EXTENSION, TaskManager } from './task-manager.js'

export { TASKS_EXTENSION } from './task-manager.js'

declare module 'fastify' {
  interface FastifyInstance {
    tasks: TaskManager
  }
}

/** How often expired tasks are purged (expired ones are invisible before that). */
export const TASK_SWEEP_MS = 10 * 60 * 1000

/**
 * The tasks extension (`io.modelcontextprotocol/tasks`, 2026-07-28) for clients that declare it in a request's
 * capabilities: long-running tools (deployments) answer such a tools/call with a task handle, and `tasks/get`,
 * `tasks/cancel` and `tasks/update` follow it. Without the declaration a client never gets a task and these methods
 * are refused with -32021 (the dispatcher checks `requires`). `tasks/result` and `tasks/list` do not exist (-32601).
 */
const tasksPlugin: FastifyPluginAsync = async (fastify) => {
  const { rpc, repos, config, events, clock } = fastify
  const { processes } = fastify
  const manager = new TaskManager({ repos, config, events, log: fastify.log, owner: processes.id, clock })
  const interrupted = await manager.recover(interruptedResult, { live: await processes.liveIds() })
  if (interrupted > 0) fastify.log.warn({ tasks: interrupted }, 'tasks left working by a previous process are completed as interrupted')
  processes.onDead(async (dead) => {
    const n = await manager.recover(interruptedResult, { dead })
    if (n > 0) fastify.log.warn({ tasks: n, processes: dead }, 'tasks of processes whose lease lapsed are completed as interrupted')
  })
  fastify.decorate('tasks', manager)
  rpc.capabilities.declareExtension(['modern'], TASKS_EXTENSION)

  // sweep never rejects (it logs what fails); a manual clock waits for it (lib/clock.ts), the system clock does not.
  const timer = clock.setInterval(() => manager.sweep(), TASK_SWEEP_MS)
  timer.unref()
  // While the pipelines are interrupted (same phase), live tasks record how they ended.
  fastify.shutdown.onDrain(() => manager.settle(config.pipelineGraceMs + 1000))
  fastify.addHook('onClose', async () => {
    clock.clearTimer(timer)
    manager.close()
  })

  const requires = { extensions: { [TASKS_EXTENSION]: {} } }
  const ownTask = async (ctx: CallContext, taskId: string) => {
    const task = await manager.get(ctx.principal, taskId)
    if (!task) throw fail('INVALID_PARAMS', { message: 'No task with this id (it never existed, has expired, or is not yours)', details: { taskId } })
    return task
  }

  // Methods of the 2025 tasks a 2026-07-28 client might still try: told they belong to the session revisions.
  rpc.declareDropped('tasks/result')
  rpc.declareDropped('tasks/list')
  rpc.registerRequest<{ taskId: string }>({
    method: 'tasks/get',
    eras: ['modern'],
    mirroredName: 'taskId',
    requires,
    params: validatorFor('mcp/tasks-get.params'),
    handle: async (params, ctx) => manager.view(await ownTask(ctx, params.taskId)),
  })

  rpc.registerRequest<{ taskId: string }>({
    method: 'tasks/cancel',
    eras: ['modern'],
    mirroredName: 'taskId',
    requires,
    params: validatorFor('mcp/tasks-cancel.params'),
    async handle(params, ctx) {
      const task = await ownTask(ctx, params.taskId)
      // Stopping the work is a call of its tool: the member must still be allowed to make it (scope and role).
      const tool = fastify.tools.get(task.tool)
      if (tool && !ctx.principal.scopes.includes(tool.def.scope)) {
        throw fail('INSUFFICIENT_SCOPE', { message: `Cancelling a task of ${task.tool} needs the ${tool.def.scope} scope`, details: { required_scope: tool.def.scope } })
      }
      if (tool && !roleAllows(ctx.principal.role, tool.def.role)) {
        throw fail('PERMISSION_DENIED', { message: `Your role (${ctx.principal.role}) cannot cancel a task of ${task.tool}; it needs ${tool.def.role} or above` })
      }
      await manager.cancel(task, 'tasks/cancel')
      return {}
    },
  })

  // Answers to a task's outstanding input requests; keys that are not outstanding are ignored (the extension says so).
  rpc.registerRequest<{ taskId: string; inputResponses: Record<string, unknown> }>({
    method: 'tasks/update',
    eras: ['modern'],
    mirroredName: 'taskId',
    requires,
    params: validatorFor('mcp/tasks-update.params'),
    async handle(params, ctx) {
      await manager.update(await ownTask(ctx, params.taskId), params.inputResponses)
      return {}
    },
  })
}

export default fp(tasksPlugin, { name: PLUGIN.tasks, fastify: '5.x', dependencies: [PLUGIN.db, PLUGIN.processes, PLUGIN.rpc] })

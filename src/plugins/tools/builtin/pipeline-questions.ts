import type { App } from '../../../db/repos/apps.js'
import type { AuditOutcome } from '../../../db/repos/audit.js'
import type { PipelineAnswer, PipelineQuestion } from '../../../deployments/questions.js'
import { isServiceError, ServiceError } from '../../../errors/service-error.js'
import type { ElicitResult } from '../../../mcp/input-requests.js'
import type { ToolContext } from '../define.js'

/**
 * How a deployment tool answers its pipeline's questions (docs/decisions/pipeline-questions.md): the member who called
 * the tool is asked a form with one required boolean, in a session on the call's stream, in a task as the task's input
 * request. A stateless 2026-07-28 call that is not a task is never asked (asking would end its run and re-run the
 * handler); there, and whenever the member cannot or does not answer yes, the pipeline is told no. Every answer is
 * audited as `<tool>.pipeline_question`.
 */

export const PIPELINE_QUESTION_SCHEMA = {
  type: 'object',
  properties: { yes: { type: 'boolean', title: 'Yes', description: 'Check to answer yes; the pipeline is told no otherwise' } },
  required: ['yes'],
} as const

interface Outcome extends PipelineAnswer {
  audited: AuditOutcome
}

/** The onQuestion hook of one run started by `toolName` for `app`. */
export function pipelineAsker(ctx: ToolContext, toolName: string, app: App): (q: PipelineQuestion) => Promise<PipelineAnswer> {
  let asked = 0
  return async ({ deploymentId, question, signal }) => {
    const key = ++asked === 1 ? 'pipeline_question' : `pipeline_question_${asked}`
    const outcome = await ask(ctx, key, `Deployment ${deploymentId} of app ${app.name} asks: ${question}`, signal)
    await ctx.audit({
      action: `${toolName}.pipeline_question`,
      targetType: 'deployment',
      targetId: deploymentId,
      outcome: outcome.audited,
      details: { app_id: app.id, question, answer: outcome.yes ? 'yes' : 'no', why: outcome.why },
    })
    return { yes: outcome.yes, why: outcome.why }
  }
}

/**
 * `runEnded` gives up on the question when the run ends: in a session it is withdrawn (notifications/cancelled); a
 * task's ends with the task, which the tool completes once the run has ended.
 */
async function ask(ctx: ToolContext, key: string, message: string, runEnded: AbortSignal): Promise<Outcome> {
  if (ctx.era === 'modern' && !ctx.inTask) {
    return no('denied', 'not asked: a 2026-07-28 call that is not a task cannot be asked while it runs; call with the tasks extension to be asked')
  }
  if (ctx.clientCapabilities.elicitation === undefined) return no('denied', 'not asked: the client did not declare the elicitation capability')
  let answer: ElicitResult
  try {
    const asking = ctx.ask({ [key]: { method: 'elicitation/create' as const, params: { mode: 'form' as const, message, requestedSchema: PIPELINE_QUESTION_SCHEMA } } }, { signal: runEnded })
    asking.catch(() => {}) // given up on when the run ended first
    answer = (await Promise.race([asking, endOf(runEnded)]))[key]!
  } catch (err) {
    if (!isServiceError(err)) {
      ctx.logger.error({ err }, 'a pipeline question could not be asked')
      return no('denied', 'not asked: a server error (in its log)')
    }
    switch (err.code) {
      case 'INPUT_TIMEOUT':
        return no('timed_out', 'no answer in time')
      case 'OPERATION_CANCELLED':
        return no('cancelled', runEnded.aborted ? 'the run ended before an answer came' : 'the call was cancelled, or its session ended, before an answer came')
      case 'INPUT_REFUSED':
        return no('declined', 'the client could not show the question')
      default: // CAPABILITY_REQUIRED (no stream to ask on, say), -32021
        return no('denied', `not asked: ${err.message}`)
    }
  }
  const by = `user ${ctx.principal.userId}`
  if (answer.action === 'accept') return answer.content?.yes === true ? { yes: true, why: `answered by ${by}`, audited: 'confirmed' } : no('declined', `answered by ${by}`)
  return no(answer.action === 'cancel' ? 'cancelled' : 'declined', `${by} ${answer.action === 'cancel' ? 'cancelled' : 'declined'} the question`)
}

/** Rejects with OPERATION_CANCELLED once `signal` aborts. */
function endOf(signal: AbortSignal): Promise<never> {
  return new Promise((_resolve, reject) => {
    const end = () => reject(new ServiceError('OPERATION_CANCELLED'))
    if (signal.aborted) end()
    else signal.addEventListener('abort', end, { once: true })
  })
}

function no(audited: AuditOutcome, why: string): Outcome {
  return { yes: false, why, audited }
}

import type { PromptDefinition } from '../define.js'
import { reviewFailedDeployment } from './review-failed-deployment.js'
import { summarizeRecentActivity } from './summarize-recent-activity.js'

/** The built-in prompts, in prompts/list order. */
export const builtinPrompts: PromptDefinition<any>[] = [reviewFailedDeployment, summarizeRecentActivity]

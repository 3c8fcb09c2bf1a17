import type { ToolDefinition } from '../define.js'
import { appTools } from './apps.js'
import { appsList } from './apps-list.js'
import { deploymentTools } from './deployments.js'
import { envTools } from './env.js'
import { orgTools } from './org.js'
import { whoami } from './whoami.js'

/** The built-in catalog (docs/decisions/tool-catalog.md), in tools/list order. */
export const builtinTools: ToolDefinition<any, any>[] = [whoami, appsList, ...appTools, ...envTools, ...deploymentTools, ...orgTools]

import type { ToolDefinition } from '../define.js'
import { appsList } from './apps-list.js'
import { whoami } from './whoami.js'

/** The built-in catalog, in tools/list order. */
export const builtinTools: ToolDefinition<any, any>[] = [whoami, appsList]

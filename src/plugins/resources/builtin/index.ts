import type { ResourceDefinition } from '../define.js'
import { appResource } from './apps.js'
import { deploymentLogResource } from './deployment-log.js'

/** The built-in resources, in resources/list and resources/templates/list order: apps, then deployment logs. */
export const builtinResources: ResourceDefinition[] = [appResource, deploymentLogResource]

export { default as builtinResourceEvents } from './notifications.js'

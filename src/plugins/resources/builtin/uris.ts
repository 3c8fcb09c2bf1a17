/** The URIs of the built-in resources (no imports: tools that change what they show may name them too). */

export const APP_TEMPLATE = 'service://apps/{app_id}'
export const DEPLOYMENT_LOG_TEMPLATE = 'service://deployments/{deployment_id}/log'

/** The URI of an app's resource. */
export function appUri(appId: string): string {
  return `service://apps/${encodeURIComponent(appId)}`
}

/** The URI of a deployment's log. */
export function deploymentLogUri(deploymentId: string): string {
  return `service://deployments/${encodeURIComponent(deploymentId)}/log`
}

import type { Deployment } from '../db/types.js'
import { isoTime } from '../lib/iso-time.js'

/**
 * What the tools and the log resource say of a deployment whose output retention deleted (src/retention/): when, and
 * that the deployment itself is kept.
 */
export function outputDeleted(d: Deployment): { at: string; message: string } | undefined {
  if (d.outputPurgedAt === null) return undefined
  const at = isoTime(d.outputPurgedAt)
  return {
    at,
    message: `The output of deployment ${d.id} was deleted by retention at ${at} (the server keeps the output of the newest runs of each app, ` +
      'for a number of days: SERVICE_DEPLOYMENT_OUTPUT_KEEP_RUNS, SERVICE_DEPLOYMENT_OUTPUT_KEEP_DAYS); its status, timings and outcome are kept',
  }
}

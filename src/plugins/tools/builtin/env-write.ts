import type { Config } from '../../../config.js'
import type { TxRepos } from '../../../db/repos/index.js'
import { holdQuota } from '../../../limits/quotas.js'

/**
 * Sets an env var inside the caller's transaction: a name new to the app first takes a place under the app's quota
 * (held, so two new names at the last place cannot both get in); replacing a value never counts.
 */
export async function setWithinQuota(tx: TxRepos, config: Config, input: { organizationId: string; appId: string; name: string; ciphertext: string; userId: string | null }): Promise<{ created: boolean }> {
  if (!(await tx.envVars.exists(input.organizationId, input.appId, input.name))) {
    await holdQuota(tx, config, input.organizationId, 'env_vars_per_app', input.appId)
  }
  return tx.envVars.set(input)
}

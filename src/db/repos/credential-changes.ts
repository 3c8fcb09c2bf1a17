import type { Db } from '../client.js'

/**
 * Tells the credential cache when what a credential resolves to may have changed: a repository write in this process
 * that touches keys, members or users calls `bump()`, and SQLite's `data_version` moves whenever another connection
 * (the CLI, another process) commits. Checking both costs one tiny statement, far less than re-verifying a credential.
 */
export interface CredentialChanges {
  bump(): void
  /** True when anything changed since the previous call (one consumer: the credential cache). */
  takeChanged(): boolean
}

export function credentialChanges(db: Db): CredentialChanges {
  // data_version is per connection and only moves on commits by *other* connections, which is exactly the blind spot.
  const dataVersion = db.$client.prepare('PRAGMA data_version').pluck()
  let local = 0
  let seenLocal = 0
  let seenExternal = dataVersion.get() as number
  return {
    bump() {
      local++
    },
    takeChanged() {
      const external = dataVersion.get() as number
      if (external === seenExternal && local === seenLocal) return false
      seenExternal = external
      seenLocal = local
      return true
    },
  }
}

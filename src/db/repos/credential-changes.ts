import type { Db } from '../sqlite/client.js'
import { commitWatch } from '../sqlite/commit-watch.js'

/**
 * Tells the credential cache when what a credential resolves to may have changed: a repository write in this process
 * that touches keys, members or users calls `bump()`, and SQLite's `data_version` moves whenever another connection
 * (the CLI, another process) commits. Asking SQLite takes a read lock, so on a database file a commit watch
 * (commit-watch.ts: one read of the wal-index header) answers first, and SQLite is asked only after some commit.
 */
export interface CredentialChanges {
  /**
   * Called once a write that changes what a credential resolves to is committed. Processes that share the database
   * (coordination/credential-barrier.ts) resolve it when every one of them has dropped its cache.
   */
  bump(): void | Promise<void>
  /** True when anything changed since the previous call (one consumer: the credential cache). */
  takeChanged(): boolean
}

export function credentialChanges(db: Db): CredentialChanges {
  // data_version is per connection and only moves on commits by *other* connections, which is exactly the blind spot.
  const dataVersion = db.$client.prepare('PRAGMA data_version').pluck()
  const commits = commitWatch(db.$client)
  let local = 0
  let seenLocal = 0
  let seenExternal = dataVersion.get() as number
  return {
    bump() {
      local++
    },
    takeChanged() {
      // The watch first: a commit after it moved is seen by data_version below, or moves the header again.
      if (commits !== null && !commits.moved() && local === seenLocal) return false
      const external = dataVersion.get() as number
      if (external === seenExternal && local === seenLocal) return false
      seenExternal = external
      seenLocal = local
      return true
    },
  }
}

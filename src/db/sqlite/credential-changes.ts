import type { CredentialChanges } from '../repos/credential-changes.js'
import type { Db } from '../types.js'
import { commitWatch } from './commit-watch.js'

/**
 * Credential changes on SQLite: a repository write in this process calls `bump()`, and SQLite's `data_version` moves
 * whenever another connection (the CLI, another process) commits. Asking SQLite takes a read lock, so on a database
 * file a commit watch (commit-watch.ts: one read of the wal-index header) answers first, and SQLite is asked only after
 * some commit.
 */
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

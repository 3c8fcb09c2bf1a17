import { reposOn } from '../repos/index.js'
import type { OpenOptions, Storage } from '../storage.js'
import type { DatabaseHandle } from '../types.js'
import { openDatabase, sqliteTarget } from './client.js'
import { credentialChanges } from './credential-changes.js'
import { lockDatabase, type DatabaseLock } from './lock.js'
import { sqliteStore } from './store.js'

/**
 * A SQLite database as storage (open.ts): locked first when asked (one server per file; a `:memory:` database has no
 * file to lock), then opened (created unless `create` is false) and migrated with owner-only files.
 */
export function openSqliteStorage(database: string, options: OpenOptions): Storage {
  const warn = (message: string) => options.warn?.(message)
  const lock: DatabaseLock | null = options.lock && sqliteTarget(database).kind === 'file' ? lockDatabase(database, warn) : null
  let handle: DatabaseHandle
  try {
    handle = openDatabase(database, { warn, create: options.create !== false })
  } catch (err) {
    lock?.release()
    throw err
  }
  let closed = false
  return {
    ...sqliteStorageOn(handle),
    async close() {
      if (closed) return
      closed = true
      handle.close()
      lock?.release()
    },
  }
}

/** Storage on a SQLite database opened by the caller (tests, embedding), who closes it: `close` does nothing. */
export function sqliteStorageOn(handle: DatabaseHandle): Storage {
  return {
    sqlite: handle,
    shared: null,
    repos: (changes) => reposOn(sqliteStore(handle.db), changes ?? credentialChanges(handle.db)),
    async close() {},
  }
}

import { reposOn, type Repos } from '../repos/index.js'
import type { Db } from '../types.js'
import { credentialChanges } from './credential-changes.js'
import { sqliteStore } from './store.js'

/** The repositories on a SQLite database (the embedded default), hearing of other connections' commits themselves. */
export function createRepos(db: Db): Repos {
  return reposOn(sqliteStore(db), credentialChanges(db))
}

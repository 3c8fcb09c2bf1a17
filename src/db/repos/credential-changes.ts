/**
 * Tells the credential cache when what a credential resolves to may have changed: a repository write in this process
 * that touches keys, members or users calls `bump()`, and `takeChanged()` also hears of changes made by other
 * processes, each dialect its own way (SQLite: sqlite/credential-changes.ts; PostgreSQL: the credential barrier,
 * coordination/credential-barrier.ts).
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

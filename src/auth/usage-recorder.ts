import type { Repos } from '../db/repos/index.js'
import type { Principal } from './principal.js'

/**
 * "Last used" of API keys and OAuth grants, written behind: a request only sets a Map entry, and the latest time per
 * credential reaches the database in one transaction per flush (the account page shows it, to the minute at best).
 */
export class UsageRecorder {
  readonly #pending = new Map<string, number>()
  readonly #repos: Repos

  constructor(repos: Repos) {
    this.#repos = repos
  }

  record(principal: Principal, now = Date.now()): void {
    this.#pending.set(principal.credential, now)
  }

  async flush(): Promise<void> {
    if (this.#pending.size === 0) return
    const keys: Array<[string, number]> = []
    const tokens: Array<[string, number]> = []
    for (const [credential, at] of this.#pending) {
      if (credential.startsWith('key:')) keys.push([credential.slice(4), at])
      else if (credential.startsWith('jwt:')) tokens.push([credential.slice(4), at])
    }
    this.#pending.clear()
    const skipped = await this.#repos.transaction(async (tx) => ({
      keys: await tx.apiKeys.touchMany(keys),
      tokens: await tx.oauthGrants.touchByJti(tokens),
    }))
    // Rows another transaction held at that instant (PostgreSQL): written at the next flush, unless used again since.
    this.#again('key:', keys, skipped.keys)
    this.#again('jwt:', tokens, skipped.tokens)
  }

  #again(prefix: string, written: Array<[string, number]>, skipped: string[]): void {
    if (skipped.length === 0) return
    const times = new Map(written)
    for (const id of skipped) if (!this.#pending.has(prefix + id)) this.#pending.set(prefix + id, times.get(id)!)
  }
}

import type { Principal } from '../auth/principal.js'
import type { Config } from '../config.js'
import type { LimiterName } from '../errors/service-error.js'
import type { DeclaredLimit, RateDecision, StagedWindows } from './fixed-windows.js'
import { mcpMember, mcpOrganization, requestRefusal } from './named.js'
import type { LimitsStore } from './store.js'

type Declared = DeclaredLimit | readonly DeclaredLimit[] | null

interface LimiterKeys {
  member: string
  organization: string
  /** By declared limit id. */
  declared: Map<string, string>
}

/**
 * The windows of an /mcp request, counted in the store: its member's and organization's (a request counts in both or,
 * refused by either, in neither), then what its methods declare (a tool's own limit, whose refusal leaves the first
 * two counted). In this process (`countHere`, synchronous and allocation-free when the request fits), or in Redis
 * (`countShared`: every window of the request in one script, one round trip), which falls back to this process when
 * Redis does not answer (docs/decisions/limits.md). A refusal is a RATE_LIMITED service error, thrown or rejected.
 */
export class McpWindows {
  readonly #store: LimitsStore
  readonly #config: Config
  /**
   * A principal's counter keys, made once per principal: the credential cache hands every request of a credential the
   * same frozen principal, so the keys are neither built nor hashed again on each request.
   */
  readonly #keys = new WeakMap<Principal, LimiterKeys>()

  constructor(store: LimitsStore, config: Config) {
    this.#store = store
    this.#config = config
  }

  #keysOf(principal: Principal): LimiterKeys {
    let keys = this.#keys.get(principal)
    if (keys === undefined) {
      const name = this.#store.name
      keys = { member: name(mcpMember.key(principal)), organization: name(mcpOrganization.key(principal)), declared: new Map() }
      this.#keys.set(principal, keys)
    }
    return keys
  }

  /** The key of a declared limit's window for this principal's member (`t:<tool>:<membership>` for a tool). */
  #declaredKey(principal: Principal, declared: DeclaredLimit): string {
    const keys = this.#keysOf(principal)
    let key = keys.declared.get(declared.id)
    if (key === undefined) keys.declared.set(declared.id, (key = this.#store.name(`${declared.id}:${principal.membershipId}`)))
    return key
  }

  /** The member and organization windows, counting `cost`, in this process: no promise, nothing allocated when it fits. */
  countHere(principal: Principal, cost: number): void {
    const keys = this.#keysOf(principal)
    const local = this.#store.local
    const window = this.#config.rateLimitWindowMs
    const now = local.clock.now()
    const member = local.take(keys.member, mcpMember.limit(this.#config, principal), window, now, cost)
    if (member !== null) throw mcpMember.refusal(principal, member)
    const org = local.take(keys.organization, mcpOrganization.limit(this.#config), window, now, cost)
    if (org !== null) {
      // Refused by its organization, the request does not count against its member either.
      local.giveBack(keys.member, cost, now)
      throw mcpOrganization.refusal(org)
    }
  }

  /** The windows the request's methods declare, in this process. */
  countDeclaredHere(principal: Principal, declared: Declared): void {
    if (declared === null) return
    if (!isList(declared)) return this.#countOneDeclared(principal, declared)
    for (const d of declared) this.#countOneDeclared(principal, d)
  }

  #countOneDeclared(principal: Principal, declared: DeclaredLimit): void {
    const refused = this.#store.local.take(this.#declaredKey(principal, declared), declared.limit, this.#config.rateLimitWindowMs)
    if (refused !== null) refuse(refused, declared.scope, declared.limiter)
  }

  /**
   * One round trip: the member and organization windows counting `cost` (none when 0), then the declared ones. In
   * this process instead when Redis does not answer. Only for a store shared through Redis.
   */
  countShared(principal: Principal, cost: number, declared: Declared): Promise<void> {
    const { shared, outage } = this.#store
    const windows = this.#sharedWindows(principal, cost, declared)
    return shared!.takeStaged(windows, this.#config.rateLimitWindowMs).then((refused) => {
      outage.answered()
      if (refused === null) return
      const i = refused.index - windows.firstStage
      if (i < 0) {
        if (refused.index === 0) throw mcpMember.refusal(principal, refused)
        throw mcpOrganization.refusal(refused)
      }
      const d = declared !== null && isList(declared) ? declared[i]! : (declared as DeclaredLimit)
      refuse(refused, d.scope, d.limiter)
    }, (err: unknown) => {
      outage.failed('mcp', err)
      if (cost > 0) this.countHere(principal, cost)
      this.countDeclaredHere(principal, declared)
    })
  }

  #sharedWindows(principal: Principal, cost: number, declared: Declared): StagedWindows {
    const keys: string[] = []
    const limits: number[] = []
    const costs: number[] = []
    if (cost > 0) {
      const mine = this.#keysOf(principal)
      keys.push(mine.member, mine.organization)
      limits.push(mcpMember.limit(this.#config, principal), mcpOrganization.limit(this.#config))
      costs.push(cost, cost)
    }
    const firstStage = keys.length
    for (const d of declared === null ? [] : isList(declared) ? declared : [declared]) {
      const key = this.#declaredKey(principal, d)
      // A batch calling one tool twice counts twice in its one window.
      const at = keys.indexOf(key, firstStage)
      if (at >= 0) costs[at]!++
      else {
        keys.push(key)
        limits.push(d.limit)
        costs.push(1)
      }
    }
    return { keys, limits, costs, firstStage }
  }
}

function refuse(decision: RateDecision, scope: string, limiter: LimiterName): never {
  throw requestRefusal(decision, scope, limiter)
}

function isList(declared: DeclaredLimit | readonly DeclaredLimit[]): declared is readonly DeclaredLimit[] {
  return Array.isArray(declared)
}

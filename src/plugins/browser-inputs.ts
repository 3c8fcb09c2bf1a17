import { createHash } from 'node:crypto'
import type { Principal } from '../auth/principal.js'
import type { Config } from '../config.js'
import type { Repos } from '../db/repos/index.js'
import type { BrowserInput } from '../db/types.js'
import { ServiceError } from '../errors/service-error.js'
import type { Clock, ClockTimer } from '../lib/clock.js'
import type { EventBus } from '../lib/event-bus.js'

export type { BrowserInput }

/** Where the page of a browser input lives (GET shows its form, POST saves or declines it). */
export const ENV_INPUT_PATH = '/account/env-input'

/** What a row id looks like: 128 bits, base64url (22 characters). */
export const BROWSER_INPUT_ID = /^[A-Za-z0-9_-]{22}$/

/** Whether `path` is the page of a browser input (where a sign-in may return to). */
export function isEnvInputPath(path: string): boolean {
  return path.startsWith(`${ENV_INPUT_PATH}/`) && BROWSER_INPUT_ID.test(path.slice(ENV_INPUT_PATH.length + 1))
}

/**
 * Env var values typed on our own page instead of passing through the client and the model
 * (service_env_set_in_browser; docs/decisions/url-elicitation.md). The call makes a pending row and sends the person
 * to its page; the page saves the value sealed in the row and emits a `browser-input` event, which reaches the
 * waiting call on whichever process it runs (the event bus is relayed through Redis when processes share a database).
 */
export class BrowserInputs {
  constructor(private readonly deps: { repos: Repos; events: EventBus; clock: Clock; config: Readonly<Config> }) {}

  /**
   * The row id of one operation's question about one variable: the same on every retry of a 2026-07-28 call (the
   * operation id is sealed in its requestState), unguessable, and never the operation id itself (which keys the
   * operation's at-most-once record).
   */
  static idFor(operationId: string, appId: string, name: string): string {
    return createHash('sha256').update(`browser-input\u0000${operationId}\u0000${appId}\u0000${name}`).digest().subarray(0, 16).toString('base64url')
  }

  /** The page's address: nothing secret or personal in it, and it works only for the member it was made for. */
  url(id: string): string {
    return `${this.deps.config.baseUrl}${ENV_INPUT_PATH}/${id}`
  }

  /** Makes the pending row, or finds the one an earlier run of the same operation made; expires with the elicitation timeout. */
  open(id: string, principal: Principal, app: { id: string }, name: string): Promise<BrowserInput> {
    const now = this.deps.clock.now()
    return this.deps.repos.browserInputs.open({
      id,
      membershipId: principal.membershipId,
      organizationId: principal.organizationId,
      userId: principal.userId,
      appId: app.id,
      name,
      createdAt: now,
      expiresAt: now + this.deps.config.elicitationTimeoutMs,
    })
  }

  /**
   * Waits until the page answers the row (it is no longer pending) and resolves with it; ELICITATION_TIMEOUT when it
   * expires first (on the injected clock), the signal's reason when the call is cancelled. Woken by events, never by
   * polling: the row is read once now, then again on each `browser-input` event naming it and at its expiry.
   */
  wait(id: string, signal: AbortSignal): Promise<BrowserInput> {
    const { repos, events, clock } = this.deps
    return new Promise((resolve, reject) => {
      let settled = false
      let timer: ClockTimer | undefined
      const finish = (settle: () => void) => {
        if (settled) return
        settled = true
        unsubscribe()
        clock.clearTimer(timer)
        signal.removeEventListener('abort', onAbort)
        settle()
      }
      const expired = () => new ServiceError('ELICITATION_TIMEOUT', { message: 'The value was not entered in the browser in time; nothing was changed' })
      /** Reads the row: settled when answered; `atExpiry` also settles a still-pending row as expired. */
      const check = (atExpiry: boolean) => repos.browserInputs.byId(id).then((row) => {
        if (!row) return finish(() => reject(expired()))
        if (row.status !== 'pending') return finish(() => resolve(row))
        if (atExpiry || row.expiresAt <= clock.now()) return finish(() => reject(expired()))
        if (timer === undefined) timer = clock.setTimeout(() => check(true), row.expiresAt - clock.now()).unref()
      }, (err: unknown) => finish(() => reject(err)))
      const onAbort = () => finish(() => reject(signal.reason instanceof Error ? signal.reason : new ServiceError('OPERATION_CANCELLED')))
      // Listening before the first read: an answer between the two is not missed.
      const unsubscribe = events.subscribe((e) => {
        if (e.type === 'browser-input' && e.id === id) void check(false)
      })
      if (signal.aborted) return onAbort()
      signal.addEventListener('abort', onAbort, { once: true })
      void check(false)
    })
  }
}

import { randomUUID } from 'node:crypto'
import type { CredentialChanges } from '../db/repos/credential-changes.js'
import type { Bus } from './bus.js'

/** Channels of the barrier (under SERVICE_REDIS_PREFIX, like every channel). */
const CHANGED = 'credentials:changed'
const ACKED = 'credentials:acked'
const BEAT = 'credentials:beat'

export interface CredentialBarrierOptions {
  bus: Bus
  /** This process (a server's registry id; the command line's own). */
  processId: string
  /** SERVICE_LEASE_MS: how long a writer waits at most for a process that does not answer. */
  leaseMs: number
  /** The ids of the server processes alive now (the processes table). */
  liveIds(): Promise<string[]>
  warn(message: string, details: Record<string, unknown>): void
  now?: () => number
}

export interface CredentialBarrier extends CredentialChanges {
  /** Subscribes (and, for a server, starts its heartbeat); before any request is served. */
  start(options: { serving: boolean }): Promise<void>
  /**
   * Asks every live server process to drop its credential cache (harmless: it reads the database again) and waits, as a
   * change does, for their answers: the live processes and those that did not answer within a lease. The command line
   * asks before it changes a credential: servers that hear nothing of it are on another Redis or prefix, and would keep
   * serving what it revokes from their caches.
   */
  probe(): Promise<{ live: string[]; missing: string[] }>
  stop(): void
}

/**
 * Credential changes between processes that share a database (decision 3 of docs/multi-process.md): a revocation counts
 * on the very next request on every process, which a notification alone cannot promise (it arrives a moment later).
 *
 * The writer, once its change is committed, publishes it and waits until every live server process has answered that
 * it dropped its credential cache (`bump` resolves then), so a request that reaches any process after the write returned
 * is verified against the database. A process that does not answer within a lease is dead (its lease lapsed) or cut
 * off from Redis; a process cut off from Redis stops serving from its cache on its own, because it trusts its cache only
 * while it hears the heartbeat it publishes every third of a lease through Redis (a subscription that died silently
 * hears nothing): so after one lease the writer may go on in every case, and it says which processes did not answer.
 */
export function credentialBarrier(options: CredentialBarrierOptions): CredentialBarrier {
  const { bus, processId, leaseMs } = options
  const now = options.now ?? Date.now
  let changed = false
  let lastHeard = Number.NEGATIVE_INFINITY
  const waits = new Map<string, { acked: Set<string>; wake(): void }>()
  const unsubscribe: Array<() => void> = []
  let beat: NodeJS.Timeout | null = null

  /** Resolves the wait of `start` for the first message heard. */
  let firstHeard: (() => void) | null = null

  const heard = () => {
    firstHeard?.()
    firstHeard = null
    const at = now()
    // Silent for a lease: a change published meanwhile may never have arrived, so nothing cached before is trusted.
    if (at - lastHeard >= leaseMs) changed = true
    lastHeard = at
  }

  /** True while this process may trust its cache: its subscription carried something within the last lease. */
  const trusted = () => bus.listening && now() - lastHeard < leaseMs

  /** Publishes a change and waits for the live processes to acknowledge it, a lease at most: those that did not. */
  async function publishChange(): Promise<{ live: string[]; missing: string[] }> {
    const id = randomUUID()
    const acked = new Set<string>([processId])
    let wake = () => {}
    waits.set(id, { acked, wake: () => wake() })
    const deadline = now() + leaseMs
    try {
      await bus.publish(CHANGED, { id, from: processId })
      for (;;) {
        const live = (await options.liveIds()).filter((p) => p !== processId)
        const missing = live.filter((p) => !acked.has(p))
        if (missing.length === 0 || deadline - now() <= 0) return { live, missing }
        // Woken by the next acknowledgement, or after a while to read the live processes again (one may have died).
        const left = deadline - now()
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.min(left, Math.max(1, Math.floor(leaseMs / 6))))
          wake = () => {
            clearTimeout(timer)
            resolve()
          }
        })
      }
    } finally {
      waits.delete(id)
    }
  }

  return {
    async bump() {
      changed = true
      const { missing } = await publishChange()
      if (missing.length > 0) {
        options.warn('credential change: some processes did not acknowledge it within a lease; they serve no cached credential until they hear Redis again', { processes: missing })
      }
    },
    probe: publishChange,
    takeChanged() {
      // Cut off (or not yet sure it hears Redis): every request is verified against the database.
      if (!trusted()) return true
      if (!changed) return false
      changed = false
      return true
    },
    async start({ serving }) {
      unsubscribe.push(await bus.subscribe(ACKED, (message) => {
        const { id, by } = message as { id?: string; by?: string }
        const wait = id === undefined ? undefined : waits.get(id)
        if (wait && typeof by === 'string') {
          wait.acked.add(by)
          wait.wake()
        }
      }))
      if (!serving) return
      // A subscription that dropped may have missed changes, whatever the heartbeat says.
      bus.onLost(() => void (changed = true))
      bus.onResubscribed(() => void (changed = true))
      unsubscribe.push(await bus.subscribe(CHANGED, (message) => {
        heard()
        const { id, from } = message as { id?: string; from?: string }
        // This process's own change set `changed` before it was published; hearing it again later would drop a cache
        // filled meanwhile with what was read after the change, for nothing.
        if (from !== processId) changed = true
        // The cache is dropped at the next look (takeChanged), before any entry of it is used again.
        if (typeof id === 'string') void bus.publish(ACKED, { id, by: processId }).catch(() => {})
      }))
      unsubscribe.push(await bus.subscribe(BEAT, heard))
      const every = Math.max(1, Math.floor(leaseMs / 3))
      const tick = () => void bus.publish(BEAT, { from: processId }).catch(() => {})
      beat = setInterval(tick, every)
      beat.unref()
      // The cache is trusted once the bus is heard: waiting for this process's own first heartbeat (one round trip,
      // a lease at most) lets the server serve cached credentials from its first request, not from whenever it lands.
      const heardOnce = new Promise<void>((resolve) => (firstHeard = resolve))
      tick()
      let timer: NodeJS.Timeout | undefined
      await Promise.race([heardOnce, new Promise<void>((resolve) => (timer = setTimeout(resolve, leaseMs)))])
      clearTimeout(timer)
      firstHeard = null
    },
    stop() {
      if (beat) clearInterval(beat)
      beat = null
      for (const u of unsubscribe.splice(0)) u()
    },
  }
}

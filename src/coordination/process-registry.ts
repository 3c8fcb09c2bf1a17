import { hostname } from 'node:os'
import type { FastifyBaseLogger } from 'fastify'
import type { Repos } from '../db/repos/index.js'
import { newId } from '../lib/crypto.js'

/** A new process id: `proc_` and random characters, never reused. */
export function newProcessId(): string {
  return newId('proc')
}

export interface ProcessRegistryOptions {
  /** This process (Coordination.processId). */
  id: string
  /**
   * True when this process holds the database alone (a lock says so): every other registered process is dead, whatever
   * its lease says. False when several processes may serve it: a process is dead once its lease lapsed.
   */
  exclusive: boolean
  /** SERVICE_LEASE_MS: renewed three times per lease. */
  leaseMs: number
  log: FastifyBaseLogger
  now?: () => number
}

/** Recovers what dead processes left in progress (their ids); runs before their rows are removed. */
export type RecoverDead = (processIds: string[]) => Promise<void>

/**
 * This process's entry in the `processes` table, and the lease it renews: work in progress (deployments, confirmed
 * calls, tasks) names its owner, and only a dead owner's work is ever recovered as interrupted. A process alone on its
 * database (exclusive) removes every other entry at start: the lock it holds proves they are gone. Processes sharing a
 * database look for lapsed leases every third of a lease and recover those processes' work (`onDead`), then remove
 * their entries; two processes doing so at once only repeat updates that find nothing left to change.
 */
export class ProcessRegistry {
  readonly #repos: Repos
  readonly #options: Required<ProcessRegistryOptions>
  readonly #recoverers: RecoverDead[] = []
  #timer: NodeJS.Timeout | null = null
  #ticking: Promise<void> | null = null

  constructor(repos: Repos, options: ProcessRegistryOptions) {
    this.#repos = repos
    this.#options = { now: Date.now, ...options }
  }

  get id(): string {
    return this.#options.id
  }

  get exclusive(): boolean {
    return this.#options.exclusive
  }

  /** Registers a recovery of dead processes' work; features register theirs before the server starts. */
  onDead(recover: RecoverDead): void {
    this.#recoverers.push(recover)
  }

  /** Registers this process with a fresh lease; an exclusive process removes every other entry. */
  async start(): Promise<void> {
    const now = this.#options.now()
    await this.#repos.processes.register({ id: this.id, host: hostname(), pid: process.pid, startedAt: now, leaseUntil: now + this.#options.leaseMs })
    if (this.exclusive) for (const other of await this.#repos.processes.others(this.id)) await this.#repos.processes.remove(other.id)
  }

  /** Starts renewing the lease (and, when shared, looking for dead processes) every third of a lease. */
  startTimers(): void {
    const every = Math.max(1, Math.floor(this.#options.leaseMs / 3))
    this.#timer = setInterval(() => {
      // One tick at a time: a slow database must not stack renewals.
      if (this.#ticking) return
      this.#ticking = this.tick().catch((err: unknown) => this.#options.log.error({ err }, 'could not renew this process\'s lease')).finally(() => {
        this.#ticking = null
      })
    }, every)
    this.#timer.unref()
  }

  /** One round: renew this process's lease, then (shared) recover the processes whose lease lapsed. */
  async tick(): Promise<void> {
    const now = this.#options.now()
    const until = now + this.#options.leaseMs
    if (!(await this.#repos.processes.renew(this.id, until))) {
      // Another process found our lease lapsed (a long pause, the database out of reach) and recovered our work: it is
      // marked interrupted, and our late results are refused by their owner checks. Come back as a live process.
      this.#options.log.error({ process: this.id }, 'this process\'s lease lapsed and its work in progress was recovered by another process')
      await this.#repos.processes.register({ id: this.id, host: hostname(), pid: process.pid, startedAt: now, leaseUntil: until })
    }
    if (!this.exclusive) await this.recoverLapsed(now)
  }

  /** Recovers the work of every process whose lease had lapsed at `now`, then removes their entries. */
  async recoverLapsed(now = this.#options.now()): Promise<string[]> {
    const dead = (await this.#repos.processes.lapsed(now, this.id)).map((p) => p.id)
    if (dead.length === 0) return dead
    this.#options.log.warn({ processes: dead }, 'processes whose lease lapsed: their work in progress is recovered as interrupted')
    for (const recover of this.#recoverers) await recover(dead)
    for (const id of dead) await this.#repos.processes.remove(id)
    return dead
  }

  /** The ids of the processes alive now (this one included). */
  async liveIds(now = this.#options.now()): Promise<string[]> {
    return (await this.#repos.processes.live(now)).map((p) => p.id)
  }

  /** Stops renewing and removes this process's entry: its work has ended or been recorded interrupted by then. */
  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer)
    this.#timer = null
    await this.#ticking
    await this.#repos.processes.remove(this.id)
  }
}

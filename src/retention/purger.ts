import type { FastifyBaseLogger } from 'fastify'
import type { Config } from '../config.js'
import type { ProcessRegistry } from '../coordination/process-registry.js'
import type { Repos } from '../db/repos/index.js'
import type { Clock, ClockTimer } from '../lib/clock.js'
import { purgeAudit, type AuditPurge } from './audit.js'
import { yieldToEventLoop, type Batches } from './batches.js'
import { purgeDeploymentOutput } from './deployment-output.js'

export interface RetentionReport {
  /** False when another process's turn it was (docs/decisions/retention.md): nothing was looked at. */
  ran: boolean
  deploymentRuns: number
  deploymentLines: number
  audit: AuditPurge[]
}

type Rules = Pick<Config, 'deploymentOutputKeepRuns' | 'deploymentOutputKeepDays' | 'auditRetentionDays' | 'retentionIntervalMs' | 'retentionBatch'>

/**
 * Whether this process purges now: with several processes, the live one with the smallest id in the registry of server
 * processes (docs/decisions/retention.md); a process alone on its database always does.
 */
export async function purgesHere(registry: Pick<ProcessRegistry, 'id' | 'exclusive' | 'liveIds'>): Promise<boolean> {
  if (registry.exclusive) return true
  const live = (await registry.liveIds()).sort()
  return live[0] === registry.id
}

/**
 * Retention: every SERVICE_RETENTION_INTERVAL_MS on the server's clock, deletes the deployment output and the audit
 * entries past their settings, in batches that requests run between. One purge at a time in this process; with several
 * processes only the one whose turn it is (`mayPurge`).
 */
export class RetentionPurger {
  readonly #repos: Repos
  readonly #rules: Rules
  readonly #clock: Clock
  readonly #log: FastifyBaseLogger
  readonly #mayPurge: () => Promise<boolean>
  #timer: ClockTimer | null = null
  #running: Promise<RetentionReport> | null = null

  constructor(options: { repos: Repos; config: Rules; clock: Clock; log: FastifyBaseLogger; mayPurge: () => Promise<boolean> }) {
    this.#repos = options.repos
    this.#rules = options.config
    this.#clock = options.clock
    this.#log = options.log
    this.#mayPurge = options.mayPurge
  }

  start(): void {
    // The timer waits for the purge it started (a manual clock does); a failure is logged, the next interval tries again.
    this.#timer = this.#clock.setInterval(() => this.run().then(() => {}, (err: unknown) => {
      this.#log.error({ err }, 'retention purge failed')
    }), this.#rules.retentionIntervalMs).unref()
  }

  /** Stops the timer and waits for a purge in progress. */
  async stop(): Promise<void> {
    this.#clock.clearTimer(this.#timer ?? undefined)
    this.#timer = null
    await this.#running?.catch(() => {})
  }

  /**
   * One purge now (after the one in progress, if any). `betweenBatches` replaces the pause between two batches (a test
   * makes a request there); by default one turn of the event loop.
   */
  async run(options: { betweenBatches?: () => Promise<void> } = {}): Promise<RetentionReport> {
    while (this.#running) await this.#running.catch(() => {})
    const running = this.#purge(options.betweenBatches ?? yieldToEventLoop)
    this.#running = running
    try {
      return await running
    } finally {
      this.#running = null
    }
  }

  async #purge(pause: () => Promise<void>): Promise<RetentionReport> {
    if (!(await this.#mayPurge())) return { ran: false, deploymentRuns: 0, deploymentLines: 0, audit: [] }
    const now = this.#clock.now()
    const batches: Batches = { size: this.#rules.retentionBatch, pause }
    const output = await purgeDeploymentOutput(this.#repos, { keepRuns: this.#rules.deploymentOutputKeepRuns, keepDays: this.#rules.deploymentOutputKeepDays }, now, batches)
    if (output.runs > 0 || output.lines > 0) {
      this.#log.info({ runs: output.runs, lines: output.lines }, 'retention deleted the stored output of old deployments (SERVICE_DEPLOYMENT_OUTPUT_KEEP_RUNS, SERVICE_DEPLOYMENT_OUTPUT_KEEP_DAYS)')
    }
    const audit = await purgeAudit(this.#repos, this.#rules.auditRetentionDays, now, batches)
    for (const p of audit) {
      this.#log.info({ organization: p.organizationId, deleted: p.deleted, start_seq: p.startSeq },
        `retention deleted audit entries older than ${this.#rules.auditRetentionDays} days (SERVICE_AUDIT_RETENTION_DAYS); the kept chain starts at seq ${p.startSeq}, recorded in a signed start checkpoint`)
    }
    return { ran: true, deploymentRuns: output.runs, deploymentLines: output.lines, audit }
  }
}

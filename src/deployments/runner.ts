import { spawn, type ChildProcess } from 'node:child_process'
import type { FastifyBaseLogger } from 'fastify'
import type { Config } from '../config.js'
import type { Deployment, DeploymentLogLine } from '../db/repos/deployments.js'
import { envVarAad } from '../db/repos/env-vars.js'
import type { Repos } from '../db/repos/index.js'
import { fail } from '../errors/service-error.js'
import { packageRoot } from '../lib/package-root.js'
import type { SecretBox } from '../lib/secret-box.js'

const MAX_LINE = 8192
// The child sees only these variables of the server's environment, plus the app's env vars and the run's identity.
const INHERITED_ENV = ['PATH', 'HOME', 'LANG', 'LC_ALL', 'TZ', 'TMPDIR', 'SYSTEMROOT']

export interface RunListener {
  onLine?(line: DeploymentLogLine): void
}

export interface RunHandle {
  deployment: Deployment
  /** Resolves with the final row when the run ends, whatever the outcome. */
  done: Promise<Deployment>
}

type StopKind = 'cancelled' | 'timeout' | 'shutdown'

interface LiveRun {
  deployment: Deployment
  child: ChildProcess | null
  stop(kind: StopKind, reason: string): void
}

/**
 * Runs an app's pipeline: the operator's argv (config `pipelines`), never anything from a tool argument, as a child
 * process with the app's env vars. Every output line is stored in order (in batches, one transaction per event-loop
 * turn) and handed to listeners; the final status is written once. A run outlives the request that started it: a
 * client that disconnects does not stop it, only a cancellation does (SIGTERM, then SIGKILL after the grace period).
 */
export class PipelineRunner {
  readonly #repos: Repos
  readonly #config: Config
  readonly #secrets: SecretBox
  readonly #log: FastifyBaseLogger
  readonly #live = new Map<string, LiveRun>()
  readonly #pendingLines: DeploymentLogLine[] = []
  #flushScheduled = false

  constructor(options: { repos: Repos; config: Config; secrets: SecretBox; log: FastifyBaseLogger }) {
    this.#repos = options.repos
    this.#config = options.config
    this.#secrets = options.secrets
    this.#log = options.log
  }

  /** At start: what a previous process left queued or running is marked interrupted. */
  recover(): number {
    return this.#repos.deployments.interruptUnfinished(Date.now())
  }

  get running(): number {
    return this.#live.size
  }

  start(input: { organizationId: string; appId: string; kind: 'deploy' | 'rollback'; rollbackOf?: string; createdBy: string | null }, listener?: RunListener): RunHandle {
    const app = this.#repos.apps.byId(input.organizationId, input.appId)
    if (!app) throw fail('RESOURCE_NOT_FOUND', { message: 'No such app in your organization' })
    const pipeline = this.#config.pipelines[app.pipeline]
    if (!pipeline) throw fail('OPERATION_FAILED', { message: `The app's pipeline "${app.pipeline}" is not configured on this server` })
    if (this.#repos.deployments.active(input.organizationId, input.appId)) {
      throw fail('CONFLICT', { message: 'A deployment of this app is already running; wait for it or cancel it' })
    }
    const env: Record<string, string> = {}
    for (const name of INHERITED_ENV) if (process.env[name] !== undefined) env[name] = process.env[name]!
    for (const v of this.#repos.envVars.ciphertexts(input.organizationId, input.appId)) {
      env[v.name] = this.#secrets.open(v.ciphertext, envVarAad(input.appId, v.name))
    }
    const deployment = this.#repos.deployments.create({ ...input, rollbackOf: input.rollbackOf ?? null, pipeline: app.pipeline })
    Object.assign(env, {
      SERVICE_APP_ID: app.id,
      SERVICE_APP_NAME: app.name,
      SERVICE_DEPLOYMENT_ID: deployment.id,
      SERVICE_DEPLOYMENT_KIND: deployment.kind,
      ...(deployment.rollbackOf ? { SERVICE_ROLLBACK_OF: deployment.rollbackOf } : {}),
    })

    let seq = 0
    let finished = false
    let stopped: { kind: StopKind; reason: string } | null = null
    let killTimer: NodeJS.Timeout | null = null
    const live: LiveRun = { deployment, child: null, stop: () => {} }
    this.#live.set(deployment.id, live)

    const emit = (stream: DeploymentLogLine['stream'], text: string) => {
      const line: DeploymentLogLine = { deploymentId: deployment.id, seq: seq++, stream, line: text.length > MAX_LINE ? text.slice(0, MAX_LINE) + '…' : text, at: Date.now() }
      this.#queueLine(line)
      try {
        listener?.onLine?.(line)
      } catch (err) {
        this.#log.error({ err }, 'deployment listener failed')
      }
    }

    const done = new Promise<Deployment>((resolve) => {
      // Declared before end(), which clears it: a spawn that throws ends the run before the timer exists.
      let timeout: NodeJS.Timeout | undefined
      const end = (status: 'succeeded' | 'failed' | 'cancelled' | 'interrupted', exitCode: number | null, outcome: string) => {
        if (finished) return
        finished = true
        if (killTimer) clearTimeout(killTimer)
        if (timeout) clearTimeout(timeout)
        emit('system', outcome)
        this.#flushLines()
        this.#live.delete(deployment.id)
        let final: Deployment = { ...deployment, status, finishedAt: Date.now(), exitCode, outcome }
        try {
          this.#repos.deployments.finish(deployment.id, status, final.finishedAt!, exitCode, outcome)
          final = this.#repos.deployments.byId(input.organizationId, deployment.id) ?? final
        } catch (err) {
          // Only after stopAll gave up waiting and the database closed: the row was already marked interrupted.
          this.#log.error({ err, deployment: deployment.id }, 'could not record the end of a deployment')
        }
        resolve(final)
      }

      const [command, ...args] = pipeline.argv as [string, ...string[]]
      let child: ChildProcess
      try {
        child = spawn(command, args, { cwd: pipeline.cwd ?? packageRoot(), env, stdio: ['ignore', 'pipe', 'pipe'], detached: process.platform !== 'win32' })
      } catch (err) {
        this.#log.error({ err, deployment: deployment.id }, 'pipeline could not start')
        end('failed', null, `failed: the pipeline could not start`)
        return
      }
      live.child = child
      this.#repos.deployments.markRunning(deployment.id, Date.now())
      emit('system', `started ${deployment.kind} of ${app.name} with pipeline ${app.pipeline}`)
      splitLines(child.stdout!, (text) => emit('stdout', text))
      splitLines(child.stderr!, (text) => emit('stderr', text))

      const signal = (sig: NodeJS.Signals) => {
        if (child.pid === undefined) return
        try {
          // The pipeline's own children go too: it runs in its own process group.
          if (process.platform !== 'win32') process.kill(-child.pid, sig)
          else child.kill(sig)
        } catch {
          child.kill(sig)
        }
      }
      live.stop = (kind: StopKind, reason: string) => {
        if (finished || stopped !== null) return
        stopped = { kind, reason }
        signal('SIGTERM')
        killTimer = setTimeout(() => signal('SIGKILL'), this.#config.pipelineGraceMs)
        killTimer.unref()
      }
      timeout = setTimeout(() => live.stop('timeout', `timed out after ${this.#config.pipelineTimeoutMs} ms`), this.#config.pipelineTimeoutMs)
      timeout.unref()

      child.on('error', (err) => {
        this.#log.error({ err, deployment: deployment.id }, 'pipeline process error')
        end('failed', null, `failed: ${err.message}`)
      })
      child.on('close', (code, sig) => {
        const stop = stopped as { kind: StopKind; reason: string } | null
        if (stop?.kind === 'cancelled') return end('cancelled', code, `cancelled: ${stop.reason}`)
        if (stop?.kind === 'timeout') return end('failed', code, `failed: ${stop.reason}`)
        if (stop?.kind === 'shutdown') return end('interrupted', code, 'interrupted: the server stopped while it ran')
        if (code === 0) return end('succeeded', 0, 'succeeded: the pipeline exited with code 0')
        end('failed', code, sig ? `failed: the pipeline was killed by ${sig}` : `failed: the pipeline exited with code ${code}`)
      })
    })
    return { deployment, done }
  }

  /** Cancels a live run of the organization; false when it is not running. */
  cancel(organizationId: string, deploymentId: string, reason: string): boolean {
    const live = this.#live.get(deploymentId)
    if (!live || live.deployment.organizationId !== organizationId) return false
    live.stop('cancelled', reason)
    return true
  }

  /** Shutdown: every live run is stopped and recorded interrupted; waits at most the grace period plus a little. */
  async stopAll(): Promise<void> {
    const runs = [...this.#live.values()]
    for (const run of runs) run.stop('shutdown', 'the server is shutting down')
    const deadline = Date.now() + this.#config.pipelineGraceMs + 1000
    while (this.#live.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
    this.#flushLines()
    for (const run of runs) {
      this.#repos.deployments.finish(run.deployment.id, 'interrupted', Date.now(), null, 'interrupted: the server stopped while it ran')
    }
  }

  #queueLine(line: DeploymentLogLine): void {
    this.#pendingLines.push(line)
    if (this.#flushScheduled) return
    this.#flushScheduled = true
    setImmediate(() => this.#flushLines())
  }

  #flushLines(): void {
    this.#flushScheduled = false
    if (this.#pendingLines.length === 0) return
    const lines = this.#pendingLines.splice(0)
    try {
      this.#repos.deployments.appendLines(lines)
    } catch (err) {
      this.#log.error({ err, lines: lines.length }, 'could not store deployment output')
    }
  }
}

/** Calls `onLine` for each line of a byte stream (UTF-8; CR LF and LF; a last line without newline included). */
function splitLines(stream: NodeJS.ReadableStream, onLine: (text: string) => void): void {
  let rest = ''
  stream.setEncoding('utf8')
  stream.on('data', (chunk: string) => {
    rest += chunk
    let nl: number
    while ((nl = rest.indexOf('\n')) !== -1) {
      onLine(rest.slice(0, nl).replace(/\r$/, ''))
      rest = rest.slice(nl + 1)
    }
    if (rest.length > MAX_LINE * 4) {
      onLine(rest)
      rest = ''
    }
  })
  stream.on('end', () => {
    if (rest !== '') onLine(rest.replace(/\r$/, ''))
    rest = ''
  })
}

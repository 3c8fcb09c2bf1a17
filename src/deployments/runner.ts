import { spawn, type ChildProcess } from 'node:child_process'
import { accessSync, constants, existsSync, statSync } from 'node:fs'
import { delimiter, join, resolve as resolvePath } from 'node:path'
import type { FastifyBaseLogger } from 'fastify'
import type { Config } from '../config.js'
import { lineBytes, type Deployment, type DeploymentLogLine } from '../db/repos/deployments.js'
import { envVarAad } from '../db/repos/env-vars.js'
import type { Repos } from '../db/repos/index.js'
import type { Abandoned } from '../db/types.js'
import { fail } from '../errors/service-error.js'
import { checkDeploymentQuotas } from '../limits/quotas.js'
import { packageRoot } from '../lib/package-root.js'
import type { SecretBox } from '../lib/secret-box.js'
import { canInspectProcesses, stopLeftoverRun } from './process-group.js'
import { RunQuestions, type AskPipelineQuestion } from './questions.js'

const MAX_LINE = 8192
/**
 * Output waiting to be stored, in characters: above UNSTORED_HIGH the runs' pipes are no longer read (their pipelines
 * block on their next write) until storage is back under UNSTORED_LOW. A database slower than a verbose pipeline
 * (PostgreSQL over the network) would otherwise hold all of its output in the server's memory.
 */
const UNSTORED_HIGH = 4 * 1024 * 1024
const UNSTORED_LOW = 1024 * 1024
// The child sees only these variables of the server's environment, plus the app's env vars and the run's identity.
const INHERITED_ENV = ['PATH', 'HOME', 'LANG', 'LC_ALL', 'TZ', 'TMPDIR', 'SYSTEMROOT']
const GROUPS = process.platform !== 'win32'
/** How long after its own grace period a supervisor that has not ended is killed with its group. */
const SUPERVISOR_MARGIN_MS = 1000

/** The supervisor every pipeline runs under (see the script): it stops the run when the server is gone. */
export function supervisorPath(): string {
  return join(packageRoot(), 'scripts', 'pipelines', 'supervise.mjs')
}

export interface RunListener {
  onLine?(line: DeploymentLogLine): void
  /**
   * Answers the pipeline's questions (questions.ts); without it every question is answered no. It must not reject
   * (a rejection is answered no).
   */
  onQuestion?: AskPipelineQuestion
}

/**
 * What the runner tells its observers about every run, whoever started it (the deployment log resources announce it
 * to MCP clients): a run was created (queued), some of its output lines were stored (once per stored batch: at most
 * one per event-loop turn), its final status was written. Lines are in the database when `stored` is heard.
 */
export type RunEvent =
  | { type: 'created'; deployment: Deployment }
  | { type: 'stored'; deploymentId: string; organizationId: string }
  | { type: 'ended'; deployment: Deployment }

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
 *
 * A run never outlives the server, though. The pipeline runs under scripts/pipelines/supervise.mjs, the leader of the
 * run's own process group, whose stdin is a pipe only this process holds: when this process ends, however it ends, the
 * supervisor stops the group. The group's id is stored with the row while the run lives, so that a server starting
 * after a crash also stops whatever is still alive of it before it marks the row interrupted (recover): an app never
 * has two live runs, across restarts too.
 */
export class PipelineRunner {
  readonly #repos: Repos
  readonly #config: Config
  readonly #secrets: SecretBox
  readonly #log: FastifyBaseLogger
  readonly #live = new Map<string, LiveRun>()
  readonly #pendingLines: DeploymentLogLine[] = []
  #flushScheduled = false
  /** Characters of the lines queued or being stored. */
  #unstored = 0
  /** Resumes the reading of runs paused because too much output waits to be stored. */
  readonly #pausedReaders = new Set<() => void>()
  /** Every batch of output lines taken so far, stored (batches are stored one after the other, in order). */
  #stored: Promise<void> = Promise.resolve()
  readonly #observers = new Set<(event: RunEvent) => void>()

  /** The process running the runs this runner starts (the `owner` of their rows). */
  readonly #owner: string | null

  constructor(options: { repos: Repos; config: Config; secrets: SecretBox; log: FastifyBaseLogger; owner?: string | null }) {
    this.#owner = options.owner ?? null
    this.#repos = options.repos
    this.#config = options.config
    this.#secrets = options.secrets
    this.#log = options.log
  }

  /**
   * At start: what a previous process left queued or running is stopped, if anything of it is still alive, then marked
   * interrupted. Its supervisor stops it once that process is gone; this covers a restart within the grace period and
   * a supervisor that could not act. A group is signalled only while it provably holds the run (process-group.ts), and
   * the wait is bounded (the grace period and a second per run still alive), before the server listens.
   */
  async recover(abandoned: Abandoned = { live: [] }, options: { stopLeftovers: boolean } = { stopLeftovers: true }): Promise<number> {
    // Only a process alone on its database knows the leftovers' process groups are on its own machine; with several
    // processes the dead one's supervisor stopped its group when it died (supervise.mjs).
    if (options.stopLeftovers) {
      for (const run of await this.#repos.deployments.unfinished(abandoned)) {
        if (run.pgid !== null) this.#stopLeftover(run.id, run.pgid)
      }
    }
    return this.#repos.deployments.interruptUnfinished(Date.now(), abandoned)
  }

  #stopLeftover(deploymentId: string, pgid: number): void {
    if (!canInspectProcesses()) {
      this.#log.warn({ deployment: deploymentId, pgid }, 'cannot check whether a run left by a previous process is still alive (no /proc); its supervisor stops it')
      return
    }
    const outcome = stopLeftoverRun(pgid, deploymentId, this.#config.pipelineGraceMs)
    if (outcome === 'none') return
    const log = outcome === 'survived' ? this.#log.error.bind(this.#log) : this.#log.warn.bind(this.#log)
    log({ deployment: deploymentId, pgid, outcome }, 'a run left by a previous process was still alive and has been stopped')
  }

  get running(): number {
    return this.#live.size
  }

  /** Calls `observer` with every RunEvent until the returned function is called. */
  observe(observer: (event: RunEvent) => void): () => void {
    this.#observers.add(observer)
    return () => this.#observers.delete(observer)
  }

  #tell(event: RunEvent): void {
    for (const observer of [...this.#observers]) {
      try {
        observer(event)
      } catch (err) {
        this.#log.error({ err }, 'deployment observer failed')
      }
    }
  }

  async start(input: { organizationId: string; appId: string; kind: 'deploy' | 'rollback'; rollbackOf?: string; createdBy: string | null }, listener?: RunListener): Promise<RunHandle> {
    const env: Record<string, string> = {}
    for (const name of INHERITED_ENV) if (process.env[name] !== undefined) env[name] = process.env[name]!
    // One transaction from the checks to the new row: no other run of the app can start in between (an app never has
    // two live runs), as when these reads and the write ran synchronously.
    const { app, pipeline, deployment } = await this.#repos.transaction(async (tx) => {
      // Held first: two starts at the organization's last place check one after the other (src/limits/quotas.ts).
      await checkDeploymentQuotas(tx, this.#config, input.organizationId, { hold: true })
      const app = await tx.apps.byId(input.organizationId, input.appId)
      if (!app) throw fail('RESOURCE_NOT_FOUND', { message: 'No such app in your organization' })
      const pipeline = this.#config.pipelines[app.pipeline]
      if (!pipeline) throw fail('OPERATION_FAILED', { message: `The app's pipeline "${app.pipeline}" is not configured on this server` })
      if (await tx.deployments.active(input.organizationId, input.appId)) {
        throw fail('CONFLICT', { message: 'A deployment of this app is already running; wait for it or cancel it' })
      }
      for (const v of await tx.envVars.ciphertexts(input.organizationId, input.appId)) {
        env[v.name] = this.#secrets.open(v.ciphertext, envVarAad(input.appId, v.name))
      }
      const deployment = await tx.deployments.create({ ...input, rollbackOf: input.rollbackOf ?? null, pipeline: app.pipeline, owner: this.#owner })
      return { app, pipeline, deployment }
    })
    this.#tell({ type: 'created', deployment })
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
    /** Tells the running child to stop; set once the run is recorded running (a stop asked before waits for that). */
    let stopChild: (() => void) | null = null
    const live: LiveRun = {
      deployment,
      child: null,
      stop: (kind: StopKind, reason: string) => {
        if (finished || stopped !== null) return
        stopped = { kind, reason }
        stopChild?.()
      },
    }
    this.#live.set(deployment.id, live)

    /** Stops reading the child's output until storage caught up; set once its pipes are read. */
    let pauseOutput: (() => void) | null = null
    const tell = (line: DeploymentLogLine) => {
      try {
        listener?.onLine?.(line)
      } catch (err) {
        this.#log.error({ err }, 'deployment listener failed')
      }
    }
    const cap = new OutputCap(this.#config.deploymentOutputMaxBytes)
    const emit = (stream: DeploymentLogLine['stream'], text: string) => {
      const line: DeploymentLogLine = { deploymentId: deployment.id, seq: seq++, stream, line: text.length > MAX_LINE ? text.slice(0, MAX_LINE) + '…' : text, at: Date.now() }
      const verdict = cap.admit(line)
      if (verdict === 'cut') {
        // The notice takes this line's place in the stored log, and the client hears it too; the line itself is only
        // streamed, after it, with the next seq.
        const notice: DeploymentLogLine = { ...line, stream: 'system', line: cap.notice(line.seq) }
        line.seq = seq++
        cap.stored(notice)
        if (this.#queueLine(notice)) pauseOutput?.()
        tell(notice)
      } else if (verdict === 'store') {
        if (this.#queueLine(line)) pauseOutput?.()
      }
      tell(line)
    }

    // What the pipeline asks (a marker line on stdout) is answered on the supervisor's stdin, which forwards it.
    const questions = new RunQuestions(deployment.id, {
      ask: listener?.onQuestion,
      log: (text) => emit('system', text),
      answer: (yes) => live.child?.stdin?.write(`answer ${yes ? 'yes' : 'no'}\n`),
    })

    const done = new Promise<Deployment>((resolve) => {
      // Declared before end(), which clears it: a spawn that throws ends the run before the timer exists.
      let timeout: NodeJS.Timeout | undefined
      const end = (status: 'succeeded' | 'failed' | 'cancelled' | 'interrupted', exitCode: number | null, outcome: string) => {
        if (finished) return
        finished = true
        if (killTimer) clearTimeout(killTimer)
        if (timeout) clearTimeout(timeout)
        questions.close()
        emit('system', outcome)
        const stored = this.#flushLines()
        this.#live.delete(deployment.id)
        const ended = { ...deployment, status, finishedAt: Date.now(), exitCode, outcome }
        // Called from the child's events, which cannot wait: recordEnd never rejects (it logs what fails).
        void this.#recordEnd(stored, input.organizationId, ended).then(resolve)
      }

      const cwd = resolvePath(pipeline.cwd ?? packageRoot())
      // Checked here: spawn would blame the program it starts (node, for the supervisor) for a missing folder, and the
      // supervisor could only say "spawn ./deploy.sh ENOENT" for a missing command. Start-up checked the folder
      // (config.ts checkPipelineFolders); it or the command may have gone since.
      const problem = !existsSync(cwd) ? `working directory ${cwd} does not exist` : commandProblem(pipeline.argv[0]!, cwd, env.PATH)
      if (problem !== null) {
        this.#log.error({ deployment: deployment.id, pipeline: app.pipeline }, `pipeline ${app.pipeline} cannot run: ${problem}`)
        end('failed', null, `failed: pipeline ${app.pipeline}: ${problem}`)
        return
      }
      let child: ChildProcess
      try {
        child = this.#spawnSupervised(pipeline.argv, cwd, env)
      } catch (err) {
        this.#log.error({ err, deployment: deployment.id, pipeline: app.pipeline }, 'pipeline could not start')
        end('failed', null, `failed: pipeline ${app.pipeline} could not start: ${(err as Error).message}`)
        return
      }
      live.child = child
      // Listened to at once: a spawn failure is emitted on the next tick, maybe before the run is recorded running.
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
      // An executor cannot wait: #markRunning never rejects (it logs), and the run goes on, or is stopped, once known.
      void this.#markRunning(deployment.id, child).then((recorded) => {
        if (finished) return // the process failed or ended meanwhile: end() recorded it
        if (!recorded) {
          // A run whose group is not on record could outlive a crash unseen: it does not start (full or read-only disk).
          killGroup(child, 'SIGKILL')
          end('failed', null, 'failed: the server could not record the run (its database cannot be written), so it was stopped before it began')
          return
        }
        emit('system', `started ${deployment.kind} of ${app.name} with pipeline ${app.pipeline}`)
        splitLines(child.stdout!, (text) => {
          if (!questions.heard(text)) emit('stdout', text)
        })
        splitLines(child.stderr!, (text) => emit('stderr', text))
        const pipes = [child.stdout!, child.stderr!]
        const resume = () => {
          for (const pipe of pipes) pipe.resume()
        }
        pauseOutput = () => {
          if (this.#pausedReaders.has(resume)) return
          for (const pipe of pipes) pipe.pause()
          this.#pausedReaders.add(resume)
        }

        const signal = (sig: NodeJS.Signals) => killGroup(child, sig)
        stopChild = () => {
          // The supervisor stops the run (SIGTERM to the group, SIGKILL after the grace period), reaping the pipeline
          // before anything else dies; killing the group from here only backs it up, should it not have ended by then.
          child.stdin?.write('stop\n')
          killTimer = setTimeout(() => signal('SIGKILL'), this.#config.pipelineGraceMs + SUPERVISOR_MARGIN_MS)
          killTimer.unref()
        }
        timeout = setTimeout(() => live.stop('timeout', `timed out after ${this.#config.pipelineTimeoutMs} ms`), this.#config.pipelineTimeoutMs)
        timeout.unref()
        // Stopped (cancelled, server stopping) while the run was being recorded: it stops now.
        if (stopped !== null) stopChild()
      })
    })
    return { deployment, done }
  }

  /** queued → running, with the run's process group; false (logged) when that cannot be written. Never rejects. */
  async #markRunning(deploymentId: string, child: ChildProcess): Promise<boolean> {
    try {
      await this.#repos.deployments.markRunning(deploymentId, Date.now(), GROUPS ? child.pid ?? null : null)
      return true
    } catch (err) {
      this.#log.error({ err, deployment: deploymentId }, 'could not record a run as running; it is stopped')
      return false
    }
  }

  /**
   * A run's end, written once its last lines are stored (`stored`), then told to the observers: the final row as read
   * back, or `ended` itself when it cannot be. Never rejects (what fails is logged).
   */
  async #recordEnd(stored: Promise<void>, organizationId: string, ended: Deployment & { status: 'succeeded' | 'failed' | 'cancelled' | 'interrupted' }): Promise<Deployment> {
    await stored
    let final: Deployment = ended
    try {
      await this.#repos.deployments.finish(ended.id, ended.status, ended.finishedAt!, ended.exitCode, ended.outcome!)
      final = (await this.#repos.deployments.byId(organizationId, ended.id)) ?? final
    } catch (err) {
      // Only after stopAll gave up waiting and the database closed: the row was already marked interrupted.
      this.#log.error({ err, deployment: ended.id }, 'could not record the end of a deployment')
    }
    this.#tell({ type: 'ended', deployment: final })
    return final
  }

  /**
   * The pipeline under its supervisor: the supervisor leads a new process group (detached) and runs the pipeline in
   * it, with the same environment and working directory and the grace period of its stops in argv. Its stdin is a pipe
   * that says `stop` and `answer yes|no` (forwarded to the pipeline's fd 3) and that this process never closes: it
   * closes when this process ends, however it ends.
   */
  #spawnSupervised(argv: readonly string[], cwd: string, env: Record<string, string>): ChildProcess {
    const args = [supervisorPath(), '--grace-ms', String(this.#config.pipelineGraceMs), '--', ...argv]
    const child = spawn(process.execPath, args, { cwd, env, stdio: ['pipe', 'pipe', 'pipe'], detached: GROUPS })
    child.stdin?.on('error', () => {}) // the supervisor ended first: nothing to tell it any more
    return child
  }

  /**
   * Asks the process that runs a deployment to cancel it (several processes: coordination/inbox.ts); resolves whether
   * it did. Set by the tools plugin; null when this process is alone.
   */
  cancelElsewhere: ((owner: string, organizationId: string, deploymentId: string, reason: string) => Promise<boolean>) | null = null

  /**
   * Cancels a run of the organization wherever it runs: here, or on the process that owns it. False when it runs
   * nowhere (it ended meanwhile, or its process is gone and it is about to be recovered as interrupted).
   */
  async cancelAnywhere(organizationId: string, deployment: Pick<Deployment, 'id' | 'owner'>, reason: string): Promise<boolean> {
    if (this.cancel(organizationId, deployment.id, reason)) return true
    if (deployment.owner === null || deployment.owner === this.#owner || this.cancelElsewhere === null) return false
    return this.cancelElsewhere(deployment.owner, organizationId, deployment.id, reason)
  }

  /** Cancels a live run of this process; false when it is not running here. */
  cancel(organizationId: string, deploymentId: string, reason: string): boolean {
    const live = this.#live.get(deploymentId)
    if (!live || live.deployment.organizationId !== organizationId) return false
    live.stop('cancelled', reason)
    return true
  }

  /** Shutdown: every live run is stopped and recorded interrupted; waits at most the grace period plus 1.5 s. */
  async stopAll(): Promise<void> {
    const runs = [...this.#live.values()]
    for (const run of runs) run.stop('shutdown', 'the server is shutting down')
    // Time for the supervisors' stop, and for the runner's own SIGKILL behind it.
    const deadline = Date.now() + this.#config.pipelineGraceMs + SUPERVISOR_MARGIN_MS + 500
    while (this.#live.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
    await this.#flushLines()
    for (const run of runs) {
      await this.#repos.deployments.finish(run.deployment.id, 'interrupted', Date.now(), null, 'interrupted: the server stopped while it ran')
    }
  }

  /** Queues a line to be stored; true when more output than UNSTORED_HIGH now waits (the caller pauses its reading). */
  #queueLine(line: DeploymentLogLine): boolean {
    this.#pendingLines.push(line)
    this.#unstored += line.line.length
    if (!this.#flushScheduled) {
      this.#flushScheduled = true
      // A timer cannot wait: #flushLines never rejects (it logs what fails).
      setImmediate(() => void this.#flushLines())
    }
    return this.#unstored > UNSTORED_HIGH
  }

  /**
   * Stores the lines queued so far in one batch, after every batch taken before it, then tells the observers; resolves
   * once this batch and all earlier ones are stored, so a run's end (which awaits it) is never recorded, nor its call
   * answered, before its output. On PostgreSQL two batches in flight take two connections of the pool and could
   * otherwise commit in either order. Never rejects (a failure is logged).
   */
  #flushLines(): Promise<void> {
    this.#flushScheduled = false
    if (this.#pendingLines.length === 0) return this.#stored
    const lines = this.#pendingLines.splice(0)
    // Runs still live when the batch is taken (a run's last lines are taken before it leaves #live); one event per run
    // of the batch, told once the lines are stored.
    const live = new Map<string, string>()
    if (this.#observers.size > 0) {
      for (const deploymentId of new Set(lines.map((l) => l.deploymentId))) {
        const organizationId = this.#live.get(deploymentId)?.deployment.organizationId
        if (organizationId !== undefined) live.set(deploymentId, organizationId)
      }
    }
    const size = lines.reduce((sum, l) => sum + l.line.length, 0)
    this.#stored = this.#stored.then(async () => {
      try {
        await this.#repos.deployments.appendLines(lines)
      } catch (err) {
        this.#log.error({ err, lines: lines.length }, 'could not store deployment output')
        return
      } finally {
        this.#storedSome(size)
      }
      for (const [deploymentId, organizationId] of live) this.#tell({ type: 'stored', deploymentId, organizationId })
    })
    return this.#stored
  }

  /** A batch of `size` characters left the queue (stored or not): paused runs are read again once under UNSTORED_LOW. */
  #storedSome(size: number): void {
    this.#unstored -= size
    if (this.#unstored > UNSTORED_LOW || this.#pausedReaders.size === 0) return
    const paused = [...this.#pausedReaders]
    this.#pausedReaders.clear()
    for (const resume of paused) resume()
  }
}

/**
 * SERVICE_DEPLOYMENT_OUTPUT_MAX_BYTES for one run: its stdout and stderr lines are stored until the next one would
 * take the stored output past `max` bytes (0: no cap); that one is replaced in the stored log by a notice saying where
 * and why the log was cut, and nothing more of the run's stdout and stderr is stored (it is still streamed). The
 * server's own lines (questions, the outcome) are always stored: the run's end is never lost.
 */
class OutputCap {
  #bytes = 0
  #cut = false

  constructor(readonly max: number) {}

  /** Whether `line` is stored, or is where the stored log is cut (the caller stores the notice instead), or neither. */
  admit(line: DeploymentLogLine): 'store' | 'cut' | 'drop' {
    if (line.stream === 'system') {
      this.stored(line)
      return 'store'
    }
    if (this.#cut) return 'drop'
    const bytes = lineBytes(line)
    if (this.max > 0 && this.#bytes + bytes > this.max) {
      this.#cut = true
      return 'cut'
    }
    this.#bytes += bytes
    return 'store'
  }

  stored(line: DeploymentLogLine): void {
    this.#bytes += lineBytes(line)
  }

  notice(seq: number): string {
    return `output cut here (seq ${seq}): ${this.#bytes} bytes of this run's output are stored and the next line would pass ` +
      `SERVICE_DEPLOYMENT_OUTPUT_MAX_BYTES (${this.max}); the rest of its stdout and stderr was streamed to the client but ` +
      'is not stored. The run went on; its end is stored below'
  }
}

/**
 * Why `command` (a pipeline's argv[0]) cannot be run from `cwd`, or null: a path (it has a slash) is taken relative to
 * `cwd`, a bare name is looked up on the child's PATH, as the supervisor's spawn will. The PATH itself is not shown
 * (an app's env var may set it). Not checked on Windows, where PATHEXT decides.
 */
function commandProblem(command: string, cwd: string, path: string | undefined): string | null {
  if (process.platform === 'win32') return null
  if (command.includes('/')) {
    const file = resolvePath(cwd, command)
    let stat
    try {
      stat = statSync(file)
    } catch {
      return `command ${command} not found in ${cwd} (cwd)`
    }
    if (stat.isDirectory()) return `command ${command} in ${cwd} (cwd) is a folder`
    return executable(file) ? null : `command ${command} in ${cwd} (cwd) is not executable (chmod +x)`
  }
  for (const dir of (path ?? '').split(delimiter)) {
    const file = resolvePath(cwd, dir, command)
    try {
      if (statSync(file).isFile() && executable(file)) return null
    } catch {
      // Not in this folder.
    }
  }
  return `command ${command} not found on the PATH (run from ${cwd})`
}

function executable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** Signals every process of a run: its group (the supervisor leads it), or the supervisor alone on Windows. */
function killGroup(child: ChildProcess, sig: NodeJS.Signals): void {
  if (child.pid === undefined) return
  try {
    if (GROUPS) process.kill(-child.pid, sig)
    else child.kill(sig)
  } catch {
    child.kill(sig)
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

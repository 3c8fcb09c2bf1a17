// test-backends: own (three processes on PostgreSQL and Redis)
/**
 * At most once across processes (issue 24): three copies of one accepted confirmation, one per process, sent at the
 * same instant with jittered arrival, many times over, in both eras, for a delete and for a deployment. Every operation
 * runs exactly once (its state and its audit entries say so), nobody is asked twice, and every copy is answered ok,
 * 409 IDEMPOTENCY_CONFLICT or the stored outcome (the same result again), never "may or may not have completed", since
 * no process stops.
 *
 * - 2026-07-28: round 1 asks (input_required with a requestState); the three copies are the accepted retry, the same
 *   requestState and answer, each on another process.
 * - 2025-11-25: one session, shared by the processes; the three copies are the same tools/call (same JSON-RPC id) on
 *   three processes. The one that holds the call asks on its stream, and the test accepts; the others are refused.
 *
 * Real processes (`service-mcp serve`), not instances in this one: the claim must hold between event loops and pools
 * that share nothing but PostgreSQL.
 */
import t, { type Test } from 'tap'
import { Agent, request } from 'undici'
import { postgresClient } from '../helpers/backends.js'
import { startServe, type Served } from '../helpers/cli.js'
import { ACCEPT_BOTH, callTool, openSession, post, readReply, type RpcReply } from '../helpers/mcp.js'
import { answerOf, confirmAnswer, ELICITING, modernCall, modernRequest } from '../helpers/modern.js'
import { deploymentEnv, distinctPorts } from '../helpers/processes.js'
import { OWNER_KEY } from '../helpers/server.js'
import { openLive } from '../helpers/stream.js'
import { isElicitation } from '../helpers/confirm.js'

/** Trials per era and tool: 4 × TRIALS runs of three copies. */
const TRIALS = 50
/** The most a copy's start is delayed, by trial: all at once, then spread over a claim's pending and running windows. */
const JITTER_MS = [0, 3, 15, 60]
/** A deployment: its supervisor (a node process) makes it last long enough for copies to land while it runs. */
const PIPELINE = ['/bin/sh', '-c', 'echo deployed']
const DELETE = 'service_apps_delete'
const DEPLOY = 'service_deployments_create'

type Tool = typeof DELETE | typeof DEPLOY

/** How one copy was answered: the result it got, a 409, or something that breaks the promise. */
type Answer = { kind: 'result'; result: any } | { kind: 'conflict' } | { kind: 'wrong'; what: string }

interface Cluster {
  urls: string[]
  db: Awaited<ReturnType<typeof postgresClient>>
  /** One keep-alive pool per process, opened before the trials: copies do not wait for a connection. */
  agent: Agent
}

async function startCluster(t: Test): Promise<Cluster> {
  const ports = await distinctPorts(3)
  const { database, env } = await deploymentEnv(t, {
    SERVICE_LOG_LEVEL: 'info',
    SERVICE_HEARTBEAT_MS: '60000',
    SERVICE_PIPELINES: JSON.stringify({ default: { argv: PIPELINE } }),
  })
  const served: Served[] = await Promise.all(ports.map((port) => startServe(env(port))))
  t.teardown(() => {
    for (const s of served) s.child.kill('SIGKILL')
  })
  const agent = new Agent({ connections: 8 })
  t.teardown(() => agent.close())
  const db = await postgresClient(t, database)
  return { urls: served.map((s) => s.url), db, agent }
}

const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)]!
const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Starts `copy(i)` for the three processes, each after its own random delay up to `jitterMs`. */
function threeCopies<T>(jitterMs: number, copy: (process: number) => Promise<T>): Promise<T[]> {
  return Promise.all([0, 1, 2].map(async (process) => {
    await delay(Math.random() * jitterMs)
    return copy(process)
  }))
}

/** A JSON-RPC error (or service error) of a 409 IDEMPOTENCY_CONFLICT, in either shape it can take. */
function isConflict(reply: { status: number; json?: any }, response: any): boolean {
  if (reply.status === 409) return reply.json?.error?.code === 'IDEMPOTENCY_CONFLICT'
  return response?.error?.data?.code === 'IDEMPOTENCY_CONFLICT'
}

function classify(reply: { status: number; json?: any; text?: string }, response: any): Answer {
  if (isConflict(reply, response)) return { kind: 'conflict' }
  if (reply.status === 200 && response?.result !== undefined) return { kind: 'result', result: response.result }
  return { kind: 'wrong', what: `HTTP ${reply.status} ${JSON.stringify(response ?? reply.json ?? reply.text)}` }
}

/** Creates an app through the first process (the tools' own path, so its audit and rows are as a client's). */
async function newApp(cluster: Cluster, name: string): Promise<string> {
  const reply = await modernCall(cluster.urls[0]!, OWNER_KEY, 'service_apps_create', { name })
  const result = answerOf(reply)?.result
  if (result?.isError !== false) throw new Error(`could not create app ${name}: ${reply.text}`)
  return result.structuredContent.app.id as string
}

/** What happened to the app, read from the database: how many times the operation ran, by state and by audit. */
async function ranTimes(cluster: Cluster, tool: Tool, appId: string): Promise<{ state: number; succeeded: number; failed: number }> {
  const audited = await cluster.db.query<{ outcome: string; n: number }>(
    "select outcome, count(*)::int as n from audit_log where action = $1 and (target_id = $2 or details->>'app_id' = $2) group by outcome",
    [tool, appId],
  )
  const count = (outcome: string) => audited.rows.find((r) => r.outcome === outcome)?.n ?? 0
  const state = tool === DELETE
    ? 1 - (await cluster.db.query<{ n: number }>('select count(*)::int as n from apps where id = $1', [appId])).rows[0]!.n
    : (await cluster.db.query<{ n: number }>('select count(*)::int as n from deployments where app_id = $1', [appId])).rows[0]!.n
  return { state, succeeded: count('succeeded'), failed: count('failed') }
}

interface Trial {
  answers: Answer[]
  /** The answer of one more copy, sent once the three have been answered: the stored outcome. */
  replay: Answer
  asked: number
}

/** 2026-07-28: round 1 on one process, then the accepted retry three times at once, then once more. */
async function modernTrial(cluster: Cluster, tool: Tool, appId: string, jitterMs: number): Promise<Trial> {
  const args = { app_id: appId }
  const first = await modernCall(pick(cluster.urls), OWNER_KEY, tool, args, { capabilities: ELICITING })
  const asked = answerOf(first)?.result
  if (asked?.resultType !== 'input_required') throw new Error(`round 1 did not ask: ${first.text}`)
  const retry = { requestState: asked.requestState, inputResponses: { [Object.keys(asked.inputRequests)[0]!]: confirmAnswer() } }
  const send = async (url: string, id: string): Promise<Answer> => {
    const { body, headers } = modernRequest(OWNER_KEY, 'tools/call', { name: tool, arguments: args, ...retry }, { capabilities: ELICITING, id })
    const reply = await readReply(await request(url, { method: 'POST', headers, body: JSON.stringify(body), dispatcher: cluster.agent }))
    return classify(reply, answerOf(reply, id))
  }
  const answers = await threeCopies(jitterMs, (process) => send(cluster.urls[process]!, `copy-${process}`))
  return { answers, replay: await send(pick(cluster.urls), 'replay'), asked: 1 }
}

/**
 * 2025-11-25: the same tools/call (same id) on the three processes. The copy that holds the call asks on its stream;
 * the test accepts, sending its answer to any process (it reaches the one waiting).
 */
async function legacyTrial(cluster: Cluster, session: { headers: Record<string, string> }, tool: Tool, appId: string, jitterMs: number, id: string): Promise<Trial> {
  const message = callTool(tool, { app_id: appId }, id)
  let asked = 0
  const copy = async (url: string): Promise<Answer> => {
    const live = await openLive(url, {
      method: 'POST',
      headers: { ...session.headers, 'content-type': 'application/json', accept: ACCEPT_BOTH },
      body: JSON.stringify(message),
    })
    try {
      if (live.status !== 200) {
        const text = await live.ended(10_000)
        return classify({ status: live.status, json: text ? JSON.parse(text) : undefined, text }, undefined)
      }
      const answered = new Set<unknown>()
      const messages = () => live.parsed().events.filter((e) => e.data !== '').map((e) => JSON.parse(e.data))
      const unanswered = () => messages().filter((m) => isElicitation(m) && !answered.has(m.id))
      const response = () => messages().find((m) => m.id === id && ('result' in m || 'error' in m))
      // Read until the call's response, answering each confirmation it asks for on the way.
      for (;;) {
        await live.waitFor(() => unanswered().length > 0 || response() !== undefined, 10_000, `the answer to ${id}`)
        if (response()) return classify({ status: 200 }, response())
        for (const question of unanswered()) {
          answered.add(question.id)
          asked++
          const reply = await post(pick(cluster.urls), { jsonrpc: '2.0', id: question.id, result: { action: 'accept', content: { confirm: true } } }, session.headers)
          if (reply.status !== 202) return { kind: 'wrong', what: `the confirmation's answer was refused: ${reply.status} ${reply.text}` }
        }
      }
    } catch (err) {
      return { kind: 'wrong', what: (err as Error).message }
    } finally {
      live.close()
    }
  }
  const answers = await threeCopies(jitterMs, (process) => copy(cluster.urls[process]!))
  return { answers, replay: await copy(pick(cluster.urls)), asked }
}

/**
 * Checks one trial against the promise; returns what broke it (nothing when it held). Every answer is ok, 409 or the
 * outcome again; the replay after them is the outcome; the operation ran once; nobody was asked twice.
 */
function judge(trial: Trial, ran: { state: number; succeeded: number; failed: number }): string[] {
  const problems: string[] = []
  const results = [...trial.answers, trial.replay].filter((a): a is Extract<Answer, { kind: 'result' }> => a.kind === 'result')
  for (const a of [...trial.answers, trial.replay]) if (a.kind === 'wrong') problems.push(a.what)
  const outcome = results[0]?.result
  if (outcome === undefined) problems.push('no copy got the outcome')
  else if (outcome.isError !== false) problems.push(`the outcome is a failure: ${JSON.stringify(outcome)}`)
  for (const other of results.slice(1)) if (JSON.stringify(other.result) !== JSON.stringify(outcome)) problems.push(`a copy got another result: ${JSON.stringify(other.result)}`)
  if (trial.replay.kind !== 'result') problems.push(`the replay after the end was not the stored outcome: ${JSON.stringify(trial.replay)}`)
  if (ran.state !== 1) problems.push(`the operation's effect is there ${ran.state} times`)
  if (ran.succeeded !== 1 || ran.failed !== 0) problems.push(`audit: ${ran.succeeded} succeeded, ${ran.failed} failed`)
  if (trial.asked !== 1) problems.push(`the user was asked ${trial.asked} times`)
  return problems
}

t.test('three copies of one accepted confirmation on three processes: the operation runs exactly once', async (t) => {
  const cluster = await startCluster(t)
  const session = await openSession(cluster.urls[0]!, OWNER_KEY, '2025-11-25', { elicitation: {} })
  const tally = { conflicts: 0, replays: 0, trials: 0 }
  const failures: string[] = []
  for (const era of ['modern', 'legacy'] as const) {
    for (const tool of [DELETE, DEPLOY] as const) {
      const started = Date.now()
      for (let trial = 0; trial < TRIALS; trial++) {
        const label = `${era} ${tool} #${trial}`
        const appId = await newApp(cluster, `race-${era}-${tool === DELETE ? 'del' : 'dep'}-${trial}`)
        const jitter = JITTER_MS[trial % JITTER_MS.length]!
        const run = era === 'modern'
          ? await modernTrial(cluster, tool, appId, jitter)
          : await legacyTrial(cluster, session, tool, appId, jitter, `${tool}-${trial}`)
        const problems = judge(run, await ranTimes(cluster, tool, appId))
        for (const p of problems) failures.push(`${label}: ${p.length > 240 ? `${p.slice(0, 240)}…` : p}`)
        tally.trials++
        tally.conflicts += run.answers.filter((a) => a.kind === 'conflict').length
        tally.replays += run.answers.filter((a) => a.kind === 'result').length - 1
      }
      t.comment(`${era} ${tool}: ${TRIALS} trials in ${Date.now() - started} ms`)
    }
  }
  t.comment(`${tally.trials} trials: ${tally.conflicts} copies answered 409, ${tally.replays} jittered copies answered the stored outcome`)
  t.strictSame(failures.slice(0, 20), [], `every operation ran exactly once and every copy was answered ok, 409 or the stored outcome (${failures.length} problems)`)
  t.equal(tally.trials, 4 * TRIALS)
  // The race was run, not avoided: copies met a call in progress. A copy after the end is each trial's replay, sent
  // once the three are answered and judged above; whether some jittered copies also land after the end depends on how
  // fast the machine ran the operation (under load none did), so it is reported in the comment above, not asserted.
  t.ok(tally.conflicts > TRIALS, `copies arrived while the call was pending or running (${tally.conflicts})`)
})

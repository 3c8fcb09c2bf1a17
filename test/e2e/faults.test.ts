// test-backends: sqlite-only (killed processes and a full disk, on SQLite files it makes)
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import t, { type Test } from 'tap'
import { groupMembers } from '../../src/deployments/process-group.js'
import { supervisorPath } from '../../src/deployments/runner.js'
import { whileServed } from '../helpers/attack.js'
import { processGone, startServe, type Served } from '../helpers/cli.js'
import { answerRequest, confirmCall, decision, elicitingSession, isElicitation, openLiveCall, readToEnd } from '../helpers/confirm.js'
import { callTool, initializeMessage, openSession, post } from '../helpers/mcp.js'
import { defaultOrganization } from '../helpers/seed.js'
import { OWNER_PASSWORD, startServer } from '../helpers/server.js'
import { fill, NO_SMALL_DISK, smallDisk } from '../helpers/small-disk.js'
import { callToEnd } from '../helpers/tools.js'
import { messagesOf, sleep, until } from '../helpers/stream.js'

/**
 * Faults (issue 10, item 9): a server killed with SIGKILL in the middle of a deployment. The pipeline must not act after
 * its server is gone, its process group must be gone, and the restarted server must read the run interrupted and
 * accept a new run of the app, never two live runs of one app, across restarts too.
 */

const API_KEY = 'service_mcp_' + 'F'.repeat(43)

t.setTimeout(90_000)

/** A pipeline quiet for `quietMs`, then writing `<marker dir>/<deployment id>`: the act a dead server's run must not do. */
function quietPipeline(markerDir: string, quietMs: number, options: { ignoreSigterm?: boolean } = {}) {
  const code = [
    // Silent: once its server is gone, a write to stdout would end it (EPIPE), which is not what this pipeline is about.
    options.ignoreSigterm ? "process.on('SIGTERM', () => {});" : '',
    "console.log('pid=' + process.pid);",
    `setTimeout(() => { require('fs').writeFileSync(require('path').join(process.argv[1], process.env.SERVICE_DEPLOYMENT_ID), 'acted'); console.log('acted') }, ${quietMs});`,
  ].join(' ')
  return { argv: [process.execPath, '-e', code, markerDir] }
}

interface Setup {
  dir: string
  dbPath: string
  markers: string
  env(extra?: Record<string, string>): Record<string, string>
}

function setup(t: Test, pipelines: (markers: string) => Record<string, unknown>): Setup {
  const dir = mkdtempSync(join(tmpdir(), 'service-mcp-faults-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const markers = join(dir, 'markers')
  mkdirSync(markers)
  const configPath = join(dir, 'config.json')
  writeFileSync(configPath, JSON.stringify({ pipelines: pipelines(markers) }))
  const dbPath = join(dir, 'db.sqlite')
  return {
    dir,
    dbPath,
    markers,
    env: (extra = {}) => ({
      SERVICE_DATABASE: dbPath,
      SERVICE_PORT: '0',
      SERVICE_LOG_LEVEL: 'info',
      SERVICE_CONFIG: configPath,
      SERVICE_BOOTSTRAP_API_KEY: API_KEY,
      SERVICE_BOOTSTRAP_PASSWORD: OWNER_PASSWORD,
      SERVICE_HEARTBEAT_MS: '60000',
      ...extra,
    }),
  }
}

async function serve(t: Test, env: Record<string, string>): Promise<Served> {
  const served = await startServe(env)
  t.teardown(() => {
    served.child.kill('SIGKILL')
  })
  return served
}

/** Creates an app on `pipeline` through the tools; returns its id. */
async function createApp(t: Test, mcpUrl: string, name: string, pipeline: string): Promise<string> {
  const { headers } = await openSession(mcpUrl, API_KEY)
  const created = await callToEnd(mcpUrl, headers, 'service_apps_create', { name, pipeline }, 1)
  t.equal(created.result.isError, false, `app ${name} created`)
  return created.result.structuredContent.app.id
}

/** Starts a deployment of `appId`, confirmed; returns the call's stream, the deployment id and the pipeline's pid. */
async function startDeployment(t: Test, mcpUrl: string, appId: string, id: string) {
  const { headers } = await elicitingSession({ mcpUrl, apiKey: API_KEY })
  const { live, reply } = await confirmCall(t, mcpUrl, headers, callTool('service_deployments_create', { app_id: appId }, id))
  t.equal(reply.status, 202, 'the deployment is confirmed')
  const lines = () => messagesOf(live).filter((m) => m.method === 'notifications/message' && m.params.logger === 'deployment').map((m) => m.params.data)
  await live.waitFor(() => lines().some((l) => l.line.startsWith('pid=')), 8000, 'the pipeline\'s pid')
  const pidLine = lines().find((l) => l.line.startsWith('pid='))!
  return { live, headers, deploymentId: pidLine.deployment_id as string, pid: Number(pidLine.line.slice(4)) }
}

/** The process group of a live process, from /proc. */
function pgidOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2])
}

function storedRow(dbPath: string, deploymentId: string): { status: string; pgid: number | null; outcome: string | null } {
  const db = new Database(dbPath, { readonly: true })
  try {
    return db.prepare('SELECT status, pgid, outcome FROM deployments WHERE id = ?').get(deploymentId) as { status: string; pgid: number | null; outcome: string | null }
  } finally {
    db.close()
  }
}

async function killHard(served: Served): Promise<void> {
  served.child.kill('SIGKILL')
  const exit = await Promise.race([served.exited, sleep(5000).then(() => null)])
  if (exit?.signal !== 'SIGKILL') throw new Error(`the server did not die of SIGKILL: ${JSON.stringify(exit)}`)
}

async function deploymentOf(t: Test, mcpUrl: string, deploymentId: string): Promise<any> {
  const { headers } = await openSession(mcpUrl, API_KEY)
  const got = await callToEnd(mcpUrl, headers, 'service_deployments_get', { deployment_id: deploymentId }, 2)
  t.equal(got.result.isError, false, 'service_deployments_get answers')
  return got.result.structuredContent
}

t.test('kill -9 during a quiet pipeline: the run never acts, its group is gone, the restart reads interrupted and deploys again', { skip: !existsSync('/proc/self/stat') && 'needs /proc' }, async (t) => {
  const QUIET_MS = 2500
  const s = setup(t, (markers) => ({ quiet: quietPipeline(markers, QUIET_MS) }))
  const first = await serve(t, s.env({ SERVICE_PIPELINE_GRACE_MS: '500' }))
  const appId = await createApp(t, first.url, 'quiet', 'quiet')

  const started = Date.now()
  const run = await startDeployment(t, first.url, appId, 'deploy-1')
  const pgid = pgidOf(run.pid)
  t.not(pgid, run.pid, 'the pipeline is not the leader of its group: its supervisor is')
  t.match(readFileSync(`/proc/${pgid}/cmdline`, 'utf8'), /supervise\.mjs/, 'the group is led by the supervisor')
  t.match(storedRow(s.dbPath, run.deploymentId), { status: 'running', pgid }, 'the running row records the group')

  // The attack: the server dies without a word while the pipeline is quiet.
  await killHard(first)
  run.live.close()
  await until(() => groupMembers(pgid).length === 0, 3000, 'the run\'s process group to be gone')
  t.ok(processGone(run.pid) || groupMembers(pgid).length === 0, 'the pipeline is gone')
  t.strictSame(groupMembers(pgid), [], 'no process of the run is left alive')

  // Past the moment the pipeline would have acted: it never did.
  await sleep(Math.max(0, started + QUIET_MS + 1000 - Date.now()))
  t.notOk(existsSync(join(s.markers, run.deploymentId)), 'the interrupted run never acted (no marker)')

  // Restart on the same database.
  const second = await serve(t, s.env({ SERVICE_PIPELINE_GRACE_MS: '500' }))
  const got = await deploymentOf(t, second.url, run.deploymentId)
  t.match(got.deployment, { id: run.deploymentId, status: 'interrupted', outcome: 'interrupted: the server stopped while it ran' })
  t.equal(storedRow(s.dbPath, run.deploymentId).pgid, null, 'the group is no longer on record')

  // A new run of the same app is accepted, and it runs to its end (writing its own marker).
  const again = await startDeployment(t, second.url, appId, 'deploy-2')
  t.not(again.deploymentId, run.deploymentId)
  const { responses } = await readToEnd(again.live, 'deploy-2', QUIET_MS + 5000)
  t.equal(responses[0]?.result?.isError, false, 'the new run succeeds')
  t.ok(existsSync(join(s.markers, again.deploymentId)), 'the new run acted')
  t.notOk(existsSync(join(s.markers, run.deploymentId)), 'the interrupted one still never did')
})

t.test('a restart within the grace period: the leftover run is stopped before the server accepts another run of the app', { skip: !existsSync('/proc/self/stat') && 'needs /proc' }, async (t) => {
  // The pipeline ignores SIGTERM and its supervisor waits 20 s before SIGKILL: only the restarted server can stop it in time.
  // The restart (a new `serve` through tsx) took 3.5–4.2 s beside another heavy test file here, and over 6 s in CI at
  // times, with this code and before it: 10 s keeps "before the pipeline would act" about the server, not the machine.
  const QUIET_MS = 10_000
  const s = setup(t, (markers) => ({ stubborn: quietPipeline(markers, QUIET_MS, { ignoreSigterm: true }) }))
  const first = await serve(t, s.env({ SERVICE_PIPELINE_GRACE_MS: '20000' }))
  const appId = await createApp(t, first.url, 'stubborn', 'stubborn')
  const started = Date.now()
  const run = await startDeployment(t, first.url, appId, 'deploy-1')
  const pgid = pgidOf(run.pid)
  t.teardown(() => {
    if (groupMembers(pgid).length > 0) process.kill(-pgid, 'SIGKILL')
  })

  await killHard(first)
  run.live.close()
  await sleep(200)
  t.ok(groupMembers(pgid).includes(run.pid), 'the pipeline ignored its supervisor\'s SIGTERM and still runs')

  const second = await serve(t, s.env({ SERVICE_PIPELINE_GRACE_MS: '300' }))
  t.ok(Date.now() - started < QUIET_MS, 'restarted before the pipeline would act')
  t.strictSame(groupMembers(pgid), [], 'the restarted server stopped the leftover group before listening')
  t.ok(second.stdout().includes('a run left by a previous process was still alive and has been stopped'), 'and said so in its log')
  const got = await deploymentOf(t, second.url, run.deploymentId)
  t.equal(got.deployment.status, 'interrupted')

  // The app deploys again, and only the new run is alive.
  await whileServed(t, second.url.replace(/\/mcp$/, ''), async () => {
    const again = await startDeployment(t, second.url, appId, 'deploy-2')
    t.not(pgidOf(again.pid), pgid, 'a new group')
    const { headers } = await openSession(second.url, API_KEY)
    const cancelled = await callToEnd(second.url, headers, 'service_deployments_cancel', { deployment_id: again.deploymentId }, 3)
    t.equal(cancelled.result.isError, false, 'the new run is cancelled')
    await readToEnd(again.live, 'deploy-2', 5000)
  }, { label: 'the restart and the new run' })

  await sleep(Math.max(0, started + QUIET_MS + 800 - Date.now()))
  t.notOk(existsSync(join(s.markers, run.deploymentId)), 'the leftover run never acted')
})

/**
 * The restart's recovery in-process, with a leftover made by hand: a supervisor whose stdin this test holds open (so
 * it does not stop on its own, as if it could not act), around a pipeline that ignores SIGTERM.
 */
t.test('recovery signals a recorded group only when it provably holds the run', { skip: !existsSync('/proc/self/stat') && 'needs /proc' }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'service-mcp-recover-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const dbPath = join(dir, 'db.sqlite')
  const first = await startServer(t, { dbPath })
  const org = (await defaultOrganization(first)).id
  const repos = first.app.repos
  const seed = async (name: string) => {
    const app = await repos.apps.create({ organizationId: org, name, pipeline: 'default' })
    return await repos.deployments.create({ organizationId: org, appId: app.id, kind: 'deploy', pipeline: 'default', createdBy: null })
  }
  const ours = await seed('ours')
  const unrelated = await seed('unrelated')
  await first.close()

  const spawned: ChildProcess[] = []
  t.teardown(() => {
    for (const child of spawned) if (child.pid && groupMembers(child.pid).length > 0) process.kill(-child.pid, 'SIGKILL')
  })
  // What a crash leaves: the supervisor of `ours`, its stdin still open, around a pipeline that ignores SIGTERM.
  const leftover = spawn(process.execPath, [supervisorPath(), '--grace-ms', '60000', '--', process.execPath, '-e', "process.on('SIGTERM', () => {}); setInterval(() => {}, 1000)"], {
    detached: true,
    stdio: ['pipe', 'ignore', 'ignore'],
    env: { PATH: process.env.PATH ?? '', SERVICE_DEPLOYMENT_ID: ours.id },
  })
  // A process group that is not the run's, under the id recorded for `unrelated` (a reused number).
  const stranger = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { detached: true, stdio: 'ignore', env: { PATH: process.env.PATH ?? '' } })
  spawned.push(leftover, stranger)
  await until(() => groupMembers(leftover.pid!).length === 2, 5000, 'the leftover supervisor and its pipeline')
  const db = new Database(dbPath)
  db.prepare("UPDATE deployments SET status = 'running', pgid = ? WHERE id = ?").run(leftover.pid, ours.id)
  db.prepare("UPDATE deployments SET status = 'running', pgid = ? WHERE id = ?").run(stranger.pid, unrelated.id)
  db.close()

  const second = await startServer(t, { dbPath, config: { pipelineGraceMs: 200 } })
  t.strictSame(groupMembers(leftover.pid!), [], 'the run\'s group was stopped (SIGTERM ignored, then SIGKILL)')
  t.notOk(processGone(stranger.pid!), 'a group that does not hold the run is never signalled')
  for (const d of [ours, unrelated]) {
    t.match(await second.app.repos.deployments.byId(org, d.id), { status: 'interrupted', pgid: null }, `${d.id} is interrupted`)
  }
  stranger.kill('SIGKILL')
})

/**
 * A full disk while the server runs (items 11 and 12): the database sits on a small tmpfs, which a filler file fills up.
 * While it is full, an unrelated client is served, new sessions either work or fail (503), and a confirmed deployment
 * either runs or does not. Once space is freed: the confirmed call's retry is never refused as "still pending", nothing
 * runs twice, and after a restart every session that `initialize` answered 200 is still there.
 */
t.test('a full disk while serving: no acknowledged session lost, no confirmed call stuck, nothing run twice', { skip: NO_SMALL_DISK ?? false }, async (t) => {
  const disk = smallDisk(t, '4m')
  const dir = mkdtempSync(join(tmpdir(), 'service-mcp-full-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const runsFile = join(dir, 'runs')
  const configPath = join(dir, 'config.json')
  writeFileSync(configPath, JSON.stringify({ pipelines: { counted: { argv: [process.execPath, '-e', "require('fs').appendFileSync(process.argv[1], 'run\\n'); console.log('ran')", runsFile] } } }))
  const runs = () => (existsSync(runsFile) ? readFileSync(runsFile, 'utf8').split('\n').filter((l) => l === 'run').length : 0)
  const env = {
    SERVICE_DATABASE: join(disk, 'service.db'),
    SERVICE_PORT: '0',
    SERVICE_LOG_LEVEL: 'info',
    SERVICE_CONFIG: configPath,
    SERVICE_BOOTSTRAP_API_KEY: API_KEY,
    SERVICE_BOOTSTRAP_PASSWORD: OWNER_PASSWORD,
    SERVICE_HEARTBEAT_MS: '60000',
    SERVICE_ELICITATION_TIMEOUT_MS: '5000',
    // Limits out of reach: this test counts what the disk refuses, not what the rate limits do.
    SERVICE_RATE_LIMIT_API_KEY_MEMBER: '100000',
    SERVICE_RATE_LIMIT_ORGANIZATION: '100000',
    SERVICE_RATE_LIMIT_TOOL_FACTOR: '1000',
  }
  let served = await serve(t, env)
  const base = () => served.url.replace(/\/mcp$/, '')
  const appId = await createApp(t, served.url, 'full', 'counted')
  const confirming = await elicitingSession({ mcpUrl: served.url, apiKey: API_KEY })

  /** A session's initialize: its headers when answered 200, else its HTTP status. */
  const initialize = async (): Promise<Record<string, string> | number> => {
    const init = await post(served.url, initializeMessage(), { authorization: `Bearer ${API_KEY}` })
    const sessionId = init.headers['mcp-session-id']
    if (init.status !== 200 || typeof sessionId !== 'string') return init.status
    return { authorization: `Bearer ${API_KEY}`, 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' }
  }
  const acknowledged: Array<Record<string, string>> = []
  const refusedStatuses: number[] = []
  const initializeMany = async (n: number) => {
    for (let i = 0; i < n; i += 10) {
      for (const got of await Promise.all(Array.from({ length: Math.min(10, n - i) }, initialize))) {
        if (typeof got === 'number') refusedStatuses.push(got)
        else acknowledged.push(got)
      }
    }
  }
  await initializeMany(5)
  t.equal(acknowledged.length, 5, 'before the disk fills, sessions start')

  /** The confirmed deployment `id`: its answer (accepting the confirmation when asked) and whether it was asked. */
  const deploy = async (id: string) => {
    const live = await openLiveCall(t, served.url, confirming.headers, callTool('service_deployments_create', { app_id: appId }, id))
    if (live.status !== 200) return { status: live.status, asked: false, response: undefined as any }
    const isAsked = () => messagesOf(live).some(isElicitation)
    await live.waitFor(() => isAsked() || messagesOf(live).some((m) => m.id === id), 8000, `the question or the answer of ${id}`)
    const asked = isAsked()
    if (asked) await answerRequest(served.url, confirming.headers, messagesOf(live).find(isElicitation).id, decision())
    const { responses } = await readToEnd(live, id, 10_000)
    return { status: live.status, asked, response: responses[0] }
  }

  // The attack: the disk fills up under the running server.
  const filler = fill(disk)
  const during = await whileServed(t, base(), async () => {
    await initializeMany(40)
    return deploy('full-1')
  }, { label: 'the full disk' })
  t.ok(refusedStatuses.every((s) => s === 503), `a session that cannot be stored is refused 503 (${refusedStatuses.length} refused, ${acknowledged.length - 5} acknowledged)`)
  t.ok(runs() <= 1, 'the confirmed call ran at most once')
  const firstRuns = runs()
  t.comment(`while full: deployment answered ${JSON.stringify(during.response?.error ?? during.response?.result?.content?.[0]?.text ?? during.status).slice(0, 300)}`)

  // Space is freed: the retry gets the call's outcome, or runs when nothing ran; it is never refused as in progress.
  rmSync(filler)
  const retried = await deploy('full-1')
  t.equal(retried.status, 200, 'the retry is not refused (409 "still pending" / "still running")')
  t.ok(retried.response?.result, 'the retry gets a tool result')
  if (during.response?.result) {
    t.strictSame(retried.response?.result, during.response.result, 'the call ended with a result: the retry gets it again')
    t.notOk(retried.asked, 'nobody is asked again')
    t.equal(runs(), firstRuns, 'nothing ran again')
  } else {
    t.equal(firstRuns, 0, 'the call was refused before it ran')
    t.equal(retried.response?.result?.isError, false, 'so the retry runs, and succeeds')
    t.equal(runs(), 1, 'once')
  }
  const outcome = retried.response?.result

  // A clean restart: every acknowledged session is there, and the call's record still answers the same.
  served.child.kill('SIGTERM')
  t.equal((await served.exited).code, 0, 'the server stops cleanly')
  served = await serve(t, env)
  let lost = 0
  for (const headers of acknowledged) {
    const ping = await post(served.url, { jsonrpc: '2.0', id: 'p', method: 'ping' }, headers)
    if (ping.status !== 200) lost++
  }
  t.equal(lost, 0, `no session answered 200 was lost (${acknowledged.length} checked)`)
  const afterRestart = await deploy('full-1')
  t.strictSame(afterRestart.response?.result, outcome, 'after the restart the call answers the same')
  t.equal(runs(), 1, 'and it ran exactly once in all')
})

t.test('under its supervisor a run still times out: SIGTERM, then SIGKILL after the grace period, pipeline reaped', async (t) => {
  const server = await startServer(t, {
    config: {
      // sh, not node: on 2 busy cores a node child could take longer than the 600 ms timeout to start and install its
      // handler, then died of the SIGTERM silently (a CI failure); sh prints its pid and traps SIGTERM within a millisecond.
      pipelines: { stubborn: { argv: ['sh', '-c', "trap 'echo ignoring SIGTERM' TERM; echo pid=$$; while :; do sleep 0.05; done"] } },
      pipelineTimeoutMs: 600,
      pipelineGraceMs: 200,
      heartbeatMs: 60_000,
    },
  })
  const org = (await defaultOrganization(server)).id
  const app = await server.app.repos.apps.create({ organizationId: org, name: 'slow', pipeline: 'stubborn' })
  const { headers } = await elicitingSession(server)
  const { live } = await confirmCall(t, server.mcpUrl, headers, callTool('service_deployments_create', { app_id: app.id }, 'timeout-1'))
  const { messages, responses } = await readToEnd(live, 'timeout-1', 8000)
  const lines = messages.filter((m) => m.method === 'notifications/message' && m.params.logger === 'deployment').map((m) => m.params.data.line as string)
  const pid = Number(lines.find((l) => l.startsWith('pid='))!.slice(4))
  const err = JSON.parse(responses[0]?.result?.content?.[0]?.text ?? '{}')
  t.equal(err.code, 'OPERATION_FAILED')
  t.match(err.message, /failed: timed out after 600 ms/)
  t.ok(lines.includes('ignoring SIGTERM'), 'SIGTERM first')
  const deploymentId = /dep_[0-9a-z]{26}/.exec(err.message)![0]
  t.match(await server.app.repos.deployments.byId(org, deploymentId), { status: 'failed', outcome: 'failed: timed out after 600 ms', exitCode: null, pgid: null })
  t.ok(processGone(pid), 'the pipeline is gone and reaped')
})

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { openDatabase } from '../../src/db/sqlite/client.js'
import { createRepos } from '../../src/db/sqlite/repos.js'
import { processGone, startServe } from '../helpers/cli.js'
import { confirmCall } from '../helpers/confirm.js'
import { callTool, openSession, post } from '../helpers/mcp.js'
import { OWNER_PASSWORD } from '../helpers/server.js'
import { messagesOf, openLive, sleep, type LiveStream } from '../helpers/stream.js'

/**
 * The real `service-mcp serve` (through tsx, as cli.test.ts runs it) stopped with SIGTERM while a deployment runs and an
 * idle SSE stream is open: exit code 0 within the grace period, both streams ended by the server (not reset), the
 * pipeline process gone, and the run recorded `interrupted` with its output in the database.
 */

const API_KEY = 'service_mcp_' + 'S'.repeat(43)
const GRACE_MS = 500
const HEARTBEAT_MS = 200
/** A pipeline that runs 30 s unless stopped: its pid, then a line every 100 ms; SIGTERM's default action ends it. */
const LONG_PIPELINE = "console.log('pid=' + process.pid); let i = 0; const t = setInterval(() => { console.log('tick ' + ++i); if (i >= 300) clearInterval(t) }, 100)"

t.setTimeout(60_000)

function deploymentLines(live: LiveStream): Array<{ deployment_id: string; seq: number; stream: string; line: string }> {
  return messagesOf(live).filter((m) => m.method === 'notifications/message' && m.params.logger === 'deployment').map((m) => m.params.data)
}

t.test('SIGTERM during a deployment: exit 0, streams ended, pipeline gone, run recorded interrupted', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'service-mcp-shutdown-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const dbPath = join(dir, 'db.sqlite')
  const configPath = join(dir, 'config.json')
  writeFileSync(configPath, JSON.stringify({ pipelines: { long: { argv: [process.execPath, '-e', LONG_PIPELINE] } } }))

  const served = await startServe({
    SERVICE_DATABASE: dbPath,
    SERVICE_PORT: '0',
    SERVICE_LOG_LEVEL: 'info',
    SERVICE_CONFIG: configPath,
    SERVICE_PIPELINE_GRACE_MS: String(GRACE_MS),
    SERVICE_HEARTBEAT_MS: String(HEARTBEAT_MS),
    SERVICE_BOOTSTRAP_API_KEY: API_KEY,
    SERVICE_BOOTSTRAP_PASSWORD: OWNER_PASSWORD,
  })
  let pipelinePid: number | undefined
  t.teardown(() => {
    served.child.kill('SIGKILL')
    if (pipelinePid !== undefined && !processGone(pipelinePid)) process.kill(pipelinePid, 'SIGKILL')
  })
  const { url: mcpUrl } = served

  // A session that can answer confirmations, and an app on the long pipeline.
  const { headers } = await openSession(mcpUrl, API_KEY, '2025-11-25', { elicitation: {} })
  const created = await post(mcpUrl, callTool('service_apps_create', { name: 'longrun', pipeline: 'long' }, 1), headers)
  t.equal(created.status, 200, 'service_apps_create answers')
  const createdResult = created.json?.result ?? created.messages.find((m) => m.id === 1)?.result
  t.equal(createdResult?.isError, false, 'the app is created')
  const appId: string = createdResult.structuredContent.app.id

  // The idle standalone stream: open, and alive (heartbeats arrive).
  const idle = await openLive(mcpUrl, { method: 'GET', headers: { ...headers, accept: 'text/event-stream' } })
  t.teardown(() => idle.close())
  t.equal(idle.status, 200, 'GET /mcp opens the standalone stream')
  t.equal(idle.headers['content-type'], 'text/event-stream')
  await idle.waitFor((text) => text.includes(': heartbeat'), 5000, 'a heartbeat on the idle stream')

  // The deployment: its tools/call answered as SSE, the confirmation read off that stream and accepted.
  const { live: call, reply: answer } = await confirmCall(t, mcpUrl, headers, callTool('service_deployments_create', { app_id: appId }, 'deploy-1'))
  t.equal(call.status, 200, 'service_deployments_create answers')
  t.equal(call.headers['content-type'], 'text/event-stream', 'a confirmation-gated call is answered as SSE')
  t.equal(answer.status, 202, 'the confirmation is accepted')

  // A few lines of output, and the pipeline's pid.
  await call.waitFor(() => deploymentLines(call).filter((l) => l.line.startsWith('tick ')).length >= 3, 8000, 'three lines of pipeline output')
  const lines = deploymentLines(call)
  const deploymentId = lines[0]!.deployment_id
  pipelinePid = Number(/^pid=(\d+)$/.exec(lines.find((l) => l.line.startsWith('pid='))!.line)![1])
  t.notOk(processGone(pipelinePid), 'the pipeline runs')

  // SIGTERM: the server stops the run (SIGTERM to its process group), ends the streams, and exits 0.
  const stoppedAt = Date.now()
  served.child.kill('SIGTERM')
  const bound = GRACE_MS + 5000
  const exit = await Promise.race([served.exited, sleep(bound).then(() => null)])
  const elapsed = Date.now() - stoppedAt
  t.ok(exit, `the server exits within the grace period + 5 s (${bound} ms)`)
  t.equal(exit?.signal, null, 'not killed by a signal')
  t.equal(exit?.code, 0, `exit code 0${exit?.code ? `\nstderr: ${served.stderr()}` : ''}`)
  t.ok(elapsed < bound, `exited after ${elapsed} ms`)
  t.ok(served.stdout().split('\n').some((l) => l.startsWith('{') && /"msg":"shutting down"/.test(l)), 'the shutdown is logged')

  // Both responses end: the client sees the end of the chunked body, not a reset or a truncated response.
  await idle.ended(2000)
  await call.ended(2000)
  t.ok(idle.endedByServer, 'the idle GET stream was ended cleanly by the server')
  t.ok(call.endedByServer, 'the tools/call stream was ended cleanly by the server')
  // The run is interrupted before the sessions end, so the waiting client gets a final, clear answer (issue 10, #13).
  const finalAnswers = messagesOf(call).filter((m) => m.id === 'deploy-1')
  t.equal(finalAnswers.length, 1, 'the call cut by the shutdown gets its JSON-RPC answer before the stream ends')
  const finalError = JSON.parse(finalAnswers[0]?.result?.content?.[0]?.text ?? '{}')
  t.equal(finalAnswers[0]?.result?.isError, true)
  t.equal(finalError.code, 'OPERATION_FAILED')
  t.match(finalError.message, new RegExp(`Deployment ${deploymentId} of app longrun was interrupted: the server stopped while it ran`), 'naming the deployment and what happened')

  t.ok(processGone(pipelinePid), 'the pipeline process is gone (ESRCH)')

  // The database, reopened: the run is interrupted, with its output and the closing line.
  const handle = openDatabase(dbPath, { migrate: false })
  t.teardown(() => handle.close())
  const repos = createRepos(handle.db)
  const org = (await repos.organizations.bySlug('default'))!
  const row = await repos.deployments.byId(org.id, deploymentId)
  t.match(row, { status: 'interrupted', outcome: 'interrupted: the server stopped while it ran', appId })
  t.type(row?.finishedAt, 'number')
  const stored = (await repos.deployments.lines(deploymentId, 1000)).items
  t.strictSame(stored.map((l) => l.seq), stored.map((_, i) => i), 'lines stored in order, without a gap')
  t.equal(stored[0]?.line, 'started deploy of longrun with pipeline long', 'the first line is the start')
  t.ok(stored.some((l) => l.line === `pid=${pipelinePid}`), 'the pid line is stored')
  const ticks = stored.filter((l) => l.stream === 'stdout' && l.line.startsWith('tick ')).length
  t.ok(ticks >= 3, `the output lines are stored (${ticks} ticks)`)
  t.ok(ticks < 100, 'the run did not go on after the shutdown')
  t.equal(stored.at(-1)?.line, 'interrupted: the server stopped while it ran', 'the last line is the outcome')
  t.ok(lines.every((l) => stored.some((s) => s.seq === l.seq && s.line === l.line)), 'every streamed line is stored')
})

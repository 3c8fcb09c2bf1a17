import { randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import t, { type Test } from 'tap'
import type { IdempotencyKey } from '../../src/db/repos/idempotency.js'
import { SecretBox } from '../../src/lib/secret-box.js'
import { IDEMPOTENCY_TTL_MS } from '../../src/plugins/tools/idempotency.js'
import type { RequestId } from '../../src/rpc/types.js'
import { answerAccepted, decision, elicitationOn, elicitingSession, isElicitation, openLiveCall, readToEnd } from '../helpers/confirm.js'
import { callToEnd, toolError } from '../helpers/tools.js'
import { callTool, post } from '../helpers/mcp.js'
import { createMember, defaultOrganization, ownerMembership } from '../helpers/seed.js'
import { ManualClock } from '../helpers/clock.js'
import { startServer, tempDatabase, type TestServer } from '../helpers/server.js'
import { messagesOf, until, type LiveStream } from '../helpers/stream.js'

/**
 * Confirmation-gated call identity (interface.md; docs/decisions/idempotency.md), over real sockets. The pipelines
 * count their own runs: each run appends a line to the file named by the app's env var RUNS_FILE. `gated` then waits
 * until GATE_FILE exists, so a test can hold a run in the middle.
 */

const ENV_KEY = randomBytes(32).toString('base64')
const BOX = new SecretBox(Buffer.from(ENV_KEY, 'base64'))
const node = (code: string) => ({ argv: [process.execPath, '-e', code] })
const PIPELINES = {
  counted: node("require('fs').appendFileSync(process.env.RUNS_FILE, 'run\\n'); console.log('ran')"),
  gated: node("const fs = require('fs'); fs.appendFileSync(process.env.RUNS_FILE, 'run\\n'); console.log('waiting'); " +
    "const timer = setInterval(() => { if (fs.existsSync(process.env.GATE_FILE)) { clearInterval(timer); console.log('ran') } }, 10)"),
}
const TOOL = 'service_deployments_create'
/** The holder of records a test writes itself: no process, and a claim no call of the server holds (a lost write). */
const ORPHAN = { owner: null, claim: 'orphan' }

async function start(t: Test, options: { dbPath?: string; elicitationTimeoutMs?: number; clock?: ManualClock } = {}): Promise<TestServer> {
  return startServer(t, {
    ...(options.dbPath ? { dbPath: options.dbPath } : {}),
    ...(options.clock ? { clock: options.clock } : {}),
    config: { envKey: ENV_KEY, pipelines: PIPELINES, pipelineGraceMs: 200, heartbeatMs: 60_000, ...(options.elicitationTimeoutMs ? { elicitationTimeoutMs: options.elicitationTimeoutMs } : {}) },
  })
}

/** A directory for the run counter and the gate, removed at teardown. */
function workDir(t: Test): { runs: string; gate: string; count(): number; open(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'idempotency-test-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const runs = join(dir, 'runs')
  const gate = join(dir, 'gate')
  return {
    runs,
    gate,
    count: () => (existsSync(runs) ? readFileSync(runs, 'utf8').split('\n').filter((l) => l === 'run').length : 0),
    open: () => writeFileSync(gate, 'go'),
  }
}

async function seedApp(server: TestServer, name: string, pipeline: keyof typeof PIPELINES, files: { runs: string; gate: string }) {
  const repos = server.app.repos
  const organizationId = (await defaultOrganization(server)).id
  const app = await repos.apps.create({ organizationId, name, pipeline })
  for (const [k, v] of Object.entries({ RUNS_FILE: files.runs, GATE_FILE: files.gate })) {
    await repos.envVars.set({ organizationId, appId: app.id, name: k, ciphertext: BOX.seal(v, `${app.id}\u0000${k}`), userId: null })
  }
  return app
}

async function keyOf(server: TestServer, sessionId: string, requestId: RequestId): Promise<IdempotencyKey> {
  const membership = await ownerMembership(server)
  return { sessionId, membershipId: membership.id, organizationId: membership.organizationId, requestId: JSON.stringify(requestId) }
}

const lines = (messages: any[]) => messages.filter((m) => m.method === 'notifications/message' && m.params.logger === 'deployment').map((m) => m.params.data.line)

async function openCall(t: Test, server: TestServer, headers: Record<string, string>, args: Record<string, unknown>, id: RequestId): Promise<LiveStream> {
  const live = await openLiveCall(t, server.mcpUrl, headers, callTool(TOOL, args, id))
  t.equal(live.status, 200)
  return live
}

/** Waits for the call's elicitation/create and answers it. */
async function answer(t: Test, server: TestServer, headers: Record<string, string>, live: LiveStream, action: 'accept' | 'decline' = 'accept'): Promise<void> {
  await answerAccepted(t, server.mcpUrl, headers, live, decision(action))
}

/** Answers the confirmation and reads the call to its end; returns the tool result and every message. */
async function confirmedCall(t: Test, server: TestServer, headers: Record<string, string>, args: Record<string, unknown>, id: RequestId) {
  const live = await openCall(t, server, headers, args, id)
  await answer(t, server, headers, live)
  const { messages, responses: [response] } = await readToEnd(live, id, 10_000)
  if (!response?.result) throw new Error(`no result for ${JSON.stringify(id)}: ${live.text()}`)
  return { result: response.result, messages }
}

/** A retry: the same request read to its end. Returns the tool result and every message of the answer. */
function retry(server: TestServer, headers: Record<string, string>, args: Record<string, unknown>, id: RequestId) {
  return callToEnd(server.mcpUrl, headers, TOOL, args, id, `retry ${JSON.stringify(id)}`)
}

async function confirmations(server: TestServer): Promise<number> {
  return (await server.app.repos.audit.page((await defaultOrganization(server)).id, 100, undefined, `${TOOL}.confirmation`)).items.length
}

t.test('a lost response: the retry with the same id gets the stored result; the pipeline ran once, nobody was asked again', async (t) => {
  const server = await start(t)
  const files = workDir(t)
  const app = await seedApp(server, 'web', 'gated', files)
  const { sessionId, headers } = await elicitingSession(server)
  const repos = server.app.repos

  // The client confirms, the run starts, and the connection drops before the answer.
  const live = await openCall(t, server, headers, { app_id: app.id }, 'lost-1')
  await answer(t, server, headers, live)
  await live.waitFor(() => lines(messagesOf(live)).includes('waiting'), 5000, 'the run')
  live.close()
  files.open()
  const record = await until(async () => {
    const r = await repos.idempotency.get(await keyOf(server, sessionId, 'lost-1'), Date.now())
    return r?.status === 'finished' ? r : undefined
  }, 5000, 'the call to finish')
  t.equal(record.tool, TOOL)
  t.equal(record.result?.isError, false, 'the stored result is the success the client never saw')

  const again = await retry(server, headers, { app_id: app.id }, 'lost-1')
  t.strictSame(again.result, record.result, 'the retry gets the stored result, unchanged')
  t.equal((again.result as any).structuredContent.deployment.status, 'succeeded')
  t.notOk(again.messages.some(isElicitation), 'nobody is asked again')
  t.strictSame(lines(again.messages), [], 'nothing runs: no output')
  t.equal(files.count(), 1, 'the pipeline ran once')
  t.equal(await confirmations(server), 1, 'one confirmation in the audit log')
  t.equal((await repos.deployments.list((await defaultOrganization(server)).id, { limit: 10, offset: 0 })).total, 1, 'one deployment')
  t.strictSame((await retry(server, headers, { app_id: app.id }, 'lost-1')).result, record.result, 'and again')

  // A completed call retried: the very answer it got the first time.
  const second = await confirmedCall(t, server, headers, { app_id: app.id }, 'lost-2')
  t.equal(files.count(), 2, 'a new id runs again')
  t.not(second.result.structuredContent.deployment.id, record.result?.structuredContent && (record.result.structuredContent as any).deployment.id)
  const replay = await retry(server, headers, { app_id: app.id }, 'lost-2')
  t.strictSame(replay.result, second.result, 'the retry of an answered call gets the same JSON')
  t.notOk(replay.messages.some(isElicitation))
  t.equal(files.count(), 2)
  t.equal(await confirmations(server), 2)
})

t.test('the same id while the first call waits for confirmation or runs: 409 IDEMPOTENCY_CONFLICT', async (t) => {
  const server = await start(t)
  const files = workDir(t)
  const app = await seedApp(server, 'busy', 'gated', files)
  const { sessionId, headers } = await elicitingSession(server)
  const key = await keyOf(server, sessionId, 'busy-1')

  const conflict = async (what: string, status: string) => {
    const dup = await post(server.mcpUrl, callTool(TOOL, { app_id: app.id }, 'busy-1'), headers)
    t.equal(dup.status, 409, `${what}: HTTP 409`)
    t.match(dup.headers['content-type'], /^application\/json/)
    t.match(dup.json, { error: { code: 'IDEMPOTENCY_CONFLICT', details: { request_id: 'busy-1', tool: TOOL, status } } }, `${what}: the service error body`)
    t.type(dup.json.error.message, 'string')
    t.type(dup.json.error.action, 'string')
  }

  const live = await openCall(t, server, headers, { app_id: app.id }, 'busy-1')
  await elicitationOn(live)
  t.equal((await server.app.repos.idempotency.get(key, Date.now()))?.status, 'running', 'recorded while it asks')
  await conflict('waiting for confirmation', 'running')

  // The dispatcher answers an id in flight with a JSON-RPC error; for a confirmed call the 409 comes first.
  const other = await post(server.mcpUrl, callTool('service_whoami', {}, 'busy-1'), headers)
  t.equal(other.status, 200, 'an unconfirmed tool with that id meets the dispatcher\'s own check')
  t.equal(other.json.error.code, -32600)
  const otherTool = await post(server.mcpUrl, callTool('service_env_unset', { app_id: app.id, name: 'RUNS_FILE' }, 'busy-1'), headers)
  t.equal(otherTool.status, 409, 'another confirmed tool with the same id: 409 too')
  t.match(otherTool.json.error.message, /already used in this session for a call of service_deployments_create/)

  await answer(t, server, headers, live)
  await live.waitFor(() => lines(messagesOf(live)).includes('waiting'), 5000, 'the run')
  await conflict('running', 'running')
  t.equal(messagesOf(live).filter(isElicitation).length, 1, 'asked once')

  files.open()
  await live.ended(5000)
  const response = messagesOf(live).find((m) => m.id === 'busy-1' && 'result' in m)
  t.equal(response.result.isError, false, 'the first call ends normally')
  t.strictSame((await retry(server, headers, { app_id: app.id }, 'busy-1')).result, response.result, 'then the id gets its result')
  t.equal(files.count(), 1, 'it ran once')
})

t.test('declined, timed out and cancelled calls are answered the same way again, without asking', async (t) => {
  // The wait for the confirmation is on a manual clock: it times out only when the test moves time.
  const ELICIT_MS = 10_000
  const clock = new ManualClock()
  const server = await start(t, { elicitationTimeoutMs: ELICIT_MS, clock })
  const files = workDir(t)
  const app = await seedApp(server, 'careful', 'counted', files)
  const { sessionId, headers } = await elicitingSession(server)
  const args = { app_id: app.id }
  /** The retry of `id` gets `result` again, and nobody is asked. */
  const sameOnRetry = async (id: string, result: unknown, what: string) => {
    const again = await retry(server, headers, args, id)
    t.strictSame(again.result, result, what)
    t.notOk(again.messages.some(isElicitation), 'not asked again')
  }
  /** The call `id`, with its confirmation answered by `ask`, ends with the tool error `code`; so does its retry. */
  const endsWith = async (id: string, code: string, ask: (live: LiveStream) => Promise<void>) => {
    const live = await openCall(t, server, headers, args, id)
    await ask(live)
    await live.ended(5000)
    const first = messagesOf(live).find((m) => m.id === id).result
    t.equal(toolError(first).code, code)
    await sameOnRetry(id, first, `the same ${code} result`)
  }

  // Declined.
  await endsWith('no-1', 'ELICITATION_DENIED', (live) => answer(t, server, headers, live, 'decline'))
  // Timed out: nobody answers.
  await endsWith('late-1', 'ELICITATION_TIMEOUT', async (live) => {
    await elicitationOn(live)
    await clock.advance(ELICIT_MS)
  })

  // Cancelled while asking: no response at all, and a retry is told it was cancelled.
  const gone = await openCall(t, server, headers, args, 'gone-1')
  await elicitationOn(gone)
  const cancel = await post(server.mcpUrl, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'gone-1', reason: 'changed my mind' } }, headers)
  t.equal(cancel.status, 202)
  await gone.ended(5000)
  t.strictSame(messagesOf(gone).filter((m) => m.id === 'gone-1'), [], 'no response for the cancelled call')
  const stored = await until(async () => {
    const r = await server.app.repos.idempotency.get(await keyOf(server, sessionId, 'gone-1'), Date.now())
    return r?.status === 'finished' ? r : undefined
  }, 3000, 'the cancelled call to be recorded')
  t.equal(toolError(stored.result).code, 'OPERATION_CANCELLED')
  await sameOnRetry('gone-1', stored.result, 'the retry gets OPERATION_CANCELLED')

  t.equal(files.count(), 0, 'nothing ever ran')
  t.equal(await confirmations(server), 3, 'one audited answer per call, none for the retries')
})

t.test('the identity is session, member, organization and the id as sent', async (t) => {
  const server = await start(t)
  const files = workDir(t)
  const app = await seedApp(server, 'ids', 'counted', files)
  const repos = server.app.repos
  const a = await elicitingSession(server)
  const args = { app_id: app.id }

  await confirmedCall(t, server, a.headers, args, 'k-1')
  t.equal(files.count(), 1)
  const b = await elicitingSession(server)
  const other = await confirmedCall(t, server, b.headers, args, 'k-1')
  t.ok(other.messages.some(isElicitation), 'the same id in another session is another call: asked')
  t.equal(files.count(), 2, 'and run')

  // Another member: its own session, its own calls.
  const admin = await createMember(server, { role: 'admin' })
  const c = await elicitingSession(server, admin.key)
  await confirmedCall(t, server, c.headers, args, 'k-1')
  t.equal(files.count(), 3)

  // 1 and "1" are different ids.
  await confirmedCall(t, server, a.headers, args, 1)
  await confirmedCall(t, server, a.headers, args, '1')
  t.equal(files.count(), 5, 'the number and the string each ran')
  t.notOk((await retry(server, a.headers, args, 1)).messages.some(isElicitation))
  t.equal(files.count(), 5)

  // Unconfirmed tools are not recorded; the id space is the same for both.
  const before = await repos.idempotency.count()
  const whoami = await post(server.mcpUrl, callTool('service_whoami', {}, 'k-2'), a.headers)
  t.equal(whoami.json.result.isError, false)
  t.equal(await repos.idempotency.count(), before, 'no record for an unconfirmed tool')
  await confirmedCall(t, server, a.headers, args, 'k-2')
  t.equal(files.count(), 6)

  // The key's membership and organization parts, at the repository.
  const now = Date.now()
  const key = await keyOf(server, a.sessionId, 'k-9')
  t.equal((await repos.idempotency.begin(key, TOOL, ORPHAN, now, now + 1000)).created, true)
  t.equal((await repos.idempotency.begin(key, TOOL, ORPHAN, now, now + 1000)).created, false, 'the same key is taken')
  t.equal((await repos.idempotency.begin({ ...key, membershipId: admin.membership.id }, TOOL, ORPHAN, now, now + 1000)).created, true, 'another member')
  t.equal((await repos.idempotency.begin({ ...key, organizationId: 'org_other' }, TOOL, ORPHAN, now, now + 1000)).created, true, 'another organization')
})

t.test('a restart during a run: the call is interrupted and its retry runs nothing', async (t) => {
  const dbPath = tempDatabase(t)
  const files = workDir(t)
  const first = await start(t, { dbPath })
  const app = await seedApp(first, 'restart', 'gated', files)
  const { sessionId, headers } = await elicitingSession(first)

  const live = await openCall(t, first, headers, { app_id: app.id }, 'r-1')
  await answer(t, first, headers, live)
  await live.waitFor(() => lines(messagesOf(live)).includes('waiting'), 5000, 'the run')
  // What a crash leaves: a call recorded running that no process will ever answer.
  const crashed = await keyOf(first, sessionId, 'crash-1')
  const now = Date.now()
  await first.app.repos.idempotency.begin(crashed, TOOL, ORPHAN, now, now + IDEMPOTENCY_TTL_MS)
  await first.app.repos.idempotency.markRunning(crashed, ORPHAN.claim, now)

  await first.close()
  await live.ended(3000)
  // A clean stop interrupts the run first, so the waiting call still gets its final answer on its stream.
  const answered = messagesOf(live).filter((m) => m.id === 'r-1')
  t.equal(answered.length, 1, 'the call cut by the shutdown is answered before its stream ends')
  t.match(toolError(answered[0]?.result).message, /was interrupted: the server stopped while it ran/, 'with the interrupted deployment')
  const db = new Database(dbPath, { readonly: true })
  const row = (id: string) => db.prepare('select status, result from idempotency_records where session_id = ? and request_id = ?').get(sessionId, JSON.stringify(id)) as { status: string; result: string | null }
  const cut = row('r-1')
  t.equal(cut.status, 'finished', 'the call ended (answered) before the server stopped')
  t.strictSame(JSON.parse(cut.result!), answered[0]?.result, 'its record holds the answer it got')
  t.equal(row('crash-1').status, 'running', 'the crashed one is left to the next start')
  db.close()

  const second = await start(t, { dbPath })
  const afterStart = await second.app.repos.idempotency.get(crashed, Date.now())
  t.equal(afterStart?.status, 'interrupted', 'marked interrupted at start')
  t.equal(afterStart?.result, null)

  // The session survived the restart; the retries are answered from the records.
  const retried = await retry(second, headers, { app_id: app.id }, 'r-1')
  t.strictSame(retried.result, JSON.parse(cut.result!), 'the interrupted deployment, named')
  t.equal(toolError(retried.result).code, 'OPERATION_FAILED')
  t.notOk(retried.messages.some(isElicitation), 'not asked again')
  const crash = await retry(second, headers, { app_id: app.id }, 'crash-1')
  const err = toolError(crash.result)
  t.equal(err.code, 'OPERATION_FAILED')
  t.match(err.message, /^The server stopped and restarted while this service_deployments_create call was in progress: the operation may or may not have completed\. Check its effect/)
  t.notOk(crash.messages.some(isElicitation), 'not asked again')
  t.equal(files.count(), 1, 'nothing ran again')

  // A new id is a new call.
  files.open()
  const fresh = await confirmedCall(t, second, headers, { app_id: app.id }, 'r-2')
  t.equal(fresh.result.isError, false)
  t.equal(files.count(), 2)
})

t.test('records are kept 24 hours after the call ended, then purged', async (t) => {
  const server = await start(t)
  const files = workDir(t)
  const app = await seedApp(server, 'old', 'counted', files)
  const repos = server.app.repos
  const { sessionId, headers } = await elicitingSession(server)
  const key = await keyOf(server, sessionId, 'p-1')

  await confirmedCall(t, server, headers, { app_id: app.id }, 'p-1')
  const record = (await repos.idempotency.get(key, Date.now()))!
  t.equal(record.status, 'finished')
  t.equal(record.expiresAt - record.updatedAt, IDEMPOTENCY_TTL_MS, 'expires 24 h after the call ended')
  t.ok(await repos.idempotency.get(key, record.expiresAt - 1), 'kept until then')
  t.equal(await repos.idempotency.get(key, record.expiresAt), undefined, 'ignored once expired, purged or not')

  // A call still running is never purged, however old.
  const live = { ...key, requestId: JSON.stringify('p-live') }
  await repos.idempotency.begin(live, TOOL, ORPHAN, Date.now(), Date.now() + 1)
  await repos.idempotency.markRunning(live, ORPHAN.claim, Date.now())

  t.equal(await repos.idempotency.purge(record.expiresAt - 1), 0, 'nothing has expired yet')
  t.equal(await repos.idempotency.purge(Date.now() + IDEMPOTENCY_TTL_MS + 60_000), 1, 'the sweep purges the expired record')
  t.equal(await repos.idempotency.get(key, Date.now()), undefined)
  t.equal((await repos.idempotency.get(live, Date.now() + 2 * IDEMPOTENCY_TTL_MS))?.status, 'running', 'the running one stays')

  // After expiry the id is new again.
  const again = await confirmedCall(t, server, headers, { app_id: app.id }, 'p-1')
  t.ok(again.messages.some(isElicitation), 'asked again')
  t.equal(files.count(), 2, 'and run again')

  // An expired record not yet purged is replaced by a new call with its id.
  const stale = { ...key, requestId: JSON.stringify('p-2') }
  await repos.idempotency.begin(stale, TOOL, ORPHAN, 1000, 2000)
  await repos.idempotency.finish(stale, ORPHAN.claim, { isError: false, content: [] }, 1000, 2000)
  t.equal((await repos.idempotency.begin(stale, TOOL, ORPHAN, Date.now(), Date.now() + 1000)).created, true, 'the expired record gave way')
  t.equal((await repos.idempotency.get(stale, Date.now()))?.status, 'pending')
})

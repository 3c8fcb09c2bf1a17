import { randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import t, { type Test } from 'tap'
import type { IdempotencyKey } from '../../src/db/repos/idempotency.js'
import { SecretBox } from '../../src/lib/secret-box.js'
import { IDEMPOTENCY_TTL_MS } from '../../src/plugins/tools/idempotency.js'
import type { RequestId } from '../../src/rpc/types.js'
import { answerAccepted, elicitingSession, isElicitation, openLiveCall, readToEnd } from '../helpers/confirm.js'
import { callTool, post } from '../helpers/mcp.js'
import { answerOf, confirmAnswer, ELICITING, modernCall } from '../helpers/modern.js'
import { answered, ask } from '../helpers/modern-runs.js'
import { defaultOrganization, ownerMembership } from '../helpers/seed.js'
import { startServer, tempDatabase, type TestServer } from '../helpers/server.js'
import { toolError } from '../helpers/tools.js'

/**
 * Confirmed calls whose idempotency record cannot be written (issue 10, item 11): a full disk, simulated by making the
 * repository's writes throw SQLite's SQLITE_FULL. A record its call no longer holds is never answered "still pending"
 * or "still running": the retry gets the call's outcome, or runs when nothing ran, and nothing runs twice. After a
 * restart, a call left pending reads "nothing ran" and one left running "may or may not have completed".
 */

const ENV_KEY = randomBytes(32).toString('base64')
const BOX = new SecretBox(Buffer.from(ENV_KEY, 'base64'))
const TOOL = 'service_deployments_create'
/** The holder of records a test writes itself: no process, and a claim no call of the server holds (a lost write). */
const ORPHAN = { owner: null, claim: 'orphan' }
/** Each run appends a line to RUNS_FILE: the count of runs. */
const PIPELINES = { counted: { argv: [process.execPath, '-e', "require('fs').appendFileSync(process.env.RUNS_FILE, 'run\\n'); console.log('ran')"] } }

function diskFull(): Error {
  return Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' })
}

async function start(t: Test, dbPath?: string): Promise<TestServer> {
  return startServer(t, { ...(dbPath ? { dbPath } : {}), config: { envKey: ENV_KEY, pipelines: PIPELINES, pipelineGraceMs: 200, heartbeatMs: 60_000, elicitationTimeoutMs: 3000 } })
}

function counter(t: Test): { file: string; count(): number } {
  const dir = mkdtempSync(join(tmpdir(), 'idempotency-faults-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'runs')
  return { file, count: () => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter((l) => l === 'run').length : 0) }
}

async function seedApp(server: TestServer, name: string, runsFile: string) {
  const repos = server.app.repos
  const organizationId = (await defaultOrganization(server)).id
  const app = await repos.apps.create({ organizationId, name, pipeline: 'counted' })
  await repos.envVars.set({ organizationId, appId: app.id, name: 'RUNS_FILE', ciphertext: BOX.seal(runsFile, `${app.id}\u0000RUNS_FILE`), userId: null })
  return app
}

async function keyOf(server: TestServer, sessionId: string, requestId: RequestId): Promise<IdempotencyKey> {
  const membership = await ownerMembership(server)
  return { sessionId, membershipId: membership.id, organizationId: membership.organizationId, requestId: JSON.stringify(requestId) }
}

type IdempotencyRepo = TestServer['app']['repos']['idempotency']

/** Makes the named writes of the idempotency repository fail as on a full disk, until the returned function is called. */
function failWrites(server: TestServer, names: Array<keyof IdempotencyRepo>): () => void {
  const repo = server.app.repos.idempotency
  const saved = names.map((name) => [name, repo[name]] as const)
  for (const name of names) (repo as any)[name] = async () => { throw diskFull() }
  return () => {
    for (const [name, fn] of saved) (repo as any)[name] = fn
  }
}

/** A confirmed call from start to end: asked, accepted, read to its answer. */
async function confirmedCall(t: Test, server: TestServer, headers: Record<string, string>, args: Record<string, unknown>, id: RequestId) {
  const live = await openLiveCall(t, server.mcpUrl, headers, callTool(TOOL, args, id))
  await answerAccepted(t, server.mcpUrl, headers, live)
  const { messages, responses: [response] } = await readToEnd(live, id, 10_000)
  return { response, messages }
}

/** A retry of `id` read to its end: its JSON-RPC answer (status 200) and every message; the HTTP status otherwise. */
async function retry(server: TestServer, headers: Record<string, string>, args: Record<string, unknown>, id: RequestId) {
  const reply = await post(server.mcpUrl, callTool(TOOL, args, id), headers)
  const messages: any[] = reply.json ? [reply.json] : reply.messages
  return { status: reply.status, reply, messages, response: messages.find((m) => m.id === id) }
}

t.test('a call whose record cannot be marked running does not run; once the disk recovers its id runs, once', async (t) => {
  const server = await start(t)
  const runs = counter(t)
  const app = await seedApp(server, 'full', runs.file)
  const { sessionId, headers } = await elicitingSession(server)
  const args = { app_id: app.id }

  const restore = failWrites(server, ['markRunning', 'release'])
  const failed = await retry(server, headers, args, 'full-1')
  t.equal(failed.status, 200, 'answered on the call\'s own stream')
  t.match(failed.response?.error, { data: { code: 'SERVICE_UNAVAILABLE' } }, 'a JSON-RPC error: the call could not be recorded')
  t.match(failed.response?.error?.message, /did not run: nothing was changed/)
  t.notOk(failed.messages.some(isElicitation), 'nobody was asked')
  t.equal(runs.count(), 0, 'nothing ran')
  t.equal((await server.app.repos.idempotency.get(await keyOf(server, sessionId, 'full-1'), Date.now()))?.status, 'pending', 'the record could not be released: it reads pending')

  // The attack of the issue: the retry used to get 409 "still pending" until a restart, although nothing ran.
  restore()
  const live = await openLiveCall(t, server.mcpUrl, headers, callTool(TOOL, args, 'full-1'))
  t.equal(live.status, 200, 'the retry is not refused 409 "still pending"')
  await answerAccepted(t, server.mcpUrl, headers, live)
  const { responses: [again] } = await readToEnd(live, 'full-1', 10_000)
  t.equal(again?.result?.isError, false, 'the retry ran and succeeded')
  t.equal(runs.count(), 1, 'it ran once')
  const replay = await retry(server, headers, args, 'full-1')
  t.strictSame(replay.response?.result, again.result, 'its result is stored and replayed')
  t.notOk(replay.messages.some(isElicitation), 'nobody is asked again')
  t.equal(runs.count(), 1, 'nothing ran twice')
})

t.test('a call whose final write fails answers its outcome to every retry, and the record is written once the disk recovers', async (t) => {
  const server = await start(t)
  const runs = counter(t)
  const app = await seedApp(server, 'unsaved', runs.file)
  const { sessionId, headers } = await elicitingSession(server)
  const args = { app_id: app.id }
  const key = await keyOf(server, sessionId, 'fin-1')

  const restore = failWrites(server, ['finish', 'interrupt'])
  const first = await confirmedCall(t, server, headers, args, 'fin-1')
  t.equal(first.response?.result?.isError, false, 'the call ran and succeeded')
  t.equal(runs.count(), 1)
  t.equal((await server.app.repos.idempotency.get(key, Date.now()))?.status, 'running', 'its result could not be written: the record reads running')

  const during = await retry(server, headers, args, 'fin-1')
  t.equal(during.status, 200, 'not 409 "still running"')
  t.strictSame(during.response?.result, first.response.result, 'the retry gets the call\'s result, from memory')
  t.notOk(during.messages.some(isElicitation), 'nobody is asked again')

  restore()
  const after = await retry(server, headers, args, 'fin-1')
  t.strictSame(after.response?.result, first.response.result, 'the same result once the disk recovered')
  const record = await server.app.repos.idempotency.get(key, Date.now())
  t.equal(record?.status, 'finished', 'and the record was written')
  t.strictSame(record?.result, first.response.result)
  t.equal(runs.count(), 1, 'nothing ran twice')
})

t.test('a call answered with a JSON-RPC error whose release cannot be written: its id is free', async (t) => {
  const server = await start(t)
  const runs = counter(t)
  const app = await seedApp(server, 'refused', runs.file)
  const args = { app_id: app.id }

  // A stateless confirmation (2026-07-28): round 1 asks; the retry carries the operation in its requestState.
  const { requestState } = await ask(t, server, server.apiKey, TOOL, args)
  const restore = failWrites(server, ['release'])
  // A malformed answer: the call is answered -32602 (nothing ran), and its record cannot be released.
  const refused = await modernCall(server.mcpUrl, server.apiKey, TOOL, args, { capabilities: ELICITING, id: 'bad-1', extra: answered(requestState, confirmAnswer('accept', 'yes please')) })
  t.equal(answerOf(refused, 'bad-1')?.error?.code, -32602, 'the call is answered with a JSON-RPC error')
  t.equal(runs.count(), 0)
  restore()

  const again = await modernCall(server.mcpUrl, server.apiKey, TOOL, args, { capabilities: ELICITING, id: 'good-1', extra: answered(requestState) })
  t.equal(again.status, 200, 'not 409 "still running"')
  t.equal(answerOf(again, 'good-1')?.result?.isError, false, 'the same operation runs')
  t.equal(runs.count(), 1, 'once')
})

t.test('a record no call of this process holds is never "still pending" or "still running"', async (t) => {
  const server = await start(t)
  const runs = counter(t)
  const app = await seedApp(server, 'orphan', runs.file)
  const { sessionId, headers } = await elicitingSession(server)
  const args = { app_id: app.id }
  const repo = server.app.repos.idempotency
  const now = Date.now()
  // What a lost write leaves behind: records that read pending and running, held by no call.
  await repo.begin(await keyOf(server, sessionId, 'left-pending'), TOOL, ORPHAN, now, now + IDEMPOTENCY_TTL_MS)
  await repo.begin(await keyOf(server, sessionId, 'left-running'), TOOL, ORPHAN, now, now + IDEMPOTENCY_TTL_MS)
  await repo.markRunning(await keyOf(server, sessionId, 'left-running'), ORPHAN.claim, now)

  const running = await retry(server, headers, args, 'left-running')
  t.equal(running.status, 200, 'not 409')
  const err = toolError(running.response?.result)
  t.equal(err.code, 'OPERATION_FAILED')
  t.match(err.message, /may or may not have completed/, 'a running record may have run')
  t.equal((await repo.get(await keyOf(server, sessionId, 'left-running'), Date.now()))?.status, 'interrupted', 'and is recorded so')
  t.equal(runs.count(), 0)

  const pending = await confirmedCall(t, server, headers, args, 'left-pending')
  t.equal(pending.response?.result?.isError, false, 'a pending record never ran: its id runs')
  t.equal(runs.count(), 1)
})

t.test('after a restart: a call left pending reads "nothing ran", one left running "may or may not have completed"', async (t) => {
  const dbPath = tempDatabase(t)
  const first = await start(t, dbPath)
  const runs = counter(t)
  const app = await seedApp(first, 'restart', runs.file)
  const { sessionId, headers } = await elicitingSession(first)
  const repo = first.app.repos.idempotency
  const now = Date.now()
  await repo.begin(await keyOf(first, sessionId, 'p-1'), TOOL, ORPHAN, now, now + IDEMPOTENCY_TTL_MS)
  await repo.begin(await keyOf(first, sessionId, 'r-1'), TOOL, ORPHAN, now, now + IDEMPOTENCY_TTL_MS)
  await repo.markRunning(await keyOf(first, sessionId, 'r-1'), ORPHAN.claim, now)
  await first.close()

  const second = await start(t, dbPath)
  const args = { app_id: app.id }
  const db = new Database(dbPath, { readonly: true })
  const stored = db.prepare('SELECT status, result FROM idempotency_records WHERE request_id = ?').get(JSON.stringify('p-1')) as { status: string; result: string }
  db.close()
  t.equal(stored.status, 'interrupted')
  t.match(JSON.parse(stored.result), { isError: true }, 'the pending call got a stored result at start')

  const pending = await retry(second, headers, args, 'p-1')
  const nothing = toolError(pending.response?.result)
  t.equal(nothing.code, 'OPERATION_FAILED')
  t.match(nothing.message, /^The server stopped before this service_deployments_create call started: nothing ran\./, 'nothing ran, says the answer')
  t.notMatch(nothing.message, /may or may not/)
  const running = await retry(second, headers, args, 'r-1')
  t.match(toolError(running.response?.result).message, /may or may not have completed/, 'a running one may have run')
  t.notOk([...pending.messages, ...running.messages].some(isElicitation), 'nobody is asked')
  t.equal(runs.count(), 0, 'nothing ran')
})

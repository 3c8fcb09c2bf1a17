/**
 * Confirmations on stateless 2026-07-28 requests (MRTR, docs/decisions/stateless-revision.md), over real sockets: round
 * 1 answers `input_required` with a sealed `requestState`, the client's retry (a new id, the same name and arguments,
 * the state echoed, the answer in `inputResponses`) runs the tool at most once. Tampered, foreign or re-bound states
 * are -32602 and nothing runs; database effects are read through server.app.repos.
 */
import t, { type Test } from 'tap'
import type { Config } from '../../src/config.js'
import { defineTool } from '../../src/index.js'
import { generateStateKey } from '../../src/mrtr/state-sealer.js'
import { builtinTools } from '../../src/plugins/tools/builtin/index.js'
import type { ToolDefinition } from '../../src/plugins/tools/define.js'
import { cli } from '../helpers/cli.js'
import { decision, elicitingSession, confirmCall, readToEnd } from '../helpers/confirm.js'
import { callTool, type RpcReply } from '../helpers/mcp.js'
import { answerOf, confirmAnswer, ELICITING, modernCall, type ModernOptions } from '../helpers/modern.js'
import { oauthTokens, tokenRequest } from '../helpers/oauth.js'
import { createKey, createMember, defaultOrganization, ownerMembership } from '../helpers/seed.js'
import { startServer, type TestServer } from '../helpers/server.js'
import { ManualClock } from '../helpers/clock.js'
import { sleep } from '../helpers/stream.js'

const PIPELINES = { default: { argv: [process.execPath, '-e', 'process.exit(0)'] } }
const DELETE = 'service_apps_delete'
const UNSET = 'service_env_unset'
const ACCEPT = confirmAnswer('accept', true)

let nextId = 1000
const rid = () => ++nextId

async function serve(t: Test, config: Partial<Config> = {}, tools: ToolDefinition<any, any>[] = builtinTools, clock?: ManualClock): Promise<TestServer> {
  return startServer(t, { tools, ...(clock ? { clock } : {}), config: { pipelines: PIPELINES, ...config } })
}

/** An app in the organization (default unless told) with `deployments` finished deployments. */
async function seedApp(server: TestServer, name: string, deployments = 0, organizationId?: string) {
  organizationId ??= (await defaultOrganization(server)).id
  const repos = server.app.repos
  const app = await repos.apps.create({ organizationId, name })
  for (let i = 0; i < deployments; i++) {
    const d = await repos.deployments.create({ organizationId, appId: app.id, kind: 'deploy', pipeline: 'default', createdBy: null })
    await repos.deployments.finish(d.id, 'succeeded', Date.now(), 0, 'exit 0')
  }
  return app
}

async function appExists(server: TestServer, appId: string, organizationId?: string): Promise<boolean> {
  organizationId ??= (await defaultOrganization(server)).id
  return (await server.app.repos.apps.byId(organizationId, appId)) !== undefined
}

async function appCount(server: TestServer): Promise<number> {
  return (await server.app.repos.apps.page((await defaultOrganization(server)).id, 100)).items.length
}

/** Audit entries of one action, oldest first. */
async function audited(server: TestServer, action: string, organizationId?: string) {
  organizationId ??= (await defaultOrganization(server)).id
  return (await server.app.repos.audit.page(organizationId, 500, undefined, action)).items.reverse()
}

async function auditCount(server: TestServer): Promise<number> {
  return server.app.repos.audit.count((await defaultOrganization(server)).id)
}

const deleteMessage = (app: { id: string; name: string }, n: number) => `Delete app ${app.name} (${app.id}) and its ${n} ${n === 1 ? 'deployment' : 'deployments'}?`

interface Answered {
  id: number | string
  reply: RpcReply
  answer: any
}

interface Asked {
  id: number
  reply: RpcReply
  result: any
  state: string
}

/** Round 1 of a confirmation-gated tool: checks the input_required shape; returns it with its requestState. */
async function ask(t: Test, server: TestServer, token: string, name: string, args: Record<string, unknown>, options: ModernOptions = {}): Promise<Asked> {
  const id = rid()
  const reply = await modernCall(server.mcpUrl, token, name, args, { capabilities: ELICITING, ...options, id })
  t.equal(reply.status, 200, `${name} round 1: HTTP 200`)
  const answer = answerOf(reply, id)
  t.equal(answer?.id, id, 'the answer echoes the request id')
  const result = answer?.result
  t.equal(result?.resultType, 'input_required', `${name} round 1: input_required`)
  t.type(result?.requestState, 'string', 'with a requestState')
  return { id, reply, result, state: result?.requestState }
}

/** The retry of round 1: a new id, the same name and arguments, the state echoed, `inputResponses` as given. */
function retry(server: TestServer, token: string, name: string, args: Record<string, unknown>, extra: Record<string, unknown>, options: ModernOptions = {}): Promise<Answered> {
  const id = options.id ?? rid()
  return modernCall(server.mcpUrl, token, name, args, { capabilities: ELICITING, ...options, id, extra }).then((reply) => ({ id, reply, answer: answerOf(reply, id) }))
}

function accepted(server: TestServer, token: string, name: string, args: Record<string, unknown>, state: string, options: ModernOptions = {}): Promise<Answered> {
  return retry(server, token, name, args, { requestState: state, inputResponses: { confirm: ACCEPT } }, options)
}

/** A complete, successful tool result on a 2026-07-28 answer; returns its structuredContent. */
function completeOk(t: Test, r: Answered, what: string): any {
  t.equal(r.reply.status, 200, `${what}: HTTP 200`)
  t.equal(r.answer?.id, r.id, `${what}: the id is echoed`)
  const result = r.answer?.result
  t.equal(result?.resultType, 'complete', `${what}: resultType complete`)
  t.equal(result?.isError, false, `${what}: not a tool failure`)
  t.strictSame(JSON.parse(result?.content?.[0]?.text ?? 'null'), result?.structuredContent, `${what}: structuredContent equals the text`)
  return result?.structuredContent
}

/** A complete tool failure with `code`. */
function completeFailure(t: Test, r: Answered, code: string, what: string): void {
  t.equal(r.reply.status, 200, `${what}: HTTP 200`)
  t.equal(r.answer?.id, r.id, `${what}: the id is echoed`)
  t.equal(r.answer?.result?.resultType, 'complete', `${what}: resultType complete`)
  t.equal(r.answer?.result?.isError, true, `${what}: a tool failure`)
  t.equal(JSON.parse(r.answer?.result?.content?.[0]?.text ?? '{}').code, code, `${what}: ${code}`)
}

/** A JSON-RPC error answer, never a result. */
function rpcError(t: Test, r: Answered, status: number, code: number, dataCode: string, what: string): any {
  t.equal(r.reply.status, status, `${what}: HTTP ${status}`)
  t.equal(r.answer?.jsonrpc, '2.0', `${what}: a JSON-RPC body`)
  t.equal(r.answer?.id, r.id, `${what}: the id is echoed`)
  t.notOk(r.answer && 'result' in r.answer, `${what}: no result`)
  t.equal(r.answer?.error?.code, code, `${what}: ${code}`)
  t.equal(r.answer?.error?.data?.code, dataCode, `${what}: data.code ${dataCode}`)
  return r.answer?.error
}

const badState = (t: Test, r: Answered, what: string) => rpcError(t, r, 200, -32602, 'INVALID_PARAMS', what)

t.test('round 1: input_required with one form elicitation and a sealed requestState; nothing changes yet', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'billing', 14)
  const before = await auditCount(server)
  const { reply, result, state } = await ask(t, server, server.apiKey, DELETE, { app_id: app.id })

  t.match(String(reply.headers['content-type']), /^application\/json/, 'a JSON answer: no notification was sent')
  t.equal(reply.headers['mcp-session-id'], undefined, 'no Mcp-Session-Id on a modern answer')
  t.strictSame(Object.keys(result).sort(), ['_meta', 'inputRequests', 'requestState', 'resultType'], 'exactly the input_required fields')
  t.equal(result._meta['io.modelcontextprotocol/serverInfo']?.name, 'service-mcp', 'serverInfo in _meta')
  t.notOk('ttlMs' in result || 'cacheScope' in result, 'an interim result carries no caching hint')
  t.strictSame(Object.keys(result.inputRequests), ['confirm'], 'one input request, keyed confirm')
  const confirm = result.inputRequests.confirm
  t.equal(confirm.method, 'elicitation/create')
  t.equal(confirm.params.mode, 'form')
  t.equal(confirm.params.message, `Delete app billing (${app.id}) and its 14 deployments?`, 'the message names the app and its deployment count')
  t.equal(confirm.params.message, deleteMessage(app, 14))
  t.equal(confirm.params.requestedSchema.type, 'object')
  t.strictSame(Object.keys(confirm.params.requestedSchema.properties), ['confirm'], 'one property')
  t.equal(confirm.params.requestedSchema.properties.confirm.type, 'boolean', 'a boolean confirm')
  t.strictSame(confirm.params.requestedSchema.required, ['confirm'])
  t.match(state, /^v1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/, 'an opaque sealed state')
  t.notMatch(state, new RegExp(app.id), 'the state does not show the arguments in clear')

  t.ok(await appExists(server, app.id), 'the app is still there')
  t.equal((await server.app.repos.deployments.list((await defaultOrganization(server)).id, { appId: app.id, limit: 100, offset: 0 })).total, 14, 'its deployments too')
  t.equal((await audited(server, `${DELETE}.confirmation`)).length, 0, 'no confirmation is audited before an answer')
  t.equal((await audited(server, DELETE)).length, 0, 'no write is audited')
  t.equal(await auditCount(server), before, 'nothing was audited')

  const again = await ask(t, server, server.apiKey, DELETE, { app_id: app.id })
  t.not(again.state, state, 'another round 1 gets another state (another operation)')
  t.not((await server.app.requestStates.open(again.state))?.op, (await server.app.requestStates.open(state))?.op, 'naming another operation')
})

t.test('accept: the retry deletes the app once; the confirmation and the write are audited', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'billing', 2)
  const keep = await seedApp(server, 'keep')
  const owner = await ownerMembership(server)
  const args = { app_id: app.id }
  const round1 = await ask(t, server, server.apiKey, DELETE, args)
  const r = await accepted(server, server.apiKey, DELETE, args, round1.state)
  t.not(r.id, round1.id, 'the retry has a new id')
  const data = completeOk(t, r, 'accepted retry')
  t.strictSame(data, { deleted: true, app_id: app.id, name: 'billing', deployments_deleted: 2 }, 'the structured result names what was deleted')
  t.equal(r.answer.result._meta?.['io.modelcontextprotocol/serverInfo']?.name, 'service-mcp')
  t.notOk(await appExists(server, app.id), 'the app is gone')
  t.equal((await server.app.repos.deployments.list((await defaultOrganization(server)).id, { appId: app.id, limit: 100, offset: 0 })).total, 0, 'with its deployments')
  t.ok(await appExists(server, keep.id), 'the other app is untouched')

  const confirmations = await audited(server, `${DELETE}.confirmation`)
  t.equal(confirmations.length, 1, 'one confirmation entry')
  const c = confirmations[0]!
  t.equal(c.outcome, 'confirmed')
  t.equal(c.membershipId, owner.id, 'by the owner')
  t.equal(c.credentialKind, 'api_key')
  t.equal(c.details?.message, deleteMessage(app, 2), 'with the message the user saw')
  t.equal(c.details?.request_id, r.id, 'and the id of the retry')
  t.type(c.details?.operation_id, 'string', 'and the operation id')
  t.equal(c.details?.operation_id, (await server.app.requestStates.open(round1.state))?.op, 'the operation of the state')

  const writes = await audited(server, DELETE)
  t.equal(writes.length, 1, 'one write entry')
  const w = writes[0]!
  t.equal(w.outcome, 'succeeded')
  t.equal(w.targetType, 'app')
  t.equal(w.targetId, app.id)
  t.equal(w.membershipId, owner.id)
  t.equal(w.details?.request_id, r.id, 'the write names the retry id')
  t.equal(w.details?.operation_id, c.details?.operation_id, 'the write names the same operation as its confirmation')
})

t.test('decline, cancel, and accept with confirm: false → ELICITATION_DENIED, the app stays, audited declined', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'billing', 1)
  const args = { app_id: app.id }
  const answers: Array<[string, Record<string, unknown>]> = [
    ['decline', confirmAnswer('decline')],
    ['cancel', confirmAnswer('cancel')],
    ['accept + confirm false', confirmAnswer('accept', false)],
  ]
  for (const [what, answer] of answers) {
    const { state } = await ask(t, server, server.apiKey, DELETE, args)
    const r = await retry(server, server.apiKey, DELETE, args, { requestState: state, inputResponses: { confirm: answer } })
    completeFailure(t, r, 'ELICITATION_DENIED', what)
    t.ok(await appExists(server, app.id), `${what}: the app is still there`)
    // The operation has finished (declined): an accept with the same state afterwards gets the stored refusal.
    const late = await accepted(server, server.apiKey, DELETE, args, state)
    t.strictSame(late.answer?.result, r.answer.result, `${what}: a later accept of the same state gets the stored refusal`)
    t.ok(await appExists(server, app.id), `${what}: and the app is still there`)
  }
  const entries = await audited(server, `${DELETE}.confirmation`)
  t.strictSame(entries.map((e) => e.outcome), ['declined', 'declined', 'declined'], 'three declined confirmations')
  t.strictSame(entries.map((e) => e.details?.action), ['decline', 'cancel', 'accept'], 'naming the action')
  t.equal(entries[2]!.details?.confirm, false, 'and confirm false')
  t.equal((await audited(server, DELETE)).length, 0, 'no write was audited')
})

// The deadline sealed into the state is the server's clock's (docs/decisions/clock.md): moved here to it exactly.
t.test('expiry: a retry after elicitationTimeoutMs → ELICITATION_TIMEOUT, nothing deleted, audited timed_out', async (t) => {
  const ELICIT_MS = 600_000
  const clock = new ManualClock()
  const server = await serve(t, { elicitationTimeoutMs: ELICIT_MS }, builtinTools, clock)
  const app = await seedApp(server, 'billing')
  const args = { app_id: app.id }
  const { state } = await ask(t, server, server.apiKey, DELETE, args)
  await clock.advance(ELICIT_MS)
  const late = await accepted(server, server.apiKey, DELETE, args, state)
  completeFailure(t, late, 'ELICITATION_TIMEOUT', 'late accept')
  t.ok(await appExists(server, app.id), 'the app is still there')
  t.strictSame((await accepted(server, server.apiKey, DELETE, args, state)).answer?.result, late.answer.result, 'a replay gets the stored timeout')
  const entries = await audited(server, `${DELETE}.confirmation`)
  t.strictSame(entries.map((e) => e.outcome), ['timed_out'], 'audited timed_out')
  t.equal((await audited(server, DELETE)).length, 0, 'no write')
})

t.test('tampered, altered, foreign and forged states → 200 -32602; nothing runs; the genuine state still works', async (t) => {
  const server = await serve(t)
  const other = await serve(t)
  const app = await seedApp(server, 'billing')
  const args = { app_id: app.id }
  const { state } = await ask(t, server, server.apiKey, DELETE, args)

  const mid = state.lastIndexOf('.') + Math.floor((state.length - state.lastIndexOf('.')) / 2)
  const flipped = state.slice(0, mid) + (state[mid] === 'A' ? 'B' : 'A') + state.slice(mid + 1)
  t.not(flipped, state)
  const foreignApp = await seedApp(other, 'billing')
  const foreign = (await ask(t, other, other.apiKey, DELETE, { app_id: foreignApp.id })).state
  t.equal(await server.app.requestStates.open(foreign), null, 'another server (another database) has another key: its state does not open here')
  const cases: Array<[string, unknown]> = [
    ['-TAMPERED appended', `${state}-TAMPERED`],
    ['one character changed in the middle', flipped],
    ['a state of another server instance', foreign],
    ['a forged v1.x.y.z', 'v1.x.y.z'],
    ['the state with its key id replaced', state.replace(/^v1\.[^.]+\./, 'v1.AAAAAAAAAAAA.')],
    ['a state that is not a string', 12345],
  ]
  for (const [what, requestState] of cases) {
    const r = await retry(server, server.apiKey, DELETE, args, { requestState, inputResponses: { confirm: ACCEPT } })
    badState(t, r, what)
  }
  t.ok(await appExists(server, app.id), 'the app is still there')
  t.equal((await audited(server, `${DELETE}.confirmation`)).length, 0, 'no confirmation was audited')
  t.ok(await appExists(other, foreignApp.id), 'the other server\'s app is untouched')

  completeOk(t, await accepted(server, server.apiKey, DELETE, args, state), 'the genuine state afterwards')
  t.notOk(await appExists(server, app.id), 'the refusals did not burn the state')
})

t.test('binding: another member, another key of the same user, another organization, tool or arguments → -32602', async (t) => {
  const server = await serve(t)
  const repos = server.app.repos
  const app = await seedApp(server, 'billing')
  const sibling = await seedApp(server, 'sibling')
  const args = { app_id: app.id }
  const { state } = await ask(t, server, server.apiKey, DELETE, args)

  const colleague = await createMember(server, { role: 'owner' })
  const ownKey = (await createKey(server, (await ownerMembership(server)).id)).key
  const org2 = await repos.organizations.create({ slug: 'elsewhere', name: 'Elsewhere' })
  // The owner's own user in another organization, and a stranger there.
  const ownerElsewhere = await repos.memberships.upsert({ userId: (await ownerMembership(server)).userId, organizationId: org2.id, role: 'owner' })
  const ownerElsewhereKey = (await createKey(server, ownerElsewhere.id)).key
  const stranger = await createMember(server, { role: 'owner', organizationId: org2.id })

  const refusals: Array<[string, string, string, Record<string, unknown>]> = [
    ['another member of the organization (same role)', colleague.key, DELETE, args],
    ['another API key of the same user (credential binding)', ownKey, DELETE, args],
    ['the same user in another organization', ownerElsewhereKey, DELETE, args],
    ['a member of another organization', stranger.key, DELETE, args],
    ['another tool (service_env_unset, same arguments)', server.apiKey, UNSET, args],
    ['other arguments (another app id)', server.apiKey, DELETE, { app_id: sibling.id }],
    ['other arguments (an extra argument)', server.apiKey, DELETE, { ...args, force: true }],
  ]
  for (const [what, token, tool, a] of refusals) {
    const r = await accepted(server, token, tool, a, state)
    badState(t, r, what)
  }
  t.ok(await appExists(server, app.id), 'the app is still there')
  t.ok(await appExists(server, sibling.id), 'the sibling too')
  t.equal((await audited(server, `${DELETE}.confirmation`)).length, 0, 'no confirmation was audited')
  t.equal((await audited(server, `${UNSET}.confirmation`)).length, 0)
  t.equal((await audited(server, `${DELETE}.confirmation`, org2.id)).length, 0, 'nor in the other organization')

  completeOk(t, await accepted(server, server.apiKey, DELETE, args, state), 'the rightful retry')
  t.notOk(await appExists(server, app.id))
  t.ok(await appExists(server, sibling.id), 'only the confirmed app was deleted')

  // Arguments in another order are the same arguments (canonical digest): accepted.
  const env = await seedApp(server, 'envs')
  await repos.envVars.set({ organizationId: (await defaultOrganization(server)).id, appId: env.id, name: 'DATABASE_URL', ciphertext: 'opaque', userId: null })
  const round1 = await ask(t, server, server.apiKey, UNSET, { app_id: env.id, name: 'DATABASE_URL' })
  t.equal(round1.result.inputRequests.confirm.params.message, `Remove env var DATABASE_URL from app envs (${env.id})?`)
  const reordered = await accepted(server, server.apiKey, UNSET, { name: 'DATABASE_URL', app_id: env.id }, round1.state)
  t.strictSame(completeOk(t, reordered, 'arguments re-ordered'), { app_id: env.id, name: 'DATABASE_URL', removed: true })
  t.notOk(await repos.envVars.exists((await defaultOrganization(server)).id, env.id, 'DATABASE_URL'), 'the env var was removed')
})

t.test('at most once: a replay after the run gets the stored result; a later decline does not change it', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'billing', 1)
  await seedApp(server, 'keep')
  const args = { app_id: app.id }
  const { state } = await ask(t, server, server.apiKey, DELETE, args)
  const first = await accepted(server, server.apiKey, DELETE, args, state)
  completeOk(t, first, 'first accept')
  const apps = await appCount(server)
  const entries = await auditCount(server)

  const replay = await accepted(server, server.apiKey, DELETE, args, state)
  completeOk(t, replay, 'replay')
  t.strictSame(replay.answer.result, first.answer.result, 'the identical stored result')
  const declined = await retry(server, server.apiKey, DELETE, args, { requestState: state, inputResponses: { confirm: confirmAnswer('decline') } })
  t.strictSame(declined.answer?.result, first.answer.result, 'a decline after the accept still gets the stored (accept) result')
  t.equal(await appCount(server), apps, 'nothing ran again')
  t.equal(await auditCount(server), entries, 'no new audit entry')
  t.equal((await audited(server, `${DELETE}.confirmation`)).length, 1)
  t.equal((await audited(server, DELETE)).length, 1)
})

/** A confirmation-gated tool whose run waits, after its confirmation, until the test releases it. */
function slowConfirmTool() {
  const runs = new Map<string, number>()
  let release: () => void = () => {}
  let gate = Promise.resolve()
  const tool = defineTool<{ label: string }, { label: string; run: number }>({
    name: 'test_slow_confirm',
    title: 'Slow confirmed write',
    description: 'Asks, then waits for the test.',
    inputSchema: { type: 'object', properties: { label: { type: 'string' } }, required: ['label'], additionalProperties: false },
    outputSchema: { type: 'object', properties: { label: { type: 'string' }, run: { type: 'number' } }, required: ['label', 'run'] },
    scope: 'mcp:write',
    role: 'developer',
    confirm: true,
    async handler(args, ctx) {
      await ctx.confirm(`Run ${args.label}?`)
      const run = (runs.get(args.label) ?? 0) + 1
      runs.set(args.label, run)
      await gate
      return { label: args.label, run }
    },
  })
  return {
    tool,
    runs: (label: string) => runs.get(label) ?? 0,
    hold() {
      gate = new Promise<void>((resolve) => (release = resolve))
    },
    release: () => release(),
  }
}

async function until(check: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(5)
  }
}

function conflict(t: Test, reply: RpcReply, what: string): void {
  t.equal(reply.status, 409, `${what}: HTTP 409`)
  t.match(String(reply.headers['content-type']), /^application\/json/, `${what}: JSON`)
  t.equal(reply.json?.error?.code, 'IDEMPOTENCY_CONFLICT', `${what}: IDEMPOTENCY_CONFLICT`)
  t.strictSame(Object.keys(reply.json?.error ?? {}).sort(), ['action', 'code', 'details', 'message'], `${what}: the service error body`)
  t.notOk('jsonrpc' in (reply.json ?? {}), `${what}: not a JSON-RPC body`)
}

t.test('at most once while running: a replay → 409; two identical retries at once → one run', async (t) => {
  const slow = slowConfirmTool()
  const server = await serve(t, {}, [...builtinTools, slow.tool])
  const SLOW = slow.tool.name

  t.test('a replay while the first run is running → 409 IDEMPOTENCY_CONFLICT, then the stored result', async (t) => {
    const args = { label: 'a' }
    const { state } = await ask(t, server, server.apiKey, SLOW, args)
    slow.hold()
    const running = accepted(server, server.apiKey, SLOW, args, state)
    await until(() => slow.runs('a') === 1, 'the first run')
    conflict(t, (await accepted(server, server.apiKey, SLOW, args, state)).reply, 'replay while running')
    conflict(t, (await retry(server, server.apiKey, SLOW, args, { requestState: state, inputResponses: { confirm: confirmAnswer('decline') } })).reply, 'a decline while running')
    slow.release()
    const first = await running
    t.strictSame(completeOk(t, first, 'the first run'), { label: 'a', run: 1 })
    const after = await accepted(server, server.apiKey, SLOW, args, state)
    t.strictSame(after.answer?.result, first.answer.result, 'afterwards: the stored result')
    t.equal(slow.runs('a'), 1, 'the tool ran once')
    t.equal((await audited(server, `${SLOW}.confirmation`)).filter((e) => e.outcome === 'confirmed').length, 1, 'one confirmation audited')
  })

  t.test('two identical accepted retries at once → exactly one run', async (t) => {
    const args = { label: 'b' }
    const { state } = await ask(t, server, server.apiKey, SLOW, args)
    const confirmedBefore = (await audited(server, `${SLOW}.confirmation`)).length
    slow.hold()
    const both = Promise.all([accepted(server, server.apiKey, SLOW, args, state), accepted(server, server.apiKey, SLOW, args, state)])
    await until(() => slow.runs('b') >= 1, 'a run')
    await sleep(100)
    slow.release()
    const results = await both
    t.equal(slow.runs('b'), 1, 'exactly one run')
    const winners = results.filter((r) => r.reply.status === 200 && r.answer?.result?.resultType === 'complete')
    t.ok(winners.length >= 1, 'one retry got the result')
    const winner = winners[0]!
    t.strictSame(completeOk(t, winner, 'the run'), { label: 'b', run: 1 })
    for (const r of results) {
      if (r === winner) continue
      if (r.reply.status === 409) conflict(t, r.reply, 'the other retry')
      else t.strictSame(r.answer?.result, winner.answer.result, 'the other retry: the stored result')
    }
    const replays = await Promise.all([accepted(server, server.apiKey, SLOW, args, state), accepted(server, server.apiKey, SLOW, args, state)])
    for (const r of replays) t.strictSame(r.answer?.result, winner.answer.result, 'a further replay: the stored result')
    t.equal(slow.runs('b'), 1, 'still one run')
    t.equal((await audited(server, `${SLOW}.confirmation`)).length - confirmedBefore, 1, 'one confirmation audited')
  })
})

t.test('capability: elicitation must be declared in this request', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'billing')
  const args = { app_id: app.id }
  const audits = await auditCount(server)
  for (const [what, capabilities] of [['no capabilities', {}], ['url mode only', { elicitation: { url: {} } }], ['sampling only', { sampling: {} }]] as const) {
    const id = rid()
    const reply = await modernCall(server.mcpUrl, server.apiKey, DELETE, args, { capabilities, id })
    const error = rpcError(t, { reply, answer: answerOf(reply, id), id }, 400, -32021, 'MISSING_CLIENT_CAPABILITY', what)
    t.strictSame(error?.data?.requiredCapabilities, { elicitation: {} }, `${what}: data.requiredCapabilities`)
  }
  const form = await ask(t, server, server.apiKey, DELETE, args, { capabilities: { elicitation: { form: {} } } })
  t.equal(form.result.inputRequests.confirm.params.mode, 'form', 'elicitation.form is enough')
  const both = await ask(t, server, server.apiKey, DELETE, args, { capabilities: { elicitation: { form: {}, url: {} } } })
  t.equal(both.result.inputRequests.confirm.params.mode, 'form', 'form and url: a form')
  t.ok(await appExists(server, app.id), 'nothing was deleted')
  t.equal(await auditCount(server), audits, 'nothing was audited')
})

t.test('missing answer: a new input_required for the same operation; the old state then names the finished operation', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'billing', 3)
  const args = { app_id: app.id }
  const round1 = await ask(t, server, server.apiKey, DELETE, args)
  const sealer = server.app.requestStates
  const op = (await sealer.open(round1.state))?.op
  t.type(op, 'string')

  let latest = round1.state
  for (const [what, inputResponses] of [['inputResponses {}', {}], ['an unknown key only', { other: ACCEPT }]] as const) {
    const r = await retry(server, server.apiKey, DELETE, args, { requestState: latest, inputResponses })
    t.equal(r.reply.status, 200, `${what}: HTTP 200`)
    const result = r.answer?.result
    t.equal(result?.resultType, 'input_required', `${what}: asked again`)
    t.equal(result?.inputRequests?.confirm?.params?.message, deleteMessage(app, 3), `${what}: the same question`)
    t.type(result?.requestState, 'string')
    t.not(result?.requestState, latest, `${what}: a new state`)
    t.equal((await sealer.open(result?.requestState))?.op, op, `${what}: for the same operation`)
    t.equal((await sealer.open(result?.requestState))?.exp, (await sealer.open(round1.state))?.exp, `${what}: with the same deadline`)
    latest = result?.requestState
  }
  t.ok(await appExists(server, app.id), 'nothing ran yet')
  t.equal((await audited(server, `${DELETE}.confirmation`)).length, 0, 'no answer, nothing audited')

  const run = await accepted(server, server.apiKey, DELETE, args, latest)
  completeOk(t, run, 'accept with the new state')
  t.notOk(await appExists(server, app.id), 'deleted')
  const old = await accepted(server, server.apiKey, DELETE, args, round1.state)
  t.strictSame(old.answer?.result, run.answer.result, 'the older state names the same operation: the stored result')
  t.equal((await audited(server, `${DELETE}.confirmation`)).length, 1, 'one confirmation')
  t.equal((await audited(server, DELETE)).length, 1, 'one write')
})

t.test('junk answers → 200 -32602, nothing runs; unknown keys beside a valid accept are ignored', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'billing')
  const args = { app_id: app.id }
  const { state } = await ask(t, server, server.apiKey, DELETE, args)
  const junk: Array<[string, unknown]> = [
    ['confirm: 12345', { confirm: 12345 }],
    ['confirm: {action: "maybe"}', { confirm: { action: 'maybe' } }],
    ['accept without content', { confirm: { action: 'accept' } }],
    ['accept with confirm "yes"', { confirm: { action: 'accept', content: { confirm: 'yes' } } }],
    ['inputResponses: null', null],
    ['inputResponses: an array', [ACCEPT]],
  ]
  for (const [what, inputResponses] of junk) {
    const r = await retry(server, server.apiKey, DELETE, args, { requestState: state, inputResponses })
    rpcError(t, r, 200, -32602, 'INVALID_PARAMS', what)
  }
  t.ok(await appExists(server, app.id), 'nothing ran')
  t.equal((await audited(server, `${DELETE}.confirmation`)).length, 0, 'no confirmation audited')

  const r = await retry(server, server.apiKey, DELETE, args, { requestState: state, inputResponses: { confirm: ACCEPT, unrelated: 42, note: { action: 'decline' } } })
  completeOk(t, r, 'a valid accept beside unknown keys')
  t.notOk(await appExists(server, app.id), 'deleted')
})

t.test('inputResponses without a requestState are not trusted: a fresh round 1', async (t) => {
  const server = await serve(t)
  const app = await seedApp(server, 'billing')
  const id = rid()
  const reply = await modernCall(server.mcpUrl, server.apiKey, DELETE, { app_id: app.id }, { capabilities: ELICITING, id, extra: { inputResponses: { confirm: ACCEPT } } })
  t.equal(reply.status, 200)
  const result = answerOf(reply, id)?.result
  t.equal(result?.resultType, 'input_required', 'asked, as if nothing had been answered')
  t.type(result?.requestState, 'string')
  t.ok(await appExists(server, app.id), 'nothing ran')
  t.equal((await audited(server, `${DELETE}.confirmation`)).length, 0)
})

t.test('key rotation: states sealed before a rotation (API or CLI) still open; new ones use the new key', async (t) => {
  const server = await serve(t)
  const repos = server.app.repos
  const kidOf = (state: string) => state.split('.')[1]
  const [a, b, c] = [await seedApp(server, 'a'), await seedApp(server, 'b'), await seedApp(server, 'c')]

  const before = await ask(t, server, server.apiKey, DELETE, { app_id: a.id })
  const key = generateStateKey()
  await repos.requestStateKeys.rotate(key)
  t.equal((await repos.requestStateKeys.current())?.kid, key.kid, 'the new key seals')
  const after = await ask(t, server, server.apiKey, DELETE, { app_id: b.id })
  t.equal(kidOf(after.state), key.kid, 'a new state names the new key')
  t.not(kidOf(before.state), key.kid)
  completeOk(t, await accepted(server, server.apiKey, DELETE, { app_id: a.id }, before.state), 'a state sealed before the rotation')
  t.notOk(await appExists(server, a.id))

  const env = server.cliEnv
  const rotated = await cli(['state-keys', 'rotate'], env)
  t.equal(rotated.code, 0, rotated.stderr)
  const cliKid = /new requestState key (\S+);/.exec(rotated.stdout)?.[1]
  t.ok(cliKid, 'the CLI prints the new key id')
  const list = await cli(['state-keys', 'list'], env)
  t.equal(list.code, 0, list.stderr)
  const rows = list.stdout.trim().split('\n').map((l) => l.trim().split(/\s+/))
  t.strictSame(rows[0], ['kid', 'created', 'retired', 'state'], 'the header')
  const row = (kid: string) => rows.find((r) => r[0] === kid)
  t.equal(row(cliKid!)?.at(-1), 'sealing', 'the CLI\'s key seals')
  t.equal(row(key.kid)?.at(-1), 'opening', 'the previous key still opens')
  t.equal(row(kidOf(before.state)!)?.at(-1), 'opening', 'the first key too')
  t.equal(rows.length - 1, 3, 'three keys')

  completeOk(t, await accepted(server, server.apiKey, DELETE, { app_id: b.id }, after.state), 'a state sealed before the CLI rotation')
  t.notOk(await appExists(server, b.id))
  const fresh = await ask(t, server, server.apiKey, DELETE, { app_id: c.id })
  t.equal(kidOf(fresh.state), cliKid, 'the server seals with the key the CLI made')
  completeOk(t, await accepted(server, server.apiKey, DELETE, { app_id: c.id }, fresh.state), 'and opens it')
  t.notOk(await appExists(server, c.id))
})

t.test('OAuth: the state is bound to the grant (a refreshed token works), not to an API key of the same member', async (t) => {
  const server = await serve(t)
  const [a, b, c] = [await seedApp(server, 'a'), await seedApp(server, 'b'), await seedApp(server, 'c')]
  const { client, tokens } = await oauthTokens(server)
  const tokenA = tokens.access_token

  const round1 = await ask(t, server, tokenA, DELETE, { app_id: a.id })
  const refreshed = await tokenRequest(server, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: client.client_id })
  t.equal(refreshed.status, 200, 'refreshed')
  const tokenB = refreshed.json.access_token as string
  t.not(tokenB, tokenA, 'a new access token')
  const r = await accepted(server, tokenB, DELETE, { app_id: a.id }, round1.state)
  completeOk(t, r, 'round 2 with the refreshed token')
  t.notOk(await appExists(server, a.id), 'deleted once')
  const entries = await audited(server, `${DELETE}.confirmation`)
  t.equal(entries.length, 1)
  t.equal(entries[0]!.credentialKind, 'oauth', 'confirmed with the OAuth credential')
  t.equal(entries[0]!.clientId, client.client_id)
  t.strictSame((await accepted(server, tokenA, DELETE, { app_id: a.id }, round1.state)).answer?.result, r.answer.result, 'a replay with token A: the stored result')

  const byKey = await ask(t, server, server.apiKey, DELETE, { app_id: b.id })
  badState(t, await accepted(server, tokenB, DELETE, { app_id: b.id }, byKey.state), 'an API key\'s state replayed with an OAuth token of the same member')
  t.ok(await appExists(server, b.id), 'nothing ran')
  const byToken = await ask(t, server, tokenB, DELETE, { app_id: c.id })
  badState(t, await accepted(server, server.apiKey, DELETE, { app_id: c.id }, byToken.state), 'an OAuth state replayed with the member\'s API key')
  t.ok(await appExists(server, c.id), 'nothing ran')
  const other = await oauthTokens(server)
  badState(t, await accepted(server, other.tokens.access_token, DELETE, { app_id: c.id }, byToken.state), 'an OAuth state replayed with a token of another grant')
  t.ok(await appExists(server, c.id), 'nothing ran')
})

t.test('the two eras side by side: the same tool confirms by elicitation/create in a 2025-11-25 session', async (t) => {
  const server = await serve(t)
  const legacyApp = await seedApp(server, 'legacy', 1)
  const modernApp = await seedApp(server, 'modern', 1)
  const { headers } = await elicitingSession(server)
  const pending = await ask(t, server, server.apiKey, DELETE, { app_id: modernApp.id })

  const id = rid()
  const { live, request, reply } = await confirmCall(t, server.mcpUrl, headers, callTool(DELETE, { app_id: legacyApp.id }, id), decision())
  t.equal(reply.status, 202, 'the session answer is accepted')
  t.equal(request.method, 'elicitation/create', 'the session is asked with a server request')
  t.equal(request.params.message, deleteMessage(legacyApp, 1))
  t.strictSame(request.params.requestedSchema, pending.result.inputRequests.confirm.params.requestedSchema, 'the same form in both eras')
  const { responses } = await readToEnd(live, id)
  t.equal(responses.length, 1)
  t.equal(responses[0]?.result?.isError, false, 'deleted in the session')
  t.notOk('resultType' in (responses[0]?.result ?? {}), 'a legacy result has no resultType')
  t.notOk(await appExists(server, legacyApp.id))

  t.ok(await appExists(server, modernApp.id), 'the modern round 1 waits, nothing ran')
  completeOk(t, await accepted(server, server.apiKey, DELETE, { app_id: modernApp.id }, pending.state), 'the modern retry')
  t.notOk(await appExists(server, modernApp.id))
  t.strictSame((await audited(server, `${DELETE}.confirmation`)).map((e) => e.outcome), ['confirmed', 'confirmed'], 'both confirmations audited')
})

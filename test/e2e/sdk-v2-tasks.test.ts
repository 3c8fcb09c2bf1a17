/**
 * Tasks that ask (docs/decisions/tasks.md), driven by the official MCP TypeScript SDK v2 client
 * (`@modelcontextprotocol/client` 2.4.0) on revision 2026-07-28 over real sockets, with a SQLite file database so a
 * restart keeps the rows: a form question answered accept; a confirmation declined; two questions at once answered one
 * at a time; a waiting task cancelled; a waiting task whose server stopped (cleanly, or killed) ended interrupted at
 * the next start.
 *
 * What the SDK offers, and what it does not (2.4.0, dist/src-CeKsbNLO.mjs unless said):
 * - No runtime for the tasks extension: its typed method surface leaves the task methods out (index-BCNZS4Ap.d.mts
 *   l. 767-776), and callTool() rejects a `resultType: "task"` answer with SdkError UNSUPPORTED_RESULT_TYPE without
 *   the task id (l. 3991-3996). The handle is read off the wire here (the test's fetch), as in sdk-v2-client.test.ts.
 * - Its task wire types are the 2025-11-25 ones (`ttl`, `pollInterval`; no `inputRequests`): specTypeSchemas.GetTaskResult
 *   refuses a 2026-07-28 task, so views are parsed with the test's own loose schema, their parts with the SDK's
 *   (TaskStatus, ElicitRequest, ElicitResult, CallToolResult).
 * - tasks/get, tasks/update and tasks/cancel go through its generic `client.request(..., schema)`: it lets tasks/get
 *   and tasks/cancel through on a 2026-07-28 connection as methods the extension reuses (l. 4097, 6082), sends
 *   tasks/update as an extension method, and sets Mcp-Name to the task id on all three (l. 4710-4717).
 * - It has no API that hands a task's `inputRequests` to its registered elicitation handler: its input_required
 *   driver (runInputRequiredFlow, l. 6544, called from Client._resolveNonCompleteResult in dist/public-CvV4ZHkX.mjs
 *   l. 2826) only fulfils a request's own input_required result and is not exported. The test's `decide` answers them
 *   and tasks/update carries the answers.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import {
  Client,
  ProtocolError,
  SdkError,
  SdkErrorCode,
  StreamableHTTPClientTransport,
  isSpecType,
  type ElicitRequest,
  type ElicitResult,
  type FetchLike,
} from '@modelcontextprotocol/client'
import t, { type Test } from 'tap'
import { z } from 'zod'
import { TASKS_EXTENSION } from '../helpers/modern.js'
import { defaultOrganization } from '../helpers/seed.js'
import { OWNER_KEY, startServer, tempDatabase, type TestServer } from '../helpers/server.js'
import { askName, confirmInTask, twoAtOnce } from '../helpers/task-tools.js'
import { sleep } from '../helpers/stream.js'

const MODERN = '2026-07-28'
const TOOLS = [askName, confirmInTask, twoAtOnce]
/** A safety net only: every wait below ends on the task's status. */
const DEADLINE_MS = 10_000

function serve(t: Test, dbPath?: string): Promise<TestServer> {
  // pipelineGraceMs bounds how long a clean stop waits for live tasks (a task waiting for input never ends by itself).
  return startServer(t, { tools: TOOLS, ...(dbPath ? { dbPath } : {}), config: { pipelineGraceMs: 1 } })
}

/** What the SDK sent and got: each request's Mcp-Method and Mcp-Name headers, each tools/call's JSON answer (the task handle). */
function recordingFetch(): { fetch: FetchLike; toolCalls: any[]; headers: Array<{ method: string; name: string | null }> } {
  const toolCalls: any[] = []
  const headers: Array<{ method: string; name: string | null }> = []
  const fetchFn: FetchLike = async (input, init) => {
    const res = await fetch(input, init)
    const sent = new Headers(init?.headers)
    const method = sent.get('mcp-method')
    if (method) headers.push({ method, name: sent.get('mcp-name') })
    if (method === 'tools/call' && res.headers.get('content-type')?.startsWith('application/json')) toolCalls.push(await res.clone().json())
    return res
  }
  return { fetch: fetchFn, toolCalls, headers }
}

/** A task as tasks/get shows it on 2026-07-28 (the SDK's own Task schema is the 2025-11-25 one: see above). */
const TaskView = z.looseObject({
  taskId: z.string(),
  status: z.string(),
  statusMessage: z.optional(z.string()),
  inputRequests: z.optional(z.record(z.string(), z.looseObject({ method: z.string() }))),
  result: z.optional(z.looseObject({})),
})
type TaskView = z.infer<typeof TaskView>
const Acknowledged = z.looseObject({})

/** The SDK v2 client pinned to 2026-07-28, declaring form elicitation and the tasks extension. */
async function connect(t: Test, url: string, key: string) {
  const { fetch: fetchFn, toolCalls, headers } = recordingFetch()
  const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { fetch: fetchFn, requestInit: { headers: { Authorization: `Bearer ${key}` } } })
  const client = new Client(
    { name: 'sdk-v2-tasks-test', version: '2.0.0' },
    { capabilities: { elicitation: { form: {} }, extensions: { [TASKS_EXTENSION]: {} } }, versionNegotiation: { mode: { pin: MODERN } } },
  )
  t.teardown(() => client.close())
  await client.connect(transport)
  t.equal(client.getProtocolEra(), 'modern')

  /** Starts `tool` as a task: callTool cannot consume the handle (see above), the fetch saw it. */
  async function start(tool: string): Promise<string> {
    const err = await client.callTool({ name: tool, arguments: {} }).then(() => null, (e: unknown) => e)
    t.ok(err instanceof SdkError && err.code === SdkErrorCode.UnsupportedResultType, `callTool(${tool}) rejects the task answer`)
    const handle = toolCalls.at(-1)?.result
    t.equal(handle?.resultType, 'task', `${tool} answered with a task handle`)
    return handle.taskId as string
  }
  const get = (taskId: string): Promise<TaskView> => client.request({ method: 'tasks/get', params: { taskId } }, TaskView)
  /** The task once its status is one of `statuses`, polled with tasks/get (the work runs on its own). */
  async function reached(taskId: string, ...statuses: string[]): Promise<TaskView> {
    for (const deadline = Date.now() + DEADLINE_MS; ; await sleep(20)) {
      const view = await get(taskId)
      if (statuses.includes(view.status)) return view
      if (Date.now() > deadline) throw new Error(`task ${taskId} still ${view.status}, not ${statuses.join(' or ')}`)
    }
  }
  const update = (taskId: string, inputResponses: Record<string, ElicitResult>) =>
    client.request({ method: 'tasks/update', params: { taskId, inputResponses } }, Acknowledged)
  const cancel = (taskId: string) => client.request({ method: 'tasks/cancel', params: { taskId } }, Acknowledged)
  return { client, start, get, reached, update, cancel, headers }
}

type Connected = Awaited<ReturnType<typeof connect>>

/** An acknowledgement: an empty result (beside the `_meta` the server adds to every result). */
function acknowledged(t: Test, reply: Record<string, unknown>, what: string): void {
  const { _meta: _serverMeta, ...rest } = reply
  t.strictSame(rest, {}, what)
}

/** The task's input requests, each checked to be an elicitation/create request as the SDK's own schema reads it. */
function questions(t: Test, view: TaskView): Record<string, ElicitRequest> {
  t.equal(view.status, 'input_required')
  const requests = view.inputRequests ?? {}
  for (const [key, request] of Object.entries(requests)) t.ok(isSpecType.ElicitRequest(request), `${key} is an ElicitRequest to the SDK`)
  return requests as Record<string, ElicitRequest>
}

/** The answers `decide` gives to each question, checked to be ElicitResults as the SDK's own schema reads them. */
function answers(t: Test, asked: Record<string, ElicitRequest>, decide: (request: ElicitRequest) => ElicitResult): Record<string, ElicitResult> {
  const out = Object.fromEntries(Object.entries(asked).map(([key, request]) => [key, decide(request)]))
  for (const answer of Object.values(out)) t.ok(isSpecType.ElicitResult(answer), 'the answer is an ElicitResult to the SDK')
  return out
}

/** The tool result of a completed task, checked to be a CallToolResult as the SDK's own schema reads it. */
function resultOf(t: Test, view: TaskView): { isError?: boolean; content: Array<{ type: string; text: string }> } {
  t.equal(view.status, 'completed')
  t.ok(isSpecType.CallToolResult(view.result), 'the result is a CallToolResult to the SDK')
  return view.result as { isError?: boolean; content: Array<{ type: string; text: string }> }
}

t.test('accept: the form question is the task\'s input request; answered, the task completes with the tool\'s result', async (t) => {
  const server = await serve(t)
  const c = await connect(t, server.url, server.apiKey)
  const taskId = await c.start('ask_name')
  const asked = questions(t, await c.reached(taskId, 'input_required'))
  t.same(Object.keys(asked), ['1.elicit'], 'one question, under a key minted for the round')
  t.equal(asked['1.elicit']!.params.message, 'What is your name?')
  acknowledged(t, await c.update(taskId, answers(t, asked, () => ({ action: 'accept', content: { name: 'Ada' } }))), 'tasks/update is acknowledged')
  const done = await c.reached(taskId, 'completed', 'failed', 'cancelled')
  const result = resultOf(t, done)
  t.equal(result.isError, false)
  t.equal(result.content[0]?.text, 'Hello, Ada!', 'the work took the answer where it asked')
  t.notOk('inputRequests' in done, 'no input request is left')
  const taskMethods = c.headers.filter((h) => h.method.startsWith('tasks/'))
  t.ok(taskMethods.some((h) => h.method === 'tasks/update'), 'the SDK sent tasks/update')
  t.ok(taskMethods.every((h) => h.name === taskId), 'the SDK set Mcp-Name to the task id on every task method')
})

t.test('decline: a declined confirmation completes the task with the ELICITATION_DENIED tool error', async (t) => {
  const server = await serve(t)
  const c = await connect(t, server.url, server.apiKey)
  const taskId = await c.start('confirm_in_task')
  const asked = questions(t, await c.reached(taskId, 'input_required'))
  t.same(Object.keys(asked), ['1.confirm'], 'the confirmation is the task\'s input request')
  await c.update(taskId, answers(t, asked, () => ({ action: 'decline' })))
  const result = resultOf(t, await c.reached(taskId, 'completed', 'failed', 'cancelled'))
  t.equal(result.isError, true)
  t.equal(JSON.parse(result.content[0]!.text).code, 'ELICITATION_DENIED', 'the tool did not go ahead')
  const audited = (await server.app.repos.audit.page((await defaultOrganization(server)).id, 10, undefined, 'confirm_in_task.confirmation')).items
  t.match(audited, [{ outcome: 'declined' }], 'the decline is audited as the confirmation\'s outcome')
})

t.test('partial: two questions at once, answered one at a time; the task completes with both answers', async (t) => {
  const server = await serve(t)
  const c = await connect(t, server.url, server.apiKey)
  const taskId = await c.start('two_at_once')
  const asked = questions(t, await c.reached(taskId, 'input_required'))
  t.same(Object.keys(asked).sort(), ['1.colour', '1.sure'])
  const decide = (request: ElicitRequest): ElicitResult => request.params.message === 'Which colour?' ? { action: 'accept', content: { colour: 'teal' } } : { action: 'accept', content: { ok: true } }
  const all = answers(t, asked, decide)

  await c.update(taskId, { '1.colour': all['1.colour']! })
  const half = await c.get(taskId)
  t.equal(half.status, 'input_required', 'one answer of two: the task still waits')
  t.same(Object.keys(questions(t, half)), ['1.sure'], 'only the unanswered request is left')

  await c.update(taskId, { '1.sure': all['1.sure']! })
  const result = resultOf(t, await c.reached(taskId, 'completed', 'failed', 'cancelled'))
  t.equal(result.isError, false)
  t.equal(result.content[0]?.text, 'colour: teal; sure: true', 'the work used both answers')
})

t.test('cancellation: a task waiting for input is cancelled through tasks/cancel; a later answer changes nothing', async (t) => {
  const server = await serve(t)
  const c = await connect(t, server.url, server.apiKey)
  const taskId = await c.start('ask_name')
  const asked = questions(t, await c.reached(taskId, 'input_required'))
  acknowledged(t, await c.cancel(taskId), 'tasks/cancel is acknowledged')
  const cancelled = await c.reached(taskId, 'cancelled', 'completed', 'failed')
  t.equal(cancelled.status, 'cancelled')
  t.notOk('inputRequests' in cancelled, 'no input request is shown')
  t.notOk('result' in cancelled)

  acknowledged(t, await c.update(taskId, answers(t, asked, () => ({ action: 'accept', content: { name: 'Late' } }))), 'a late tasks/update is acknowledged')
  t.strictSame(await c.get(taskId), cancelled, 'and changes nothing')
  t.ok(c.headers.some((h) => h.method === 'tasks/cancel' && h.name === taskId), 'the SDK sent tasks/cancel with Mcp-Name')
})

/** After a restart: the waiting task ended interrupted, as TaskManager.recover records it, and answering it changes nothing. */
async function endedInterrupted(t: Test, c: Connected, taskId: string, asked: Record<string, ElicitRequest>): Promise<void> {
  const ended = await c.get(taskId)
  t.equal(ended.status, 'completed', 'the task is ended')
  t.match(ended.statusMessage, /^interrupted: the server stopped while the task ran/, 'it says it was interrupted')
  t.notOk('inputRequests' in ended, 'its question is gone')
  const result = resultOf(t, ended)
  t.equal(result.isError, true)
  const failure = JSON.parse(result.content[0]!.text)
  t.equal(failure.code, 'OPERATION_FAILED')
  t.match(failure.message, /stopped and restarted while this ask_name call was in progress/)
  acknowledged(t, await c.update(taskId, answers(t, asked, () => ({ action: 'accept', content: { name: 'After' } }))), 'an answer is acknowledged')
  t.strictSame(await c.get(taskId), ended, 'and changes nothing')
}

t.test('across a clean restart: a task waiting for input ends interrupted; a new connection sees it so', async (t) => {
  const dbPath = tempDatabase(t)
  const first = await serve(t, dbPath)
  const before = await connect(t, first.url, first.apiKey)
  const taskId = await before.start('ask_name')
  const asked = questions(t, await before.reached(taskId, 'input_required'))
  await before.client.close()
  await first.close()

  const second = await serve(t, dbPath)
  await endedInterrupted(t, await connect(t, second.url, second.apiKey), taskId, asked)
})

/**
 * A server in a child process (built code, the same tools), printing its URL; SIGKILL ends it with nothing recorded.
 * The database is a SQLite file: the next server holds it alone, so the dead process's tasks are recovered at start.
 */
async function childServer(t: Test, dbPath: string): Promise<{ url: string; kill(): Promise<void> }> {
  const helpers = (file: string) => JSON.stringify(new URL(`../helpers/${file}`, import.meta.url).href)
  const child = spawn(process.execPath, ['--input-type=module', '-e', `
    import { startServer } from ${helpers('server.js')}
    import { askName } from ${helpers('task-tools.js')}
    const server = await startServer({ teardown() {} }, { tools: [askName], dbPath: process.env.DB_PATH })
    process.stdout.write('LISTENING ' + server.url + '\\n')
  `], { env: { ...process.env, DB_PATH: dbPath }, stdio: ['ignore', 'pipe', 'pipe'] })
  t.teardown(() => void child.kill('SIGKILL'))
  let out = ''
  let err = ''
  child.stderr!.on('data', (d: Buffer) => void (err += d.toString()))
  const exited = once(child, 'exit')
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString()
      const found = /^LISTENING (\S+)$/m.exec(out)?.[1]
      if (found) resolve(found)
    })
    void exited.then(([code]) => reject(new Error(`the child server exited (${String(code)}) before listening\n${out}\n${err}`)))
  })
  return {
    url,
    async kill() {
      child.kill('SIGKILL')
      await exited
    },
  }
}

t.test('across a kill: a task waiting for input in a killed process ends interrupted at the next start', async (t) => {
  const dbPath = tempDatabase(t)
  const first = await childServer(t, dbPath)
  const before = await connect(t, first.url, OWNER_KEY)
  const taskId = await before.start('ask_name')
  const asked = questions(t, await before.reached(taskId, 'input_required'))
  await before.client.close()
  await first.kill()

  const second = await serve(t, dbPath)
  await endedInterrupted(t, await connect(t, second.url, second.apiKey), taskId, asked)
})

t.test('the SDK reports a task method\'s JSON-RPC error: tasks/update of an unknown task is -32602', async (t) => {
  const server = await serve(t)
  const c = await connect(t, server.url, server.apiKey)
  const err = await c.update('task_nope', { '1.elicit': { action: 'decline' } }).then(() => null, (e: unknown) => e)
  t.ok(err instanceof ProtocolError)
  t.equal((err as ProtocolError).code, -32602)
})

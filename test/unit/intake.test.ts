import t from 'tap'
import type { FastifyBaseLogger, FastifyRequest } from 'fastify'
import type { Principal } from '../../src/auth/principal.js'
import { fail, isServiceError } from '../../src/errors/service-error.js'
import type { DeclaredLimit } from '../../src/limits/fixed-windows.js'
import { ServerStopping } from '../../src/rpc/call-abort.js'
import { Dispatcher, NULL_SINK, type PreparedRequest } from '../../src/rpc/dispatcher.js'
import { ModernExchange } from '../../src/rpc/exchange.js'
import { Intake, Refusal, type AdmissionLimits } from '../../src/rpc/intake.js'
import type { MessageDone } from '../../src/rpc/observer.js'
import type { JsonRpcRequest } from '../../src/rpc/types.js'
import { validatorFor } from '../../src/validation/index.js'

// The intake: admission all or none, the era's rendering of a refusal, and the observer told once per request by the
// intake alone (docs/decisions/call-state.md).

const principal = { kind: 'api_key', credential: 'key:k', credentialId: 'k', userId: 'u', membershipId: 'm', organizationId: 'o', role: 'owner', scopes: ['mcp:read'], expiresAt: null } as unknown as Principal
const log = { error: () => {}, warn: () => {}, info: () => {}, debug: () => {} } as unknown as FastifyBaseLogger
const request = {} as FastifyRequest
const exchange = new ModernExchange('2026-07-28', {}, null)
const TOOL_LIMIT = { name: 'tool' } as unknown as DeclaredLimit

interface Setup {
  dispatcher: Dispatcher
  done: MessageDone[]
  counted: Array<{ extra: number; declared: unknown }>
  prechecked: string[]
  ran: string[]
}

function setup(limits?: AdmissionLimits['admit']): Setup & { intake(era: 'legacy' | 'modern'): Intake } {
  const dispatcher = new Dispatcher()
  const s: Setup = { dispatcher, done: [], counted: [], prechecked: [], ran: [] }
  dispatcher.addObserver({ onMessageDone: (d) => s.done.push({ ...d }) })
  const params = validatorFor('mcp/empty.params')
  const method = (name: string, extra: Partial<Parameters<Dispatcher['registerRequest']>[0]> = {}) =>
    dispatcher.registerRequest({ method: name, eras: ['legacy', 'modern'], params, handle: () => (s.ran.push(name), {}), ...extra })
  method('plain')
  method('limited', { limits: () => TOOL_LIMIT, prefersStream: () => true })
  method('scoped', { precheck: () => { s.prechecked.push('scoped'); throw fail('INSUFFICIENT_SCOPE') } })
  method('mismatched', { precheck: async () => { s.prechecked.push('mismatched'); throw fail('HEADER_MISMATCH') } })
  method('slowcheck', { precheck: async () => { s.prechecked.push('slowcheck') }, longLived: () => true })
  method('conflict', { handle: () => { throw fail('IDEMPOTENCY_CONFLICT') } })
  method('hangs', { handle: () => new Promise(() => {}) })
  const admitter: AdmissionLimits = {
    admit: limits ?? ((_r, _p, extra, declared) => { s.counted.push({ extra, declared }) }),
  }
  return { ...s, intake: (era) => new Intake(dispatcher, admitter, era, request) }
}

/** What `fn` throws or rejects with; null when it succeeds. */
async function thrownBy(fn: () => unknown): Promise<unknown> {
  try {
    await fn()
    return null
  } catch (err) {
    return err
  }
}

const message = (id: number, method: string): JsonRpcRequest => ({ jsonrpc: '2.0', id, method })

function prepared(intake: Intake, m: JsonRpcRequest): PreparedRequest {
  const p = intake.prepare(m)
  if (!('def' in p)) throw new Error(`${m.method} was refused`)
  return p
}

t.test('a batch is counted once with every declared limit, then prechecked in order; what the methods ask is returned', async (t) => {
  const s = setup()
  const intake = s.intake('legacy')
  const msgs = [message(1, 'plain'), message(2, 'limited'), message(3, 'slowcheck')]
  for (const m of msgs) intake.observe(m)
  const admitted = await intake.admit(msgs.map((m) => prepared(intake, m)), exchange, principal, { messages: 5 })
  t.same(s.counted, [{ extra: 4, declared: [TOOL_LIMIT] }], 'one count: the four other messages and the tool limit')
  t.ok(Array.isArray(admitted))
  const list = admitted as Exclude<typeof admitted, Refusal>
  t.same(list.map((a) => [a.call.message.method, a.prefersStream, a.longLived]), [['plain', false, false], ['limited', true, false], ['slowcheck', false, true]])
  t.same(s.prechecked, ['slowcheck'])
  t.same(s.done, [], 'nothing is observed before the requests are answered')
})

t.test('a refusal of the limits refuses the whole exchange before any precheck, in both eras', async (t) => {
  for (const era of ['legacy', 'modern'] as const) {
    const s = setup(() => { throw fail('RATE_LIMITED', { limiter: 'tool' }) })
    const intake = s.intake(era)
    const m = message(1, 'scoped')
    intake.observe(m)
    const refused = await thrownBy(() => intake.settle(() => intake.admit([prepared(intake, m)], exchange, principal)))
    t.ok(isServiceError(refused) && refused.code === 'RATE_LIMITED', `${era}: thrown (HTTP 429)`)
    t.same(s.prechecked, [], `${era}: no precheck ran`)
    t.equal(s.done.length, 1, `${era}: observed once`)
    t.equal(s.done[0]!.failure?.code, 'RATE_LIMITED', `${era}: as the HTTP refusal`)
  }
})

t.test("an error with a JSON-RPC code of its own is a stateless request's JSON-RPC answer, a session's HTTP refusal", async (t) => {
  const modern = setup()
  const mi = modern.intake('modern')
  const m = message(7, 'mismatched')
  mi.observe(m)
  const refusal = await mi.admit([prepared(mi, m)], exchange, principal)
  t.ok(refusal instanceof Refusal, 'modern: a Refusal')
  t.equal((refusal as Refusal).status, 400, 'the revision\'s own error keeps HTTP 400')
  t.equal((refusal as Refusal).response.error?.code, -32020)
  t.equal(modern.done.length, 1, 'observed as answered')
  t.equal(modern.done[0]!.response?.error?.code, -32020)

  const legacy = setup()
  const li = legacy.intake('legacy')
  const lm = message(8, 'mismatched')
  const thrown = await thrownBy(() => li.admit([prepared(li, lm)], exchange, principal))
  t.ok(isServiceError(thrown) && thrown.code === 'HEADER_MISMATCH', 'legacy: the same error is thrown, an HTTP refusal')
})

t.test('a run is observed with its answer, or left to the HTTP refusal the era makes of its failure', async (t) => {
  const s = setup()
  const intake = s.intake('modern')
  const ok = message(1, 'plain')
  const conflict = message(2, 'conflict')
  intake.observe(ok)
  intake.observe(conflict)
  const setupCall = { exchange, principal, sink: NULL_SINK, log }
  const first = await intake.run(prepared(intake, ok), setupCall)
  t.same(first.response?.result, {}, 'answered')
  t.equal(first.overHttp, null)
  const second = await intake.run(prepared(intake, conflict), setupCall, undefined, (f) => f.status === 409)
  t.equal(second.overHttp?.code, 'IDEMPOTENCY_CONFLICT', 'the era answers it over HTTP')
  t.same(s.done.map((d) => d.message.method), ['plain'], 'only the answered one observed so far')
  await thrownBy(() => intake.settle(() => { throw second.overHttp }))
  t.same(s.done.map((d) => [d.message.method, d.failure?.code ?? null]), [['plain', null], ['conflict', 'IDEMPOTENCY_CONFLICT']], 'then as the HTTP refusal')
})

t.test('a call the shutdown stops is answered at once and observed once; an unanswered request ends as cancelled', async (t) => {
  const s = setup()
  const intake = s.intake('legacy')
  const hangs = message(1, 'hangs')
  const never = message(2, 'plain')
  intake.observe(hangs)
  intake.observe(never)
  const call = prepared(intake, hangs)
  const stopped: Array<string | undefined> = []
  const controller = intake.stoppable(call, (answer) => stopped.push(answer.failure?.code))
  const running = intake.run(call, { exchange, principal, sink: NULL_SINK, log }, controller)
  controller.abort(new ServerStopping('stop'))
  t.same(stopped, ['SERVICE_UNAVAILABLE'], 'answered with SERVICE_UNAVAILABLE at once, the handler still running')
  t.equal(s.done.length, 1)
  t.match(s.done[0]!.response?.error?.message, /shutting down/)
  await intake.settle(() => undefined)
  t.equal(s.done.length, 2, 'the request never run is observed when the exchange ends')
  t.same([s.done[1]!.response, s.done[1]!.failure], [null, null], 'as cancelled')
  t.equal(s.ran.length, 0)
  void running
})

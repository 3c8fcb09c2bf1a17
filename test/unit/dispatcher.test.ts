import t from 'tap'
import type { FastifyBaseLogger } from 'fastify'
import type { Principal } from '../../src/auth/principal.js'
import { fail } from '../../src/errors/service-error.js'
import { Dispatcher, type Answer, type MessageSink, type PreparedRequest } from '../../src/rpc/dispatcher.js'
import { HANDSHAKE_EXCHANGE, LegacyExchange } from '../../src/rpc/exchange.js'
import type { JsonRpcMessage, JsonRpcRequest, JsonRpcResponse, RequestId } from '../../src/rpc/types.js'
import { OutboundRequestError } from '../../src/rpc/calls.js'
import type { Session } from '../../src/sessions/session.js'
import { validatorFor } from '../../src/validation/index.js'

/** A logger that records error calls and swallows the rest. */
function fakeLog(): FastifyBaseLogger & { errors: unknown[][] } {
  const errors: unknown[][] = []
  const noop = () => {}
  const log = {
    errors,
    level: 'silent',
    fatal: noop,
    error: (...args: unknown[]) => errors.push(args),
    warn: noop,
    info: noop,
    debug: noop,
    trace: noop,
    silent: noop,
    child: () => log,
  }
  return log as unknown as FastifyBaseLogger & { errors: unknown[][] }
}

function fakeSession(overrides: Partial<Session> = {}): Session {
  return {
    id: 'sess-1',
    credential: 'key:key_1',
    membershipId: 'mem_1',
    organizationId: 'org_1',
    protocolVersion: '2025-11-25',
    clientCapabilities: { elicitation: {} },
    subscriptions: null,
    logLevel: 'info',
    initialized: true,
    lastSeenAt: Date.now(),
    ended: false,
    ...overrides,
  }
}

function fakePrincipal(overrides: Partial<Principal> = {}): Principal {
  return {
    kind: 'api_key',
    credential: 'key:key_1',
    credentialId: 'key_1',
    userId: 'usr_1',
    membershipId: 'mem_1',
    organizationId: 'org_1',
    role: 'owner',
    scopes: ['mcp:read', 'mcp:write'],
    expiresAt: null,
    ...overrides,
  }
}

function recordingSink(ok = true): MessageSink & { sent: JsonRpcMessage[] } {
  const sent: JsonRpcMessage[] = []
  return { streaming: true, sent, send: (m) => (sent.push(m), ok) }
}

function req(method: string, id: RequestId = 1, params?: Record<string, unknown>): JsonRpcRequest {
  return { jsonrpc: '2.0', id, method, ...(params ? { params } : {}) }
}

/** The JSON-RPC response of a run (null: cancelled). */
async function responseOf(answer: Promise<Answer>): Promise<JsonRpcResponse | null> {
  return (await answer).response
}

/** A promise whose resolver is exposed. */
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void
  const promise = new Promise<void>((r) => (resolve = r))
  return { promise, resolve }
}

/** Resolves when the signal aborts. */
function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve()
    else signal.addEventListener('abort', () => resolve(), { once: true })
  })
}

function prepared(d: Dispatcher, message: JsonRpcRequest): PreparedRequest {
  const p = d.prepare(message, 'legacy')
  if (!('def' in p)) throw new Error(`prepare failed: ${JSON.stringify(p)}`)
  return p
}

/** A dispatcher with the methods the tests use, and notifications/cancelled wired like src/plugins/sessions.ts. */
function makeDispatcher() {
  const d = new Dispatcher()
  type Deferred = ReturnType<typeof deferred>
  const gates = new Map<RequestId, { started: Deferred; release: Deferred }>()
  d.registerRequest({ method: 'ping', eras: ['legacy'], params: validatorFor('mcp/empty.params'), handle: () => ({}) })
  d.registerRequest<{ requestId: RequestId; reason?: string }>({
    method: 'test/echo',
    eras: ['legacy'],
    params: validatorFor('mcp/cancelled.params'),
    handle: (params) => ({ echoed: params.requestId }),
  })
  d.registerRequest({
    method: 'test/service-error',
    eras: ['legacy'],
    params: validatorFor('mcp/empty.params'),
    handle: () => {
      throw fail('SESSION_NOT_FOUND', { details: { why: 'gone' } })
    },
  })
  d.registerRequest({
    method: 'test/crash',
    eras: ['legacy'],
    params: validatorFor('mcp/empty.params'),
    handle: async () => {
      throw new Error('SELECT secret FROM users WHERE 1 -- boom at /srv/app/db.ts:12')
    },
  })
  d.registerRequest({
    method: 'test/crash-sync',
    eras: ['legacy'],
    params: validatorFor('mcp/empty.params'),
    handle: () => {
      throw new TypeError('cannot read properties of undefined (reading "x")')
    },
  })
  // Waits until aborted, then either returns or throws (both must yield no response).
  d.registerRequest({
    method: 'test/wait-abort',
    eras: ['legacy'],
    params: validatorFor('mcp/empty.params'),
    handle: async (_p, ctx) => {
      await aborted(ctx.signal)
      return { late: true }
    },
  })
  d.registerRequest({
    method: 'test/wait-abort-throw',
    eras: ['legacy'],
    params: validatorFor('mcp/empty.params'),
    handle: async (_p, ctx) => {
      await aborted(ctx.signal)
      throw new Error('aborted inside')
    },
  })
  // Waits on a gate keyed by request id so a test can hold a request in flight.
  d.registerRequest({
    method: 'test/gate',
    eras: ['legacy'],
    params: validatorFor('mcp/empty.params'),
    handle: async (_p, ctx) => {
      const g = gates.get(ctx.requestId)!
      g.started.resolve()
      await g.release.promise
      return { released: ctx.requestId }
    },
  })
  d.registerNotification<{ requestId: RequestId; reason?: string }>({
    method: 'notifications/cancelled',
    params: validatorFor('mcp/cancelled.params'),
    handle(params, ctx) {
      d.cancel(ctx.session.id, params.requestId, new Error(params.reason ?? 'cancelled by the client'))
    },
  })
  const gate = (id: RequestId) => {
    const g = { started: deferred(), release: deferred() }
    gates.set(id, g)
    return g
  }
  return { d, gate }
}

t.test('registration refuses duplicates', async (t) => {
  const { d } = makeDispatcher()
  t.throws(() => d.registerRequest({ method: 'ping', eras: ['legacy'], params: validatorFor('mcp/empty.params'), handle: () => ({}) }), /already registered/)
  t.throws(() => d.registerNotification({ method: 'notifications/cancelled', params: validatorFor('mcp/empty.params'), handle: () => {} }), /already registered/)
  t.ok(d.definition('ping', 'legacy'))
  t.equal(d.definition('ping', 'modern'), undefined, 'a method exists only in the eras it names')
  t.equal(d.definition('nope', 'legacy'), undefined)
})

t.test('classify', async (t) => {
  const { d } = makeDispatcher()

  t.test('request, notification, response', async (t) => {
    const r = d.classify({ jsonrpc: '2.0', id: 7, method: 'ping' })
    t.equal(r.kind, 'request')
    t.equal(d.classify({ jsonrpc: '2.0', id: 'abc', method: 'ping', params: {} }).kind, 'request')
    t.equal(d.classify({ jsonrpc: '2.0', method: 'notifications/initialized' }).kind, 'notification')
    t.equal(d.classify({ jsonrpc: '2.0', id: 1, result: {} }).kind, 'response')
    t.equal(d.classify({ jsonrpc: '2.0', id: 1, error: { code: -1, message: 'x' } }).kind, 'response')
    t.equal(d.classify({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'x' } }).kind, 'response')
  })

  t.test('non-objects are invalid with id null', async (t) => {
    for (const v of [null, 42, 'ping', true, [], [{ jsonrpc: '2.0', id: 1, method: 'ping' }]]) {
      const c = d.classify(v)
      t.equal(c.kind, 'invalid', JSON.stringify(v))
      if (c.kind === 'invalid') t.equal(c.id, null)
    }
  })

  t.test("jsonrpc '1.0' is invalid and keeps a readable id", async (t) => {
    const c = d.classify({ jsonrpc: '1.0', id: 5, method: 'ping' })
    t.equal(c.kind, 'invalid')
    if (c.kind === 'invalid') {
      t.equal(c.id, 5)
      t.ok(Array.isArray(c.details) && (c.details as unknown[]).length > 0, 'validation details are given')
    }
    t.equal(d.classify({ jsonrpc: '1.0', method: 'notifications/initialized' }).kind, 'invalid')
    t.equal(d.classify({ id: 1, method: 'ping' }).kind, 'invalid', 'jsonrpc member missing')
  })

  t.test('id null on a request is invalid', async (t) => {
    const c = d.classify({ jsonrpc: '2.0', id: null, method: 'ping' })
    t.equal(c.kind, 'invalid')
    if (c.kind === 'invalid') t.equal(c.id, null)
    t.equal(d.classify({ jsonrpc: '2.0', id: 1.5, method: 'ping' }).kind, 'invalid', 'fractional id')
    t.equal(d.classify({ jsonrpc: '2.0', id: {}, method: 'ping' }).kind, 'invalid', 'object id')
    t.equal(d.classify({ jsonrpc: '2.0', id: 1, method: '' }).kind, 'invalid', 'empty method')
    t.equal(d.classify({ jsonrpc: '2.0', id: 1, method: 'ping', params: [] }).kind, 'invalid', 'array params')
  })

  t.test('a response with both result and error is invalid', async (t) => {
    t.equal(d.classify({ jsonrpc: '2.0', id: 1, result: {}, error: { code: 1, message: 'x' } }).kind, 'invalid')
    t.equal(d.classify({ jsonrpc: '2.0', id: 1, error: { message: 'no code' } }).kind, 'invalid')
  })

  t.test('an object that is none of the three is invalid', async (t) => {
    const c = d.classify({ jsonrpc: '2.0', id: 3 })
    t.equal(c.kind, 'invalid')
    if (c.kind === 'invalid') t.equal(c.id, 3)
  })
})

t.test('prepare', async (t) => {
  const { d } = makeDispatcher()

  t.test('unknown method is -32601 with the request id', async (t) => {
    const r = d.prepare(req('no/such/method', 'abc'), 'legacy')
    t.notOk('def' in r)
    const res = 'response' in r ? r.response : ({} as JsonRpcResponse)
    t.equal('failure' in r ? r.failure.code : undefined, 'METHOD_NOT_FOUND', 'the failure comes with the answer')
    t.equal(res.jsonrpc, '2.0')
    t.equal(res.id, 'abc')
    t.equal(res.error?.code, -32601)
    t.match(res.error?.message, /no\/such\/method/)
    t.equal(res.result, undefined)
  })

  t.test('bad params are -32602 with details', async (t) => {
    const r = d.prepare(req('test/echo', 9, { requestId: { nested: true }, extra: 1 }), 'legacy')
    t.notOk('def' in r)
    const res = 'response' in r ? r.response : ({} as JsonRpcResponse)
    t.equal('failure' in r ? r.failure.code : undefined, 'INVALID_PARAMS')
    t.equal(res.id, 9)
    t.equal(res.error?.code, -32602)
    const data = res.error?.data as { code: string; details: Array<{ path: string; message: string }> }
    t.equal(data.code, 'INVALID_PARAMS')
    t.ok(Array.isArray(data.details) && data.details.length > 0)
    t.ok(data.details.some((x) => x.path === '/requestId'), 'the offending path is named')

    const refusedMissing = d.prepare(req('test/echo', 10, {}), 'legacy')
    const missing = 'response' in refusedMissing ? refusedMissing.response : ({} as JsonRpcResponse)
    t.equal(missing.error?.code, -32602)
    t.ok((missing.error?.data as { details: Array<{ path: string }> }).details.some((x) => x.path === '/requestId'))
  })

  t.test('good params yield a prepared call; absent params become {}', async (t) => {
    const p = d.prepare(req('ping', 1), 'legacy')
    t.ok('def' in p)
    if ('def' in p) {
      t.same(p.params, {})
      t.equal(p.def.method, 'ping')
    }
  })
})

t.test('run', async (t) => {
  t.test('returns the result', async (t) => {
    const { d } = makeDispatcher()
    const session = fakeSession()
    const res = await responseOf(d.run(prepared(d, req('test/echo', 4, { requestId: 'x' })), { exchange: new LegacyExchange(session), principal: fakePrincipal(), sink: recordingSink(), log: fakeLog() }))
    t.same(res, { jsonrpc: '2.0', id: 4, result: { echoed: 'x' } })
    t.notOk(d.holdsCalls(session.id), 'nothing held after completion')
  })

  t.test('runs without a session', async (t) => {
    const { d } = makeDispatcher()
    const res = await responseOf(d.run(prepared(d, req('ping', 'p')), { exchange: HANDSHAKE_EXCHANGE, principal: fakePrincipal(), sink: recordingSink(), log: fakeLog() }))
    t.same(res, { jsonrpc: '2.0', id: 'p', result: {} })
  })

  t.test('a thrown ServiceError becomes a JSON-RPC error with data.code', async (t) => {
    const { d } = makeDispatcher()
    const log = fakeLog()
    const session = fakeSession()
    const res = await responseOf(d.run(prepared(d, req('test/service-error', 2)), { exchange: new LegacyExchange(session), principal: fakePrincipal(), sink: recordingSink(), log }))
    t.equal(res?.id, 2)
    t.equal(res?.error?.code, -32001)
    t.equal(res?.error?.message, 'The session has expired or is invalid')
    t.match(res?.error?.data, { code: 'SESSION_NOT_FOUND', details: { why: 'gone' } })
    t.type((res?.error?.data as { action: unknown }).action, 'string')
    t.equal(log.errors.length, 0, 'deliberate failures are not logged as errors')
    t.notOk(d.holdsCalls(session.id))
    const answer = await d.run(prepared(d, req('test/service-error', 5)), { exchange: new LegacyExchange(session), principal: fakePrincipal(), sink: recordingSink(), log })
    t.equal(answer.failure?.code, 'SESSION_NOT_FOUND', 'the ServiceError comes back with its answer, status and all')
    t.equal(answer.failure?.status, 404)
    const ok = await d.run(prepared(d, req('ping', 6)), { exchange: new LegacyExchange(session), principal: fakePrincipal(), sink: recordingSink(), log })
    t.equal(ok.failure, null, 'a result has no failure')
  })

  for (const method of ['test/crash', 'test/crash-sync']) {
    t.test(`a plain Error (${method}) becomes -32603 Internal error without leaking`, async (t) => {
      const { d } = makeDispatcher()
      const log = fakeLog()
      const session = fakeSession()
      const res = await responseOf(d.run(prepared(d, req(method, 3)), { exchange: new LegacyExchange(session), principal: fakePrincipal(), sink: recordingSink(), log }))
      t.equal(res?.id, 3)
      t.equal(res?.error?.code, -32603)
      t.equal(res?.error?.message, 'Internal error')
      t.equal((res?.error?.data as { code: string }).code, 'INTERNAL_ERROR')
      const text = JSON.stringify(res)
      t.notMatch(text, /SELECT|secret|db\.ts|undefined|reading|stack/i, 'nothing of the original error reaches the client')
      t.equal(log.errors.length, 1, 'the failure is logged server-side')
      t.notOk(d.holdsCalls(session.id))
    })
  }

  t.test('a request cancelled by notifications/cancelled returns null', async (t) => {
    for (const method of ['test/wait-abort', 'test/wait-abort-throw']) {
      const { d } = makeDispatcher()
      const session = fakeSession()
      const principal = fakePrincipal()
      const log = fakeLog()
      const running = responseOf(d.run(prepared(d, req(method, 'c1')), { exchange: new LegacyExchange(session), principal, sink: recordingSink(), log }))
      t.ok(d.inFlight(session.id, 'c1'), 'the request is tracked while in flight')
      // A cancel for another id does nothing.
      d.notify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'other' } }, { session, principal, log })
      t.ok(d.inFlight(session.id, 'c1'), 'still running')
      d.notify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'c1', reason: 'user hit stop' } }, { session, principal, log })
      t.equal(await running, null, `${method}: no response`)
      t.notOk(d.holdsCalls(session.id), 'nothing held any more')
      t.equal(log.errors.length, 0, 'a cancellation is not an error')
    }
  })

  t.test('aborting the inflight controller directly returns null', async (t) => {
    const { d } = makeDispatcher()
    const session = fakeSession()
    const running = responseOf(d.run(prepared(d, req('test/wait-abort', 11)), { exchange: new LegacyExchange(session), principal: fakePrincipal(), sink: recordingSink(), log: fakeLog() }))
    d.cancel(session.id, 11, new Error('stop'))
    t.equal(await running, null)
    t.notOk(d.holdsCalls(session.id))
  })

  t.test('a duplicate in-flight id is -32600; the first request still completes', async (t) => {
    const { d, gate } = makeDispatcher()
    const session = fakeSession()
    const ctx = { exchange: new LegacyExchange(session), principal: fakePrincipal(), sink: recordingSink(), log: fakeLog() }
    const g = gate(21)
    const first = responseOf(d.run(prepared(d, req('test/gate', 21)), ctx))
    await g.started.promise
    const dup = await responseOf(d.run(prepared(d, req('ping', 21)), ctx))
    t.equal(dup?.id, 21)
    t.equal(dup?.error?.code, -32600)
    t.match(dup?.error?.message, /already in use/)
    t.ok(d.inFlight(session.id, 21), 'the duplicate did not disturb the first request')
    // A different id runs fine meanwhile.
    const other = await responseOf(d.run(prepared(d, req('ping', 22)), ctx))
    t.same(other, { jsonrpc: '2.0', id: 22, result: {} })
    t.ok(d.holdsCalls(session.id), 'held while the first request runs')
    g.release.resolve()
    t.same(await first, { jsonrpc: '2.0', id: 21, result: { released: 21 } })
    t.notOk(d.holdsCalls(session.id), 'nothing held once nothing is in flight')
    // The id can be reused after completion.
    const again = await responseOf(d.run(prepared(d, req('ping', 21)), ctx))
    t.same(again, { jsonrpc: '2.0', id: 21, result: {} })
  })

  t.test('the handler gets the request id, the signal and the sink', async (t) => {
    const d = new Dispatcher()
    let seen: { id: RequestId; aborted: boolean; streaming: boolean } | undefined
    d.registerRequest({
      method: 'x',
      eras: ['legacy'],
      params: validatorFor('mcp/empty.params'),
      handle: (_p, ctx) => {
        seen = { id: ctx.requestId, aborted: ctx.signal.aborted, streaming: ctx.sink.streaming }
        return {}
      },
    })
    await responseOf(d.run(prepared(d, req('x', 'rid')), { exchange: new LegacyExchange(fakeSession()), principal: fakePrincipal(), sink: recordingSink(), log: fakeLog() }))
    t.same(seen, { id: 'rid', aborted: false, streaming: true })
  })
})

t.test('notify ignores unknown and malformed notifications', async (t) => {
  const d = new Dispatcher()
  let calls = 0
  d.registerNotification({ method: 'n', params: validatorFor('mcp/cancelled.params'), handle: () => void calls++ })
  const ctx = { session: fakeSession(), principal: fakePrincipal(), log: fakeLog() }
  d.notify({ jsonrpc: '2.0', method: 'unknown' }, ctx)
  d.notify({ jsonrpc: '2.0', method: 'n', params: {} }, ctx)
  t.equal(calls, 0)
  d.notify({ jsonrpc: '2.0', method: 'n', params: { requestId: 1 } }, ctx)
  t.equal(calls, 1)
})

t.test('request() outbound', async (t) => {
  t.test('sends on the sink; acceptResponse resolves it', async (t) => {
    const d = new Dispatcher()
    const session = fakeSession()
    const principal = fakePrincipal()
    const sink = recordingSink()
    const pending = d.request(session, principal, sink, 'elicitation/create', { message: 'Sure?' }, { timeoutMs: 5000 })
    t.equal(sink.sent.length, 1)
    const sent = sink.sent[0] as JsonRpcRequest
    t.equal(sent.jsonrpc, '2.0')
    t.equal(sent.method, 'elicitation/create')
    t.same(sent.params, { message: 'Sure?' })
    t.ok(typeof sent.id === 'number' || typeof sent.id === 'string')
    t.ok(d.holdsCalls(session.id), 'the question is held while it awaits its answer')
    const refused = d.acceptResponse({ jsonrpc: '2.0', id: sent.id, result: { action: 'accept' } }, session, principal)
    t.equal(refused, null)
    t.same(await pending, { action: 'accept' })
    t.notOk(d.holdsCalls(session.id), 'nothing held after the answer')
  })

  t.test('outbound ids are distinct', async (t) => {
    const d = new Dispatcher()
    const session = fakeSession()
    const principal = fakePrincipal()
    const sink = recordingSink()
    const a = d.request(session, principal, sink, 'm', {}, { timeoutMs: 5000 })
    const b = d.request(session, principal, sink, 'm', {}, { timeoutMs: 5000 })
    const [ia, ib] = sink.sent.map((m) => (m as JsonRpcRequest).id)
    t.not(ia, ib)
    t.equal(d.acceptResponse({ jsonrpc: '2.0', id: ib!, result: { which: 'b' } }, session, principal), null)
    t.equal(d.acceptResponse({ jsonrpc: '2.0', id: ia!, result: { which: 'a' } }, session, principal), null)
    t.same(await Promise.all([a, b]), [{ which: 'a' }, { which: 'b' }])
    t.notOk(d.holdsCalls(session.id))
  })

  t.test('an error answer rejects with reason error', async (t) => {
    const d = new Dispatcher()
    const session = fakeSession()
    const principal = fakePrincipal()
    const sink = recordingSink()
    const pending = d.request(session, principal, sink, 'm', {}, { timeoutMs: 5000 })
    const id = (sink.sent[0] as JsonRpcRequest).id
    t.equal(d.acceptResponse({ jsonrpc: '2.0', id, error: { code: -1, message: 'nope' } }, session, principal), null)
    const err = await pending.then(() => null, (e: unknown) => e)
    t.ok(err instanceof OutboundRequestError)
    t.equal((err as OutboundRequestError).reason, 'error')
    t.notOk(d.holdsCalls(session.id))
  })

  t.test('an answer from another membership is refused and does not resolve', async (t) => {
    const d = new Dispatcher()
    const session = fakeSession()
    const principal = fakePrincipal()
    const intruder = fakePrincipal({ membershipId: 'mem_other', userId: 'usr_other', credential: 'key:key_2', credentialId: 'key_2' })
    const sink = recordingSink()
    let settled = false
    const pending = d.request(session, principal, sink, 'elicitation/create', {}, { timeoutMs: 5000 })
    pending.then(() => (settled = true), () => (settled = true))
    const id = (sink.sent[0] as JsonRpcRequest).id
    const refused = d.acceptResponse({ jsonrpc: '2.0', id, result: { action: 'accept' } }, session, intruder)
    t.not(refused, null)
    t.equal(refused?.code, 'INVALID_REQUEST')
    t.equal(refused?.status, 400)
    await new Promise((r) => setTimeout(r, 20))
    t.equal(settled, false, 'the wait goes on')
    t.ok(d.holdsCalls(session.id), 'still pending')
    // The right member can still answer.
    t.equal(d.acceptResponse({ jsonrpc: '2.0', id, result: { action: 'decline' } }, session, principal), null)
    t.same(await pending, { action: 'decline' })
  })

  t.test('an unknown id is refused', async (t) => {
    const d = new Dispatcher()
    const session = fakeSession()
    const principal = fakePrincipal()
    t.equal(d.acceptResponse({ jsonrpc: '2.0', id: 999, result: {} }, session, principal)?.code, 'INVALID_REQUEST', 'no runtime at all')
    t.equal(d.acceptResponse({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'x' } }, session, principal)?.code, 'INVALID_REQUEST', 'null id')
    const sink = recordingSink()
    const pending = d.request(session, principal, sink, 'm', {}, { timeoutMs: 5000 })
    const id = (sink.sent[0] as JsonRpcRequest).id as number
    t.equal(d.acceptResponse({ jsonrpc: '2.0', id: id + 100, result: {} }, session, principal)?.code, 'INVALID_REQUEST', 'unknown id with one pending')
    t.equal(d.acceptResponse({ jsonrpc: '2.0', id: String(id), result: {} }, session, principal)?.code, 'INVALID_REQUEST', 'same digits as a string is another id')
    t.equal(d.acceptResponse({ jsonrpc: '2.0', id, result: { ok: 1 } }, session, principal), null)
    t.same(await pending, { ok: 1 })
    t.equal(d.acceptResponse({ jsonrpc: '2.0', id, result: {} }, session, principal)?.code, 'INVALID_REQUEST', 'a second answer is refused')
  })

  t.test('timeout rejects with reason timeout and sends notifications/cancelled', async (t) => {
    const d = new Dispatcher()
    const session = fakeSession()
    const principal = fakePrincipal()
    const sink = recordingSink()
    const started = Date.now()
    const err = await d.request(session, principal, sink, 'elicitation/create', {}, { timeoutMs: 30 }).then(() => null, (e: unknown) => e)
    t.ok(Date.now() - started >= 25, 'waited for the timeout')
    t.ok(err instanceof OutboundRequestError)
    t.equal((err as OutboundRequestError).reason, 'timeout')
    t.equal(sink.sent.length, 2)
    const id = (sink.sent[0] as JsonRpcRequest).id
    const cancel = sink.sent[1] as unknown as { method: string; params: { requestId: RequestId; reason?: string }; id?: unknown }
    t.equal(cancel.method, 'notifications/cancelled')
    t.equal(cancel.params.requestId, id)
    t.type(cancel.params.reason, 'string')
    t.notOk('id' in cancel, 'a notification has no id')
    t.notOk(d.holdsCalls(session.id), 'nothing held any more')
    t.equal(d.acceptResponse({ jsonrpc: '2.0', id, result: {} }, session, principal)?.code, 'INVALID_REQUEST', 'a late answer is refused')
  })

  t.test('a sink that cannot send rejects with reason closed', async (t) => {
    const d = new Dispatcher()
    const session = fakeSession()
    const sink = recordingSink(false)
    const err = await d.request(session, fakePrincipal(), sink, 'elicitation/create', {}, { timeoutMs: 5000 }).then(() => null, (e: unknown) => e)
    t.ok(err instanceof OutboundRequestError)
    t.equal((err as OutboundRequestError).reason, 'closed')
    t.notOk(d.holdsCalls(session.id), 'nothing left pending')
  })

  t.test('an abort signal rejects with reason aborted and tells the client', async (t) => {
    const d = new Dispatcher()
    const session = fakeSession()
    const sink = recordingSink()
    const ac = new AbortController()
    const pending = d.request(session, fakePrincipal(), sink, 'elicitation/create', {}, { timeoutMs: 5000, signal: ac.signal })
    ac.abort()
    const err = await pending.then(() => null, (e: unknown) => e)
    t.equal((err as OutboundRequestError).reason, 'aborted')
    t.equal((sink.sent[1] as { method: string }).method, 'notifications/cancelled')
    t.notOk(d.holdsCalls(session.id))

    const pre = new AbortController()
    pre.abort()
    const sink2 = recordingSink()
    const err2 = await d.request(session, fakePrincipal(), sink2, 'm', {}, { timeoutMs: 5000, signal: pre.signal }).then(() => null, (e: unknown) => e)
    t.equal((err2 as OutboundRequestError).reason, 'aborted', 'an already aborted signal rejects at once')
    t.same(sink2.sent, [], 'neither the request nor a cancellation for a request never issued is sent')
    t.notOk(d.holdsCalls(session.id))
  })

  t.test('ending the session rejects pending requests with reason closed', async (t) => {
    const d = new Dispatcher()
    const session = fakeSession()
    const sink = recordingSink()
    const pending = d.request(session, fakePrincipal(), sink, 'm', {}, { timeoutMs: 5000 })
    d.endSession(session.id, 'session deleted')
    const err = await pending.then(() => null, (e: unknown) => e)
    t.equal((err as OutboundRequestError).reason, 'closed')
  })
})

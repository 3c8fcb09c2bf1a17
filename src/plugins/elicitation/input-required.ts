import type { FastifyInstance } from 'fastify'
import { lastingCredential, type Principal } from '../../auth/principal.js'
import { fail, ServiceError } from '../../errors/service-error.js'
import { randomSecret } from '../../lib/crypto.js'
import { capabilityName, checkAnswer, missingCapability, onTheWire, type InputRequests, type InputResponses } from '../../mcp/input-requests.js'
import { argumentsDigest } from '../../lib/canonical-json.js'
import type { RequestStateSealer } from '../../mrtr/state-sealer.js'
import type { CallContext } from '../../rpc/dispatcher.js'
import type { Exchange } from '../../rpc/exchange.js'
import type { AskOptions, AskTarget } from '../../rpc/handler-context.js'
import type { Asked } from './asked.js'

/**
 * Questions on a stateless (2026-07-28) request, with multi round-trip requests (MRTR). There is no stream to ask on
 * and nothing is remembered between requests, so:
 *
 * 1. The handler runs until its first unanswered `ask(requests)`, which ends the request with an `input_required`
 *    result: the requests as `inputRequests` (their keys are the handler's), and a `requestState` sealed by the server
 *    (AES-256-GCM, see RequestStateSealer) naming an operation id, the member, organization and lasting credential
 *    (API key or OAuth grant), the target (`tools/call <name>`, `prompts/get <name>`, `resources/read <uri>`), the
 *    SHA-256 of the canonical arguments, the deadline of the pending questions, the answers of earlier rounds and the
 *    keys and kinds asked now.
 * 2. The client retries with a new JSON-RPC id, the same target and arguments, the answers in `inputResponses` and the
 *    `requestState` unchanged. The state is opened and checked against the retry before the handler runs: altered,
 *    forged, another member's, credential's, target's or arguments' → -32602, nothing runs. The handler then runs
 *    again from the start: each `ask` answered in an earlier round resolves at once with its sealed answer; the pending
 *    one reads `inputResponses` (every key answered and each answer fitting its request, else -32602; a key left
 *    unanswered asks the same questions again, same deadline; past the deadline INPUT_TIMEOUT); a later `ask` is a
 *    new round. Unknown keys in `inputResponses` are ignored.
 *
 * So a handler must change nothing before its asks and ask the same things in the same order: arguments cannot change
 * between rounds (they are bound), and an ask that differs from the one sealed is refused (-32602). Asking a kind the
 * client did not declare in this request's capabilities is -32021 (HTTP 400) with `requiredCapabilities`.
 *
 * The operation id makes a confirmed run happen at most once: CallIdempotency records it (docs/decisions/idempotency.md
 * and docs/decisions/stateless-revision.md).
 */

/** Thrown by `ask()` to end the request with an input_required result; the method answers with `result`. */
export class InputRequired extends Error {
  override name = 'InputRequired'
  constructor(readonly result: Record<string, unknown>) {
    super('the request needs the client to answer its input requests and retry')
  }
}

/**
 * Thrown by `ask()` when the retry itself is malformed (an answer that does not fit its request, a state the handler
 * no longer matches): the request gets a JSON-RPC error (-32602), never a tool result, whatever the handler does with
 * its own failures.
 */
export class AnswerRefused extends Error {
  override name = 'AnswerRefused'
  constructor(readonly error: ServiceError) {
    super(error.message)
  }
}

/** Largest requestState handed out (the request schemas accept up to 64 KiB): answers are carried in it. */
const MAX_STATE_LENGTH = 65_536

/** What a requestState holds (sealed, so the client can neither read nor change it). */
interface StatePayload {
  v: 2
  /** Operation id: identifies the run across retries (the key of a confirmed call's at-most-once record). */
  op: string
  /** Membership, organization and lasting credential it was issued to. */
  m: string
  o: string
  c: string
  /** Target (method and name or URI) and SHA-256 of the canonical arguments it was issued for. */
  t: string
  a: string
  /** When the pending questions expire (ms since epoch). */
  exp: number
  /** Checked answers of the earlier rounds, in order. */
  r: Array<Record<string, unknown>>
  /** The pending round: its keys and the method each asks. */
  p: Record<string, string>
}

function isStatePayload(p: Record<string, unknown>): p is Record<string, unknown> & StatePayload {
  return p.v === 2 && typeof p.op === 'string' && typeof p.m === 'string' && typeof p.o === 'string' && typeof p.c === 'string' &&
    typeof p.t === 'string' && typeof p.a === 'string' && typeof p.exp === 'number' && Array.isArray(p.r) &&
    p.r.every((x) => typeof x === 'object' && x !== null && !Array.isArray(x)) && typeof p.p === 'object' && p.p !== null && !Array.isArray(p.p)
}

/** One request's questions: its verified state, the answers it carries, and what its handler asked so far. */
class Round {
  /** ask() calls made by this run of the handler. */
  calls = 0
  /** Answers known to this run, in order: the sealed ones, then any answered by this request. */
  readonly known: Array<Record<string, unknown>>
  #digest: string | undefined
  #op: string | undefined

  constructor(
    readonly target: string,
    private readonly args: unknown,
    readonly state: StatePayload | null,
    readonly answers: Readonly<Record<string, unknown>> | undefined,
    digest?: string,
  ) {
    this.known = state ? [...state.r] : []
    this.#digest = digest
  }

  /** The operation: the state's, or a new one (sealed into the first question), minted when first needed. */
  get op(): string {
    return (this.#op ??= this.state?.op ?? randomSecret(16))
  }

  /** SHA-256 of the canonical arguments, computed only when a state is checked or minted (most requests never ask). */
  get digest(): string {
    return (this.#digest ??= argumentsDigest(this.args))
  }
}

const sameKeys = (a: Record<string, unknown>, b: Record<string, unknown>) => {
  const ka = Object.keys(a)
  return ka.length === Object.keys(b).length && ka.every((k) => k in b)
}

function refused(message: string, param = 'requestState'): AnswerRefused {
  return new AnswerRefused(new ServiceError('INVALID_PARAMS', { message, details: { param } }))
}

/** Each answer checked against its request (-32602 for the first that does not fit); unknown keys are left out. */
function checkedAnswers(requests: InputRequests, given: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const checked: Record<string, unknown> = {}
  for (const [key, request] of Object.entries(requests)) {
    const outcome = checkAnswer(request, given[key])
    if ('problem' in outcome) throw refused(`inputResponses.${key} does not answer its ${request.method} request: ${outcome.problem}`, `inputResponses.${key}`)
    checked[key] = outcome.ok
  }
  return checked
}

export function statelessAsker(fastify: FastifyInstance, sealer: RequestStateSealer) {
  const { config, clock } = fastify
  const rounds = new WeakMap<Exchange, Round>()

  /**
   * Before a handler runs on a stateless request: opens and checks its requestState (-32602 when it is not one of
   * ours, or not for this member, credential, target and arguments) and keeps its answers for `ask()`. A promise only
   * when the state names a key this process has not seen yet (RequestStateSealer.open).
   */
  function open(ctx: { exchange: Exchange; principal: Principal }, target: string, args: unknown, requestState: unknown, inputResponses: unknown): void | Promise<void> {
    // A request without state or answers is a first round: ask() makes its round if the handler ever asks.
    if (requestState === undefined && inputResponses === undefined) return
    if (requestState === undefined) return keep(ctx, target, args, null, inputResponses, undefined)
    const digest = argumentsDigest(args)
    const opened = typeof requestState === 'string' ? sealer.open(requestState) : null
    if (opened instanceof Promise) return opened.then((payload) => accept(ctx, target, args, payload, inputResponses, digest))
    accept(ctx, target, args, opened, inputResponses, digest)
  }

  /** The opened requestState checked against the retry; kept with its answers when it is this request's. */
  function accept(ctx: { exchange: Exchange; principal: Principal }, target: string, args: unknown, payload: Record<string, unknown> | null, inputResponses: unknown, digest: string): void {
    if (!payload || !isStatePayload(payload)) {
      throw fail('INVALID_PARAMS', {
        message: 'requestState is not one this server issued, or it was altered: send the request again without requestState and inputResponses',
        details: { param: 'requestState' },
      })
    }
    const p = ctx.principal
    if (payload.m !== p.membershipId || payload.o !== p.organizationId || payload.c !== lastingCredential(p) || payload.t !== target || payload.a !== digest) {
      throw fail('INVALID_PARAMS', {
        message: 'requestState belongs to another request: a retry repeats the method, name (or URI) and arguments of the request that returned it, with the same credential',
        details: { param: 'requestState' },
      })
    }
    keep(ctx, target, args, payload, inputResponses, digest)
  }

  /** Keeps the request's round: its verified state (null: none) and the answers it carries. */
  function keep(ctx: { exchange: Exchange }, target: string, args: unknown, state: StatePayload | null, inputResponses: unknown, digest: string | undefined): void {
    const answers = typeof inputResponses === 'object' && inputResponses !== null && !Array.isArray(inputResponses) ? (inputResponses as Record<string, unknown>) : undefined
    rounds.set(ctx.exchange, new Round(target, args, state, answers, digest))
  }

  /** The operation id of the request's verified requestState, when it carries one (the key of at-most-once). */
  function operationOf(exchange: Exchange): string | null {
    return rounds.get(exchange)?.state?.op ?? null
  }

  /** The operation of the request's round (made now when the handler has not asked yet): see RequestContext.operationId. */
  function operation(ctx: CallContext, about: AskTarget): string {
    return roundOf(ctx, about).op
  }

  function roundOf(ctx: CallContext, about: AskTarget): Round {
    let round = rounds.get(ctx.exchange)
    if (!round) {
      round = new Round(about.target, about.args, null, undefined)
      rounds.set(ctx.exchange, round)
    }
    return round
  }

  /** The input_required result that asks `requests` for the pending round `index` of this operation. */
  async function question(ctx: CallContext, round: Round, requests: InputRequests, exp: number): Promise<InputRequired> {
    const p = ctx.principal
    const state: StatePayload = {
      v: 2,
      op: round.op,
      m: p.membershipId,
      o: p.organizationId,
      c: lastingCredential(p),
      t: round.target,
      a: round.digest,
      exp,
      r: round.known,
      p: Object.fromEntries(Object.entries(requests).map(([k, r]) => [k, r.method])),
    }
    const sealed = await sealer.seal({ ...state })
    if (sealed.length > MAX_STATE_LENGTH) {
      throw fail('INVALID_PARAMS', { message: 'The answers given so far are too large to carry to the next round; answer with less' })
    }
    const inputRequests = Object.fromEntries(Object.entries(requests).map(([k, r]) => [k, onTheWire(r, 'modern')]))
    return new InputRequired({ resultType: 'input_required', inputRequests, requestState: sealed })
  }

  /**
   * One ask of the handler (see the module comment). `fresh` says whether the answers were given by this very
   * request (false: replayed from an earlier round's sealed state), so that what is recorded once is not recorded on
   * every retry.
   */
  async function ask<R extends InputRequests>(ctx: CallContext, about: AskTarget, requests: R, options: AskOptions = {}): Promise<Asked<R>> {
    const round = roundOf(ctx, about)
    const index = round.calls++
    const known = round.known[index]
    if (known !== undefined) {
      if (!sameKeys(known, requests)) throw refused('The handler asked other questions than the ones answered: send the request again without requestState and inputResponses')
      return { answers: known as InputResponses<R>, fresh: false }
    }
    const state = round.state
    if (state && index === state.r.length && sameKeys(state.p, requests) && Object.entries(requests).every(([k, r]) => state.p[k] === r.method)) {
      if (state.exp <= clock.now()) throw fail('INPUT_TIMEOUT')
      const given = round.answers ?? {}
      // Not answered (yet), or only in part: the same questions again, for the same operation and deadline.
      if (Object.keys(requests).some((k) => given[k] === undefined)) throw await question(ctx, round, requests, state.exp)
      const checked = checkedAnswers(requests, given)
      round.known.push(checked)
      return { answers: checked as InputResponses<R>, fresh: true }
    }
    if (state && index === state.r.length) throw refused('The handler asked other questions than the ones pending: send the request again without requestState and inputResponses')
    // Answers given before any question was asked count only where the handler says they need no proof.
    if (!state && options.acceptUnasked === true && round.answers !== undefined && Object.keys(requests).every((k) => round.answers![k] !== undefined)) {
      const checked = checkedAnswers(requests, round.answers)
      round.known.push(checked)
      return { answers: checked as InputResponses<R>, fresh: true }
    }
    // A round not asked yet. Only what the client declared in this very request may be asked.
    const required: Record<string, unknown> = {}
    for (const request of Object.values(requests)) Object.assign(required, missingCapability(request, ctx.exchange.clientCapabilities))
    if (Object.keys(required).length > 0) {
      throw fail('MISSING_CLIENT_CAPABILITY', {
        message: `${about.target} asks the client for input: declare ${capabilityName(required)} in this request's io.modelcontextprotocol/clientCapabilities`,
        details: { requiredCapabilities: required },
      })
    }
    throw await question(ctx, round, requests, clock.now() + config.elicitationTimeoutMs)
  }

  return { open, operationOf, operation, ask }
}

import type { FastifyInstance } from 'fastify'
import { lastingCredential, type Principal } from '../../auth/principal.js'
import { fail, type ServiceError } from '../../errors/service-error.js'
import { randomSecret } from '../../lib/crypto.js'
import { argumentsDigest } from '../../mrtr/canonical.js'
import type { RequestStateSealer } from '../../mrtr/state-sealer.js'
import type { CallContext } from '../../rpc/dispatcher.js'
import { canElicitForm, type Exchange } from '../../rpc/exchange.js'
import { checkConfirmAnswer, confirmationRequest, confirms, recordOutcome } from './form.js'

/**
 * Confirmation on a stateless (2026-07-28) request, with multi round-trip requests (MRTR). There is no stream to ask
 * on and nothing is remembered between requests, so:
 *
 * 1. The tool runs until its `confirm(message)`, which ends the call with an `input_required` result: one form
 *    `elicitation/create` input request (`confirm`, the same message and boolean schema as in a session) and a
 *    `requestState` sealed by the server (AES-256-GCM, see RequestStateSealer) naming an operation id, the member,
 *    organization and lasting credential (API key or OAuth grant), the tool, the SHA-256 of the canonical arguments,
 *    an expiry (the confirmation timeout) and which confirmations are already granted. Nothing has changed yet: a tool
 *    changes nothing before it is confirmed.
 * 2. The client retries the call (a new JSON-RPC id, the same name and arguments) with the user's answer in
 *    `inputResponses.confirm` and the `requestState` unchanged. The state is opened and checked against the retry
 *    before anything runs: altered, forged, another member's, another credential's, another tool's or other
 *    arguments' → -32602, nothing runs. Then the tool runs again and its `confirm(message)` reads the answer: accept
 *    with `confirm: true` → goes ahead; decline, cancel or false → ELICITATION_DENIED; past the expiry →
 *    ELICITATION_TIMEOUT; no answer → the same question again (same operation, same expiry); a malformed answer →
 *    -32602. A tool that asks again later gets `confirm_2`, `confirm_3`… in further rounds.
 *
 * The operation id makes the confirmed run happen at most once: CallIdempotency records it in the database, so a replay
 * of the same accepted state while it runs is a 409 and afterwards gets the stored result (decisions.md §6 and §10).
 * A client that did not declare `elicitation` in this request's capabilities is not asked: -32021 (HTTP 400) with
 * `requiredCapabilities: {elicitation: {}}`, as the revision prescribes.
 */

/** Thrown by `confirm()` to end the call with an input_required result; the tools plugin answers with `result`. */
export class InputRequired extends Error {
  override name = 'InputRequired'
  constructor(readonly result: Record<string, unknown>) {
    super('the call needs the client to answer an input request and retry')
  }
}

/**
 * Thrown by `confirm()` when the retry itself is malformed (an answer that does not fit the form): the request gets a
 * JSON-RPC error (-32602), never a tool result, whatever the tool does with its own failures.
 */
export class AnswerRefused extends Error {
  override name = 'AnswerRefused'
  constructor(readonly error: ServiceError) {
    super(error.message)
  }
}

/** What a requestState holds (sealed, so the client can neither read nor change it). */
interface StatePayload {
  v: 1
  /** Operation id: identifies the confirmed run across retries. */
  op: string
  /** Membership, organization and lasting credential it was issued to. */
  m: string
  o: string
  c: string
  /** Tool and SHA-256 of the canonical arguments it was issued for. */
  t: string
  a: string
  /** When the pending question expires (ms since epoch). */
  exp: number
  /** Confirmations of this operation already granted in earlier rounds. */
  n: number
  /** Key of the pending question (`confirm`, `confirm_2`, …). */
  k: string
}

function isStatePayload(p: Record<string, unknown>): p is Record<string, unknown> & StatePayload {
  return p.v === 1 && typeof p.op === 'string' && typeof p.m === 'string' && typeof p.o === 'string' && typeof p.c === 'string' &&
    typeof p.t === 'string' && typeof p.a === 'string' && typeof p.exp === 'number' && Number.isSafeInteger(p.n) && typeof p.k === 'string'
}

/** One tools/call of a stateless request, as far as confirmations go: its verified state and answers, if any. */
class ConfirmationRound {
  /** confirm() calls made by this run of the tool. */
  calls = 0
  #digest: string | undefined

  constructor(
    readonly tool: string,
    private readonly args: unknown,
    readonly state: StatePayload | null,
    readonly answers: Readonly<Record<string, unknown>> | undefined,
    digest?: string,
  ) {
    this.#digest = digest
  }

  /** SHA-256 of the canonical arguments, computed only when a state is checked or minted (most calls never ask). */
  get digest(): string {
    return (this.#digest ??= argumentsDigest(this.args))
  }
}

function keyOf(index: number): string {
  return index === 1 ? 'confirm' : `confirm_${index}`
}

export function inputRequiredConfirmation(fastify: FastifyInstance, sealer: RequestStateSealer) {
  const { repos, config } = fastify
  const rounds = new WeakMap<Exchange, ConfirmationRound>()

  /**
   * Before a stateless tools/call runs: opens and checks its requestState (-32602 when it is not one of ours, or not
   * for this member, credential, tool and arguments) and keeps its answers for `confirm()`.
   */
  function open(ctx: { exchange: Exchange; principal: Principal }, toolName: string, args: unknown, requestState: unknown, inputResponses: unknown): void {
    // A call without state or answers is a first round: confirm() makes its round if the tool ever asks.
    if (requestState === undefined && inputResponses === undefined) return
    let state: StatePayload | null = null
    let digest: string | undefined
    if (requestState !== undefined) {
      digest = argumentsDigest(args)
      const payload = typeof requestState === 'string' ? sealer.open(requestState) : null
      if (!payload || !isStatePayload(payload)) {
        throw fail('INVALID_PARAMS', {
          message: 'requestState is not one this server issued, or it was altered: call the tool again without requestState and inputResponses',
          details: { param: 'requestState' },
        })
      }
      const p = ctx.principal
      if (payload.m !== p.membershipId || payload.o !== p.organizationId || payload.c !== lastingCredential(p) || payload.t !== toolName || payload.a !== digest) {
        throw fail('INVALID_PARAMS', {
          message: 'requestState belongs to another call: a retry repeats the tool name and arguments of the call that returned it, with the same credential',
          details: { param: 'requestState' },
        })
      }
      state = payload
    }
    const answers = typeof inputResponses === 'object' && inputResponses !== null ? (inputResponses as Record<string, unknown>) : undefined
    rounds.set(ctx.exchange, new ConfirmationRound(toolName, args, state, answers, digest))
  }

  /** The operation id of the call's verified requestState, when it carries one (the key of at-most-once). */
  function operationOf(exchange: Exchange): string | null {
    return rounds.get(exchange)?.state?.op ?? null
  }

  function ask(ctx: CallContext, round: ConfirmationRound, index: number, message: string, exp: number): InputRequired {
    const p = ctx.principal
    const key = keyOf(index)
    const state: StatePayload = {
      v: 1,
      op: round.state?.op ?? randomSecret(16),
      m: p.membershipId,
      o: p.organizationId,
      c: lastingCredential(p),
      t: round.tool,
      a: round.digest,
      exp,
      n: index - 1,
      k: key,
    }
    return new InputRequired({
      resultType: 'input_required',
      inputRequests: { [key]: { method: 'elicitation/create', params: confirmationRequest(message) } },
      requestState: sealer.seal({ ...state }),
    })
  }

  async function confirm(ctx: CallContext, toolName: string, args: unknown, message: string): Promise<void> {
    let round = rounds.get(ctx.exchange)
    if (!round) {
      round = new ConfirmationRound(toolName, args, null, undefined)
      rounds.set(ctx.exchange, round)
    }
    const index = ++round.calls
    const granted = round.state?.n ?? 0
    if (index <= granted) return // answered with accept in an earlier round of this operation
    const key = keyOf(index)
    const state = round.state
    const record = (outcome: Parameters<typeof recordOutcome>[4], details: Record<string, unknown> = {}) =>
      recordOutcome(repos, ctx, toolName, message, outcome, { operation_id: state?.op, ...details })

    if (state && index === granted + 1 && state.k === key) {
      if (state.exp <= Date.now()) {
        record('timed_out')
        throw fail('ELICITATION_TIMEOUT')
      }
      const answer = round.answers?.[key]
      // Not answered (yet): the same question, for the same operation and deadline.
      if (answer === undefined) throw ask(ctx, round, index, message, state.exp)
      const problem = checkConfirmAnswer(answer)
      if (problem !== null) {
        throw new AnswerRefused(fail('INVALID_PARAMS', {
          message: `inputResponses.${key} does not answer the confirmation: ${problem}`,
          details: { param: `inputResponses.${key}` },
        }))
      }
      const a = answer as Record<string, unknown>
      if (confirms(a)) {
        record('confirmed')
        return
      }
      record('declined', { action: a.action, ...(a.action === 'accept' ? { confirm: (a.content as { confirm?: unknown }).confirm } : {}) })
      throw fail('ELICITATION_DENIED')
    }
    // A question not asked yet. Only a client that declared elicitation in this very request may be asked.
    if (!canElicitForm(ctx.exchange.clientCapabilities)) {
      throw fail('MISSING_CLIENT_CAPABILITY', {
        message: `${toolName} asks the user for confirmation: declare the elicitation capability (form) in this request's io.modelcontextprotocol/clientCapabilities`,
        details: { requiredCapabilities: { elicitation: {} } },
      })
    }
    throw ask(ctx, round, index, message, Date.now() + config.elicitationTimeoutMs)
  }

  return { open, operationOf, confirm }
}

import type { FastifyBaseLogger } from 'fastify'
import { randomSecret } from '../lib/crypto.js'
import type { Principal } from '../auth/principal.js'
import type { Config } from '../config.js'
import type { Repos } from '../db/repos/index.js'
import type { EventBus } from '../lib/event-bus.js'
import type {
  CreateMessageParams,
  CreateMessageResult,
  ElicitForm,
  ElicitResult,
  ElicitUrlParams,
  InputRequests,
  InputResponses,
  ListRootsResult,
} from '../mcp/input-requests.js'
import { sendLog, type CallContext } from './dispatcher.js'
import type { ClientCapabilities, SessionView } from './exchange.js'
import type { Era, LogLevel, ProtocolVersion, RequestId } from './types.js'

/**
 * What every handler of the embedding API gets (tools, prompts, resources, completions): who is asking, in which era,
 * and the means to ask the client something back. Tools get more (ToolContext).
 */
export interface RequestContext {
  principal: Principal
  /**
   * The legacy session of the request, as a read-only record (who it is bound to, what was negotiated); null on
   * stateless (2026-07-28) requests, which have none. What the session is doing (its calls, its streams) is not here.
   */
  session: SessionView | null
  /** The revision the request came in: a session's negotiated one, or the request's own (`2026-07-28`). */
  protocolVersion: ProtocolVersion
  /** `legacy` (a session of the 2025 revisions) or `modern` (a stateless 2026-07-28 request). */
  era: Era
  requestId: RequestId
  /**
   * Aborted when the request is cancelled: notifications/cancelled in a session (CancelledByClient), tasks/cancel for
   * a task (TaskCancelled), the session ending (SessionEnded), or the client closing the connection of a stateless
   * request (ClientDisconnected).
   */
  signal: AbortSignal
  /** What the client declared: at initialize (legacy), or in this very request (modern). */
  clientCapabilities: Readonly<ClientCapabilities>
  /** Server-side logger (never sent to the client). */
  logger: FastifyBaseLogger
  repos: Repos
  /** The server's configuration (read only). */
  config: Readonly<Config>
  /**
   * Sends notifications/message when the level passes the threshold: the session's logging/setLevel, or the
   * request's own `io.modelcontextprotocol/logLevel` (without one, a stateless request gets no log messages).
   */
  log(level: LogLevel, data: unknown, logger?: string): void
  /**
   * Asks the client one or more things at once (keys name them) and resolves with the answers, checked against what
   * was asked. In a session each request is sent on the request's SSE stream and awaited. On a stateless request the
   * first run of the handler ends here with an `input_required` result; the client's retry runs the handler again
   * from the start, and each ask already answered resolves at once with its answer (sealed in the requestState). So:
   * change nothing before an ask, ask the same things in the same order, and let whatever it throws propagate.
   * Throws CAPABILITY_REQUIRED (session) or MISSING_CLIENT_CAPABILITY (stateless) when the client did not declare
   * what a request needs (`elicitation`, `sampling`, `roots`): look at `clientCapabilities` first to ask only what
   * it can answer.
   *
   * A 2026-07-28 client may answer before it is asked (`inputResponses` on a first request, without requestState).
   * Such answers are ignored (the questions are asked, bound to the request), unless `acceptUnasked` says that an
   * answer needs no proof this server asked it for these arguments: then well-formed unasked answers are taken.
   * Never for anything that authorizes a change.
   */
  ask<R extends InputRequests>(requests: R, options?: AskOptions): Promise<InputResponses<R>>
  /** Asks the user to fill a form (`elicitation/create`); see `ask`. */
  elicit(message: string, requestedSchema: ElicitForm, key?: string): Promise<ElicitResult>
  /**
   * Asks the person to open `url` in their browser (URL-mode elicitation; docs/decisions/url-elicitation.md) and
   * resolves with their choice: `accept` means they consented to open it, not that what the page does is done. Only
   * for clients that declared `elicitation.url` (look at `clientCapabilities`): otherwise it throws as `ask` does. The
   * URL must be on a page that identifies the person itself (never one that works for whoever holds the link), and
   * nothing secret goes in it. `elicitationId` names it in 2025-11-25 (and in `completeElicitation`); on a stateless
   * request it is not sent, and the handler must pass the same one on every retry.
   */
  elicitUrl(request: Omit<ElicitUrlParams, 'mode'>, key?: string): Promise<ElicitResult>
  /**
   * Tells the client that the out-of-band part of the URL-mode elicitation `elicitationId` finished
   * (`notifications/elicitation/complete` on the call's stream, 2025-11-25 sessions). 2026-07-28 removed the
   * notification (the client learns the outcome by retrying), so on a stateless request, and in sessions of earlier
   * revisions, nothing is sent.
   */
  completeElicitation(elicitationId: string): void
  /**
   * Names this operation, the same on every run of it: on a stateless request, the id sealed in its requestState
   * (minted here, or at the first ask, and carried by every retry); in a session, one per call. Random; it keys the
   * at-most-once record of a confirmed call and is in its audit entries, so derive ids from it with a hash rather than
   * using it as is. A handler that must make something before it asks (a row its question points to,
   * docs/decisions/url-elicitation.md) names it by this, so that the retries find it again.
   */
  readonly operationId: string
  /** Asks the client's LLM for a completion (`sampling/createMessage`); see `ask`. */
  sample(params: CreateMessageParams, key?: string): Promise<CreateMessageResult>
  /** Asks the client for its roots (`roots/list`); see `ask`. */
  listRoots(key?: string): Promise<ListRootsResult>
  /**
   * Tells the clients of the caller's organization that resources changed (never another organization's): `updated`
   * reaches those following `uri` (sessions that subscribed to it, listen streams that asked for it); `listChanged`
   * tells them all to list resources again (something a template lists was created, renamed or deleted).
   */
  resources: ResourceAnnouncer
}

export interface ResourceAnnouncer {
  updated(uri: string): void
  listChanged(): void
}

/** What a HandlerContext is built with: the plugins' shared parts. */
export interface HandlerDeps {
  asker: Asker
  repos: Repos
  config: Readonly<Config>
  events: EventBus
}

/** The HandlerDeps of an app (each plugin that builds handler contexts takes them once, at registration). */
export function handlerDeps(app: { elicitation: Asker; repos: Repos; config: Readonly<Config>; events: EventBus }): HandlerDeps {
  return { asker: app.elicitation, repos: app.repos, config: app.config, events: app.events }
}

export interface AskOptions {
  /** Take answers a stateless client gave before being asked (see RequestContext.ask). */
  acceptUnasked?: boolean
  /**
   * In a session: withdraws the questions when it aborts (notifications/cancelled for each), and the ask fails with
   * OPERATION_CANCELLED; for what outlives the answer it waits for (a pipeline's run that ended while asking).
   */
  signal?: AbortSignal
}

/** How a handler's questions reach the client: the elicitation plugin, one strategy per era. */
export interface Asker {
  /** `about` names what the questions are for (bound into a stateless requestState): the method's target and arguments. */
  ask<R extends InputRequests>(ctx: CallContext, about: AskTarget, requests: R, options?: AskOptions): Promise<InputResponses<R>>
  /** The operation a stateless request belongs to (its requestState's, or the one its first ask will seal); null in a session. */
  operation(ctx: CallContext, about: AskTarget): string | null
}

/** What a handler's questions are about: `tools/call <name>`, `prompts/get <name>` or `resources/read <uri>`, and its arguments. */
export interface AskTarget {
  target: string
  args: unknown
}

/**
 * The RequestContext of one request. A class: one is made per call, and V8 makes class instances cheaply. Subclasses
 * (a tool's call) add their own parts.
 */
export class HandlerContext implements RequestContext {
  readonly principal: Principal
  readonly session: SessionView | null
  readonly protocolVersion: ProtocolVersion
  readonly era: Era
  readonly requestId: RequestId
  readonly logger: FastifyBaseLogger
  readonly repos: Repos
  readonly config: Readonly<Config>
  readonly #asker: Asker
  readonly #events: EventBus
  /** How many times each default key was used by this run: `elicit`, `elicit_2`… (the same on every retry). */
  readonly #keys = new Map<string, number>()
  #operationId: string | undefined

  constructor(protected readonly call: CallContext, protected readonly about: AskTarget, deps: HandlerDeps) {
    this.principal = call.principal
    this.session = call.session
    this.protocolVersion = call.exchange.protocolVersion
    this.era = call.exchange.era
    this.requestId = call.requestId
    this.logger = call.log
    this.repos = deps.repos
    this.config = deps.config
    this.#asker = deps.asker
    this.#events = deps.events
  }

  /** Made when a handler uses it (few do): a call that announces nothing pays nothing. */
  get resources(): ResourceAnnouncer {
    const events = this.#events
    const organizationId = this.principal.organizationId
    return {
      updated: (uri) => events.emit({ type: 'resource.updated', uri, organizationId }),
      listChanged: () => events.emit({ type: 'list.changed', list: 'resources', organizationId }),
    }
  }

  get operationId(): string {
    return (this.#operationId ??= this.#asker.operation(this.call, this.about) ?? randomSecret(16))
  }

  get signal(): AbortSignal {
    return this.call.signal // made on first use (CallAbort)
  }

  get clientCapabilities(): Readonly<ClientCapabilities> {
    return this.call.exchange.clientCapabilities
  }

  log(level: LogLevel, data: unknown, logger = 'server'): void {
    sendLog(this.call, level, logger, data)
  }

  ask<R extends InputRequests>(requests: R, options?: AskOptions): Promise<InputResponses<R>> {
    return this.#asker.ask(this.call, this.about, requests, options)
  }

  async elicit(message: string, requestedSchema: ElicitForm, key?: string): Promise<ElicitResult> {
    const k = key ?? this.#nextKey('elicit')
    const answers = await this.ask({ [k]: { method: 'elicitation/create' as const, params: { mode: 'form' as const, message, requestedSchema } } })
    return answers[k]!
  }

  async elicitUrl(request: Omit<ElicitUrlParams, 'mode'>, key?: string): Promise<ElicitResult> {
    const k = key ?? this.#nextKey('elicit')
    const params: ElicitUrlParams = { mode: 'url', message: request.message, url: request.url, elicitationId: request.elicitationId }
    const answers = await this.ask({ [k]: { method: 'elicitation/create' as const, params } })
    return answers[k]!
  }

  completeElicitation(elicitationId: string): void {
    // Only sessions of the revision that defines it: an earlier session's client would not know the method.
    if (this.era !== 'legacy' || this.protocolVersion < '2025-11-25') return
    this.call.sink.send({ jsonrpc: '2.0', method: 'notifications/elicitation/complete', params: { elicitationId } })
  }

  async sample(params: CreateMessageParams, key?: string): Promise<CreateMessageResult> {
    const k = key ?? this.#nextKey('sample')
    const answers = await this.ask({ [k]: { method: 'sampling/createMessage' as const, params } })
    return answers[k]!
  }

  async listRoots(key?: string): Promise<ListRootsResult> {
    const k = key ?? this.#nextKey('roots')
    const answers = await this.ask({ [k]: { method: 'roots/list' as const } })
    return answers[k]!
  }

  #nextKey(base: string): string {
    const n = (this.#keys.get(base) ?? 0) + 1
    this.#keys.set(base, n)
    return n === 1 ? base : `${base}_${n}`
  }
}

import type { FastifyBaseLogger } from 'fastify'
import type { Principal, Scope } from '../auth/principal.js'
import type { Bus } from '../coordination/bus.js'
import type { ProcessInbox } from '../coordination/inbox.js'
import { ServiceError } from '../errors/service-error.js'
import { CancelledByClient } from '../rpc/call-abort.js'
import type { Dispatcher } from '../rpc/dispatcher.js'
import type { JsonRpcResponse, LogLevel, RequestId } from '../rpc/types.js'
import type { Session } from './session.js'

/**
 * What one process tells the others about a session (a 2025 one): they may hold parts of it in memory (a call it runs,
 * a question it awaits, a GET stream it serves), since a load balancer without sticky sessions sends each request of a
 * session wherever it likes.
 */
export type SessionNews =
  /** notifications/cancelled for a call that does not run here. */
  | { kind: 'cancel'; session: string; requestId: RequestId; reason: string }
  /** DELETE, or its credential revoked: its calls stop, its streams end. */
  | { kind: 'closed'; session: string; reason: string }
  | { kind: 'changed'; session: string; logLevel?: LogLevel; initialized?: true }
  /** resources/subscribe and unsubscribe: updates go out on the GET stream, which another process may serve. */
  | { kind: 'subscriptions'; session: string; uris: string[]; scopes: Scope[] }

/** An answer to a question another process asked, forwarded to it; its verdict is the refusal, or null. */
type Forwarded = { session: string; membershipId: string; message: JsonRpcResponse }
type Verdict = { refusal: string | null }

/** What the relay asks of the session store: the sessions this process holds in memory, and how to drop one. */
export interface SessionHolder {
  inMemory(id: string): Session | undefined
  forget(session: Session, reason: string): void
  /** Applies what another process changed in a session's record. */
  applyNews(session: Session, news: { logLevel?: LogLevel; initialized?: boolean; subscriptions?: { uris: string[]; scopes: Scope[] } }): void
  /** Drops the sessions held with nothing live; returns how many. */
  forgetQuiet(): number
}

const NEWS = 'sessions'
const ANSWER = 'session.answer'

/**
 * The live parts of 2025 sessions across processes (decision 4 of docs/multi-process.md). Calls run where they arrive;
 * the questions they ask the client carry this process's id in their JSON-RPC id (`<n>.<process id>`), so an answer
 * that reaches another process is forwarded here (coordination/inbox.ts), and the process that received it answers its
 * sender with the verdict. Cancellations, closes and changes are told to every process, which applies them to what it holds.
 * A process alone tells nobody and asks nobody: `shared` false costs nothing.
 */
export class SessionRelay {
  readonly #unsubscribe: Array<() => void> = []

  constructor(
    private readonly options: {
      shared: boolean
      bus: Bus
      inbox: ProcessInbox
      processId: string
      rpc: Dispatcher
      sessions: SessionHolder
      log: FastifyBaseLogger
      /** How long a forwarded answer waits for the verdict of the process that asked. */
      forwardTimeoutMs: number
    },
  ) {}

  get shared(): boolean {
    return this.options.shared
  }

  async start(): Promise<void> {
    if (!this.shared) return
    const { bus, processId } = this.options
    this.#unsubscribe.push(await bus.subscribe(NEWS, (news) => this.#apply(news as SessionNews)))
    this.options.inbox.handle<Forwarded, Verdict>(ANSWER, (forwarded) => this.#judge(forwarded))
    // News published while the subscription was down is lost: sessions held without a live part are read again.
    bus.onResubscribed(() => this.#forgetQuiet())
    this.options.rpc.outboundIdSuffix = processId
  }

  stop(): void {
    for (const u of this.#unsubscribe.splice(0)) u()
  }

  /** Tells the other processes (nothing when alone). Fire and forget: news is a courtesy to what they hold. */
  tell(news: SessionNews): void {
    if (!this.shared) return
    this.options.log.debug({ session: news.session, news: news.kind }, 'session news told to the other processes')
    this.options.bus.publish(NEWS, news).catch((err: unknown) => this.options.log.warn({ err, news: news.kind }, 'could not tell the other processes about a session'))
  }

  /**
   * A client's answer to a question of this session: resolved here when this process asked it, forwarded to the
   * process that did otherwise. Null when accepted; else why it is refused.
   */
  answer(message: JsonRpcResponse, session: Session, principal: Principal): ServiceError | null | Promise<ServiceError | null> {
    const refused = this.options.rpc.acceptResponse(message, session, principal)
    if (refused === null || !this.shared) return refused
    const asker = askerOf(message.id)
    if (asker === undefined || asker === this.options.processId) return refused
    return this.#forward(asker, { session: session.id, membershipId: principal.membershipId, message })
  }

  async #forward(asker: string, forwarded: Forwarded): Promise<ServiceError | null> {
    this.options.log.debug({ session: forwarded.session, asker, id: forwarded.message.id }, 'answer forwarded to the process that asked')
    const verdict = await this.options.inbox.ask<Verdict>(asker, ANSWER, forwarded, this.options.forwardTimeoutMs)
    // No verdict: the process that asked is gone, and its question with it.
    if (verdict === undefined) return notAwaited(forwarded.message.id)
    return verdict.refusal === null ? null : new ServiceError('INVALID_REQUEST', { message: verdict.refusal })
  }

  /** The process that asked: resolves its question with the forwarded answer, or says why not. */
  #judge(forwarded: Forwarded): Verdict {
    const session = this.options.sessions.inMemory(forwarded.session)
    const refused = session
      ? this.options.rpc.acceptResponse(forwarded.message, session, { membershipId: forwarded.membershipId } as Principal)
      : notAwaited(forwarded.message.id)
    return { refusal: refused?.message ?? null }
  }

  #apply(news: SessionNews): void {
    const session = this.options.sessions.inMemory(news.session)
    if (!session) return
    switch (news.kind) {
      case 'cancel':
        this.options.rpc.cancel(session.id, news.requestId, new CancelledByClient(news.reason))
        return
      case 'closed':
        this.options.sessions.forget(session, news.reason)
        return
      case 'changed':
        this.options.sessions.applyNews(session, { ...(news.logLevel !== undefined ? { logLevel: news.logLevel } : {}), ...(news.initialized ? { initialized: true } : {}) })
        return
      case 'subscriptions':
        this.options.sessions.applyNews(session, { subscriptions: { uris: news.uris, scopes: news.scopes } })
        return
    }
  }

  /** Sessions held with nothing live are dropped from memory, to be read again from the database when next used. */
  #forgetQuiet(): void {
    const dropped = this.options.sessions.forgetQuiet()
    this.options.log.info({ sessions: dropped }, 'Redis subscription back: sessions held without a live part will be read again from the database')
  }
}

function notAwaited(id: RequestId | null): ServiceError {
  return new ServiceError('INVALID_REQUEST', { message: `No request with id ${JSON.stringify(id)} is awaiting an answer in this session` })
}

/** The process that asked a question, from the JSON-RPC id it gave it (`<n>.<process id>`). */
function askerOf(id: RequestId | null): string | undefined {
  if (typeof id !== 'string') return undefined
  const dot = id.indexOf('.')
  return dot > 0 ? id.slice(dot + 1) : undefined
}

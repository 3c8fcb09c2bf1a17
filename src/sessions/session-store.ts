import type { FastifyBaseLogger } from 'fastify'
import type { Repos } from '../db/repos/index.js'
import type { SessionRow } from '../db/repos/sessions.js'
import { ServiceError } from '../errors/service-error.js'
import { systemClock, type Clock, type ClockTimer } from '../lib/clock.js'
import { newSessionId } from '../lib/crypto.js'
import { isLegacyProtocolVersion, LOG_LEVELS, type LegacyProtocolVersion, type LogLevel } from '../rpc/types.js'
import type { SessionView } from '../rpc/exchange.js'
import type { Scope } from '../auth/principal.js'
import type { Session } from './session.js'
import type { SessionNews } from './session-relay.js'

export interface SessionStoreOptions {
  idleMs: number
  sweepMs: number
  touchFlushMs: number
  /**
   * Other processes serve the same sessions (a load balancer sends each request anywhere): a session that looks idle
   * here may be busy elsewhere, so the database's activity time is read before it expires.
   */
  shared?: boolean
  /** Tells the other processes what changed in a session (sessions/session-relay.ts); nothing when alone. */
  announce?: (news: SessionNews) => void
  /**
   * True while this process holds something live of the session (a call, a question, a stream): such a session stays
   * in memory when the quiet ones are forgotten (forgetQuiet).
   */
  holdsLive?: (sessionId: string) => boolean
  /** Idle time and the flush and sweep timers are measured by it (docs/decisions/clock.md); default the system's. */
  clock?: Clock
}

/**
 * Told when a session stops here: it ended (DELETE, expiry, revoked credential, closed by another process, or could not
 * be stored), or the server stops (`ended` false then: the session lives on in the database). What others hold of it
 * (calls, streams) stops with it.
 */
export type SessionStopListener = (session: Session, reason: string) => void

export interface NewSession {
  credential: string
  membershipId: string
  organizationId: string
  protocolVersion: LegacyProtocolVersion
  clientInfo: { name: string; version: string }
  clientCapabilities: Record<string, unknown>
}

/**
 * Sessions live in SQLite (so they survive a restart) and, while in use, in memory.
 *
 * The in-memory Map is kept in last-activity order: a touch moves the session to the end. Expiry therefore only ever
 * looks at the head of the Map (cost proportional to what expires, not to how many sessions exist), and activity
 * times reach the database in batches rather than one write per request.
 *
 * New sessions are written behind too: rows created during one event-loop turn are inserted together in one
 * transaction right after it (setImmediate), which costs a third of one commit per session. Until then the row lives
 * only in `unsaved`, and every other write of the session goes there instead of to the database. Anything that
 * writes sessions in the database by another key (endByCredential) saves them first.
 */
export class SessionStore {
  private readonly live = new Map<string, Session>()
  private readonly dirty = new Map<string, number>()
  private readonly unsaved = new Map<string, SessionRow>()
  /** Ids of new sessions whose insert is under way (no longer in `unsaved`, not committed yet). */
  private readonly saving = new Set<string>()
  /** Who waits for an unsaved session to reach the database (initialize answers only once it has). */
  private readonly waiting = new Map<string, { resolve(): void; reject(err: Error): void }>()
  private saveScheduled = false
  private readonly stopListeners: SessionStopListener[] = []
  private flushTimer: ClockTimer | null = null
  private sweepTimer: ClockTimer | null = null
  private readonly clock: Clock

  constructor(
    private readonly repos: Repos,
    private readonly options: SessionStoreOptions,
    private readonly log: FastifyBaseLogger,
  ) {
    this.clock = options.clock ?? systemClock
  }

  /** Adds a listener told when a session stops here (SessionStopListener). */
  onStopped(listener: SessionStopListener): void {
    this.stopListeners.push(listener)
  }

  start(): void {
    // Each run reports its own failure: the system clock does not wait for it (a manual one does, lib/clock.ts).
    this.flushTimer = this.clock.setInterval(() => this.flush().catch((err: unknown) => this.log.error({ err }, 'could not flush sessions')), this.options.touchFlushMs)
    this.flushTimer.unref()
    this.sweepTimer = this.clock.setInterval(() => this.sweep().then(() => {}, (err: unknown) => this.log.error({ err }, 'could not sweep sessions')), this.options.sweepMs)
    this.sweepTimer.unref()
  }

  async stop(): Promise<void> {
    this.clock.clearTimer(this.flushTimer ?? undefined)
    this.clock.clearTimer(this.sweepTimer ?? undefined)
    this.flushTimer = this.sweepTimer = null
    await this.flush() // saves unsaved sessions too
    for (const s of this.live.values()) this.tellStopped(s, 'server shutting down')
    this.live.clear()
  }

  get size(): number {
    return this.live.size
  }

  /** The sessions in memory (the ones with a client about): for notifications that go to every session concerned. */
  liveSessions(): IterableIterator<Session> {
    return this.live.values()
  }

  create(input: NewSession, now = this.clock.now()): Session {
    const row: SessionRow = {
      id: newSessionId(),
      credential: input.credential,
      membershipId: input.membershipId,
      organizationId: input.organizationId,
      protocolVersion: input.protocolVersion,
      clientInfo: input.clientInfo,
      clientCapabilities: input.clientCapabilities,
      logLevel: 'info',
      initializedAt: null,
      createdAt: now,
      lastSeenAt: now,
      endedAt: null,
    }
    this.unsaved.set(row.id, row)
    if (!this.saveScheduled) {
      this.saveScheduled = true
      // A timer cannot wait: saveNew never rejects (a session that cannot be stored fails its initialize).
      setImmediate(() => void this.saveNew())
    }
    const session = this.fromRow(row)
    this.live.set(session.id, session)
    return session
  }

  /**
   * Resolves once the session's row is committed; rejects with SERVICE_UNAVAILABLE when it could not be stored (full
   * disk, read-only database), and the session is then gone: an initialize must not succeed for a session that a
   * restart would lose.
   */
  saved(session: Session): Promise<void> {
    if (!this.unsaved.has(session.id) && !this.saving.has(session.id)) return Promise.resolve()
    return new Promise((resolve, reject) => this.waiting.set(session.id, { resolve, reject }))
  }

  /**
   * Inserts the sessions created since the last save, together in one transaction. If that fails, each row is tried on
   * its own, so that one row that cannot be written never costs another member's session; a session whose row cannot
   * be stored is dropped and its initialize fails. Never rejects.
   */
  async saveNew(): Promise<void> {
    this.saveScheduled = false
    if (this.unsaved.size === 0) return
    const rows = [...this.unsaved.values()]
    this.unsaved.clear()
    for (const row of rows) this.saving.add(row.id)
    try {
      await this.repos.sessions.insertMany(rows)
      for (const row of rows) this.settle(row.id)
      return
    } catch (err) {
      if (rows.length === 1) return this.unstorable(rows[0]!, err)
      this.log.warn({ err, sessions: rows.length }, 'could not save new sessions together; saving them one by one')
    }
    for (const row of rows) {
      try {
        await this.repos.sessions.insertMany([row])
        this.settle(row.id)
      } catch (err) {
        this.unstorable(row, err)
      }
    }
  }

  private unstorable(row: SessionRow, err: unknown): void {
    this.log.error({ err, session: row.id, membership: row.membershipId }, 'could not save a new session: its initialize fails')
    const session = this.live.get(row.id)
    if (session) this.drop(session, 'session could not be stored')
    this.settle(row.id, new ServiceError('SERVICE_UNAVAILABLE', { message: 'The session could not be stored; nothing was kept. Retry later', retryAfter: 5, cause: err }))
  }

  private settle(id: string, err?: Error): void {
    this.saving.delete(id)
    const waiter = this.waiting.get(id)
    if (!waiter) return
    this.waiting.delete(id)
    if (err) waiter.reject(err)
    else waiter.resolve()
  }

  /**
   * The live session with this id, or undefined when unknown, ended or idle for too long. A session in memory is
   * answered at once (the path of every request of a session); one that must be read from the database, with a promise.
   */
  get(id: string, now = this.clock.now()): Session | undefined | Promise<Session | undefined> {
    const session = this.live.get(id)
    if (!session) return this.load(id, now)
    if (this.options.shared && this.idle(session, now)) return this.recheck(session, now)
    return this.current(session, now)
  }

  /** The session, when this process holds it in memory (never read from the database). */
  inMemory(id: string): Session | undefined {
    return this.live.get(id)
  }

  private idle(session: Session, now: number): boolean {
    return session.lastSeenAt + this.options.idleMs <= now
  }

  /** Shared: a session idle here may have been used through another process; the database says when it was last seen. */
  private async recheck(session: Session, now: number): Promise<Session | undefined> {
    const row = await this.repos.sessions.byId(session.id)
    if (row && row.endedAt === null && row.lastSeenAt > session.lastSeenAt) session.lastSeenAt = row.lastSeenAt
    if (!row || row.endedAt !== null) {
      this.drop(session, 'session closed')
      return undefined
    }
    return this.current(session, now)
  }

  /** A session not in memory, read from the database (after a restart, or once expired from memory). */
  private async load(id: string, now: number): Promise<Session | undefined> {
    const row = await this.repos.sessions.byId(id)
    if (!row || row.endedAt !== null || !isLegacyProtocolVersion(row.protocolVersion)) return undefined
    // Another request may have loaded it meanwhile: one Session object per id.
    let session = this.live.get(id)
    if (!session) {
      session = this.fromRow(row)
      this.live.set(id, session)
    }
    return this.current(session, now)
  }

  private current(session: Session, now: number): Session | undefined {
    if (session.lastSeenAt + this.options.idleMs <= now) {
      this.expire(session)
      return undefined
    }
    return session
  }

  /** Restarts the idle timer. */
  touch(session: Session, now = this.clock.now()): void {
    session.lastSeenAt = now
    this.live.delete(session.id)
    this.live.set(session.id, session)
    this.dirty.set(session.id, now)
  }

  /** notifications/initialized. The record in memory (when it still is) changes here; the row by its id. */
  async markInitialized(view: SessionView): Promise<void> {
    if (view.initialized) return
    const session = this.live.get(view.id)
    if (session) session.initialized = true
    const now = this.clock.now()
    const row = this.unsaved.get(view.id)
    if (row) row.initializedAt = now
    else await this.repos.sessions.markInitialized(view.id, now)
    this.options.announce?.({ kind: 'changed', session: view.id, initialized: true })
  }

  /** logging/setLevel. The record in memory (when it still is) changes here; the row by its id. */
  async setLogLevel(view: SessionView, level: LogLevel): Promise<void> {
    const session = this.live.get(view.id)
    if (session) session.logLevel = level
    const row = this.unsaved.get(view.id)
    if (row) row.logLevel = level
    else await this.repos.sessions.setLogLevel(view.id, level)
    this.options.announce?.({ kind: 'changed', session: view.id, logLevel: level })
  }

  /**
   * resources/subscribe: the session follows `uri` (with the scopes of the credential that asked). False when it
   * follows `max` resources already and not this one.
   */
  subscribe(view: SessionView, uri: string, scopes: readonly Scope[], max: number): boolean {
    const session = this.live.get(view.id)
    if (!session) return true // ended meanwhile: nothing to follow
    const uris = new Set(session.subscriptions?.uris)
    if (!uris.has(uri) && uris.size >= max) return false
    uris.add(uri)
    session.subscriptions = { uris, scopes: session.subscriptions?.scopes ?? scopes }
    this.subscriptionsChanged(session)
    return true
  }

  /** resources/unsubscribe: the session no longer follows `uri` (harmless when it never did). */
  unsubscribe(view: SessionView, uri: string): void {
    const session = this.live.get(view.id)
    if (!session?.subscriptions?.uris.has(uri)) return
    const uris = new Set(session.subscriptions.uris)
    uris.delete(uri)
    session.subscriptions = { uris, scopes: session.subscriptions.scopes }
    this.subscriptionsChanged(session)
  }

  /** What another process told of a session: applied to the record held here (sessions/session-relay.ts). */
  applyNews(session: Session, news: { logLevel?: LogLevel; initialized?: boolean; subscriptions?: { uris: string[]; scopes: Scope[] } }): void {
    if (news.logLevel !== undefined) session.logLevel = news.logLevel
    if (news.initialized) session.initialized = true
    if (news.subscriptions) session.subscriptions = news.subscriptions.uris.length === 0 ? null : { uris: new Set(news.subscriptions.uris), scopes: news.subscriptions.scopes }
  }

  /** resources/subscribe or unsubscribe changed what the session follows: the process serving its GET stream must know. */
  private subscriptionsChanged(session: Session): void {
    const subs = session.subscriptions
    this.options.announce?.({ kind: 'subscriptions', session: session.id, uris: subs ? [...subs.uris] : [], scopes: subs ? [...subs.scopes] : [] })
  }

  /** DELETE: the session is closed and its streams end. */
  async close(session: Session, reason = 'session closed'): Promise<void> {
    // A session closed before it was saved never reaches the database.
    if (this.unsaved.delete(session.id)) this.settle(session.id)
    else await this.repos.sessions.end(session.id, this.clock.now())
    this.drop(session, reason)
    this.options.announce?.({ kind: 'closed', session: session.id, reason })
  }

  /** Another process closed the session: what this one holds of it stops (its calls, its streams). */
  forget(session: Session, reason: string): void {
    this.drop(session, reason)
  }

  /** Drops from memory the sessions with nothing live here; they are read again from the database when next used. */
  forgetQuiet(): number {
    let dropped = 0
    for (const session of [...this.live.values()]) {
      if (this.options.holdsLive?.(session.id) === true || this.unsaved.has(session.id) || this.saving.has(session.id)) continue
      this.live.delete(session.id)
      dropped++
    }
    return dropped
  }

  /** The credential was revoked: every session bound to it ends, with its streams. */
  async endByCredential(credential: string, reason = 'credential revoked'): Promise<number> {
    await this.saveNew()
    const ids = await this.repos.sessions.endByCredential(credential, this.clock.now())
    // Every session in memory has a live row, so the ids the database ended are all that must be dropped here.
    for (const id of ids) {
      const s = this.live.get(id)
      if (s) this.drop(s, reason)
      this.options.announce?.({ kind: 'closed', session: id, reason })
    }
    return ids.length
  }

  /** Saves new sessions, then writes pending activity times in one transaction. */
  async flush(): Promise<void> {
    await this.saveNew()
    if (this.dirty.size === 0) return
    const entries = [...this.dirty]
    this.dirty.clear()
    try {
      const skipped = await this.repos.sessions.touchMany(entries)
      // Held by another transaction at that instant (PostgreSQL): written at the next flush, unless touched since.
      const times = new Map(entries)
      for (const id of skipped) if (!this.dirty.has(id)) this.dirty.set(id, times.get(id)!)
    } catch (err) {
      this.log.error({ err }, 'could not record session activity')
    }
  }

  /** Expires idle sessions from the head of the activity order, then purges ended and idle rows. */
  async sweep(now = this.clock.now()): Promise<number> {
    let expired = 0
    const idle: Session[] = []
    for (const session of this.live.values()) {
      if (session.lastSeenAt + this.options.idleMs > now) break
      idle.push(session)
    }
    for (const session of idle) {
      // Shared: used through another process meanwhile? Then it stays (touched, so it moves out of the head).
      if (this.options.shared) {
        const row = await this.repos.sessions.byId(session.id).catch(() => undefined)
        if (row && row.endedAt === null && !this.idle({ ...session, lastSeenAt: row.lastSeenAt }, now)) {
          this.touch(session, row.lastSeenAt)
          this.dirty.delete(session.id)
          continue
        }
      }
      if (session.ended || !this.live.has(session.id)) continue
      this.expire(session)
      expired++
    }
    await this.flush()
    try {
      await this.repos.sessions.purge(now - this.options.idleMs)
    } catch (err) {
      this.log.error({ err }, 'could not purge sessions')
    }
    return expired
  }

  private expire(session: Session): void {
    this.dirty.delete(session.id)
    if (this.unsaved.delete(session.id)) this.settle(session.id)
    this.drop(session, 'session expired')
  }

  private drop(session: Session, reason: string): void {
    session.ended = true
    this.live.delete(session.id)
    this.dirty.delete(session.id)
    this.tellStopped(session, reason)
  }

  private tellStopped(session: Session, reason: string): void {
    for (const listener of this.stopListeners) listener(session, reason)
  }

  private fromRow(row: SessionRow): Session {
    const level = (LOG_LEVELS as readonly string[]).includes(row.logLevel) ? (row.logLevel as LogLevel) : 'info'
    return {
      id: row.id,
      credential: row.credential,
      membershipId: row.membershipId,
      organizationId: row.organizationId,
      protocolVersion: row.protocolVersion as LegacyProtocolVersion,
      clientCapabilities: Object.freeze(row.clientCapabilities),
      subscriptions: null,
      logLevel: level,
      initialized: row.initializedAt !== null,
      lastSeenAt: row.lastSeenAt,
      ended: false,
    }
  }
}

import type { Scope } from '../auth/principal.js'
import type { SessionView } from '../rpc/exchange.js'
import type { LogLevel } from '../rpc/types.js'

/**
 * A 2025 session's record: who it is bound to, what was negotiated, and what the client set since. Only the session
 * store writes it (session-store.ts); the methods read it as a SessionView. What a session is doing lives elsewhere,
 * each with its own owner: its calls and questions in the dispatcher's call table (rpc/calls.ts), its SSE streams in
 * SessionStreams (session-streams.ts).
 */
export interface Session extends SessionView {
  /** Resources the client subscribed to (resources/subscribe), in memory: a restart forgets them, like its streams. */
  subscriptions: ResourceSubscriptions | null
  logLevel: LogLevel
  initialized: boolean
  lastSeenAt: number
  ended: boolean
}

/**
 * A session's resource subscriptions, with the scopes of the credential that made them: an update is delivered only
 * while the member may still read the resource (scopes, and the member's role read at delivery time).
 */
export interface ResourceSubscriptions {
  readonly uris: ReadonlySet<string>
  readonly scopes: readonly Scope[]
}

import {
  LATEST_LEGACY_PROTOCOL_VERSION,
  type Era,
  type LegacyProtocolVersion,
  type LogLevel,
  type ModernProtocolVersion,
  type ProtocolVersion,
} from './types.js'

/** What a client may declare it can do (both eras; 2026-07-28 adds `extensions`). Unknown keys are kept, never trusted. */
export interface ClientCapabilities {
  elicitation?: { form?: Record<string, unknown>; url?: Record<string, unknown> }
  sampling?: Record<string, unknown>
  roots?: Record<string, unknown>
  experimental?: Record<string, Record<string, unknown>>
  extensions?: Record<string, Record<string, unknown>>
  [key: string]: unknown
}

/**
 * What a method may read of the 2025 session its request belongs to: the session's record, which only the session
 * store writes (sessions/session-store.ts). Declared here, where the methods look, so that `rpc` needs nothing from
 * `sessions`; the store's Session is one of these.
 */
export interface SessionView {
  readonly id: string
  /** `key:<api key id>` or `jwt:<jti>`: the credential the session is bound to. */
  readonly credential: string
  readonly membershipId: string
  readonly organizationId: string
  readonly protocolVersion: LegacyProtocolVersion
  readonly clientCapabilities: Readonly<ClientCapabilities>
  readonly logLevel: LogLevel
  /** notifications/initialized was received. */
  readonly initialized: boolean
  /** Closed, expired or revoked. */
  readonly ended: boolean
}

/**
 * What a method knows of the protocol era its request came in: the revision, what the client declared for it and
 * whether it wants log messages. Each era's front-end builds one per request (legacy: from the session; modern: from
 * the request's own `_meta`); methods read it and never look at the transport.
 */
export interface Exchange {
  readonly era: Era
  readonly protocolVersion: ProtocolVersion
  /** The legacy session the request belongs to; null on modern requests and on `initialize`. */
  readonly session: SessionView | null
  /** Declared at `initialize` (legacy) or in this very request's `_meta` (modern). */
  readonly clientCapabilities: Readonly<ClientCapabilities>
  /** The lowest `notifications/message` level the client wants for this request; null: none at all. */
  readonly logLevel: LogLevel | null
}

/** True when the client can answer a form elicitation: `elicitation: {}` means form (2025-11-25 and 2026-07-28). */
export function canElicitForm(capabilities: Readonly<ClientCapabilities>): boolean {
  const e = capabilities.elicitation
  if (typeof e !== 'object' || e === null) return false
  return Object.keys(e).length === 0 || (typeof e.form === 'object' && e.form !== null)
}

/** True when the client declared URL-mode elicitation (`elicitation.url`, an object); `elicitation: {}` is form only. */
export function canElicitUrl(capabilities: Readonly<ClientCapabilities>): boolean {
  const e = capabilities.elicitation
  return typeof e === 'object' && e !== null && typeof e.url === 'object' && e.url !== null
}

/** True when the client declared the extension (`capabilities.extensions[id]`, an object). */
export function declaresExtension(capabilities: Readonly<ClientCapabilities>, id: string): boolean {
  const value = capabilities.extensions?.[id]
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** A request of a legacy session. Reads the session live: `logging/setLevel` may change the level mid-call. */
export class LegacyExchange implements Exchange {
  readonly era = 'legacy' as const

  constructor(readonly session: SessionView) {}

  get protocolVersion(): LegacyProtocolVersion {
    return this.session.protocolVersion
  }

  get clientCapabilities(): Readonly<ClientCapabilities> {
    return this.session.clientCapabilities
  }

  get logLevel(): LogLevel {
    return this.session.logLevel
  }
}

const NOTHING: Readonly<ClientCapabilities> = Object.freeze({})

/** `initialize`: legacy, before its session exists. */
export const HANDSHAKE_EXCHANGE: Exchange = Object.freeze({
  era: 'legacy',
  protocolVersion: LATEST_LEGACY_PROTOCOL_VERSION,
  session: null,
  clientCapabilities: NOTHING,
  logLevel: null,
})

/** One stateless request: everything comes from its own `_meta`, nothing from earlier requests. */
export class ModernExchange implements Exchange {
  readonly era = 'modern' as const
  readonly session = null

  constructor(
    readonly protocolVersion: ModernProtocolVersion,
    readonly clientCapabilities: Readonly<ClientCapabilities>,
    readonly logLevel: LogLevel | null,
  ) {}
}

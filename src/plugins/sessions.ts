import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { systemClock } from '../lib/clock.js'
import { HeartbeatRegistry } from '../lib/sse.js'
import { CancelledByClient } from '../rpc/call-abort.js'
import { atLeast, isLegacyProtocolVersion, LATEST_LEGACY_PROTOCOL_VERSION, type LogLevel, type RequestId } from '../rpc/types.js'
import { SessionStore } from '../sessions/session-store.js'
import { SessionRelay } from '../sessions/session-relay.js'
import { SessionStreams } from '../sessions/session-streams.js'
import { validatorFor } from '../validation/index.js'
import { SERVER_INSTRUCTIONS } from '../version.js'
import { serverInfoFor } from '../mcp/server-info.js'
import { PLUGIN } from './names.js'

declare module 'fastify' {
  interface FastifyInstance {
    sessions: SessionStore
    /** Sessions across processes: answers forwarded to the process that asked, news told to the others. */
    sessionRelay: SessionRelay
    /** The SSE streams of sessions held by this process (the legacy front-end opens them). */
    sessionStreams: SessionStreams
    heartbeats: HeartbeatRegistry
  }
}

/** How long an answer forwarded to the process that asked the question waits for its verdict. */
const FORWARD_TIMEOUT_MS = 5_000

interface InitializeParams {
  protocolVersion: string
  capabilities: Record<string, unknown>
  clientInfo: { name: string; version: string }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/**
 * What a session keeps of the capabilities a client declared: which known ones it declared (and elicitation's modes),
 * never the client's own payload. A client may send anything under `experimental` or unknown keys (a megabyte, or a
 * structure nested 100,000 deep); none of it is stored, so no row is large and none fails to serialise.
 */
export function sessionCapabilities(declared: Record<string, unknown>): Record<string, unknown> {
  const kept: Record<string, unknown> = {}
  const elicitation = declared.elicitation
  if (isObject(elicitation)) kept.elicitation = { ...(isObject(elicitation.form) ? { form: {} } : {}), ...(isObject(elicitation.url) ? { url: {} } : {}) }
  if (isObject(declared.sampling)) kept.sampling = {}
  if (isObject(declared.roots)) kept.roots = declared.roots.listChanged === true ? { listChanged: true } : {}
  return kept
}

/**
 * Session lifecycle: `initialize` (revision negotiation, session bound to the credential, membership and
 * organization), `notifications/initialized`, `ping`, `logging/setLevel` and `notifications/cancelled`.
 */
const sessionsPlugin: FastifyPluginAsync = async (fastify) => {
  const { config, rpc, repos, auth, coordination, clock } = fastify
  const streams = new SessionStreams(clock)
  const store: SessionStore = new SessionStore(repos, {
    idleMs: config.sessionIdleMs,
    sweepMs: config.sessionSweepMs,
    touchFlushMs: config.sessionTouchFlushMs,
    shared: coordination.shared,
    announce: (news) => relay.tell(news),
    holdsLive: (id) => rpc.holdsCalls(id) || streams.holds(id),
    clock,
  }, fastify.log)
  // A session that stops here stops what this process holds of it: its calls (the dispatcher's), then its streams.
  store.onStopped((session, reason) => {
    rpc.endSession(session.id, reason)
    streams.endSession(session.id)
  })
  // Other processes may serve requests of the same sessions: what each holds of one is kept in step through the bus.
  const relay = new SessionRelay({
    shared: coordination.shared,
    bus: coordination.bus,
    inbox: coordination.inbox,
    processId: coordination.processId,
    rpc,
    sessions: store,
    log: fastify.log,
    forwardTimeoutMs: FORWARD_TIMEOUT_MS,
  })
  await relay.start()
  const heartbeats = new HeartbeatRegistry(config.heartbeatMs, clock)
  fastify.decorate('sessions', store)
  fastify.decorate('sessionRelay', relay)
  fastify.decorate('sessionStreams', streams)
  fastify.decorate('heartbeats', heartbeats)
  // A listener cannot wait: the sessions end once the database has ended them (the ones in memory are dropped then).
  auth.onRevoked((credential) => void store.endByCredential(credential).catch((err: unknown) => {
    fastify.log.error({ err }, 'could not end the sessions of a revoked credential')
  }))

  // Keys revoked by another process (the CLI) end their sessions, and close their streams, within one sweep interval
  // even if the revoked key is never presented again.
  // The revocation times compared here are written by another process (the CLI) with the system clock, so they are
  // compared with the system clock too (docs/decisions/clock.md); only the watch's interval is the server's clock.
  let revocationsCheckedAt = systemClock.now()
  const checkRevocations = async () => {
    const since = revocationsCheckedAt
    revocationsCheckedAt = systemClock.now()
    try {
      for (const id of await repos.apiKeys.revokedSince(since - 1000)) auth.revoked(`key:${id}`)
    } catch (err) {
      fastify.log.error({ err }, 'could not check for revoked keys')
    }
  }
  // checkRevocations reports its own failure: the system clock does not wait for it (a manual one does, lib/clock.ts).
  const revocationWatch = clock.setInterval(checkRevocations, config.sessionSweepMs)
  revocationWatch.unref()

  // List changes reach sessions on their GET stream (the 2025 revisions' place for messages about no request).
  const unsubscribe = fastify.events.subscribe((event) => {
    if (event.type !== 'list.changed') return
    for (const session of store.liveSessions()) {
      if (event.organizationId === null || session.organizationId === event.organizationId) {
        streams.notify(session.id, { jsonrpc: '2.0', method: `notifications/${event.list}/list_changed` })
      }
    }
  })

  fastify.addHook('onReady', async () => store.start())
  // At the start of a stop the sessions' GET streams end (cleanly: the SDKs reconnect after a clean end too), so their
  // clients open them again through the proxy on another process, which serves any request of any session. What the
  // server would send on a session's GET stream while none is open is dropped, as the 2025 revisions allow.
  fastify.shutdown.onStop(() => streams.endStandalone())
  fastify.shutdown.onFinish(() => {
    unsubscribe()
    relay.stop()
    clock.clearTimer(revocationWatch)
    heartbeats.stop()
  })
  // Sessions end (and their streams close) once the calls in flight have answered: the drain let the work that can end
  // end and answer (deployments); what still ran was stopped by the dispatcher's end step (plugins/rpc.ts, which runs
  // before this one), and answered by the transport, before its stream ends.
  fastify.shutdown.onEnd(() => store.stop())

  rpc.registerRequest<InitializeParams>({
    method: 'initialize',
    eras: ['legacy'],
    params: validatorFor('mcp/initialize.params'),
    sessionless: true,
    async handle(params, ctx) {
      const version = isLegacyProtocolVersion(params.protocolVersion) ? params.protocolVersion : LATEST_LEGACY_PROTOCOL_VERSION
      const session = store.create({
        credential: ctx.principal.credential,
        membershipId: ctx.principal.membershipId,
        organizationId: ctx.principal.organizationId,
        protocolVersion: version,
        clientInfo: { name: params.clientInfo.name, version: params.clientInfo.version },
        clientCapabilities: sessionCapabilities(params.capabilities),
      })
      // Answered only once the session is stored (together with the others of this event-loop turn).
      await store.saved(session)
      ctx.onSessionStarted?.(session)
      return {
        protocolVersion: version,
        capabilities: rpc.capabilities.of('legacy'),
        serverInfo: serverInfoFor(version),
        instructions: SERVER_INSTRUCTIONS,
      }
    },
  })

  // Sent as a request by a 2026-07-28 client, it is told the method belongs to the session revisions.
  rpc.declareDropped('notifications/initialized')
  rpc.registerNotification({
    method: 'notifications/initialized',
    params: validatorFor('mcp/empty.params'),
    handle: (_params, ctx) => store.markInitialized(ctx.session),
  })

  rpc.registerRequest({
    method: 'ping',
    eras: ['legacy'],
    params: validatorFor('mcp/empty.params'),
    handle: () => ({}),
  })

  rpc.registerRequest<{ level: LogLevel }>({
    method: 'logging/setLevel',
    eras: ['legacy'],
    params: validatorFor('mcp/logging-set-level.params'),
    async handle(params, ctx) {
      await store.setLogLevel(ctx.session!, params.level)
      return {}
    },
  })

  rpc.registerNotification<{ requestId: RequestId; reason?: string }>({
    method: 'notifications/cancelled',
    params: validatorFor('mcp/cancelled.params'),
    handle(params, ctx) {
      // Unknown or finished ids are ignored: the race between an answer and a cancel is normal.
      const reason = params.reason ?? 'cancelled by the client'
      // Not running here: perhaps on another process of this session (the relay tells them; nothing when alone).
      if (!rpc.cancel(ctx.session.id, params.requestId, new CancelledByClient(reason))) {
        relay.tell({ kind: 'cancel', session: ctx.session.id, requestId: params.requestId, reason })
      }
    },
  })
}

export default fp(sessionsPlugin, {
  name: PLUGIN.sessions,
  fastify: '5.x',
  dependencies: [PLUGIN.db, PLUGIN.rpc, PLUGIN.auth, PLUGIN.coordination],
})

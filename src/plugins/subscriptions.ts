import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { canUse, type Principal } from '../auth/principal.js'
import { fail } from '../errors/service-error.js'
import type { ServerEvent } from '../lib/event-bus.js'
import type { CallContext } from '../rpc/dispatcher.js'
import { declaresExtension } from '../rpc/exchange.js'
import { listenStreams } from '../limits/named.js'
import type { Release } from '../limits/held-open.js'
import type { JsonRpcNotification, RequestId } from '../rpc/types.js'
import { validatorFor } from '../validation/index.js'
import { PLUGIN } from './names.js'
import { TASKS_EXTENSION } from './tasks/index.js'

export const SUBSCRIPTION_ID_META_KEY = 'io.modelcontextprotocol/subscriptionId'

interface Filter {
  toolsListChanged?: boolean
  promptsListChanged?: boolean
  resourcesListChanged?: boolean
  resourceSubscriptions?: string[]
  taskIds?: string[]
}

/** One open subscriptions/listen stream. */
interface Subscription {
  id: RequestId
  ctx: CallContext
  principal: Principal
  honored: Filter
  /** The names of the tools its caller may see, comma-joined: a change is a tools/list_changed. */
  tools: string
  /** Likewise for prompts. */
  prompts: string
  /** Ends the subscription: `graceful` answers the listen request (the server closes it), else nothing more is sent. */
  end(graceful: boolean): void
}

/**
 * `subscriptions/listen` (2026-07-28): the long-lived SSE answer that replaces the session's GET stream. The first
 * message acknowledges the honoured part of the filter; every message carries the listen request's id in
 * `_meta["io.modelcontextprotocol/subscriptionId"]`; only requested kinds are sent. Honoured here:
 *
 * - `toolsListChanged`: the tools a caller may see depend on its scopes and role, so a role change (CLI, another
 *   process) changes its list. Each stream re-authenticates its credential every SERVICE_LISTEN_CHECK_MS and sends
 *   `notifications/tools/list_changed` when the visible tools differ; a credential that is no longer valid (revoked,
 *   expired, membership gone) ends the stream.
 * - `promptsListChanged`: likewise for the prompts a caller may see.
 * - `resourcesListChanged`: `notifications/resources/list_changed` when the resources its organization can list
 *   change (an app created or deleted).
 * - `resourceSubscriptions`: `notifications/resources/updated` for each URI the caller may read (others are left out
 *   of the acknowledgement), when its contents change (a deployment's log while it runs).
 * - `taskIds` (tasks extension, declared in the request): `notifications/tasks` with the task as tasks/get shows it,
 *   for the caller's own tasks.
 * The client ends a
 * subscription by closing the stream; the server ends it gracefully (the listen result, then the end of the stream)
 * when it shuts down or the credential stops being valid. Heartbeats keep idle streams open through proxies.
 */
const subscriptionsPlugin: FastifyPluginAsync = async (fastify) => {
  const { rpc, config, events, auth, clock } = fastify
  const open = new Set<Subscription>()
  // A member's open streams (listenStreams), held in the limits store: counted across processes when Redis is shared.
  const held = fastify.limits.held
  const refuseWhenFull = (mine: number) => {
    if (mine >= listenStreams.capacity(config)) throw listenStreams.refusal(config)
  }
  const validateFilter = validatorFor('mcp/subscriptions-listen.params')

  const visibleTools = (principal: Principal) => fastify.tools.visibleTo(principal).map((t) => t.def.name).join(',')
  const visiblePrompts = (principal: Principal) => fastify.prompts.visibleTo(principal).map((p) => p.def.name).join(',')
  const mayRead = (principal: Principal, uri: string) => {
    const audience = fastify.resources.audienceOf(uri)
    return audience !== undefined && canUse(principal, audience)
  }
  const tagged = (sub: Subscription, method: string, params: Record<string, unknown> = {}): JsonRpcNotification => ({
    jsonrpc: '2.0',
    method,
    params: { ...params, _meta: { [SUBSCRIPTION_ID_META_KEY]: sub.id } },
  })

  /**
   * Re-authenticates each stream: ends the ones whose credential lapsed, tells the others when their tools changed.
   * Returns the checks that wait for the database (they report their own failures), for a manual clock to wait for.
   */
  function check(): Promise<void> | undefined {
    const pending: Promise<void>[] = []
    for (const sub of open) {
      let again: Principal | Promise<Principal>
      try {
        again = sub.ctx.authenticateAgain ? sub.ctx.authenticateAgain() : sub.principal
      } catch {
        sub.end(true)
        continue
      }
      if (!(again instanceof Promise)) {
        recheck(sub, again)
        continue
      }
      // A credential the cache no longer holds is verified against the database; a timer cannot wait, so the stream
      // is checked once it is (unless it ended meanwhile).
      pending.push(again.then((principal) => {
        if (open.has(sub)) recheck(sub, principal)
      }, () => sub.end(true)).catch((err: unknown) => fastify.log.error({ err }, 'could not check a subscriptions/listen stream')))
    }
    return pending.length === 0 ? undefined : Promise.all(pending).then(() => {})
  }

  /** A stream whose credential is still valid, for `principal`: tells it when the tools or prompts it may see changed. */
  function recheck(sub: Subscription, principal: Principal): void {
    sub.principal = principal
    if (sub.honored.toolsListChanged) {
      const tools = visibleTools(principal)
      if (tools !== sub.tools) {
        sub.tools = tools
        sub.ctx.sink.send(tagged(sub, 'notifications/tools/list_changed'))
      }
    }
    if (sub.honored.promptsListChanged) {
      const prompts = visiblePrompts(principal)
      if (prompts !== sub.prompts) {
        sub.prompts = prompts
        sub.ctx.sink.send(tagged(sub, 'notifications/prompts/list_changed'))
      }
    }
  }
  // The server's clock (docs/decisions/clock.md): a test moves it past a check instead of waiting for one.
  const timer = clock.setInterval(check, config.listenCheckMs)
  timer.unref()

  const concerns = (sub: Subscription, organizationId: string | null) => organizationId === null || sub.principal.organizationId === organizationId
  const onEvent = (event: ServerEvent) => {
    if (event.type === 'resource.updated') {
      for (const sub of open) {
        // The principal is the one of the stream's last credential check: a member who may no longer read the
        // resource (a demotion) stops hearing of it.
        if (concerns(sub, event.organizationId) && sub.honored.resourceSubscriptions?.includes(event.uri) && mayRead(sub.principal, event.uri)) {
          sub.ctx.sink.send(tagged(sub, 'notifications/resources/updated', { uri: event.uri }))
        }
      }
      return
    }
    if (event.type === 'list.changed') {
      const wanted = event.list === 'tools' ? 'toolsListChanged' : event.list === 'prompts' ? 'promptsListChanged' : 'resourcesListChanged'
      for (const sub of open) {
        if (!concerns(sub, event.organizationId) || sub.honored[wanted] !== true) continue
        // What the stream compares on its checks follows the change, so the same change is not announced twice.
        if (event.list === 'tools') sub.tools = visibleTools(sub.principal)
        if (event.list === 'prompts') sub.prompts = visiblePrompts(sub.principal)
        sub.ctx.sink.send(tagged(sub, `notifications/${event.list}/list_changed`))
      }
      return
    }
    if (event.type !== 'task') return
    for (const sub of open) {
      if (sub.principal.membershipId !== event.membershipId || !sub.honored.taskIds?.includes(event.taskId)) continue
      // A listener cannot wait: the task is read, then sent to the stream if it is still open (the reads are answered
      // in the order they are made, so the notifications keep the order of the events).
      void fastify.tasks.get(sub.principal, event.taskId).then((task) => {
        if (task && open.has(sub)) sub.ctx.sink.send(tagged(sub, 'notifications/tasks', fastify.tasks.view(task)))
      }).catch((err: unknown) => fastify.log.error({ err, task: event.taskId }, 'could not read a task to notify its listen stream'))
    }
  }
  const unsubscribe = events.subscribe(onEvent)
  // A revoked credential ends its streams at once, not at the next check.
  auth.onRevoked((credential) => {
    for (const sub of open) if (sub.principal.credential === credential) sub.end(true)
  })

  fastify.shutdown.onFinish(async () => {
    clock.clearTimer(timer)
    unsubscribe()
    for (const sub of [...open]) sub.end(true)
    // Let the front-end write each listen result before the connections close.
    await new Promise((resolve) => setImmediate(resolve))
  })

  rpc.registerRequest<{ notifications: Filter }>({
    method: 'subscriptions/listen',
    eras: ['modern'],
    params: validateFilter,
    // Open until the client or the server ends it: a stop ends it (its listen result) rather than wait for it.
    longLived: () => true,
    precheck(params, ctx) {
      if (params.notifications.taskIds !== undefined && !declaresExtension(ctx.exchange.clientCapabilities, TASKS_EXTENSION)) {
        throw fail('MISSING_CLIENT_CAPABILITY', {
          message: 'Task notifications need the tasks extension declared in this request\'s capabilities',
          details: { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } },
        })
      }
      // Checked here, so that a full member is answered 429 before a stream opens; the slot itself is taken in
      // `handle` (a request refused between the two would otherwise hold one).
      const mine = held.count(listenStreams.key(ctx.principal))
      return typeof mine === 'number' ? refuseWhenFull(mine) : mine.then(refuseWhenFull)
    },
    async handle(params, ctx) {
      if (!ctx.sink.streaming) {
        throw fail('NOT_ACCEPTABLE', { message: 'subscriptions/listen answers with an SSE stream: send Accept: application/json, text/event-stream' })
      }
      const requested = params.notifications
      const honored: Filter = {}
      if (requested.toolsListChanged === true) honored.toolsListChanged = true
      if (requested.promptsListChanged === true) honored.promptsListChanged = true
      if (requested.resourcesListChanged === true) honored.resourcesListChanged = true
      // resources/read's rule, once per URI asked for: absent and foreign ones are left out alike. Later updates check
      // only the role and scope (mayRead), at the stream's credential checks (docs/decisions/subscriptions.md).
      const asked = [...new Set(requested.resourceSubscriptions ?? [])]
      const mayFollow = await Promise.all(asked.map((uri) => fastify.resources.readable(uri, ctx)))
      const readable = asked.filter((_uri, i) => mayFollow[i])
      if (readable.length > 0) honored.resourceSubscriptions = readable
      if (requested.taskIds !== undefined) {
        const found = await Promise.all(requested.taskIds.map((id) => fastify.tasks.get(ctx.principal, id)))
        honored.taskIds = requested.taskIds.filter((_id, i) => found[i] !== undefined)
      }
      // Two requests that passed the precheck together may find the last slot taken: the later one is refused.
      const release: Release | null = await held.hold(listenStreams.key(ctx.principal), listenStreams.capacity(config))
      if (release === null) throw listenStreams.refusal(config)
      if (ctx.signal.aborted) {
        release()
        return {}
      }
      return new Promise<Record<string, unknown>>((resolve) => {
        const sub: Subscription = {
          id: ctx.requestId,
          ctx,
          principal: ctx.principal,
          honored,
          tools: honored.toolsListChanged ? visibleTools(ctx.principal) : '',
          prompts: honored.promptsListChanged ? visiblePrompts(ctx.principal) : '',
          end(graceful) {
            if (!open.delete(sub)) return
            release()
            ctx.signal.removeEventListener('abort', onClose)
            // The listen result (graceful end); after a client's close the dispatcher sends nothing anyway.
            resolve(graceful ? { _meta: { [SUBSCRIPTION_ID_META_KEY]: sub.id } } : {})
          },
        }
        const onClose = () => sub.end(false)
        open.add(sub)
        ctx.signal.addEventListener('abort', onClose, { once: true })
        ctx.sink.send(tagged(sub, 'notifications/subscriptions/acknowledged', { notifications: honored }))
      })
    },
  })
}

export default fp(subscriptionsPlugin, {
  name: PLUGIN.subscriptions,
  fastify: '5.x',
  dependencies: [PLUGIN.rpc, PLUGIN.auth, PLUGIN.rateLimits, PLUGIN.tasks, PLUGIN.tools, PLUGIN.prompts, PLUGIN.resources],
})

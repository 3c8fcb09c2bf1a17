import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { canUse, type Audience } from '../../auth/principal.js'
import { roleAllows } from '../../lib/roles.js'
import { fail, isServiceError, ServiceError } from '../../errors/service-error.js'
import type { ServerEvent } from '../../lib/event-bus.js'
import { forRevision, resourceContentsProblem, type ResourceContents } from '../../mcp/content.js'
import { listMethod } from '../../rpc/list-method.js'
import type { CallContext } from '../../rpc/dispatcher.js'
import { HandlerContext, handlerDeps } from '../../rpc/handler-context.js'
import type { ResourceSubscriptions, Session } from '../../sessions/session.js'
import { validatorFor } from '../../validation/index.js'
import { AnswerRefused, InputRequired } from '../elicitation/index.js'
import { PLUGIN } from '../names.js'
import type { ReadResult, ResourceDefinition, ResourceEntry } from './define.js'
import { describeEntry, describeTemplate, ResourceRegistry } from './registry.js'

declare module 'fastify' {
  interface FastifyInstance {
    resources: Resources
  }
}

export interface Resources {
  readonly registry: ResourceRegistry
  /**
   * Tells the clients following `uri` that it changed: sessions that subscribed to it (on their GET stream) and listen
   * streams that asked for it. `organizationId`: whose resource it is (null: one every organization sees).
   */
  updated(uri: string, organizationId: string | null): void
  /** Tells an organization's clients that the resources they can list changed (null: every organization's). */
  listChanged(organizationId: string | null): void
  /** Who may see and read `uri` (its definition's audience), or undefined when nothing serves it. */
  audienceOf(uri: string): Audience | undefined
  /**
   * Whether the caller may read `uri` now, by resources/read's own rule: something serves it, its audience admits the
   * caller (scope ∩ role), and it names something of the caller's organization (the definition's `exists`). Absent
   * and foreign are both false. For resources/subscribe and the subscriptions/listen acknowledgement.
   */
  readable(uri: string, ctx: CallContext): Promise<boolean>
}

export interface ResourcesPluginOptions {
  /** The resources to serve (default: none). */
  resources?: ResourceDefinition[]
}

interface ReadParams {
  uri: string
  inputResponses?: Record<string, unknown>
  requestState?: string
}

/**
 * Resources: `resources/list` (static resources and what each template lists for the caller), `resources/templates/list`,
 * `resources/read` (both eras; `input_required` on stateless requests when the reader asks the client something), and
 * in sessions `resources/subscribe` / `resources/unsubscribe` with `notifications/resources/updated` on the
 * session's GET stream (2026-07-28 clients follow updates through subscriptions/listen instead; list changes reach both
 * eras through the `list.changed` event, see the sessions and subscriptions plugins). Visibility is scope ∩ role, as for tools; a resource the caller may not read, an
 * unknown URI and an absent or foreign id are the same "not found" (-32002 in sessions, -32602 in 2026-07-28).
 */
const resourcesPlugin: FastifyPluginAsync<ResourcesPluginOptions> = async (fastify, opts) => {
  const { rpc, repos, config, events, sessions } = fastify
  const registry = new ResourceRegistry()
  for (const def of opts.resources ?? []) registry.add(def)
  const deps = handlerDeps(fastify)
  // A resource added or removed at run time (embedding) is announced like any list change.
  registry.onChange(() => events.emit({ type: 'list.changed', list: 'resources', organizationId: null }))

  rpc.capabilities.declare(['legacy', 'modern'], 'resources', { subscribe: true, listChanged: true })

  const audienceOf = (uri: string): Audience | undefined => {
    const found = registry.resolve(uri)
    return found?.resource.audience
  }
  const readable = async (uri: string, ctx: CallContext): Promise<boolean> => {
    const found = registry.resolve(uri)
    if (!found || !canUse(ctx.principal, found.resource.audience)) return false
    // A static resource is at its URI; a template's variables may name an absent or foreign id.
    if (found.kind === 'static' || !found.resource.def.exists) return true
    return found.resource.def.exists(found.variables, new HandlerContext(ctx, { target: readTarget(uri), args: {} }, deps))
  }
  fastify.decorate('resources', {
    registry,
    updated: (uri, organizationId) => events.emit({ type: 'resource.updated', uri, organizationId }),
    listChanged: (organizationId) => events.emit({ type: 'list.changed', list: 'resources', organizationId }),
    audienceOf,
    readable,
  } satisfies Resources)

  const notFound = (uri: string) => new ServiceError('RESOURCE_NOT_FOUND', { message: `Resource not found: ${uri}`, details: { uri } })

  /** Every entry the caller may list: the static resources, then what each template lists, in registration order. */
  async function entries(ctx: CallContext): Promise<ResourceEntry[]> {
    const all: ResourceEntry[] = registry.staticsVisibleTo(ctx.principal).map(({ def }) => {
      const { read: _r, scope: _s, role: _ro, ...entry } = def
      return entry
    })
    for (const { def } of registry.templatesVisibleTo(ctx.principal)) {
      if (!def.list) continue
      all.push(...(await def.list(new HandlerContext(ctx, { target: `resources/list ${def.uriTemplate}`, args: {} }, deps))))
    }
    return all
  }

  rpc.registerRequest(listMethod(config, { method: 'resources/list', field: 'resources', items: entries, describe: describeEntry }))
  rpc.registerRequest(listMethod(config, {
    method: 'resources/templates/list',
    field: 'resourceTemplates',
    items: (ctx) => registry.templatesVisibleTo(ctx.principal),
    describe: (template, version) => describeTemplate(template.def, version),
  }))

  rpc.registerRequest<ReadParams>({
    method: 'resources/read',
    eras: ['legacy', 'modern'],
    mirroredName: 'uri',
    params: validatorFor('mcp/resources-read.params'),
    cache: { scope: 'private', ttlMs: () => config.readTtlMs },
    precheck(params, ctx) {
      const found = registry.resolve(params.uri)
      if (found && canUse(ctx.principal, found.resource.audience)) {
        // A stateless retry's requestState is checked before anything runs (-32602 when it is not this read's).
        return fastify.elicitation.openRound(ctx, readTarget(params.uri), {}, params.requestState, params.inputResponses)
      }
    },
    async handle(params, ctx) {
      const found = registry.resolve(params.uri)
      if (!found || !canUse(ctx.principal, found.resource.audience)) throw notFound(params.uri)
      const handlerCtx = new HandlerContext(ctx, { target: readTarget(params.uri), args: {} }, deps)
      let read: ReadResult | null
      try {
        read = found.kind === 'static'
          ? await found.resource.def.read(handlerCtx)
          : await found.resource.def.read(found.variables, params.uri, handlerCtx)
      } catch (err) {
        if (err instanceof InputRequired) return err.result
        if (err instanceof AnswerRefused) throw err.error
        if (!isServiceError(err)) ctx.log.error({ err, uri: params.uri }, 'resource read failed')
        throw err
      }
      const contents = read === null ? [] : Array.isArray(read) ? read : [read]
      // Never an empty contents list: a reader that finds nothing means the resource does not exist (SEP-2164).
      if (contents.length === 0) throw notFound(params.uri)
      const version = ctx.exchange.protocolVersion
      return { contents: contents.map((c, i) => checkedContents(c, i, params.uri, ctx)).map((c) => shapeContents(c, version)) }
    },
  })

  /** What a reader returned must be resource contents; anything else is the server's failure, never sent. */
  function checkedContents(contents: ResourceContents, index: number, uri: string, ctx: CallContext): ResourceContents {
    const problem = resourceContentsProblem(contents)
    if (problem === null) return contents
    ctx.log.error({ uri, index, problem }, 'a resource reader returned something that is not resource contents')
    throw fail('INTERNAL_ERROR')
  }

  // Sessions (the 2025 revisions): subscriptions to resource updates, delivered on the session's GET stream.
  rpc.registerRequest<{ uri: string }>({
    method: 'resources/subscribe',
    eras: ['legacy'],
    params: validatorFor('mcp/resources-subscribe.params'),
    async handle(params, ctx) {
      // Checked once, here: what the member may read later is checked again at each update (notifyIfReadable).
      if (!(await readable(params.uri, ctx))) throw notFound(params.uri)
      if (!fastify.sessions.subscribe(ctx.session!, params.uri, ctx.principal.scopes, config.resourceSubscriptionsMax)) {
        throw fail('INVALID_PARAMS', {
          message: `A session may subscribe to ${config.resourceSubscriptionsMax} resources; unsubscribe from one first`,
          details: { limit: config.resourceSubscriptionsMax },
        })
      }
      return {}
    },
  })

  rpc.registerRequest<{ uri: string }>({
    method: 'resources/unsubscribe',
    eras: ['legacy'],
    params: validatorFor('mcp/resources-subscribe.params'),
    handle(params, ctx) {
      // Unsubscribing from something never subscribed to is harmless: the result is the same.
      fastify.sessions.unsubscribe(ctx.session!, params.uri)
      return {}
    },
  })

  const concerns = (session: Session, organizationId: string | null) => organizationId === null || session.organizationId === organizationId
  /**
   * Whether the session's member may still read `uri`: a subscription outlives the request that made it, and a
   * demoted or removed member must stop hearing of what it can no longer read (docs/decisions/subscriptions.md).
   * Scopes are the credential's (fixed for the session); the role is read now.
   */
  const stillReadable = async (session: Session, subscriptions: ResourceSubscriptions, uri: string): Promise<boolean> => {
    const audience = audienceOf(uri)
    if (audience === undefined || !subscriptions.scopes.includes(audience.scope)) return false
    const membership = await repos.memberships.byId(session.membershipId)
    return membership !== undefined && membership.organizationId === session.organizationId && roleAllows(membership.role, audience.role)
  }
  /** Tells the session of the update when its member may still read `uri`. Never rejects: a failed read is logged. */
  const notifyIfReadable = async (session: Session, subscriptions: ResourceSubscriptions, uri: string): Promise<void> => {
    try {
      if (!(await stillReadable(session, subscriptions, uri))) return
    } catch (err) {
      fastify.log.error({ err, session: session.id }, 'could not check who may still read an updated resource')
      return
    }
    // The role was read over a round trip (PostgreSQL): the client may have unsubscribed meanwhile.
    if (!session.subscriptions?.uris.has(uri)) return
    fastify.sessionStreams.notify(session.id, { jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri } })
  }
  const unsubscribe = events.subscribe((event: ServerEvent) => {
    if (event.type !== 'resource.updated') return
    for (const session of sessions.liveSessions()) {
      const subscriptions = session.subscriptions
      if (!subscriptions?.uris.has(event.uri) || !concerns(session, event.organizationId)) continue
      // A listener cannot wait: the role is read, then the session is told (in the order of the events, since the
      // reads are answered in the order they are made). notifyIfReadable never rejects.
      void notifyIfReadable(session, subscriptions, event.uri)
    }
  })
  fastify.shutdown.onFinish(() => unsubscribe())
}

/** What a read's questions are about, in a stateless requestState. */
function readTarget(uri: string): string {
  return `resources/read ${uri}`
}

/** Resource contents as `version` defines them (`_meta` from 2025-06-18). */
function shapeContents(contents: ResourceContents, version: Parameters<typeof forRevision>[1]): ResourceContents {
  const block = forRevision({ type: 'resource', resource: contents }, version)
  return block.type === 'resource' ? block.resource : contents
}

export default fp(resourcesPlugin, { name: PLUGIN.resources, fastify: '5.x', dependencies: [PLUGIN.db, PLUGIN.rpc, PLUGIN.sessions, PLUGIN.elicitation] })

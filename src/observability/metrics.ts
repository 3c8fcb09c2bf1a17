import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type * as PromClient from 'prom-client'
import type { MessageDone, RpcObserver } from '../rpc/observer.js'
import type { LimiterName } from '../errors/service-error.js'
import { quotaUsageSummary } from '../limits/quotas.js'
import { SERVICE_MCP_VERSION } from '../version.js'
import { endedOf, KnownNames } from './outcome.js'

/**
 * The server's Prometheus metrics, on a registry of its own (never prom-client's global one: several servers may live
 * in one process, in tests or embedded). Labels are bounded by construction: methods, tools and error codes the
 * server knows (anything else is `other`), route patterns, status classes. No argument value, id, email, token or
 * session id is ever a label.
 *
 * Counts and latencies are recorded as requests end (`onMessageDone`, `onResponse`, `onRateLimited`); the gauges are
 * asked of their owners when Prometheus scrapes (the sessions store, the SSE heartbeat registry, the pipeline runner),
 * so nothing keeps a copy of their state; the quota gauges ask the database (a few aggregate queries per scrape).
 */

/**
 * Seconds. The MCP semantic conventions' buckets for operation durations (10 ms to 5 min: deployments take minutes),
 * with 1 ms and 5 ms in front: most answers of this server take less than 10 ms.
 */
const DURATION_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300]

/** Server-to-client requests a session may await (elicitation/create is how confirmations ask). */
const CLIENT_REQUEST_METHODS = ['elicitation/create', 'sampling/createMessage', 'roots/list']

export class McpMetrics implements RpcObserver {
  readonly registry: PromClient.Registry
  readonly #names: KnownNames
  readonly #requests: PromClient.Counter<'method' | 'era' | 'outcome' | 'code'>
  readonly #requestSeconds: PromClient.Histogram<'method' | 'era'>
  readonly #toolCalls: PromClient.Counter<'tool' | 'outcome' | 'code'>
  readonly #toolSeconds: PromClient.Histogram<'tool'>
  readonly #httpSeconds: PromClient.Histogram<'method' | 'route' | 'status_class'>
  readonly #rateLimited: PromClient.Counter<'limiter'>

  constructor(prom: typeof PromClient, fastify: FastifyInstance) {
    const registry = new prom.Registry()
    this.registry = registry
    this.#names = new KnownNames(fastify)
    const registers = [registry]

    this.#requests = new prom.Counter({
      name: 'mcp_requests_total',
      help: 'JSON-RPC requests answered, by method (unknown ones: other), era, outcome (ok, error, tool_error, input_required, cancelled) and error code',
      labelNames: ['method', 'era', 'outcome', 'code'],
      registers,
    })
    this.#requestSeconds = new prom.Histogram({
      name: 'mcp_request_duration_seconds',
      help: 'Time from taking a JSON-RPC request to knowing its answer, by method and era',
      labelNames: ['method', 'era'],
      buckets: DURATION_BUCKETS,
      registers,
    })
    this.#toolCalls = new prom.Counter({
      name: 'mcp_tool_calls_total',
      help: 'tools/call requests, by registered tool (unknown ones: other), outcome and error code',
      labelNames: ['tool', 'outcome', 'code'],
      registers,
    })
    this.#toolSeconds = new prom.Histogram({
      name: 'mcp_tool_call_duration_seconds',
      help: 'Duration of tools/call requests, by registered tool',
      labelNames: ['tool'],
      buckets: DURATION_BUCKETS,
      registers,
    })
    this.#httpSeconds = new prom.Histogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP requests, from arrival to the end of the response (an SSE answer: its whole stream), by method, route pattern and status class',
      labelNames: ['method', 'route', 'status_class'],
      buckets: DURATION_BUCKETS,
      registers,
    })
    this.#rateLimited = new prom.Counter({
      name: 'mcp_rate_limit_refusals_total',
      help: 'Requests refused with 429 RATE_LIMITED, by limiter',
      labelNames: ['limiter'],
      registers,
    })

    new prom.Gauge({
      name: 'mcp_sessions_open',
      help: 'Sessions (2025 revisions) held in memory: created and neither closed nor expired',
      registers,
      collect() {
        this.set(fastify.sessions.size)
      },
    })
    new prom.Gauge({
      name: 'mcp_sse_streams_open',
      help: 'SSE response streams not ended: session call streams (a resumable one counts while its client may come back), session GET streams, and 2026-07-28 request streams',
      labelNames: ['era', 'kind'],
      registers,
      collect() {
        const { standalone, calls } = fastify.sessionStreams.counts()
        // Every open stream, of either era, gets heartbeats: the ones no session holds are the stateless requests'.
        this.set({ era: 'legacy', kind: 'call' }, calls)
        this.set({ era: 'legacy', kind: 'standalone' }, standalone)
        this.set({ era: 'modern', kind: 'call' }, Math.max(0, fastify.heartbeats.size - calls - standalone))
      },
    })
    new prom.Gauge({
      name: 'mcp_client_requests_pending',
      help: 'Requests sent to clients in sessions and awaiting their answer, by method (a confirmation waiting for its user is an elicitation/create); 2026-07-28 requests keep none: they ask with input_required',
      labelNames: ['method'],
      registers,
      collect() {
        const counts = new Map<string, number>(CLIENT_REQUEST_METHODS.map((m) => [m, 0]))
        let other = 0
        for (const method of fastify.rpc.pendingRequestMethods()) {
          const n = counts.get(method)
          if (n === undefined) other++
          else counts.set(method, n + 1)
        }
        for (const [method, n] of counts) this.set({ method }, n)
        this.set({ method: 'other' }, other)
      },
    })
    new prom.Gauge({
      name: 'mcp_deployments_running',
      help: 'Pipeline runs (deployments and rollbacks) in progress in this process',
      registers,
      collect() {
        this.set(fastify.pipelines.running)
      },
    })
    // Usage against the per-organization quotas, over every organization (no organization is a label): both gauges
    // read one summary per scrape, a few aggregate queries whatever the number of organizations (src/limits/quotas.ts).
    // A database that does not answer leaves these two out of the scrape (and says so in the log), not the whole page.
    type Summary = Awaited<ReturnType<typeof quotaUsageSummary>>
    let summary: Promise<Summary> | null = null
    const quotaSummary = () => {
      summary ??= quotaUsageSummary(fastify.repos, fastify.config).catch((err: unknown) => {
        fastify.log.warn({ err }, 'the quota usage could not be read for /metrics')
        return new Map() as Summary
      }).finally(() => { summary = null })
      return summary
    }
    new prom.Gauge({
      name: 'service_quota_usage_ratio_max',
      help: 'The highest usage/limit of each per-organization quota over the organizations it limits (1 = an organization is at its limit; unlimited ones are left out)',
      labelNames: ['quota'],
      registers,
      async collect() {
        for (const [quota, { ratioMax }] of await quotaSummary()) this.set({ quota }, ratioMax)
      },
    })
    new prom.Gauge({
      name: 'service_quota_organizations_at_limit',
      help: 'Organizations at or over their limit of each per-organization quota',
      labelNames: ['quota'],
      registers,
      async collect() {
        for (const [quota, { atLimit }] of await quotaSummary()) this.set({ quota }, atLimit)
      },
    })
    new prom.Gauge({
      name: 'service_mcp_build_info',
      help: 'Always 1; the version of the server',
      labelNames: ['version'],
      registers,
    }).set({ version: SERVICE_MCP_VERSION }, 1)

    // Node's own: CPU, memory, event-loop lag, GC, handles; standard names, so stock dashboards read them.
    prom.collectDefaultMetrics({ register: registry })
  }

  onMessageDone(done: MessageDone): void {
    const { outcome, code } = endedOf(done)
    const method = this.#names.method(done.message.method) ?? 'other'
    const seconds = (done.endedAt - done.startedAt) / 1000
    this.#requests.inc({ method, era: done.era, outcome, code })
    this.#requestSeconds.observe({ method, era: done.era }, seconds)
    if (done.message.method === 'tools/call') {
      const tool = this.#names.tool(done) ?? 'other'
      this.#toolCalls.inc({ tool, outcome, code })
      this.#toolSeconds.observe({ tool }, seconds)
    }
  }

  onResponse(request: FastifyRequest, reply: FastifyReply): void {
    const status = reply.statusCode
    this.#httpSeconds.observe(
      { method: request.method, route: request.routeOptions.url ?? 'unmatched', status_class: `${Math.floor(status / 100)}xx` },
      reply.elapsedTime / 1000,
    )
  }

  /** A RATE_LIMITED refusal, labelled by the limiter that raised it (`other` for one that did not say). */
  onRateLimited(limiter: LimiterName | undefined): void {
    this.#rateLimited.inc({ limiter: limiter ?? 'other' })
  }
}

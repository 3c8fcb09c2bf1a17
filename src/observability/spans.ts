import { performance } from 'node:perf_hooks'
import {
  defaultTextMapGetter,
  isSpanContextValid,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type Tracer,
} from '@opentelemetry/api'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import {
  ATTR_CLIENT_ADDRESS,
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_NETWORK_PROTOCOL_NAME,
  ATTR_NETWORK_PROTOCOL_VERSION,
  ATTR_NETWORK_TRANSPORT,
  ATTR_URL_PATH,
  ATTR_URL_SCHEME,
  ATTR_USER_AGENT_ORIGINAL,
} from '@opentelemetry/semantic-conventions'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { catalog, type ErrorCode } from '../errors/catalog.js'
import type { MessageDone, RpcObserver } from '../rpc/observer.js'
import { endedOf, KnownNames } from './outcome.js'

/**
 * The spans of /mcp, after the OpenTelemetry semantic conventions for HTTP servers and for MCP (Development status;
 * their attribute names are spelled here, as OpenTelemetry advises for unstable ones):
 *
 * - one SERVER span per HTTP request to /mcp, `POST /mcp`, continuing the caller's trace from its `traceparent` and
 *   `tracestate` headers (W3C Trace Context);
 * - one SERVER span per JSON-RPC request, `{mcp.method.name} {target}` (`tools/call service_apps_list`), whose parent
 *   is the trace context in the request's `params._meta` (`traceparent`, `tracestate`) when it holds a valid one, with
 *   a link to the HTTP span, else the HTTP span itself. `_meta` is honoured in both eras: 2026-07-28 reserves these
 *   keys for it, and SDK instrumentations put them there on the 2025 revisions too.
 *
 * Never recorded: argument values, results, resource URIs (they name tenants' objects), error messages (a catalog
 * code and its fixed message instead), tokens, emails, and the session id (`mcp.session.id`): Mcp-Session-Id is a
 * bearer handle on a session (with the credential, it is all a client presents), and trace backends are read by far
 * more people than the server's own logs. The client address and user agent are on the HTTP span, as the HTTP
 * conventions have them.
 */

const ATTR_MCP_METHOD_NAME = 'mcp.method.name'
const ATTR_MCP_PROTOCOL_VERSION = 'mcp.protocol.version'
const ATTR_JSONRPC_REQUEST_ID = 'jsonrpc.request.id'
const ATTR_RPC_RESPONSE_STATUS_CODE = 'rpc.response.status_code'
const ATTR_GEN_AI_TOOL_NAME = 'gen_ai.tool.name'
const ATTR_GEN_AI_PROMPT_NAME = 'gen_ai.prompt.name'
const ATTR_GEN_AI_OPERATION_NAME = 'gen_ai.operation.name'
/** This server's own: the protocol era, how the request ended, and the catalog code of its error. */
const ATTR_ERA = 'service_mcp.era'
const ATTR_OUTCOME = 'service_mcp.outcome'
const ATTR_ERROR_CODE = 'service_mcp.error.code'

/** What OpenTelemetry calls a value outside the known set. */
const OTHER = '_OTHER'

const propagator = new W3CTraceContextPropagator()

/** The remote parent a `_meta` carries, when it carries a valid W3C trace context. */
function metaContext(done: MessageDone): Context | null {
  const meta = done.message.params?._meta
  if (typeof meta !== 'object' || meta === null) return null
  const { traceparent, tracestate } = meta as { traceparent?: unknown; tracestate?: unknown }
  if (typeof traceparent !== 'string') return null
  const carrier: Record<string, string> = { traceparent }
  if (typeof tracestate === 'string') carrier.tracestate = tracestate
  const context = propagator.extract(ROOT_CONTEXT, carrier, defaultTextMapGetter)
  const span = trace.getSpanContext(context)
  return span !== undefined && isSpanContextValid(span) ? context : null
}

function isMcpPath(url: string): boolean {
  return url === '/mcp' || url.startsWith('/mcp?')
}

export class McpSpans implements RpcObserver {
  readonly #tracer: Tracer
  readonly #names: KnownNames
  /** The HTTP span of each /mcp request in progress, for the JSON-RPC spans of its messages. */
  readonly #httpSpans = new WeakMap<FastifyRequest, Span>()

  constructor(tracer: Tracer, fastify: FastifyInstance) {
    this.#tracer = tracer
    this.#names = new KnownNames(fastify)
  }

  /** onRequest: opens the HTTP span of a /mcp request; it ends when the response does (or the connection goes). */
  onRequest(request: FastifyRequest, reply: FastifyReply): void {
    if (!isMcpPath(request.url)) return
    const parent = propagator.extract(ROOT_CONTEXT, request.headers, defaultTextMapGetter)
    const attributes: Attributes = {
      [ATTR_HTTP_REQUEST_METHOD]: request.method,
      [ATTR_HTTP_ROUTE]: '/mcp',
      [ATTR_URL_PATH]: '/mcp',
      [ATTR_URL_SCHEME]: request.protocol,
      [ATTR_NETWORK_PROTOCOL_NAME]: 'http',
      [ATTR_NETWORK_PROTOCOL_VERSION]: request.raw.httpVersion,
      [ATTR_NETWORK_TRANSPORT]: 'tcp',
      [ATTR_CLIENT_ADDRESS]: request.ip,
    }
    const agent = request.headers['user-agent']
    if (typeof agent === 'string') attributes[ATTR_USER_AGENT_ORIGINAL] = agent.slice(0, 256)
    const span = this.#tracer.startSpan(`${request.method} /mcp`, { kind: SpanKind.SERVER, attributes }, parent)
    this.#httpSpans.set(request, span)
    // 'close' comes for every response, finished or cut off (a client that went away mid-stream).
    reply.raw.once('close', () => {
      const raw = reply.raw
      if (raw.headersSent) {
        span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, raw.statusCode)
        if (raw.statusCode >= 500) {
          span.setAttribute(ATTR_ERROR_TYPE, String(raw.statusCode))
          span.setStatus({ code: SpanStatusCode.ERROR })
        }
      }
      span.end()
    })
  }

  /** The JSON-RPC span, made once the request has its answer, with the times the front-end measured. */
  onMessageDone(done: MessageDone): void {
    const http = this.#httpSpans.get(done.request)
    const fromMeta = metaContext(done)
    const parent = fromMeta ?? (http ? trace.setSpan(ROOT_CONTEXT, http) : ROOT_CONTEXT)
    const links: Link[] = fromMeta && http ? [{ context: http.spanContext() }] : []
    const method = this.#names.method(done.message.method) ?? OTHER
    const attributes: Attributes = {
      [ATTR_MCP_METHOD_NAME]: method,
      [ATTR_JSONRPC_REQUEST_ID]: String(done.message.id),
      [ATTR_ERA]: done.era,
      [ATTR_NETWORK_TRANSPORT]: 'tcp',
      [ATTR_NETWORK_PROTOCOL_NAME]: 'http',
      [ATTR_NETWORK_PROTOCOL_VERSION]: done.request.raw.httpVersion,
    }
    if (done.protocolVersion !== null) attributes[ATTR_MCP_PROTOCOL_VERSION] = done.protocolVersion
    let target: string | null = null
    const tool = this.#names.tool(done)
    if (tool !== null) {
      target = tool
      attributes[ATTR_GEN_AI_TOOL_NAME] = tool
      attributes[ATTR_GEN_AI_OPERATION_NAME] = 'execute_tool'
    }
    const prompt = this.#names.prompt(done)
    if (prompt !== null) {
      target = prompt
      attributes[ATTR_GEN_AI_PROMPT_NAME] = prompt
    }
    const ended = endedOf(done)
    attributes[ATTR_OUTCOME] = ended.outcome
    let status: { code: SpanStatusCode; message?: string } | null = null
    if (ended.outcome === 'error' || ended.outcome === 'tool_error') {
      // The JSON-RPC code when one was answered, `tool_error` for a tool result with isError, else the catalog code
      // of the HTTP-level refusal. The description is the catalog's fixed message, never the rendered one.
      attributes[ATTR_ERROR_TYPE] = ended.rpcCode !== null ? String(ended.rpcCode) : ended.outcome === 'tool_error' ? 'tool_error' : ended.code
      if (ended.rpcCode !== null) attributes[ATTR_RPC_RESPONSE_STATUS_CODE] = String(ended.rpcCode)
      if (ended.code !== '') attributes[ATTR_ERROR_CODE] = ended.code
      const spec = catalog[ended.code as ErrorCode] as { message: string } | undefined
      status = { code: SpanStatusCode.ERROR, ...(spec ? { message: spec.message } : {}) }
    }
    const span = this.#tracer.startSpan(target === null ? method : `${method} ${target}`, { kind: SpanKind.SERVER, attributes, links, startTime: toEpochMs(done.startedAt) }, parent)
    if (status) span.setStatus(status)
    span.end(toEpochMs(done.endedAt))
  }
}

/** `performance.now()` as epoch milliseconds (what OpenTelemetry takes as a time). */
function toEpochMs(now: number): number {
  return performance.timeOrigin + now
}

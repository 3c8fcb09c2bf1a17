import { SpanKind, SpanStatusCode, type Attributes } from '@opentelemetry/api'
import { ExportResultCode, hrTimeToMilliseconds, type ExportResult } from '@opentelemetry/core'
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base'
import type { FastifyBaseLogger } from 'fastify'

/** A finished span as its log line holds it (`"span"` beside `"msg":"span"`). */
export interface SpanLine {
  name: string
  traceId: string
  spanId: string
  /** null for a root span. */
  parentSpanId: string | null
  /** `SERVER`, `INTERNAL`, … */
  kind: string
  /** ISO 8601, with milliseconds. */
  startTime: string
  /** To the microsecond. */
  durationMs: number
  /** `UNSET`, `OK` or `ERROR`, and the status message when there is one. */
  status: { code: string; message?: string }
  attributes: Attributes
  /** Other spans this one is linked to (a 2026-07-28 request's span links to its HTTP span). */
  links: Array<{ traceId: string; spanId: string }>
}

export function spanLine(span: ReadableSpan): SpanLine {
  const context = span.spanContext()
  return {
    name: span.name,
    traceId: context.traceId,
    spanId: context.spanId,
    parentSpanId: span.parentSpanContext?.spanId ?? null,
    kind: SpanKind[span.kind],
    startTime: new Date(hrTimeToMilliseconds(span.startTime)).toISOString(),
    durationMs: Math.round(hrTimeToMilliseconds(span.duration) * 1000) / 1000,
    status: { code: SpanStatusCode[span.status.code], ...(span.status.message ? { message: span.status.message } : {}) },
    attributes: span.attributes,
    links: span.links.map((link) => ({ traceId: link.context.traceId, spanId: link.context.spanId })),
  }
}

/**
 * SERVICE_TRACING=console: each finished span is one JSON line of the server's own log, at level info, whatever
 * SERVICE_LOG_LEVEL says (asking for console traces is asking to see them):
 *   {"level":30,"time":…,"msg":"span","span":{"name":"tools/call service_whoami","traceId":…,"durationMs":1.234,…}}
 * OpenTelemetry's ConsoleSpanExporter printed multi-line objects on stdout instead, between the log's JSON lines,
 * which broke every reader of the log. Written through the logger, a span shares its stream, file descriptor and
 * redaction, and an injected test logger sees it.
 */
export class LogSpanExporter implements SpanExporter {
  readonly #log: FastifyBaseLogger

  constructor(log: FastifyBaseLogger) {
    this.#log = log.child({}, { level: 'info' })
  }

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    for (const span of spans) this.#log.info({ span: spanLine(span) }, 'span')
    done({ code: ExportResultCode.SUCCESS })
  }

  /** Nothing is buffered: each line is written when its span ends. */
  async shutdown(): Promise<void> {}
}

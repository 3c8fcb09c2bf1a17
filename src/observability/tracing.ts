import type { Tracer, TracerProvider } from '@opentelemetry/api'
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base'
import type { FastifyBaseLogger } from 'fastify'
import type { Config } from '../config.js'
import { SERVICE_MCP_VERSION } from '../version.js'

/** How an embedder (or a test) traces the server, besides or instead of SERVICE_TRACING. */
export interface TracingOptions {
  /**
   * Span processors (each with its exporter) of the tracer provider the server makes for itself: added to the one
   * SERVICE_TRACING configures, and flushed and shut down when the server closes. Tests pass
   * `new SimpleSpanProcessor(new InMemorySpanExporter())`.
   */
  spanProcessors?: SpanProcessor[]
  /**
   * Or your own tracer provider (your OpenTelemetry setup): the server only asks it for a tracer, never registers it
   * globally nor shuts it down, and SERVICE_TRACING is then ignored.
   */
  tracerProvider?: TracerProvider
}

export const TRACER_NAME = 'service-mcp'

export interface ServerTracer {
  tracer: Tracer
  /** Flushes what is still buffered and stops exporting (nothing for a provider that is not the server's). */
  shutdown(): Promise<void>
}

/**
 * The tracer of one server, or null when tracing is off; `log` is the server's logger, where SERVICE_TRACING=console
 * writes each span as a line (log-span-exporter.ts). The provider is the server's own, never registered as the
 * global one: an embedder's OpenTelemetry setup (its global provider, context manager, propagators) stays untouched,
 * and two servers in one process trace independently. The SDK is loaded only when tracing is on.
 *
 * What the standard OTEL_* variables still do: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (the resource),
 * OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG (default parentbased_always_on), OTEL_BSP_* (batching),
 * OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION and the certificate variables (and their _TRACES_ forms). Not the
 * endpoint: SERVICE_OTLP_ENDPOINT always names it.
 */
export async function openTracer(config: Config, log: FastifyBaseLogger, options: TracingOptions = {}): Promise<ServerTracer | null> {
  if (options.tracerProvider) return { tracer: options.tracerProvider.getTracer(TRACER_NAME, SERVICE_MCP_VERSION), shutdown: async () => {} }
  const processors = [...(options.spanProcessors ?? [])]
  if (config.tracing === 'off' && processors.length === 0) return null
  const sdk = await import('@opentelemetry/sdk-trace-base')
  if (config.tracing === 'otlp') {
    const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http')
    processors.push(new sdk.BatchSpanProcessor(new OTLPTraceExporter({ url: config.otlpEndpoint })))
  } else if (config.tracing === 'console') {
    const { LogSpanExporter } = await import('./log-span-exporter.js')
    processors.push(new sdk.SimpleSpanProcessor(new LogSpanExporter(log)))
  }
  const { detectResources, envDetector, resourceFromAttributes } = await import('@opentelemetry/resources')
  const { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } = await import('@opentelemetry/semantic-conventions')
  // The environment's resource attributes (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) win over these defaults.
  const resource = resourceFromAttributes({ [ATTR_SERVICE_NAME]: TRACER_NAME, [ATTR_SERVICE_VERSION]: SERVICE_MCP_VERSION })
    .merge(detectResources({ detectors: [envDetector] }))
  const provider = new sdk.BasicTracerProvider({ resource, spanProcessors: processors })
  return { tracer: provider.getTracer(TRACER_NAME, SERVICE_MCP_VERSION), shutdown: () => provider.shutdown() }
}

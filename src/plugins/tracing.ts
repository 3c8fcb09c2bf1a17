import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { McpSpans } from '../observability/spans.js'
import { openTracer, type TracingOptions } from '../observability/tracing.js'
import { PLUGIN } from './names.js'

/**
 * OpenTelemetry traces of /mcp (observability/spans.ts says which spans and what they hold): on when SERVICE_TRACING is
 * `otlp` or `console`, or when the embedder passes span processors or a tracer provider (`tracing` in buildApp's
 * options). Off, it registers nothing and loads no OpenTelemetry code. The server's own provider is flushed and shut
 * down when the server closes, after the connections (and so every span) have ended.
 */
const tracingPlugin: FastifyPluginAsync<{ options?: TracingOptions }> = async (fastify, opts) => {
  const opened = await openTracer(fastify.config, opts.options)
  if (opened === null) return
  const spans = new McpSpans(opened.tracer, fastify)
  fastify.rpc.addObserver(spans)
  // A callback hook: cheaper than an async one, and it runs on every request.
  fastify.addHook('onRequest', (request, reply, done) => {
    try {
      spans.onRequest(request, reply)
    } finally {
      done()
    }
  })
  fastify.addHook('onClose', async () => {
    try {
      await opened.shutdown()
    } catch (err) {
      fastify.log.warn({ err }, 'traces could not be flushed')
    }
  })
}

export default fp(tracingPlugin, { name: PLUGIN.tracing, fastify: '5.x', dependencies: [PLUGIN.http, PLUGIN.rpc] })

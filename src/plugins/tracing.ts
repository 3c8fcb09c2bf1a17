import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { openTracer, type TracingOptions } from '../observability/tracing.js'
import { PLUGIN } from './names.js'

/**
 * OpenTelemetry traces of /mcp (observability/spans.ts says which spans and what they hold): on when SERVICE_TRACING is
 * `otlp` or `console`, or when the embedder passes span processors or a tracer provider (`tracing` in buildApp's
 * options). Off, it registers nothing and loads no OpenTelemetry code. The server's own provider is flushed and shut
 * down when the server closes, after the connections (and so every span) have ended.
 */
const tracingPlugin: FastifyPluginAsync<{ options?: TracingOptions }> = async (fastify, opts) => {
  const opened = await openTracer(fastify.config, fastify.log, opts.options)
  if (opened === null) return
  // Loaded here, not at the top: its OpenTelemetry API, core and semantic conventions are 80 modules that a server
  // without traces never needs (about 150 ms of every start, and of every test process that builds a server).
  const { McpSpans } = await import('../observability/spans.js')
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

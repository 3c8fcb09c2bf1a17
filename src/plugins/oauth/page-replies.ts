import type { FastifyInstance, FastifyReply } from 'fastify'
import { toServiceError } from '../../errors/render.js'
import { pageHeaders } from '../../web/headers.js'
import { errorPage } from '../../web/pages.js'
import { fromFastifyError, logFailure } from '../http.js'

/** An HTML page with the headers every page carries (CSP, no framing, no-store). */
export function sendPage(reply: FastifyReply, status: number, body: string): FastifyReply {
  return reply.code(status).headers(pageHeaders()).send(body)
}

/** A 303 (never 307: the browser must not re-POST credentials to where it goes next, RFC 9700 §4.12). */
export function seeOther(reply: FastifyReply, location: string): FastifyReply {
  reply.header('cache-control', 'no-store')
  reply.header('referrer-policy', 'no-referrer')
  return reply.code(303).header('location', location).send()
}

/** Anything that goes wrong on a page route is answered with the error page, never JSON. */
export function answerErrorsWithPages(fastify: FastifyInstance): void {
  fastify.setErrorHandler((err, request, reply) => {
    const e = toServiceError(fromFastifyError(err as Error))
    logFailure(request, err, e)
    return sendPage(reply, e.status, errorPage({ title: e.code === 'CSRF_FAILED' ? 'Form expired' : 'Something went wrong', message: e.message, detail: e.action }))
  })
}

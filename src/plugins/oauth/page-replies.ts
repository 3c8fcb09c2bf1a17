import type { FastifyInstance, FastifyReply } from 'fastify'
import type { ErrorCode } from '../../errors/catalog.js'
import { toServiceError } from '../../errors/render.js'
import type { ServiceError } from '../../errors/service-error.js'
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

/** The headers a refusal carries on a page too: Retry-After on a 429, Allow on a 405. */
export function refusalHeaders(reply: FastifyReply, err: ServiceError): void {
  if (err.headers) reply.headers(err.headers)
  if (err.retryAfter !== undefined) reply.header('retry-after', String(err.retryAfter))
}

const TITLES: Partial<Record<ErrorCode, string>> = {
  CSRF_FAILED: 'Form expired',
  RATE_LIMITED: 'Please wait',
  METHOD_NOT_ALLOWED: 'Not available',
}

/** Anything that goes wrong on a page route is answered with the error page, never JSON. */
export function answerErrorsWithPages(fastify: FastifyInstance): void {
  fastify.setErrorHandler((err, request, reply) => {
    const e = toServiceError(fromFastifyError(err as Error))
    logFailure(request, err, e)
    refusalHeaders(reply, e)
    // A page's refusal of too many attempts says in its message what to wait for; the catalog's action speaks to API clients.
    const detail = e.code === 'RATE_LIMITED' ? {} : { detail: e.action }
    return sendPage(reply, e.status, errorPage({ title: TITLES[e.code] ?? 'Something went wrong', message: e.message, ...detail }))
  })
}

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

/**
 * What a person reads when a page route refuses: a title, and what to do next when the message does not say it. The
 * catalog's `action` is not shown: it speaks to API clients ("Fix the parameter named in error_description").
 */
const PAGE_WORDING: Partial<Record<ErrorCode, { title: string; next?: string }>> = {
  CSRF_FAILED: { title: 'Form expired', next: 'Reload the page and submit the form again.' },
  RATE_LIMITED: { title: 'Please wait' },
  METHOD_NOT_ALLOWED: { title: 'Not available' },
  SIGN_IN_REQUIRED: { title: 'Sign in again', next: 'Your sign-in has ended. Sign in again, then repeat what you were doing.' },
  NOT_FOUND: { title: 'Not found' },
}
const FALLBACK_WORDING = { title: 'Something went wrong', next: 'Go back and try again.' }

/**
 * Anything that goes wrong on a page route is answered with the error page, never JSON. `link` is the way on that the
 * pages of this context offer (the account page offers itself; the OAuth pages cannot know the application's address).
 */
export function answerErrorsWithPages(fastify: FastifyInstance, options: { link?: { href: string; label: string } } = {}): void {
  fastify.setErrorHandler((err, request, reply) => {
    const e = toServiceError(fromFastifyError(err as Error))
    logFailure(request, err, e)
    refusalHeaders(reply, e)
    const wording = PAGE_WORDING[e.code] ?? FALLBACK_WORDING
    return sendPage(reply, e.status, errorPage({
      title: wording.title,
      message: e.message,
      ...(wording.next !== undefined ? { next: wording.next } : {}),
      ...(options.link !== undefined ? { link: options.link } : {}),
    }))
  })
}

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
  // Single sign-on's refusals, whose catalog action speaks to the person (they are only ever pages).
  SIGN_IN_PROVIDER_UNKNOWN: { title: 'No such sign-in provider' },
  SIGN_IN_LINK_UNUSABLE: { title: 'This sign-in link can no longer be used' },
  SIGN_IN_FLOW_UNKNOWN: { title: 'This sign-in has expired or was already used' },
  SIGN_IN_FLOW_ELSEWHERE: { title: 'This sign-in was started in another browser' },
  SIGN_IN_PROVIDER_ERROR: { title: 'Your identity provider did not sign you in' },
  SIGN_IN_PROVIDER_UNREACHABLE: { title: 'Your identity provider cannot be reached' },
  SIGN_IN_TOKEN_REFUSED: { title: 'Your sign-in could not be verified' },
  SIGN_IN_NO_EMAIL: { title: 'No email address from your identity provider' },
  SIGN_IN_EMAIL_UNVERIFIED: { title: 'Your email address is not verified' },
  SIGN_IN_NOT_INVITED: { title: 'You have no account on this server' },
  SIGN_IN_ACCOUNT_DISABLED: { title: 'Your account is disabled' },
  SIGN_IN_EMAIL_TAKEN: { title: 'Your email address belongs to another account' },
}
const FALLBACK_WORDING = { title: 'Something went wrong', next: 'Go back and try again.' }

/** The title (and next step, where the catalog's action is not for people) of `code`'s page. */
export function pageWording(code: ErrorCode): { title: string; next?: string } {
  return PAGE_WORDING[code] ?? FALLBACK_WORDING
}

/**
 * Anything that goes wrong on a page route is answered with the error page, never JSON. `link` is the way on that the
 * pages of this context offer (the account page offers itself; the OAuth pages cannot know the application's address).
 */
export function answerErrorsWithPages(fastify: FastifyInstance, options: { link?: { href: string; label: string } } = {}): void {
  fastify.setErrorHandler((err, request, reply) => {
    const e = toServiceError(fromFastifyError(err as Error))
    logFailure(request, err, e)
    refusalHeaders(reply, e)
    const wording = pageWording(e.code)
    return sendPage(reply, e.status, errorPage({
      title: wording.title,
      message: e.message,
      ...(wording.next !== undefined ? { next: wording.next } : {}),
      ...(options.link !== undefined ? { link: options.link } : {}),
    }))
  })
}

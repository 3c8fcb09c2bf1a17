import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { BROWSER_INPUT_ID, ENV_INPUT_PATH } from '../browser-inputs.js'
import type { BrowserInput } from '../../db/types.js'
import { envVarAad } from '../../db/repos/env-vars.js'
import { fail } from '../../errors/service-error.js'
import type { SecretBox } from '../../lib/secret-box.js'
import { envInputDonePage, envInputPage } from '../../web/env-input-pages.js'
import { errorPage } from '../../web/pages.js'
import type { BrowserState } from './browser.js'
import { answerErrorsWithPages, seeOther, sendPage } from './page-replies.js'

/** service_env_set's limit on a value (schemas/tools/service_env_set.input.schema.json). */
export const MAX_ENV_VALUE = 32_768
/**
 * The form's body can be larger than the other pages' (16 KiB): the value URL-encoded takes up to 12 bytes a
 * character (4 UTF-8 bytes, each %XX), with room for the other fields.
 */
const FORM_BODY_LIMIT = MAX_ENV_VALUE * 12 + 4096

/**
 * The page of a value asked for in the browser (service_env_set_in_browser; docs/decisions/url-elicitation.md). It
 * identifies the person itself (our browser sign-in, then back here) and serves only the user the question was asked
 * for: another signed-in user learns nothing about it (the specification's phishing rule). The value is sealed as
 * service_env_set seals it, kept in the row, and never logged, audited or put in a URL; the waiting call writes it.
 */
export async function envInputPages(fastify: FastifyInstance, opts: { browser: BrowserState; secrets: () => SecretBox }): Promise<void> {
  const { repos, clock, events } = fastify
  const { browser } = opts
  answerErrorsWithPages(fastify, { link: { href: '/account', label: 'Your account' } })

  const csrfPurpose = (id: string) => `env-input\u0000${id}`
  const idOf = (request: FastifyRequest) => (request.params as { id: string }).id

  /** One page for absent, expired, answered and malformed ids: which one it is tells nothing useful. */
  const noSuchRequest = (reply: FastifyReply) =>
    sendPage(reply, 404, errorPage({ title: 'No such request', message: 'This request does not exist, has expired or was already answered.', next: 'Ask again from your client if you still need to.' }))
  const anotherAccount = (reply: FastifyReply) =>
    sendPage(reply, 403, errorPage({ title: 'Made for another account', message: 'This request was made for another account than the one signed in here.', next: 'Sign in as the account that asked, or ask again from your client.', link: { href: '/account', label: 'Your account' } }))

  /** The pending row `id` asked for `userId`, with its app's name; or the page to answer instead. */
  async function pending(reply: FastifyReply, id: string, userId: string): Promise<{ row: BrowserInput; appName: string } | FastifyReply> {
    const row = BROWSER_INPUT_ID.test(id) ? await repos.browserInputs.byId(id) : undefined
    if (!row || row.status !== 'pending' || row.expiresAt <= clock.now()) return noSuchRequest(reply)
    if (row.userId !== userId) return anotherAccount(reply)
    // The member may have left the organization, or the app been deleted, since the call asked.
    const membership = await repos.memberships.byId(row.membershipId)
    const app = await repos.apps.byId(row.organizationId, row.appId)
    if (!membership || membership.userId !== userId || !app) return noSuchRequest(reply)
    return { row, appName: app.name }
  }

  function form(request: FastifyRequest, reply: FastifyReply, found: { row: BrowserInput; appName: string }, userEmail: string, error?: string, status = 200) {
    const browserId = browser.browserId(request, reply)
    return sendPage(reply, status, envInputPage({
      action: `${ENV_INPUT_PATH}/${found.row.id}`,
      csrf: browser.csrfToken(browserId, csrfPurpose(found.row.id)),
      appName: found.appName,
      name: found.row.name,
      maxLength: MAX_ENV_VALUE,
      userEmail,
      ...(error !== undefined ? { error } : {}),
    }))
  }

  fastify.get(`${ENV_INPUT_PATH}/:id`, async (request, reply) => {
    const id = idOf(request)
    if (!BROWSER_INPUT_ID.test(id)) return noSuchRequest(reply)
    const user = await browser.user(request)
    if (!user) return seeOther(reply, `/account/signin?return=${encodeURIComponent(`${ENV_INPUT_PATH}/${id}`)}`)
    const found = await pending(reply, id, user.id)
    if (!('row' in found)) return found
    return form(request, reply, found, user.email)
  })

  fastify.post(`${ENV_INPUT_PATH}/:id`, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
    const id = idOf(request)
    const body = (request.body ?? {}) as Record<string, unknown>
    browser.checkForm(request, csrfPurpose(id), body.csrf)
    const user = await browser.user(request)
    if (!user) throw fail('SIGN_IN_REQUIRED')
    const found = await pending(reply, id, user.id)
    if (!('row' in found)) return found
    const { row } = found
    const decline = body.answer === 'decline'
    if (!decline) {
      const value = body.value
      if (typeof value !== 'string' || value.length > MAX_ENV_VALUE) return form(request, reply, found, user.email, `Enter a value of at most ${MAX_ENV_VALUE} characters.`, 400)
    }
    const answer = decline ? 'declined' as const : { ciphertext: opts.secrets().seal(body.value as string, envVarAad(row.appId, row.name)) }
    // Expired or answered meanwhile (another tab): the compare-and-set says so.
    if (!(await repos.browserInputs.answer(id, clock.now(), answer))) return noSuchRequest(reply)
    events.emit({ type: 'browser-input', id })
    request.log.info({ browserInput: id, declined: decline }, 'browser input answered')
    return sendPage(reply, 200, envInputDonePage({ saved: !decline, name: row.name }))
  })
}

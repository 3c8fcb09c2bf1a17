/**
 * The page of a value asked for in the browser (service_env_set_in_browser; docs/decisions/url-elicitation.md): sign-in
 * first and back, only for the user it was asked for, CSRF, one "no such request" page for absent, expired and
 * answered rows, the value sealed in the row (never in the page, a log or a URL), the event that wakes the call, and
 * the purge of expired rows.
 */
import t, { type Test } from 'tap'
import { BrowserInputs, ENV_INPUT_PATH } from '../../src/plugins/browser-inputs.js'
import { envVarAad } from '../../src/db/repos/env-vars.js'
import type { ServerEvent } from '../../src/lib/event-bus.js'
import { injectServer } from '../helpers/inject.js'
import { formAction, formValue, FormBrowser } from '../helpers/oauth.js'
import { createMember, defaultOrganization, ownerMembership } from '../helpers/seed.js'
import { OWNER_EMAIL, OWNER_PASSWORD } from '../helpers/server.js'

const SECRET = 'hunter2-the-secret-value'
const TTL = 60_000

async function setup(t: Test) {
  const log: string[] = []
  const server = await injectServer(t, { config: { elicitationTimeoutMs: TTL, logLevel: 'debug' }, logger: { level: 'debug', stream: { write: (line: string) => log.push(line) } } })
  const { repos } = server.app
  const org = await defaultOrganization(server)
  const owner = await ownerMembership(server)
  const app = await repos.apps.create({ organizationId: org.id, name: 'billing-api' })
  let n = 0
  /** A pending row asked for `membership` (the owner's unless given). */
  const ask = async (membership: { id: string; userId: string } = owner, name = 'STRIPE_KEY') => {
    const id = BrowserInputs.idFor(`op-${++n}`, app.id, name)
    const now = server.clock.now()
    await repos.browserInputs.open({ id, membershipId: membership.id, organizationId: org.id, userId: membership.userId, appId: app.id, name, createdAt: now, expiresAt: now + TTL })
    return id
  }
  const events: ServerEvent[] = []
  server.app.events.subscribe((e) => void events.push(e))
  return { server, repos, app, owner, ask, events, log }
}

/** A browser signed in as the owner (through /account/signin). */
async function signedIn(origin: string): Promise<FormBrowser> {
  const browser = new FormBrowser(origin)
  const page = await browser.get('/account/signin')
  const posted = await browser.post(formAction(page.text), { csrf: formValue(page.text, 'csrf') ?? '', email: OWNER_EMAIL, password: OWNER_PASSWORD })
  if (posted.status !== 303) throw new Error(`sign-in failed: ${posted.status}`)
  return browser
}

t.test('not signed in: the sign-in page, then back to the request; the form names the app and the variable', async (t) => {
  const { server, ask } = await setup(t)
  const id = await ask()
  const path = `${ENV_INPUT_PATH}/${id}`
  const browser = new FormBrowser(server.url)
  const first = await browser.get(path)
  t.equal(first.status, 303)
  t.equal(first.location, `/account/signin?return=${encodeURIComponent(path)}`)
  const signIn = await browser.get(first.location!)
  t.equal(formAction(signIn.text), `/account/signin?return=${encodeURIComponent(path)}`, 'the form keeps where to return')
  const posted = await browser.post(formAction(signIn.text), { csrf: formValue(signIn.text, 'csrf') ?? '', email: OWNER_EMAIL, password: OWNER_PASSWORD })
  t.equal(posted.status, 303)
  t.equal(posted.location, path, 'back to the request after sign-in')
  const form = await browser.get(path)
  t.equal(form.status, 200)
  t.match(form.text, /billing-api/)
  t.match(form.text, /STRIPE_KEY/)
  t.match(form.text, /<input id="value" name="value" type="password"/, 'a password-type input')
  t.match(form.text, /value="save">Save<\/button>\n<button type="submit" name="answer" value="decline"[^>]*>Decline</, 'Save first: Enter in the field saves')
  t.equal(formAction(form.text), path)
  t.ok(formValue(form.text, 'csrf'), 'a CSRF token')
})

t.test('a sign-in returns only to a request page, never elsewhere', async (t) => {
  const { server } = await setup(t)
  const browser = new FormBrowser(server.url)
  for (const elsewhere of ['https://evil.example/x', '//evil.example', '/account/env-input/../../oauth', `${ENV_INPUT_PATH}/short`]) {
    const page = await browser.get(`/account/signin?return=${encodeURIComponent(elsewhere)}`)
    t.equal(formAction(page.text), '/account/signin', `${elsewhere}: not kept`)
  }
  const signedInBrowser = await signedIn(server.url)
  const again = await signedInBrowser.get(`/account/signin?return=${encodeURIComponent('https://evil.example/x')}`)
  t.equal(again.location, '/account')
})

t.test('signed in as another user: a page saying so, naming neither the app nor the variable', async (t) => {
  const { server, ask, repos } = await setup(t)
  const other = await createMember(server, { role: 'developer' })
  const id = await ask(other.membership, 'OTHER_SECRET_NAME')
  const browser = await signedIn(server.url)
  const page = await browser.get(`${ENV_INPUT_PATH}/${id}`)
  t.equal(page.status, 403)
  t.match(page.text, /made for another account/)
  t.notMatch(page.text, /billing-api|OTHER_SECRET_NAME/)
  const csrf = formValue(page.text, 'csrf') ?? ''
  const posted = await browser.post(`${ENV_INPUT_PATH}/${id}`, { csrf, answer: 'save', value: SECRET })
  t.not(posted.status, 200, 'nor can it be answered')
  t.equal((await repos.browserInputs.byId(id))?.status, 'pending')
})

t.test('a post without the page\'s CSRF token is refused and changes nothing', async (t) => {
  const { server, ask, repos } = await setup(t)
  const id = await ask()
  const browser = await signedIn(server.url)
  await browser.get(`${ENV_INPUT_PATH}/${id}`)
  const posted = await browser.post(`${ENV_INPUT_PATH}/${id}`, { csrf: 'x'.repeat(64), answer: 'save', value: SECRET })
  t.equal(posted.status, 403)
  t.match(posted.text, /Form expired/)
  // Another request's token does not fit either.
  const otherId = await ask(undefined, 'OTHER')
  const otherForm = await browser.get(`${ENV_INPUT_PATH}/${otherId}`)
  const crossed = await browser.post(`${ENV_INPUT_PATH}/${id}`, { csrf: formValue(otherForm.text, 'csrf') ?? '', answer: 'save', value: SECRET })
  t.equal(crossed.status, 403)
  t.equal((await repos.browserInputs.byId(id))?.status, 'pending')
})

t.test('absent, malformed, expired and answered requests: one "no such request" page', async (t) => {
  const { server, ask } = await setup(t)
  const browser = await signedIn(server.url)
  const absent = await browser.get(`${ENV_INPUT_PATH}/${'A'.repeat(22)}`)
  t.equal(absent.status, 404)
  t.match(absent.text, /No such request/)
  t.equal((await browser.get(`${ENV_INPUT_PATH}/nope`)).status, 404, 'malformed')

  const id = await ask()
  const form = await browser.get(`${ENV_INPUT_PATH}/${id}`)
  t.equal(form.status, 200)
  const csrf = formValue(form.text, 'csrf') ?? ''
  await server.clock.advance(TTL)
  const expired = await browser.get(`${ENV_INPUT_PATH}/${id}`)
  t.equal(expired.status, 404, 'expired on the server clock')
  t.match(expired.text, /No such request/)
  t.equal((await browser.post(`${ENV_INPUT_PATH}/${id}`, { csrf, answer: 'save', value: SECRET })).status, 404, 'an expired request takes no value')

  const answered = await ask(undefined, 'ANSWERED')
  const page = await browser.get(`${ENV_INPUT_PATH}/${answered}`)
  const token = formValue(page.text, 'csrf') ?? ''
  t.equal((await browser.post(`${ENV_INPUT_PATH}/${answered}`, { csrf: token, answer: 'save', value: 'first' })).status, 200)
  const second = await browser.post(`${ENV_INPUT_PATH}/${answered}`, { csrf: token, answer: 'save', value: 'second' })
  t.equal(second.status, 404, 'a second answer (another tab) is refused')
  t.equal((await browser.get(`${ENV_INPUT_PATH}/${answered}`)).status, 404)
})

t.test('saved: the value sealed in the row, the event emitted, the value in no page, log or URL', async (t) => {
  const { server, ask, repos, app, events, log } = await setup(t)
  const id = await ask()
  const browser = await signedIn(server.url)
  const form = await browser.get(`${ENV_INPUT_PATH}/${id}`)
  const saved = await browser.post(`${ENV_INPUT_PATH}/${id}`, { csrf: formValue(form.text, 'csrf') ?? '', answer: 'save', value: SECRET })
  t.equal(saved.status, 200)
  t.match(saved.text, /STRIPE_KEY saved/)
  t.match(saved.text, /go back to your client/)
  t.notMatch(saved.text, new RegExp(SECRET))
  const row = await repos.browserInputs.byId(id)
  t.equal(row?.status, 'submitted')
  t.not(row?.ciphertext, null)
  t.notMatch(row?.ciphertext ?? '', new RegExp(SECRET), 'sealed, not stored in the clear')
  t.equal(server.app.secrets.open(row!.ciphertext!, envVarAad(app.id, 'STRIPE_KEY')), SECRET, 'sealed as service_env_set seals it')
  t.strictSame(events.filter((e) => e.type === 'browser-input'), [{ type: 'browser-input', id }], 'the waiting call is told')
  t.ok(log.some((l) => l.includes('browser input answered')), 'the answer is logged')
  t.notOk(log.some((l) => l.includes(SECRET)), 'never the value')
})

t.test('declined on the page: the row says so, nothing is sealed', async (t) => {
  const { server, ask, repos, events } = await setup(t)
  const id = await ask()
  const browser = await signedIn(server.url)
  const form = await browser.get(`${ENV_INPUT_PATH}/${id}`)
  const declined = await browser.post(`${ENV_INPUT_PATH}/${id}`, { csrf: formValue(form.text, 'csrf') ?? '', answer: 'decline', value: '' })
  t.equal(declined.status, 200)
  t.match(declined.text, /Nothing was saved/)
  const row = await repos.browserInputs.byId(id)
  t.equal(row?.status, 'declined')
  t.equal(row?.ciphertext, null)
  t.equal(events.filter((e) => e.type === 'browser-input').length, 1)
})

t.test('a value over service_env_set\'s limit is refused in place; the request stays open', async (t) => {
  const { server, ask, repos } = await setup(t)
  const id = await ask()
  const browser = await signedIn(server.url)
  const form = await browser.get(`${ENV_INPUT_PATH}/${id}`)
  const posted = await browser.post(`${ENV_INPUT_PATH}/${id}`, { csrf: formValue(form.text, 'csrf') ?? '', answer: 'save', value: 'x'.repeat(32_769) })
  t.equal(posted.status, 400)
  t.match(posted.text, /at most 32768 characters/)
  t.equal((await repos.browserInputs.byId(id))?.status, 'pending')
})

t.test('expired requests are purged with the other expired rows', async (t) => {
  const { server, ask, repos } = await setup(t)
  const id = await ask()
  await server.clock.advance(server.config.sessionSweepMs)
  t.ok(await repos.browserInputs.byId(id), 'kept while it can be answered')
  await server.clock.advance(TTL)
  t.equal(await repos.browserInputs.byId(id), undefined, 'purged once expired')
})

/**
 * The env-input page in headless Chromium (docs/decisions/url-elicitation.md): a 2026-07-28 call asks for a value by
 * URL; the browser opens it, signs in, comes back to the form, types the value and saves; the waiting retry returns.
 * Screenshots of the form and of the saved page land in test-artifacts/screenshots/.
 */
import t from 'tap'
import { launchBrowser, openPage, screenshot } from '../helpers/browser.js'
import { answerOf, modernCall } from '../helpers/modern.js'
import { defaultOrganization } from '../helpers/seed.js'
import { OWNER_EMAIL, OWNER_PASSWORD, startServer } from '../helpers/server.js'

const TOOL = 'service_env_set_in_browser'
const URL_MODE = { elicitation: { url: {} } }

t.test('sign in, type the value in a password field, save: the waiting retry sets the env var', async (t) => {
  const server = await startServer(t)
  const app = await server.app.repos.apps.create({ organizationId: (await defaultOrganization(server)).id, name: 'billing-api' })
  const args = { app_id: app.id, name: 'STRIPE_KEY' }
  const first = answerOf(await modernCall(server.mcpUrl, server.apiKey, TOOL, args, { capabilities: URL_MODE }))
  const url: string = first.result.inputRequests.elicit.params.url
  const waiting = modernCall(server.mcpUrl, server.apiKey, TOOL, args, {
    id: 2,
    capabilities: URL_MODE,
    extra: { requestState: first.result.requestState, inputResponses: { elicit: { action: 'accept' } } },
  })

  const { page, problems } = await openPage(t, await launchBrowser(t), { width: 390, height: 844 })
  await page.goto(url)
  t.match(page.url(), /\/account\/signin\?return=/, 'sign-in first')
  await page.fill('#email', OWNER_EMAIL)
  await page.fill('#password', OWNER_PASSWORD)
  await Promise.all([page.waitForURL(url), page.getByRole('button', { name: 'Sign in' }).click()])
  t.equal(await page.getAttribute('#value', 'type'), 'password', 'the value is typed in a password field')
  t.match(await page.textContent('main'), /billing-api/)
  await screenshot(page, 'env-input-form')

  await page.fill('#value', 'sk_live_typed-in-chromium')
  // Enter in the field saves (the form's first button), as a person would expect; it never declines.
  await Promise.all([page.waitForLoadState('load'), page.press('#value', 'Enter')])
  await page.waitForSelector('text=STRIPE_KEY saved')
  await screenshot(page, 'env-input-saved')
  t.strictSame(problems, [], 'no CSP violation or script error')

  const done = answerOf(await waiting, 2)
  t.strictSame(done.result.structuredContent, { app_id: app.id, name: 'STRIPE_KEY', created: true })
})

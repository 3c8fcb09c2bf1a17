/**
 * service_env_set_in_browser with real clients (docs/decisions/url-elicitation.md): the value is typed on our own page,
 * never through the client. A 2025-11-25 session (the SDK v2 client declaring elicitation.url) is asked in URL mode,
 * the test plays the browser (signs in, posts the form), and the client hears notifications/elicitation/complete and
 * gets the tool's result; a 2026-07-28 request and its retry do the same by MRTR, the retry waiting for the page; a
 * client without URL mode gets the documented error and nothing is asked.
 */
import { Client, StreamableHTTPClientTransport, type ElicitRequest, type VersionNegotiationMode } from '@modelcontextprotocol/client'
import t, { type Test } from 'tap'
import { envVarAad } from '../../src/db/repos/env-vars.js'
import { injectServer } from '../helpers/inject.js'
import { answerOf, modernCall } from '../helpers/modern.js'
import { formAction, formValue, FormBrowser } from '../helpers/oauth.js'
import { defaultOrganization } from '../helpers/seed.js'
import { until } from '../helpers/stream.js'
import { OWNER_EMAIL, OWNER_PASSWORD, startServer, type TestServer } from '../helpers/server.js'

const TOOL = 'service_env_set_in_browser'
const VALUE = 'sk_live_typed-in-the-browser'
const URL_MODE = { elicitation: { url: {} } }
const TTL = 60_000

async function newApp(server: TestServer, name = 'billing-api') {
  return server.app.repos.apps.create({ organizationId: (await defaultOrganization(server)).id, name })
}

/** Plays the person: opens the page of `url` (signing in on the way, as the owner) and saves `value` or declines. */
async function answerInBrowser(url: string, answer: { value: string } | 'decline') {
  const page = new URL(url)
  const browser = new FormBrowser(page.origin)
  const signInRedirect = await browser.get(page.pathname)
  const signIn = await browser.get(signInRedirect.location!)
  const signedIn = await browser.post(formAction(signIn.text), { csrf: formValue(signIn.text, 'csrf') ?? '', email: OWNER_EMAIL, password: OWNER_PASSWORD })
  if (signedIn.location !== page.pathname) throw new Error(`the sign-in did not return to the page: ${signedIn.location}`)
  const form = await browser.get(page.pathname)
  const fields = answer === 'decline' ? { answer: 'decline', value: '' } : { answer: 'save', value: answer.value }
  return browser.post(formAction(form.text), { csrf: formValue(form.text, 'csrf') ?? '', ...fields })
}

/** The env var as stored: its value opened with the server's key (undefined when it is not set). */
async function storedValue(server: TestServer, appId: string, name: string): Promise<string | undefined> {
  const org = await defaultOrganization(server)
  const row = (await server.app.repos.envVars.ciphertexts(org.id, appId)).find((v) => v.name === name)
  return row && server.app.secrets.open(row.ciphertext, envVarAad(appId, name))
}

/** The SDK v2 client, declaring `capabilities`, answering URL questions with `action` and then playing the browser. */
function sdkClient(t: Test, server: TestServer, mode: VersionNegotiationMode, capabilities: Record<string, unknown>, browser: (url: string) => Promise<unknown>) {
  const transport = new StreamableHTTPClientTransport(new URL(server.mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${server.apiKey}` } } })
  const client = new Client({ name: 'sdk-v2-env-in-browser', version: '2.0.0' }, { capabilities, versionNegotiation: { mode } })
  const asked: ElicitRequest[] = []
  const played: Array<Promise<unknown>> = []
  client.setRequestHandler('elicitation/create', async (request) => {
    asked.push(request)
    const params = request.params as { url?: string }
    // The person agreed to open the page; what they do there happens after this answer, in the browser.
    if (params.url !== undefined) played.push(browser(params.url))
    return { action: 'accept' }
  })
  const completed: string[] = []
  client.setNotificationHandler('notifications/elicitation/complete', (n) => void completed.push(n.params.elicitationId))
  t.teardown(() => client.close())
  return { client, transport, asked, played, completed }
}

t.test('2025-11-25 session (SDK v2): URL mode on our page, the value saved there, completion, then the result', async (t) => {
  const server = await startServer(t)
  const app = await newApp(server)
  const { client, transport, asked, played, completed } = sdkClient(t, server, 'legacy', URL_MODE, (url) => answerInBrowser(url, { value: VALUE }))
  await client.connect(transport)
  const result = await client.callTool({ name: TOOL, arguments: { app_id: app.id, name: 'STRIPE_KEY' } })
  t.notOk(result.isError, JSON.stringify(result.content))
  t.strictSame(result.structuredContent, { app_id: app.id, name: 'STRIPE_KEY', created: true })
  t.equal(asked.length, 1, 'asked once')
  const params = asked[0]!.params as { mode: string; url: string; elicitationId: string; message: string }
  t.equal(params.mode, 'url')
  t.match(params.message, /Enter the value of STRIPE_KEY for app billing-api in your browser/)
  t.equal(params.url, `${server.url}/account/env-input/${params.elicitationId}`, 'our own page, named by the elicitation id')
  t.match(params.elicitationId, /^[A-Za-z0-9_-]{22}$/)
  t.strictSame(completed, [params.elicitationId], 'notifications/elicitation/complete names it')
  const saved = (await Promise.all(played))[0] as { status: number }
  t.equal(saved.status, 200, 'the page saved the value')
  t.equal(await storedValue(server, app.id, 'STRIPE_KEY'), VALUE, 'the env var holds what was typed')
  t.notOk(JSON.stringify(result).includes(VALUE), 'the value never reaches the client')
  t.equal((await server.app.repos.browserInputs.byId(params.elicitationId))?.status, 'used', 'the request is used up')
  const audit = (await server.app.repos.audit.page((await defaultOrganization(server)).id, 10, undefined, TOOL)).items
  t.equal(audit.length, 1, 'audited')
  t.match(audit[0], { outcome: 'succeeded', targetType: 'env_var', targetId: `${app.id}/STRIPE_KEY` })
  t.notOk(JSON.stringify(audit).includes(VALUE), 'never the value')
})

t.test('2025-11-25 session: declined on the page → ELICITATION_DENIED, nothing set, no completion', async (t) => {
  const server = await startServer(t)
  const app = await newApp(server)
  const { client, transport, completed } = sdkClient(t, server, 'legacy', URL_MODE, (url) => answerInBrowser(url, 'decline'))
  await client.connect(transport)
  const result = await client.callTool({ name: TOOL, arguments: { app_id: app.id, name: 'STRIPE_KEY' } })
  t.equal(result.isError, true)
  t.match(JSON.parse((result.content as Array<{ text: string }>)[0]!.text), { code: 'ELICITATION_DENIED' })
  t.strictSame(completed, [])
  t.equal(await storedValue(server, app.id, 'STRIPE_KEY'), undefined)
})

t.test('a session client without URL mode: CAPABILITY_REQUIRED naming elicitation.url, nothing asked', async (t) => {
  const server = await startServer(t)
  const app = await newApp(server)
  const { client, transport, asked } = sdkClient(t, server, 'legacy', { elicitation: { form: {} } }, async () => undefined)
  await client.connect(transport)
  const result = await client.callTool({ name: TOOL, arguments: { app_id: app.id, name: 'STRIPE_KEY' } })
  t.equal(result.isError, true)
  const failure = JSON.parse((result.content as Array<{ text: string }>)[0]!.text)
  t.equal(failure.code, 'CAPABILITY_REQUIRED')
  t.match(failure.message, /elicitation\.url/)
  t.equal(asked.length, 0)
})

t.test('2026-07-28: input_required in URL mode; the retry waits for the page and writes the value', async (t) => {
  const server = await injectServer(t, { config: { elicitationTimeoutMs: TTL } })
  const app = await newApp(server)
  const args = { app_id: app.id, name: 'STRIPE_KEY' }
  const first = answerOf(await modernCall(server.mcpUrl, server.apiKey, TOOL, args, { capabilities: URL_MODE }))
  t.equal(first.result.resultType, 'input_required')
  const request = first.result.inputRequests.elicit
  t.match(request, { method: 'elicitation/create', params: { mode: 'url', message: /STRIPE_KEY for app billing-api/ } })
  t.notOk('elicitationId' in request.params, 'the revision has no elicitationId')
  const url: string = request.params.url
  const id = url.slice(url.lastIndexOf('/') + 1)
  t.equal(url, `${server.url}/account/env-input/${id}`)
  t.equal((await server.app.repos.browserInputs.byId(id))?.status, 'pending', 'the page\'s request exists before the question is answered')

  const retry = (n: number) => modernCall(server.mcpUrl, server.apiKey, TOOL, args, {
    id: n,
    capabilities: URL_MODE,
    extra: { requestState: first.result.requestState, inputResponses: { elicit: { action: 'accept' } } },
  })
  const waiting = retry(2)
  const saved = await answerInBrowser(url, { value: VALUE })
  t.equal(saved.status, 200)
  const done = answerOf(await waiting, 2)
  t.equal(done.result.resultType, 'complete')
  t.strictSame(done.result.structuredContent, { app_id: app.id, name: 'STRIPE_KEY', created: true })
  t.equal(await storedValue(server, app.id, 'STRIPE_KEY'), VALUE)
  // Another retry of the same operation names the same request, which is used up: the value is not written twice.
  const again = answerOf(await retry(3), 3)
  t.equal(again.result.isError, true)
  t.match(JSON.parse(again.result.content[0].text), { code: 'CONFLICT' })
})

t.test('2026-07-28: the retry gives up at the elicitation timeout (server clock); a decline in the client is ELICITATION_DENIED', async (t) => {
  const server = await injectServer(t, { config: { elicitationTimeoutMs: TTL } })
  const app = await newApp(server)
  const args = { app_id: app.id, name: 'STRIPE_KEY' }
  const ask = async () => answerOf(await modernCall(server.mcpUrl, server.apiKey, TOOL, args, { capabilities: URL_MODE }))
  const retry = (first: any, action: string) => modernCall(server.mcpUrl, server.apiKey, TOOL, args, {
    id: 2,
    capabilities: URL_MODE,
    extra: { requestState: first.result.requestState, inputResponses: { elicit: { action } } },
  })

  const first = await ask()
  const timers = server.clock.pendingTimers
  const waiting = retry(first, 'accept')
  // Once the retry waits on the page (its expiry is a timer), time passes on the server's clock only.
  await until(() => server.clock.pendingTimers > timers, 5000, 'the retry waiting for the page')
  await server.clock.advance(TTL)
  const timedOut = answerOf(await waiting, 2)
  t.match(JSON.parse(timedOut.result.content[0].text), { code: 'ELICITATION_TIMEOUT' })
  t.equal(server.clock.pendingTimers, timers, 'the wait leaves no timer behind')

  const second = await ask()
  const declined = answerOf(await retry(second, 'decline'), 2)
  t.match(JSON.parse(declined.result.content[0].text), { code: 'ELICITATION_DENIED' })
  const url: string = second.result.inputRequests.elicit.params.url
  t.equal((await server.app.repos.browserInputs.byId(url.slice(url.lastIndexOf('/') + 1)))?.status, 'declined', 'the page no longer takes a value')
  t.equal(await storedValue(server, app.id, 'STRIPE_KEY'), undefined)
})

t.test('2026-07-28 request without URL mode: -32021 requiring elicitation.url', async (t) => {
  const server = await injectServer(t)
  const app = await newApp(server)
  const reply = await modernCall(server.mcpUrl, server.apiKey, TOOL, { app_id: app.id, name: 'STRIPE_KEY' }, { capabilities: { elicitation: {} } })
  t.equal(reply.status, 400)
  const error = answerOf(reply).error
  t.equal(error.code, -32021)
  t.strictSame(error.data.requiredCapabilities, { elicitation: { url: {} } })
})

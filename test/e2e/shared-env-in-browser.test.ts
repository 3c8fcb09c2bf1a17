// test-backends: own (processes on PostgreSQL and Redis)
/**
 * A value typed in the browser reaches the call waiting on another process (docs/decisions/url-elicitation.md): the
 * 2026-07-28 retry waits on A, the page is answered on B, and B's `browser-input` event, relayed through Redis, wakes
 * A, which reads the row B wrote and sets the env var.
 */
import t from 'tap'
import { builtinTools } from '../../src/index.js'
import { envVarAad } from '../../src/db/repos/env-vars.js'
import { postgresDatabase, redisPrefix, redisUrl } from '../helpers/backends.js'
import { answerOf, modernCall } from '../helpers/modern.js'
import { formAction, formValue, FormBrowser } from '../helpers/oauth.js'
import { defaultOrganization } from '../helpers/seed.js'
import { OWNER_EMAIL, OWNER_PASSWORD, startServer, type TestServer } from '../helpers/server.js'

const ENV_KEY = Buffer.alloc(32, 0x5a).toString('base64')
const TOOL = 'service_env_set_in_browser'
const URL_MODE = { elicitation: { url: {} } }
const VALUE = 'typed-on-the-other-process'

t.test('the retry waits on A; the page is answered on B; A writes the value', async (t) => {
  const url = await postgresDatabase(t)
  const config = { envKey: ENV_KEY, redisUrl: redisUrl(), redisPrefix: redisPrefix(t) }
  const a = await startServer(t, { dbPath: url, tools: builtinTools, config })
  const b: TestServer = await startServer(t, { dbPath: url, tools: builtinTools, config })
  const org = await defaultOrganization(a)
  const app = await a.app.repos.apps.create({ organizationId: org.id, name: 'billing-api' })
  const args = { app_id: app.id, name: 'STRIPE_KEY' }

  const first = answerOf(await modernCall(a.mcpUrl, a.apiKey, TOOL, args, { capabilities: URL_MODE }))
  const path = new URL(first.result.inputRequests.elicit.params.url as string).pathname
  const waiting = modernCall(a.mcpUrl, a.apiKey, TOOL, args, {
    id: 2,
    capabilities: URL_MODE,
    extra: { requestState: first.result.requestState, inputResponses: { elicit: { action: 'accept' } } },
  })

  // The person's browser lands on B (a load balancer's choice).
  const browser = new FormBrowser(b.url)
  const signIn = await browser.get((await browser.get(path)).location!)
  await browser.post(formAction(signIn.text), { csrf: formValue(signIn.text, 'csrf') ?? '', email: OWNER_EMAIL, password: OWNER_PASSWORD })
  const form = await browser.get(path)
  t.equal(form.status, 200, 'B serves the page of A\'s call')
  const saved = await browser.post(path, { csrf: formValue(form.text, 'csrf') ?? '', answer: 'save', value: VALUE })
  t.equal(saved.status, 200)

  const done = answerOf(await waiting, 2)
  t.strictSame(done.result.structuredContent, { app_id: app.id, name: 'STRIPE_KEY', created: true }, 'A heard B\'s answer')
  const row = (await a.app.repos.envVars.ciphertexts(org.id, app.id)).find((v) => v.name === 'STRIPE_KEY')
  t.equal(row && a.app.secrets.open(row.ciphertext, envVarAad(app.id, 'STRIPE_KEY')), VALUE)
})

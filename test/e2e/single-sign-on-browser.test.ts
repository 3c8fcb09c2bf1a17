import { Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client'
import type { Browser, Page } from 'playwright-core'
import t, { type Test } from 'tap'
import { launchBrowser, openPage, screenshot } from '../helpers/browser.js'
import { clientCallback, MemoryOAuthProvider } from '../helpers/sdk-v2-oauth.js'
import { startServer, type TestServer } from '../helpers/server.js'
import { teamIdp, type TeamIdp } from '../helpers/team-idp.js'

// Single sign-on end to end, in headless Chromium, against a real OpenID Connect provider (oidc-provider 9.x) started
// here as the team's: the SDK v2 client runs the MCP authorization flow, the person signs in at the provider, consents
// on our page, and the client calls service_whoami with the role the provider's groups map to. Then the provider
// misbehaves (a wrong nonce, another audience, an expired ID token) or vouches for an unverified email, and each is
// refused with a page saying so.

const ACCOUNTS = {
  alice: { email: 'alice@example.com', email_verified: true, groups: ['mcp-devs'] },
  mallory: { email: 'mallory@example.com', email_verified: false, groups: ['mcp-admins'] },
}

let browserPromise: Promise<Browser> | undefined
const browser = () => (browserPromise ??= launchBrowser(t))

interface Setup {
  server: TestServer
  idp: TeamIdp
}

async function setup(t: Test): Promise<Setup> {
  const idp = await teamIdp(t, ACCOUNTS)
  const server = await startServer(t, {
    config: {
      signInProviders: [{
        name: 'team',
        title: 'Team IdP',
        issuer: idp.issuer,
        clientId: idp.clientId,
        clientSecret: idp.clientSecret,
        scopes: 'openid email profile groups',
        provision: { justInTime: true, organizations: [{ organization: 'default', groups: { 'mcp-devs': 'developer', 'mcp-admins': 'admin' } }] },
      }] as never,
    },
  })
  idp.register(`${server.url}/oauth/callback/team`)
  return { server, idp }
}

/** From our sign-in page: the provider's button, its development login, its consent; back on our server. */
async function signInAtProvider(page: Page, login: string, shot?: string): Promise<void> {
  if (shot !== undefined) await screenshot(page, `single-sign-on-${shot}`)
  await page.getByRole('button', { name: 'Sign in with Team IdP' }).click()
  await page.waitForSelector('input[name="login"]')
  await page.fill('input[name="login"]', login)
  await page.fill('input[name="password"]', 'anything')
  await page.getByRole('button', { name: 'Sign-in' }).click()
  await page.getByRole('button', { name: 'Continue' }).click()
}

t.test('the SDK v2 client signs in through the team\'s provider in the browser, consents, and calls a tool', async (t) => {
  const { server } = await setup(t)
  const provider = new MemoryOAuthProvider(await clientCallback(t), 'SSO test client')
  const first = new Client({ name: 'sso-e2e', version: '1.0.0' })
  const err = await first.connect(new StreamableHTTPClientTransport(new URL(server.mcpUrl), { authProvider: provider })).then(() => null, (e: unknown) => e)
  t.type(err, UnauthorizedError, 'the first connect stops at the authorization redirect')
  await first.close()
  const authorize = provider.redirects[0]
  t.ok(authorize, 'the client asked to open the authorization URL')

  const { page, problems } = await openPage(t, await browser(), { width: 1000, height: 800 })
  await page.goto(authorize!.href)
  t.equal(new URL(page.url()).origin, server.url, `the authorization URL leads to our sign-in page (${page.url()})`)
  await signInAtProvider(page, 'alice', 'sign-in')
  // Back on our consent page, signed in as the provider's account, with the role its groups map to.
  await page.waitForURL(`${server.url}/oauth/interaction/**`)
  t.match(await page.textContent('main'), /as alice@example\.com/)
  t.match(await page.textContent('main'), /developer/)
  const [callback] = await Promise.all([
    page.waitForURL(`${provider.redirectUrl}**`),
    page.getByRole('button', { name: 'Allow' }).click(),
  ])
  void callback
  const back = new URL(page.url())
  t.ok(back.searchParams.get('code'), 'the client got a code')
  t.same(problems, [], 'no CSP violation or script error on our pages')

  const transport = new StreamableHTTPClientTransport(new URL(server.mcpUrl), { authProvider: provider })
  await transport.finishAuth(back.searchParams)
  const client = new Client({ name: 'sso-e2e', version: '1.0.0' })
  await client.connect(transport)
  t.teardown(() => client.close())
  const result = await client.callTool({ name: 'service_whoami', arguments: {} })
  t.equal(result.isError, false)
  t.match(result.structuredContent, { user: { email: 'alice@example.com' }, organization: { slug: 'default' }, role: 'developer' })

  const org = await server.app.repos.organizations.bySlug('default')
  const audit = (await server.app.repos.audit.page(org!.id, 10, undefined, 'sign_in')).items
  t.match(audit[0]?.details, { provider: 'team', account: 'created' }, 'the sign-in is in the audit log with the provider')
})

t.test('refused at the callback: a wrong nonce, another audience, an expired ID token, an unverified email', async (t) => {
  const { server, idp } = await setup(t)
  const now = () => Math.floor(Date.now() / 1000)
  const cases: Array<{ label: string; login: string; tamper?: TeamIdp['tamper']; title: RegExp; reason: RegExp }> = [
    { label: 'wrong nonce', login: 'alice', tamper: (c) => ({ ...c, nonce: 'replayed-nonce' }), title: /could not be verified/, reason: /nonce/ },
    { label: 'another audience', login: 'alice', tamper: (c) => ({ ...c, aud: 'another-client' }), title: /could not be verified/, reason: /another client/ },
    { label: 'expired', login: 'alice', tamper: (c) => ({ ...c, iat: now() - 600, exp: now() - 300 }), title: /could not be verified/, reason: /expired|issued before/ },
    { label: 'unverified email', login: 'mallory', title: /Your email address is not verified/, reason: /Verify your email address/ },
  ]
  for (const c of cases) {
    idp.tamper = c.tamper
    const { page } = await openPage(t, await browser(), { width: 1000, height: 800 })
    await page.goto(`${server.url}/account/signin`)
    await signInAtProvider(page, c.login)
    await page.waitForURL(`${server.url}/oauth/callback/team**`)
    await screenshot(page, `single-sign-on-refused-${c.label.replace(/\s+/g, '-')}`)
    const text = await page.textContent('main')
    t.match(text, c.title, `${c.label}: the page says what happened`)
    t.match(text, c.reason, `${c.label}: and why`)
    const account = await page.goto(`${server.url}/account`)
    t.equal(new URL(account!.url()).pathname, '/account/signin', `${c.label}: not signed in`)
  }
  idp.tamper = undefined
  t.equal(await server.app.repos.users.byEmail('mallory@example.com'), undefined, 'no account for the unverified email')
})

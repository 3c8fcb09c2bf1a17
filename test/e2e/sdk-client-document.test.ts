import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client'
import t, { type Test } from 'tap'
import { startServe, type Served } from '../helpers/cli.js'
import { launchBrowser, openPage, screenshot } from '../helpers/browser.js'
import { documentServer, type DocumentServer } from '../helpers/document-server.js'
import { ROOT } from '../helpers/root.js'
import { clientCallback, MemoryOAuthProvider } from '../helpers/sdk-v2-oauth.js'

// Client ID Metadata Documents end to end: the SDK v2 client, given `clientMetadataUrl`, sends that https URL as its
// client_id (the server advertises client_id_metadata_document_supported); the server, a real `serve` process, fetches
// the document from a local HTTPS server through its safe fetcher (trusting the test CA through NODE_EXTRA_CA_CERTS,
// and allowed to reach `localhost` only by the unsafe test setting); the person signs in and consents in headless
// Chromium on a page that names the document's host; the client exchanges the code and calls a tool.

const OWNER_EMAIL = 'owner@example.com'
const OWNER_PASSWORD = 'correct horse battery staple'

async function serveWithDocuments(t: Test): Promise<Served> {
  const dir = mkdtempSync(join(tmpdir(), 'service-mcp-cimd-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const served = await startServe({
    SERVICE_HOST: '127.0.0.1',
    SERVICE_PORT: '0',
    SERVICE_DATABASE: join(dir, 'service.db'),
    SERVICE_BOOTSTRAP_EMAIL: OWNER_EMAIL,
    SERVICE_BOOTSTRAP_PASSWORD: OWNER_PASSWORD,
    SERVICE_CLIENT_DOCUMENTS_UNSAFE_LOOPBACK_HOSTS: 'localhost',
    NODE_EXTRA_CA_CERTS: join(ROOT, 'test', 'fixtures', 'tls', 'ca.crt'),
  })
  t.teardown(async () => {
    served.child.kill('SIGTERM')
    await served.exited
  })
  return served
}

t.test('the SDK v2 client identified by its metadata document signs in through the browser and calls a tool', async (t) => {
  const docs: DocumentServer = await documentServer()
  t.teardown(() => docs.close())
  const documentUrl = `https://localhost:${docs.port}/oauth/client.json`
  const redirectUrl = await clientCallback(t)
  docs.serve('/oauth/client.json', {
    client_id: documentUrl,
    client_name: 'Document client',
    redirect_uris: [redirectUrl],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  }, { 'cache-control': 'max-age=3600' })
  const served = await serveWithDocuments(t)
  const mcpUrl = new URL(served.url)
  t.match(served.stdout(), /SERVICE_CLIENT_DOCUMENTS_UNSAFE_LOOPBACK_HOSTS is set/, 'the server warns that the unsafe test setting is on')

  const provider = new MemoryOAuthProvider(redirectUrl, 'Document client', { clientMetadataUrl: documentUrl })
  const first = new Client({ name: 'cimd-e2e', version: '1.0.0' })
  const err = await first.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider })).then(() => null, (e: unknown) => e)
  t.type(err, UnauthorizedError, 'the first connect stops at the authorization redirect')
  await first.close()
  const authorize = provider.redirects[0]
  t.equal(authorize?.searchParams.get('client_id'), documentUrl, 'the client sent its document URL as client_id, not a registration')
  t.equal(docs.hits.get('/oauth/client.json'), undefined, 'nothing is fetched before the browser asks')

  const browser = await launchBrowser(t)
  const { page, problems } = await openPage(t, browser, { width: 1000, height: 900 })
  await page.goto(authorize!.href)
  t.equal(new URL(page.url()).origin, mcpUrl.origin, `the authorization URL leads to our sign-in page (${page.url()})`)
  await page.fill('input[name="email"]', OWNER_EMAIL)
  await page.fill('input[name="password"]', OWNER_PASSWORD)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.waitForSelector('button:has-text("Allow")')
  const consent = (await page.textContent('main')) ?? ''
  t.match(consent, `localhost:${docs.port}`, 'the consent page names the document\'s host')
  t.match(consent, /Document client/, 'and the name the document gives')
  t.equal(docs.hits.get('/oauth/client.json'), 1, 'the server fetched the document once, for the authorization request')
  await screenshot(page, 'client-document-consent')
  await Promise.all([page.waitForURL(`${redirectUrl}**`), page.getByRole('button', { name: 'Allow' }).click()])
  const back = new URL(page.url())
  t.ok(back.searchParams.get('code'), 'the client got a code')
  t.same(problems, [], 'no CSP violation or script error on our pages')

  const transport = new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider })
  await transport.finishAuth(back.searchParams)
  const client = new Client({ name: 'cimd-e2e', version: '1.0.0' })
  await client.connect(transport)
  t.teardown(() => client.close())
  const result = await client.callTool({ name: 'service_whoami', arguments: {} })
  t.equal(result.isError, false)
  t.match(result.structuredContent, { user: { email: OWNER_EMAIL }, credential: { kind: 'oauth', client_id: documentUrl } }, 'the tool ran for the owner, through the document client')
  t.equal(docs.hits.get('/oauth/client.json'), 1, 'the token exchange used the cached document (max-age=3600)')
})

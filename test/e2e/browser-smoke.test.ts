// test-backends: none (Chromium against a page server of its own; no database)
import { existsSync, statSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { pageHeaders } from '../../src/web/headers.js'
import { signInPage } from '../../src/web/pages.js'
import { launchBrowser, screenshot } from '../helpers/browser.js'

// Runs inside the page (serialized by Playwright); the project compiles without the DOM lib.
declare const document: { documentElement: { scrollWidth: number } }
declare function getComputedStyle(el: unknown): { getPropertyValue(name: string): string }

const CSRF = 'smoke-csrf'

/** Serves the sign-in page as the real server will, plus a copy whose CSP hash is wrong (the control). */
async function startPageServer(t: { teardown(fn: () => unknown): void }) {
  const posts: string[] = []
  let port = 0
  const server = createServer((req, res) => {
    const page = signInPage({ action: '/signin', csrf: CSRF, server: 'smoke.example', clientName: 'Smoke <Client>' })
    if (req.method === 'GET' && (req.url === '/' || req.url === '/bad-hash')) {
      const headers = pageHeaders()
      if (req.url === '/bad-hash') {
        headers['content-security-policy'] = (headers['content-security-policy'] ?? '').replace(/'sha256-[^']+'/, `'sha256-${'A'.repeat(43)}='`)
      }
      res.writeHead(200, headers).end(page)
    } else if (req.method === 'POST' && req.url === '/signin') {
      let body = ''
      req.setEncoding('utf8')
      req.on('data', (chunk: string) => (body += chunk))
      req.on('end', () => {
        posts.push(body)
        // Another origin, like a client's redirect URI after consent: no CSP directive may stop it.
        res.writeHead(303, { location: `http://localhost:${port}/callback?code=x` }).end()
      })
    } else if (req.method === 'GET' && req.url?.startsWith('/callback')) {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('callback')
    } else {
      res.writeHead(204).end()
    }
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  port = (server.address() as AddressInfo).port
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return { url: `http://127.0.0.1:${port}`, port, posts }
}

t.test('sign-in page in headless Chromium', async (t) => {
  const server = await startPageServer(t)
  const browser = await launchBrowser(t)

  const page = await browser.newPage()
  const errors: string[] = []
  page.on('console', (m) => {
    if (m.type() === 'error' || /Content Security Policy/i.test(m.text())) errors.push(m.text())
  })
  page.on('pageerror', (e) => errors.push(String(e)))

  const response = await page.goto(server.url + '/')
  t.equal(response?.status(), 200)
  t.match(response?.headers()['content-security-policy'] ?? '', "style-src 'sha256-")
  t.equal(await page.title(), 'Sign in')
  t.equal(await page.locator('strong').first().textContent(), 'Smoke <Client>', 'the client name is text, not markup')

  // The hashed <style> applied under the CSP: none of these are Chromium's defaults.
  t.equal(await page.$eval('main', (el) => getComputedStyle(el).getPropertyValue('max-width')), '448px')
  t.match(await page.$eval('body', (el) => getComputedStyle(el).getPropertyValue('font-family')), /^system-ui/)
  t.equal(await page.$eval('button[type=submit]', (el) => getComputedStyle(el).getPropertyValue('background-color')), 'rgb(29, 78, 216)')

  await page.fill('#email', 'owner@example.com')
  await page.fill('#password', 'correct horse battery staple')
  const shot = await screenshot(page, 'smoke-sign-in')
  t.ok(existsSync(shot) && statSync(shot).size > 1000, `screenshot written: ${shot}`)

  await Promise.all([page.waitForURL(`http://localhost:${server.port}/callback?code=x`), page.click('button[type=submit]')])
  t.same(server.posts.map((b) => Object.fromEntries(new URLSearchParams(b))), [
    { csrf: CSRF, email: 'owner@example.com', password: 'correct horse battery staple' },
  ], 'the form posts csrf, email and password, and its 303 to another origin is followed')
  t.same(errors, [], 'no console errors, CSP violations included')

  // Phone-sized viewport: nothing wider than the screen.
  const phone = await browser.newPage({ viewport: { width: 390, height: 844 } })
  await phone.goto(server.url + '/')
  t.ok((await phone.evaluate(() => document.documentElement.scrollWidth)) <= 390, 'no horizontal scrolling at 390px')
  const phoneShot = await screenshot(phone, 'smoke-sign-in-390x844')
  t.ok(existsSync(phoneShot), `screenshot written: ${phoneShot}`)

  // Control: with a wrong hash the stylesheet is refused and the refusal is reported, so the checks above mean something.
  const control = await browser.newPage()
  const refused: string[] = []
  control.on('console', (m) => {
    if (/Content Security Policy/i.test(m.text())) refused.push(m.text())
  })
  await control.goto(server.url + '/bad-hash')
  t.equal(await control.$eval('main', (el) => getComputedStyle(el).getPropertyValue('max-width')), 'none')
  t.ok(refused.length > 0, 'a CSP violation is reported on the console')
})

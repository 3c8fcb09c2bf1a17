import t from 'tap'
import { request } from 'undici'
import { FormBrowser, formAction, formValue } from '../helpers/oauth.js'
import { OWNER_EMAIL, OWNER_PASSWORD, startServer } from '../helpers/server.js'

// Pages send Referrer-Policy: no-referrer, so Chromium posts their forms with `Origin: null` and
// `Sec-Fetch-Site: same-origin`. Every form was refused as cross-site until the check read Sec-Fetch-Site.
t.test('a same-origin form post with Origin: null is accepted, a cross-site one is not', async (t) => {
  const server = await startServer(t)
  const browser = new FormBrowser(server.url)
  const page = await browser.get('/account/signin')
  const csrf = formValue(page.text, 'csrf')!
  const post = (headers: Record<string, string>) => request(`${server.url}${formAction(page.text)}`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: [...browser.cookies].map(([k, v]) => `${k}=${v}`).join('; '), ...headers },
    body: new URLSearchParams({ csrf, email: OWNER_EMAIL, password: OWNER_PASSWORD }).toString(),
  })
  const crossSite = await post({ origin: 'null', 'sec-fetch-site': 'cross-site' })
  t.equal(crossSite.statusCode, 403, 'Origin: null from another site is refused')
  await crossSite.body.dump()
  const sameSite = await post({ origin: 'null', 'sec-fetch-site': 'same-site' })
  t.equal(sameSite.statusCode, 403, 'a sibling origin (another port) is refused too')
  await sameSite.body.dump()
  const ok = await post({ origin: 'null', 'sec-fetch-site': 'same-origin' })
  t.equal(ok.statusCode, 303, 'the browser\'s own same-origin post is accepted')
  t.equal(ok.headers.location, '/account')
  await ok.body.dump()
})

import { request } from 'undici'

/**
 * A person at a browser, for the server's own pages: a cookie-keeping client that sends what Chromium sends for a form
 * post, and the walk through authorize → sign-in → consent. The tests use it, and so does the conformance runner, which
 * plays the person the suite's authorization-code scenario waits for.
 */

/** A minimal cookie-keeping browser over undici: enough to walk the server's own pages, with a real browser's headers. */
export class FormBrowser {
  readonly cookies = new Map<string, string>()

  constructor(readonly origin: string) {}

  async get(url: string) {
    return this.#send('GET', url)
  }

  async post(url: string, fields: Record<string, string>) {
    return this.#send('POST', url, new URLSearchParams(fields).toString())
  }

  async #send(method: string, url: string, body?: string) {
    const headers: Record<string, string> = {}
    if (this.cookies.size > 0) headers.cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ')
    if (body !== undefined) {
      headers['content-type'] = 'application/x-www-form-urlencoded'
      // What Chromium sends for a form post from a page on `origin` with Referrer-Policy: no-referrer.
      headers.origin = 'null'
      headers['sec-fetch-site'] = new URL(url, this.origin).origin === this.origin ? 'same-origin' : 'cross-site'
    }
    const res = await request(new URL(url, this.origin).href, { method, headers, ...(body !== undefined ? { body } : {}) })
    const setCookie = res.headers['set-cookie']
    for (const line of Array.isArray(setCookie) ? setCookie : setCookie ? [setCookie] : []) {
      const [pair] = line.split(';')
      const eq = pair!.indexOf('=')
      const name = pair!.slice(0, eq)
      const value = pair!.slice(eq + 1)
      if (value === '' || /Max-Age=0/i.test(line)) this.cookies.delete(name)
      else this.cookies.set(name, value)
    }
    const text = await res.body.text()
    return { status: res.statusCode, headers: res.headers, text, location: typeof res.headers.location === 'string' ? res.headers.location : undefined }
  }
}

export function formValue(page: string, name: string): string | undefined {
  const m = new RegExp(`name="${name}"[^>]*value="([^"]*)"`).exec(page) ?? new RegExp(`value="([^"]*)"[^>]*name="${name}"`).exec(page)
  return m?.[1]?.replace(/&amp;/g, '&').replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>')
}

export function formAction(page: string): string {
  const m = /<form[^>]*action="([^"]+)"/.exec(page)
  if (!m) throw new Error('no form on the page')
  return m[1]!.replace(/&amp;/g, '&')
}

/**
 * Walks authorize → sign-in → consent with the given decision, as a person would, and returns the final redirect
 * (to the client) parsed. `origin` is the server's base URL.
 */
export async function walkAuthorization(
  origin: string,
  url: string,
  options: { email: string; password: string; decision?: 'approve' | 'deny'; membership?: string; browser?: FormBrowser },
): Promise<{ redirect: URL; browser: FormBrowser }> {
  const browser = options.browser ?? new FormBrowser(origin)
  const start = await browser.get(url)
  if (start.status !== 303 || !start.location) throw new Error(`authorize answered ${start.status}: ${start.text.slice(0, 300)}`)
  if (!start.location.startsWith('/oauth/interaction/')) return { redirect: new URL(start.location), browser }
  let page = await browser.get(start.location)
  if (page.text.includes('name="password"')) {
    const signin = await browser.post(formAction(page.text), {
      csrf: formValue(page.text, 'csrf') ?? '',
      email: options.email,
      password: options.password,
    })
    if (signin.status !== 303) throw new Error(`sign-in answered ${signin.status}`)
    page = await browser.get(signin.location!)
  }
  if (page.status !== 200) throw new Error(`consent page answered ${page.status}: ${page.text.slice(0, 300)}`)
  const membership = options.membership ?? formValue(page.text, 'membership') ?? ''
  const consent = await browser.post(formAction(page.text), { csrf: formValue(page.text, 'csrf') ?? '', decision: options.decision ?? 'approve', membership })
  if (consent.status !== 303 || !consent.location) throw new Error(`consent answered ${consent.status}: ${consent.text.slice(0, 300)}`)
  return { redirect: new URL(consent.location), browser }
}

import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core'
import { ROOT } from './root.js'

/** Repository root, so artifacts land in the same place whatever the working directory. */
export const SCREENSHOT_DIR = join(ROOT, 'test-artifacts', 'screenshots')

/**
 * Debian's Chromium (installed by .ci/run), driven by playwright-core, which never downloads a browser.
 * The networking flags keep Chromium from calling home: this machine's network refuses it, slowly.
 */
export async function launchBrowser(t: { teardown(fn: () => unknown): void }): Promise<Browser> {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    // Playwright's default, spelled out; it adds --headless and --no-sandbox itself too, repeating them is harmless.
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  })
  t.teardown(() => browser.close())
  return browser
}

/** Full-page PNG at test-artifacts/screenshots/<name>.png; returns its absolute path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  if (!/^[\w.-]+$/.test(name)) throw new Error(`screenshot name must be a plain file name: ${name}`)
  await mkdir(SCREENSHOT_DIR, { recursive: true })
  const path = join(SCREENSHOT_DIR, `${name}.png`)
  await page.screenshot({ path, fullPage: true })
  return path
}

/** Console errors and page errors of a page: a CSP violation or a failing script shows up here. */
export function watchConsole(page: Page): string[] {
  const problems: string[] = []
  page.on('console', (m) => {
    if (/Content Security Policy|Refused to/i.test(m.text())) problems.push(m.text())
  })
  page.on('pageerror', (e) => problems.push(String(e)))
  return problems
}

/** A fresh context (5 s default timeout, closed at the test's end) and its page, watched by watchConsole. */
export async function openPage(
  t: { teardown(fn: () => unknown): void },
  browser: Browser,
  viewport?: { width: number; height: number },
): Promise<{ context: BrowserContext; page: Page; problems: string[] }> {
  const context = await browser.newContext(viewport ? { viewport } : {})
  context.setDefaultTimeout(5000)
  t.teardown(() => context.close())
  const page = await context.newPage()
  return { context, page, problems: watchConsole(page) }
}

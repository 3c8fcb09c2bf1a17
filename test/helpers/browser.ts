import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { chromium, type Browser, type Page } from 'playwright-core'

/** Repository root, so artifacts land in the same place whatever the working directory. */
const ROOT = fileURLToPath(new URL('../../', import.meta.url))
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

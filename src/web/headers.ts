import { COPY_SCRIPT_HASH } from './copy-script.js'
import { STYLESHEET_HASH } from './html.js'

/**
 * The CSP of every HTML page: nothing loads but the one hashed stylesheet, the one hashed script (the Copy buttons) and
 * the icon, and no framing (clickjacking of the consent page). No form-action: the consent form's 303 goes to the client's redirect URI, on
 * any origin, and Chromium applies form-action to the redirect targets of a form submission too.
 */
export const PAGE_CSP = [
  "default-src 'none'",
  `style-src '${STYLESHEET_HASH}'`,
  `script-src '${COPY_SCRIPT_HASH}'`,
  "img-src 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ')

/** Headers every server-rendered HTML page carries (security requirements 12 and 20; MCP confused-deputy advice). */
export function pageHeaders(): Record<string, string> {
  return {
    'content-type': 'text/html; charset=utf-8',
    // Pages carry CSRF tokens, keys shown once and account data: never store them in any cache.
    'cache-control': 'no-store',
    pragma: 'no-cache',
    'x-frame-options': 'DENY',
    'referrer-policy': 'no-referrer',
    'x-content-type-options': 'nosniff',
    'content-security-policy': PAGE_CSP,
    'cross-origin-opener-policy': 'same-origin',
  }
}

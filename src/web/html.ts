import { createHash } from 'node:crypto'
import { COPY_SCRIPT } from './copy-script.js'
import { FAVICON_PATH } from './favicon.js'

/** Markup that is already safe to embed: the output of `html` or a trusted constant wrapped by `raw`. */
export class SafeHtml {
  readonly value: string
  constructor(value: string) {
    this.value = value
  }
  toString(): string {
    return this.value
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }

/** Escapes text for element content and quoted attribute values. null and undefined become ''. */
export function escapeHtml(value: unknown): string {
  if (value === null || value === undefined) return ''
  return String(value).replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c)
}

/** Wraps a trusted constant. Never pass anything derived from a request or the database. */
export function raw(s: string): SafeHtml {
  return new SafeHtml(s)
}

// false renders as nothing too, so `${cond && html`…`}` can be used for optional fragments.
function render(value: unknown): string {
  if (value instanceof SafeHtml) return value.value
  if (Array.isArray(value)) return value.map(render).join('')
  if (value === false) return ''
  return escapeHtml(value)
}

/** Tagged template: every interpolated value is escaped unless it is SafeHtml; arrays are rendered item by item. */
export function html(strings: TemplateStringsArray, ...values: unknown[]): SafeHtml {
  let out = strings[0] ?? ''
  for (let i = 0; i < values.length; i++) out += render(values[i]) + (strings[i + 1] ?? '')
  return new SafeHtml(out)
}

/**
 * The only styles of every page. Inline, so the pages load nothing else; allowed by the CSP through its hash, so no
 * other inline style (nor any style attribute) can apply. Must never contain `</style`.
 */
export const STYLESHEET = `
:root{color-scheme:light dark;--bg:#f3f4f6;--card:#fff;--text:#111827;--muted:#4b5563;--border:#d1d5db;--primary:#1d4ed8;--primary-text:#fff;--danger:#b91c1c;--focus:#f59e0b;--notice-bg:#eff6ff;--notice-border:#93c5fd;--error-bg:#fef2f2;--error-border:#fca5a5;--code-bg:#f3f4f6}
@media (prefers-color-scheme:dark){:root{--bg:#0b0f17;--card:#161b26;--text:#e5e7eb;--muted:#9ca3af;--border:#374151;--primary:#2563eb;--danger:#ef4444;--notice-bg:#172554;--notice-border:#1e40af;--error-bg:#450a0a;--error-border:#991b1b;--code-bg:#0b0f17}}
*,*::before,*::after{box-sizing:border-box}
html{-webkit-text-size-adjust:100%;text-size-adjust:100%}
body{margin:0;padding:1rem;background:var(--bg);color:var(--text);font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,"Noto Sans",sans-serif;font-size:1rem;line-height:1.5}
main{max-width:28rem;margin:2rem auto;padding:1.5rem;background:var(--card);border:1px solid var(--border);border-radius:.75rem}
main.wide{max-width:72rem}
main.wide form:not(.inline){max-width:28rem}
h1{font-size:1.5rem;line-height:1.25;margin:0 0 .75rem;overflow-wrap:anywhere}
h2{font-size:1.125rem;margin:1.75rem 0 .5rem}
p{margin:.5rem 0}
a{color:var(--primary)}
ul{margin:.5rem 0;padding-left:1.25rem}
.muted{color:var(--muted)}
.small{font-size:.875rem}
.mono,code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;font-size:.9em;overflow-wrap:anywhere}
.host{display:block;margin:.5rem 0;padding:.5rem .75rem;background:var(--code-bg);border:1px solid var(--border);border-radius:.375rem;font-size:1.125rem;font-weight:700}
label{display:block;font-weight:600;margin:1rem 0 .25rem}
input[type=email],input[type=password],input[type=text],select{display:block;width:100%;padding:.625rem .75rem;font:inherit;color:inherit;background:var(--card);border:1px solid var(--border);border-radius:.375rem}
fieldset{margin:1rem 0;padding:.5rem .75rem;border:1px solid var(--border);border-radius:.375rem}
legend{font-weight:600;padding:0 .25rem}
label.choice{display:flex;gap:.5rem;align-items:flex-start;font-weight:400;margin:.5rem 0}
label.choice input{margin-top:.3rem}
button,a.button{display:inline-block;padding:.625rem 1rem;font:inherit;font-weight:600;line-height:1.5;text-align:center;text-decoration:none;border:1px solid var(--primary);border-radius:.375rem;background:var(--primary);color:var(--primary-text);cursor:pointer}
button.secondary,a.button.secondary{background:transparent;color:var(--text);border-color:var(--border)}
button.danger,a.button.danger{background:transparent;color:var(--danger);border-color:var(--danger)}
button.destructive{background:#b91c1c;border-color:#b91c1c;color:#fff}
button.small,a.button.small{padding:.25rem .625rem;font-size:.875rem}
button.block{display:block;width:100%;margin-top:1.25rem}
:focus-visible{outline:3px solid var(--focus);outline-offset:2px}
.actions{display:flex;gap:.75rem;margin-top:1.25rem}
.actions button,.actions a.button{flex:1}
.visually-hidden{position:absolute;width:1px;height:1px;margin:-1px;padding:0;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap;border:0}
form.inline{display:inline}
.notice,.error{margin:1rem 0;padding:.75rem 1rem;border:1px solid var(--notice-border);border-radius:.375rem;background:var(--notice-bg);overflow-wrap:anywhere}
.error{border-color:var(--error-border);background:var(--error-bg)}
.secret,.copy-text{display:block;margin-top:.5rem;padding:.5rem .75rem;background:var(--code-bg);border:1px solid var(--border);border-radius:.375rem;word-break:break-all;user-select:all}
.copyable{display:flex;flex-wrap:wrap;gap:.5rem;align-items:center;margin-top:.5rem}
.copyable .secret,.copyable .copy-text{flex:1 1 16rem;min-width:0;margin:0}
.copy-status{margin:.25rem 0 0;font-size:.875rem;color:var(--muted)}
[hidden]{display:none!important}
.field-label{display:block;font-weight:600;margin:1rem 0 .25rem}
.org-meta{white-space:nowrap}
.role{display:inline-block;padding:0 .5rem;font-size:.8125rem;line-height:1.5;border:1px solid var(--border);border-radius:999px;color:var(--muted)}
.table-wrap{overflow-x:auto;margin:.5rem 0;border:1px solid var(--border);border-radius:.375rem}
table{width:100%;border-collapse:collapse;font-size:.875rem}
th,td{padding:.5rem .625rem;text-align:left;vertical-align:top;border-bottom:1px solid var(--border);white-space:nowrap}
tr:last-child td{border-bottom:0}
td.wrap{white-space:normal;min-width:7rem}
th{font-weight:600;color:var(--muted)}
td form.inline+form.inline{margin-left:.375rem}
table.stack td{white-space:normal;overflow-wrap:anywhere}
table.stack td:first-child{min-width:9rem}
table.stack td.row-actions{white-space:nowrap}
@media (max-width:64rem){
.table-wrap{overflow:visible;border:0}
table.stack,table.stack tbody,table.stack tr,table.stack td{display:block}
table.stack thead{position:absolute;width:1px;height:1px;margin:-1px;overflow:hidden;clip:rect(0 0 0 0)}
table.stack tr{margin:0 0 .75rem;padding:.375rem 0;border:1px solid var(--border);border-radius:.375rem}
table.stack td,table.stack td:first-child{position:relative;min-width:0;padding:.25rem .75rem .25rem 7.75rem;border:0}
table.stack td::before{content:attr(data-label);position:absolute;left:.75rem;width:6.5rem;white-space:nowrap;overflow-wrap:normal;font:600 .875rem/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,"Noto Sans",sans-serif;color:var(--muted)}
table.stack td.row-actions{display:flex;flex-wrap:wrap;gap:.5rem;padding:.5rem .75rem .25rem}
table.stack td:empty{display:none}
}
.status-active{color:inherit}
.status-revoked,.status-expired{color:var(--danger);font-weight:600}
.header{display:flex;flex-wrap:wrap;gap:.5rem 1rem;align-items:baseline;justify-content:space-between}
`

/** CSP source expression allowing exactly STYLESHEET as an inline `<style>`. */
export const STYLESHEET_HASH = 'sha256-' + createHash('sha256').update(STYLESHEET, 'utf8').digest('base64')

/**
 * A complete HTML5 document. The pages work with forms alone; `copy` adds the one script (COPY_SCRIPT), which only turns
 * on the page's Copy buttons.
 */
export function layout(opts: { title: string; body: SafeHtml; wide?: boolean; copy?: boolean }): string {
  // STYLESHEET and COPY_SCRIPT go in verbatim: one changed byte and the CSP hash no longer matches.
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${opts.title}</title>
<link rel="icon" href="${FAVICON_PATH}" type="image/svg+xml">
<style>${raw(STYLESHEET)}</style>
</head>
<body>
<main${opts.wide === true ? raw(' class="wide"') : ''}>
${opts.body}
</main>
${opts.copy === true && html`<script>${raw(COPY_SCRIPT)}</script>
`}</body>
</html>
`.value
}

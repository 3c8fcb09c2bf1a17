import { html, layout } from './html.js'

/** The form of a value asked for in the browser (service_env_set_in_browser): what it is for, never what it was. */
export interface EnvInputPageData {
  action: string
  csrf: string
  appName: string
  name: string
  /** The largest value accepted (service_env_set's limit). */
  maxLength: number
  /** Who is signed in: the value is set as them. */
  userEmail: string
  error?: string
}

/**
 * A password-type input, so the value is not shown on screen nor kept by the browser's autofill; Decline is a second
 * submit button of the same form (its `answer`), so both carry the CSRF token. Save comes first: pressing Enter in
 * the field submits with the form's first button.
 */
export function envInputPage(p: EnvInputPageData): string {
  const body = html`<h1>Set ${p.name}</h1>
<p>An application you use asked you to enter the value of the environment variable <strong class="mono">${p.name}</strong> of the app <strong>${p.appName}</strong>. The value is stored encrypted and passed only to the app's deployments; the application never sees it.</p>
<p class="muted small">Signed in as ${p.userEmail}</p>
${p.error !== undefined && html`<div class="error" role="alert">${p.error}</div>`}
<form method="post" action="${p.action}">
<input type="hidden" name="csrf" value="${p.csrf}">
<label for="value">Value of ${p.name}</label>
<input id="value" name="value" type="password" autocomplete="off" maxlength="${p.maxLength}" autofocus>
<div class="actions">
<button type="submit" name="answer" value="save">Save</button>
<button type="submit" name="answer" value="decline" class="secondary">Decline</button>
</div>
</form>`
  return layout({ title: `Set ${p.name}`, body })
}

/** After the answer: nothing more to do here. */
export function envInputDonePage(p: { saved: boolean; name: string }): string {
  const title = p.saved ? `${p.name} saved` : 'Declined'
  const body = html`<h1>${title}</h1>
<p>${p.saved ? 'The value is saved.' : 'Nothing was saved.'} You can close this page and go back to your client.</p>`
  return layout({ title, body })
}

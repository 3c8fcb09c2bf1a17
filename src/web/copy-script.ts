import { createHash } from 'node:crypto'

/**
 * The one script of the pages: it turns on the Copy buttons (`<button data-copy="ID" hidden>`, beside the element ID
 * whose text is copied, followed by a `.copy-status` live region). Without it the buttons stay hidden and the text
 * stays selectable (`user-select: all`): the pages work without JavaScript.
 *
 * The Clipboard API needs a secure context (https, or a loopback http address); elsewhere, or when the browser refuses,
 * the text is selected and copied with the older execCommand, and when even that fails the reader is told to press
 * the copy keys on the selection. Inline and allowed by the CSP through its hash, like the stylesheet: no file to serve,
 * no handler attributes (the CSP would refuse them). Must never contain `</script`.
 */
export const COPY_SCRIPT = `
for (const button of document.querySelectorAll('button[data-copy]')) {
  const source = document.getElementById(button.dataset.copy)
  const status = button.parentElement.nextElementSibling
  if (!source) continue
  const say = (text) => { if (status && status.classList.contains('copy-status')) status.textContent = text }
  const selectSource = () => {
    const range = document.createRange()
    range.selectNodeContents(source)
    const selection = window.getSelection()
    selection.removeAllRanges()
    selection.addRange(range)
  }
  const copyBySelection = () => {
    selectSource()
    let copied = false
    try { copied = document.execCommand('copy') } catch { copied = false }
    say(copied ? 'Copied.' : 'Selected: press Ctrl+C (⌘C on a Mac) to copy.')
  }
  button.addEventListener('click', () => {
    say('')
    const text = source.textContent.trim()
    if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).then(() => say('Copied.'), copyBySelection)
    else copyBySelection()
  })
  button.hidden = false
}
`

/** CSP source expression allowing exactly COPY_SCRIPT as an inline `<script>`. */
export const COPY_SCRIPT_HASH = 'sha256-' + createHash('sha256').update(COPY_SCRIPT, 'utf8').digest('base64')

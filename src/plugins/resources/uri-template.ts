/**
 * URI templates of resources: RFC 6570 level 1, `{name}` expressions only (simple string expansion), which is what
 * resource identifiers need (`service://apps/{app_id}`). A variable matches one non-empty path segment without `/`,
 * `?` or `#`, and arrives percent-decoded. Anything richer (`{+path}`, `{?query}`) is refused when a resource is
 * registered, so that what a template matches is never a surprise.
 */
export class UriTemplate {
  readonly variables: readonly string[]
  readonly #pattern: RegExp

  constructor(readonly template: string) {
    const variables: string[] = []
    let source = '^'
    let rest = template
    for (;;) {
      const open = rest.indexOf('{')
      if (open < 0) break
      const close = rest.indexOf('}', open)
      if (close < 0) throw new Error(`URI template ${template}: "{" without "}"`)
      const name = rest.slice(open + 1, close)
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new Error(`URI template ${template}: {${name}} is not a simple variable (only {name} is supported)`)
      if (variables.includes(name)) throw new Error(`URI template ${template}: {${name}} appears twice`)
      variables.push(name)
      source += escapeRegExp(rest.slice(0, open)) + '([^/?#]+)'
      rest = rest.slice(close + 1)
    }
    if (rest.includes('}')) throw new Error(`URI template ${template}: "}" without "{"`)
    if (variables.length === 0) throw new Error(`URI template ${template} has no variable: register it as a static resource`)
    this.#pattern = new RegExp(source + escapeRegExp(rest) + '$')
    this.variables = variables
  }

  /** The variables of `uri` when it matches, else null (also when a variable is not valid percent-encoding). */
  match(uri: string): Record<string, string> | null {
    const m = this.#pattern.exec(uri)
    if (!m) return null
    const values: Record<string, string> = {}
    for (let i = 0; i < this.variables.length; i++) {
      try {
        values[this.variables[i]!] = decodeURIComponent(m[i + 1]!)
      } catch {
        return null
      }
    }
    return values
  }

  /** The URI for these variables (each percent-encoded). */
  expand(values: Readonly<Record<string, string>>): string {
    return this.template.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, name: string) => encodeURIComponent(values[name] ?? ''))
  }
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

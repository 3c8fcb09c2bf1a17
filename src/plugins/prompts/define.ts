import type { Scope } from '../../auth/principal.js'
import type { Role } from '../../lib/roles.js'
import type { Completers } from '../../mcp/completion.js'
import type { Icon, PromptMessage } from '../../mcp/content.js'
import type { RequestContext } from '../../rpc/handler-context.js'

export interface PromptArgument {
  name: string
  title?: string
  description?: string
  required?: boolean
}

/** What a prompt gives: the messages to put in front of the model, and optionally a description of this rendering. */
export interface PromptResult {
  description?: string
  messages: PromptMessage[]
}

/**
 * A prompt is one module exporting one definition. Its arguments are strings (as MCP defines them); required ones are
 * checked before `get` runs, and unknown ones are refused.
 */
export interface PromptDefinition<A extends Record<string, string> = Record<string, string>> {
  name: string
  title?: string
  description?: string
  icons?: Icon[]
  arguments?: PromptArgument[]
  /** OAuth scope the token must carry to see and get it (default mcp:read). */
  scope?: Scope
  /** Lowest role that may see and get it (default viewer). */
  role?: Role
  get(args: A, ctx: RequestContext): Promise<PromptResult> | PromptResult
  /** Completions of its arguments (completion/complete with a ref/prompt naming it). */
  complete?: Completers
}

/** Identity function that gives a prompt definition its types. */
export function definePrompt<A extends Record<string, string> = Record<string, string>>(def: PromptDefinition<A>): PromptDefinition<A> {
  return def
}

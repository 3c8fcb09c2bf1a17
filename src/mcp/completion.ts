import type { RequestContext } from '../rpc/handler-context.js'

/**
 * Suggests values for one argument of a prompt or one variable of a resource template (`completion/complete`):
 * `value` is what the user typed so far, `context` the other arguments already filled in. Return the matching values,
 * best first; the server sends at most 100 and says how many there were.
 */
export type Completer = (value: string, ctx: RequestContext, context: Readonly<Record<string, string>>) => Promise<readonly string[]> | readonly string[]

/** Completers by argument (or template variable) name. */
export type Completers = Readonly<Record<string, Completer>>

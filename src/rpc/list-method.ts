import type { Config } from '../config.js'
import { validatorFor } from '../validation/index.js'
import { page } from './cursor.js'
import type { CallContext, RequestMethod } from './dispatcher.js'
import type { ProtocolVersion } from './types.js'

export interface ListSpec<T> {
  /** `tools/list`, `prompts/list`, … (also the kind of its cursors). */
  method: string
  /** The result's array field: `tools`, `prompts`, `resources`, `resourceTemplates`. */
  field: string
  /** Everything this caller may see, in the list's stable order. */
  items(ctx: CallContext): readonly T[] | Promise<readonly T[]>
  /** One entry as the request's revision defines it. */
  describe(item: T, version: ProtocolVersion): unknown
}

/**
 * A paginated list method of both eras: one page (`SERVICE_PAGE_SIZE`) of what the caller may see, each entry described
 * for the request's revision, `nextCursor` while more remain. What a caller sees depends on its scopes and role, so a
 * 2026-07-28 list is only ever reusable by the same caller (`cacheScope: private`, `SERVICE_LIST_TTL_MS`).
 */
export function listMethod<T>(config: Readonly<Pick<Config, 'pageSize' | 'listTtlMs'>>, spec: ListSpec<T>): RequestMethod<{ cursor?: string }> {
  return {
    method: spec.method,
    eras: ['legacy', 'modern'],
    params: validatorFor('mcp/paginated.params'),
    cache: { scope: 'private', ttlMs: () => config.listTtlMs },
    async handle(params, ctx) {
      const { items, nextCursor } = page(spec.method, await spec.items(ctx), params.cursor, config.pageSize)
      const version = ctx.exchange.protocolVersion
      const result: Record<string, unknown> = { [spec.field]: items.map((item) => spec.describe(item, version)) }
      if (nextCursor !== undefined) result.nextCursor = nextCursor
      return result
    },
  }
}

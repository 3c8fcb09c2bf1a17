import type { App } from '../../../db/repos/apps.js'
import { fail } from '../../../errors/service-error.js'
import { isoTime } from '../../../lib/iso-time.js'
import { decodeCursor, encodeCursor } from '../../../rpc/cursor.js'
import { defineTool } from '../define.js'

/** How every tool shows an app (the app object of the apps output schemas). */
export function appView(app: App) {
  return {
    id: app.id,
    name: app.name,
    description: app.description,
    pipeline: app.pipeline,
    created_at: isoTime(app.createdAt),
    updated_at: isoTime(app.updatedAt),
  }
}

export const appsList = defineTool<{ limit?: number; cursor?: string }>({
  name: 'service_apps_list',
  title: 'List apps',
  description: 'Lists the apps of your organization, oldest first. Pass next_cursor back as cursor to get the next page.',
  inputSchema: 'tools/service_apps_list.input',
  outputSchema: 'tools/service_apps_list.output',
  scope: 'mcp:read',
  role: 'viewer',
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  rateLimitPerMinute: 60,
  async handler(args, { principal, repos }) {
    const limit = args.limit ?? 20
    let after: string | undefined
    if (args.cursor !== undefined) {
      after = decodeCursor('apps', args.cursor)
      if (after === undefined) throw fail('INVALID_ARGUMENTS', { message: 'cursor is not a cursor returned by service_apps_list' })
    }
    const page = await repos.apps.page(principal.organizationId, limit, after)
    const last = page.items.at(-1)
    return {
      apps: page.items.map(appView),
      next_cursor: page.more && last ? encodeCursor('apps', last.id) : null,
    }
  },
})

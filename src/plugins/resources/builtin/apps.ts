import type { App } from '../../../db/repos/apps.js'
import type { Repos } from '../../../db/repos/index.js'
import type { RequestContext } from '../../../rpc/handler-context.js'
import { appDetails } from '../../tools/builtin/apps.js'
import { defineResource, type ResourceEntry } from '../define.js'
import { APP_TEMPLATE, appUri } from './uris.js'

/** Every app of the organization, oldest first (keyset pages of the repository; organizations have few apps). */
export async function appsOf(repos: Repos, organizationId: string): Promise<App[]> {
  const all: App[] = []
  let after: string | undefined
  for (;;) {
    const page = await repos.apps.page(organizationId, 500, after)
    all.push(...page.items)
    if (!page.more || page.items.length === 0) return all
    after = page.items.at(-1)!.id
  }
}

/**
 * Completes an app id of the caller's organization. People type names, the argument takes ids: first the apps whose
 * name starts with what was typed, ignoring case (by name), then those whose id starts with it (oldest first). So `web`
 * offers the id of app `web`, and a pasted id prefix still finds its app. Only ids are offered.
 */
export async function completeAppId(value: string, ctx: RequestContext): Promise<string[]> {
  const typed = value.toLowerCase()
  const apps = await appsOf(ctx.repos, ctx.principal.organizationId)
  const byName = apps
    .filter((a) => a.name.toLowerCase().startsWith(typed))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  const named = new Set(byName)
  const byId = apps.filter((a) => !named.has(a) && a.id.startsWith(typed))
  return [...byName, ...byId].map((a) => a.id)
}

/** The app `service://apps/{app_id}` names, in the caller's organization only: an absent and a foreign id alike give undefined. */
function appOf(variables: Readonly<Record<string, string>>, ctx: RequestContext): Promise<App | undefined> {
  return ctx.repos.apps.byId(ctx.principal.organizationId, variables.app_id!)
}

/** How resources/list shows an app. */
function entryOf(app: App): ResourceEntry {
  return {
    uri: appUri(app.id),
    name: app.name,
    title: `App ${app.name}`,
    ...(app.description !== '' ? { description: app.description } : {}),
    mimeType: 'application/json',
  }
}

/**
 * `service://apps/{app_id}`: an app of the caller's organization as JSON, exactly what service_apps_get returns (the
 * app and the names of its env vars; values never leave the server). resources/list lists every app of the caller's
 * organization. An absent id and an id of another organization are the same "not found".
 */
export const appResource = defineResource({
  name: 'app',
  uriTemplate: APP_TEMPLATE,
  title: 'App',
  description: 'An app of your organization as JSON: the app (id, name, description, pipeline, timestamps) and the names of its environment variables, as service_apps_get returns it. Values of environment variables are never returned.',
  mimeType: 'application/json',
  scope: 'mcp:read',
  role: 'viewer',
  async list(ctx) {
    return (await appsOf(ctx.repos, ctx.principal.organizationId)).map(entryOf)
  },
  async read(variables, uri, ctx) {
    const app = await appOf(variables, ctx)
    if (!app) return null
    return { uri, mimeType: 'application/json', text: JSON.stringify(await appDetails(ctx.repos, app)) }
  },
  async exists(variables, ctx) {
    return (await appOf(variables, ctx)) !== undefined
  },
  complete: { app_id: completeAppId },
})

import { and, count, eq } from 'drizzle-orm'
import { newId } from '../../lib/crypto.js'
import type { Store } from '../store.js'
import { uniqueOrConflict } from './conflict.js'
import { appsPageQuery } from './queries.js'
import type { App } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { App }

const nameTaken = (name: string) => `An app named ${name} already exists in your organization`

/** Apps, always addressed through their organization: an id from another organization finds nothing. */
export function appsRepo(store: Store) {
  const { db, fastPaths, t: { apps, deployments } } = store

  /** A page through the query builder: where the dialect has no fast path (a PostgreSQL transaction). */
  async function portablePage(organizationId: string, limit: number, after?: string): Promise<{ items: App[]; more: boolean }> {
    const rows = await appsPageQuery(store, organizationId, limit + 1, after)
    return { items: rows.slice(0, limit), more: rows.length > limit }
  }

  return {
    /** Creates an app; CONFLICT when the name is taken in the organization. */
    async create(input: { organizationId: string; name: string; description?: string; pipeline?: string; createdBy?: string | null }): Promise<App> {
      const now = Date.now()
      const row: App = {
        id: newId('app'),
        organizationId: input.organizationId,
        name: input.name,
        description: input.description ?? '',
        pipeline: input.pipeline ?? 'default',
        createdBy: input.createdBy ?? null,
        createdAt: now,
        updatedAt: now,
      }
      await uniqueOrConflict(() => db.insert(apps).values(row).execute(), nameTaken(row.name))
      return row
    },
    /** Returns up to `limit` apps of the organization after `after` (exclusive), plus whether more follow. */
    page(organizationId: string, limit: number, after?: string): Promise<{ items: App[]; more: boolean }> {
      return (fastPaths.appsPage ?? portablePage)(organizationId, limit, after)
    },
    async byId(organizationId: string, id: string): Promise<App | undefined> {
      return (await db.select().from(apps).where(and(eq(apps.organizationId, organizationId), eq(apps.id, id))))[0]
    },
    /** Applies the given changes; undefined when the app is not in the organization; CONFLICT when the name is taken. */
    async update(organizationId: string, id: string, changes: { name?: string; description?: string; pipeline?: string }): Promise<App | undefined> {
      const set: Partial<App> = { updatedAt: Date.now() }
      if (changes.name !== undefined) set.name = changes.name
      if (changes.description !== undefined) set.description = changes.description
      if (changes.pipeline !== undefined) set.pipeline = changes.pipeline
      const rows = await uniqueOrConflict(() => db.update(apps).set(set).where(and(eq(apps.organizationId, organizationId), eq(apps.id, id))).returning().execute(), nameTaken(changes.name ?? ''))
      return rows[0]
    },
    /** Deletes the app with its env vars and deployments (cascade); false when it is not in the organization. */
    async delete(organizationId: string, id: string): Promise<boolean> {
      const deleted = await db.delete(apps).where(and(eq(apps.organizationId, organizationId), eq(apps.id, id))).returning({ id: apps.id })
      return deleted.length === 1
    },
    async deploymentCount(organizationId: string, id: string): Promise<number> {
      const [row] = await db.select({ n: count() }).from(deployments)
        .where(and(eq(deployments.organizationId, organizationId), eq(deployments.appId, id)))
      return row?.n ?? 0
    },
  }
}

import { asc, count, eq } from 'drizzle-orm'
import { newId } from '../../lib/crypto.js'
import type { Store } from '../store.js'
import { uniqueOrConflict } from './conflict.js'
import type { Organization } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { Organization }

export function organizationsRepo(store: Store) {
  const { db, t: { organizations } } = store
  return {
    async create(input: { slug: string; name?: string }): Promise<Organization> {
      const row: Organization = { id: newId('org'), slug: input.slug, name: input.name ?? input.slug, createdAt: Date.now() }
      await uniqueOrConflict(() => db.insert(organizations).values(row).execute(), `An organization with the slug ${input.slug} already exists`)
      return row
    },
    async bySlug(slug: string): Promise<Organization | undefined> {
      return (await db.select().from(organizations).where(eq(organizations.slug, slug)))[0]
    },
    async byId(id: string): Promise<Organization | undefined> {
      return (await db.select().from(organizations).where(eq(organizations.id, id)))[0]
    },
    async list(): Promise<Organization[]> {
      return db.select().from(organizations).orderBy(asc(organizations.slug))
    },
    async count(): Promise<number> {
      return (await db.select({ n: count() }).from(organizations))[0]?.n ?? 0
    },
  }
}

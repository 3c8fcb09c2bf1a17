import { asc, count, eq } from 'drizzle-orm'
import { newId } from '../../lib/crypto.js'
import type { Db } from '../client.js'
import { uniqueOrConflict } from './conflict.js'
import { organizations } from '../schema.js'
import type { Organization } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { Organization }

export function organizationsRepo(db: Db) {
  return {
    create(input: { slug: string; name?: string }): Organization {
      const row: Organization = { id: newId('org'), slug: input.slug, name: input.name ?? input.slug, createdAt: Date.now() }
      uniqueOrConflict(() => db.insert(organizations).values(row).run(), `An organization with the slug ${input.slug} already exists`)
      return row
    },
    bySlug(slug: string): Organization | undefined {
      return db.select().from(organizations).where(eq(organizations.slug, slug)).get()
    },
    byId(id: string): Organization | undefined {
      return db.select().from(organizations).where(eq(organizations.id, id)).get()
    },
    list(): Organization[] {
      return db.select().from(organizations).orderBy(asc(organizations.slug)).all()
    },
    count(): number {
      return db.select({ n: count() }).from(organizations).get()?.n ?? 0
    },
  }
}

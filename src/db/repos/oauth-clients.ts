import { desc, eq } from 'drizzle-orm'
import { randomSecret } from '../../lib/crypto.js'
import type { Store } from '../store.js'
import type { OAuthClient } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { OAuthClient }

export function oauthClientsRepo(store: Store) {
  const { db, t: { oauthClients } } = store
  return {
    /** Registers a public client; the id is chosen here, never by the client (RFC 9700 §4.15). */
    async create(input: { name: string; redirectUris: string[]; grantTypes: string[]; scope: string }): Promise<OAuthClient> {
      const row: OAuthClient = { id: `mcp_${randomSecret(18)}`, ...input, source: 'registration', createdAt: Date.now(), lastUsedAt: null }
      await db.insert(oauthClients).values(row)
      return row
    },
    async byId(id: string): Promise<OAuthClient | undefined> {
      return (await db.select().from(oauthClients).where(eq(oauthClients.id, id)))[0]
    },
    async list(): Promise<OAuthClient[]> {
      return db.select().from(oauthClients).orderBy(desc(oauthClients.createdAt))
    },
    async markUsed(id: string, at: number): Promise<void> {
      await db.update(oauthClients).set({ lastUsedAt: at }).where(eq(oauthClients.id, id))
    },
  }
}

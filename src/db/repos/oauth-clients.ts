import { desc, eq } from 'drizzle-orm'
import { randomSecret } from '../../lib/crypto.js'
import type { Db } from '../client.js'
import { oauthClients } from '../schema.js'
import type { OAuthClient } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { OAuthClient }

export function oauthClientsRepo(db: Db) {
  return {
    /** Registers a public client; the id is chosen here, never by the client (RFC 9700 §4.15). */
    create(input: { name: string; redirectUris: string[]; grantTypes: string[]; scope: string }): OAuthClient {
      const row: OAuthClient = { id: `mcp_${randomSecret(18)}`, ...input, createdAt: Date.now(), lastUsedAt: null }
      db.insert(oauthClients).values(row).run()
      return row
    },
    byId(id: string): OAuthClient | undefined {
      return db.select().from(oauthClients).where(eq(oauthClients.id, id)).get()
    },
    list(): OAuthClient[] {
      return db.select().from(oauthClients).orderBy(desc(oauthClients.createdAt)).all()
    },
    markUsed(id: string, at: number): void {
      db.update(oauthClients).set({ lastUsedAt: at }).where(eq(oauthClients.id, id)).run()
    },
  }
}

import { desc, eq } from 'drizzle-orm'
import { randomSecret } from '../../lib/crypto.js'
import type { Store } from '../store.js'
import type { OAuthClient } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { OAuthClient }

/** What a Client ID Metadata Document says about its client: the fields its row keeps. */
export interface DocumentClientFields {
  /** The document's URL, which is the client_id. */
  id: string
  name: string
  redirectUris: string[]
  grantTypes: string[]
  scope: string
}

/** What saving a document client did: its first row, a row brought up to date, or nothing to change. */
export type DocumentClientChange = 'new' | 'changed' | 'same'

export function oauthClientsRepo(store: Store) {
  const { db, t: { oauthClients } } = store
  return {
    /** Registers a public client; the id is chosen here, never by the client (RFC 9700 §4.15). */
    async create(input: { name: string; redirectUris: string[]; grantTypes: string[]; scope: string }): Promise<OAuthClient> {
      const row: OAuthClient = { id: `mcp_${randomSecret(18)}`, ...input, source: 'registration', createdAt: Date.now(), lastUsedAt: null }
      await db.insert(oauthClients).values(row)
      return row
    },
    /**
     * The row of a client identified by its metadata document, created or brought up to date from the document: the
     * pending requests, codes and grants of the client refer to it. A registered client's row is never touched (a
     * registered id never looks like a URL, so this cannot happen unless the caller is wrong): it is refused.
     */
    async saveDocument(fields: DocumentClientFields, now: number): Promise<{ client: OAuthClient; change: DocumentClientChange }> {
      const existing = (await db.select().from(oauthClients).where(eq(oauthClients.id, fields.id)))[0]
      if (!existing) {
        const row: OAuthClient = { ...fields, source: 'metadata_document', createdAt: now, lastUsedAt: null }
        // Two first requests of one client at once: the later insert finds the row, does nothing, and is no news.
        const inserted = await db.insert(oauthClients).values(row).onConflictDoNothing().returning({ id: oauthClients.id })
        return { client: row, change: inserted.length > 0 ? 'new' : 'same' }
      }
      if (existing.source !== 'metadata_document') throw new Error(`oauth client ${fields.id} is a registered client, not a metadata document`)
      if (sameDocument(existing, fields)) return { client: existing, change: 'same' }
      const update = { name: fields.name, redirectUris: fields.redirectUris, grantTypes: fields.grantTypes, scope: fields.scope }
      await db.update(oauthClients).set(update).where(eq(oauthClients.id, fields.id))
      return { client: { ...existing, ...update }, change: 'changed' }
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

function sameDocument(row: OAuthClient, fields: DocumentClientFields): boolean {
  const sameList = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((v, i) => v === b[i])
  return row.name === fields.name && row.scope === fields.scope && sameList(row.redirectUris, fields.redirectUris) && sameList(row.grantTypes, fields.grantTypes)
}

import { and, asc, count, eq } from 'drizzle-orm'
import { newId } from '../../lib/crypto.js'
import type { Store } from '../store.js'
import type { EnvVar } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { EnvVar }

/** The associated data every env var ciphertext is sealed with: a value copied onto another app or name won't open. */
export function envVarAad(appId: string, name: string): string {
  return `${appId}\u0000${name}`
}

/** Env vars of an app. Values arrive and leave as ciphertext: encryption is the caller's (lib/secret-box.ts). */
export function envVarsRepo(store: Store) {
  const { db, t: { envVars } } = store
  return {
    /** Names and times, never values. */
    async list(organizationId: string, appId: string): Promise<Array<{ name: string; createdAt: number; updatedAt: number }>> {
      return db.select({ name: envVars.name, createdAt: envVars.createdAt, updatedAt: envVars.updatedAt }).from(envVars)
        .where(and(eq(envVars.organizationId, organizationId), eq(envVars.appId, appId))).orderBy(asc(envVars.name))
    },
    /** Everything, for the pipeline's environment only. */
    async ciphertexts(organizationId: string, appId: string): Promise<Array<{ name: string; ciphertext: string }>> {
      return db.select({ name: envVars.name, ciphertext: envVars.ciphertext }).from(envVars)
        .where(and(eq(envVars.organizationId, organizationId), eq(envVars.appId, appId))).orderBy(asc(envVars.name))
    },
    /**
     * Creates or replaces; returns whether the variable is new. One statement, an upsert on the (app, name) unique index,
     * rather than a read then an insert: two sets of a new name at once (two requests, two processes) would both read
     * nothing, and on PostgreSQL the second insert would fail on the index instead of replacing the value. The id it
     * returns tells which happened: the new row's own id, or the existing row's.
     */
    async set(input: { organizationId: string; appId: string; name: string; ciphertext: string; userId: string | null }): Promise<{ created: boolean }> {
      const now = Date.now()
      const id = newId('env')
      const [row] = await db.insert(envVars)
        .values({ id, organizationId: input.organizationId, appId: input.appId, name: input.name, ciphertext: input.ciphertext, createdAt: now, updatedAt: now, updatedBy: input.userId })
        .onConflictDoUpdate({ target: [envVars.appId, envVars.name], set: { ciphertext: input.ciphertext, updatedAt: now, updatedBy: input.userId } })
        .returning({ id: envVars.id })
      return { created: row?.id === id }
    },
    async exists(organizationId: string, appId: string, name: string): Promise<boolean> {
      const rows = await db.select({ id: envVars.id }).from(envVars)
        .where(and(eq(envVars.organizationId, organizationId), eq(envVars.appId, appId), eq(envVars.name, name)))
      return rows[0] !== undefined
    },
    /** How many values are sealed in the database, every organization's (the env-key check, db/env-key.ts). */
    async count(): Promise<number> {
      return (await db.select({ n: count() }).from(envVars))[0]?.n ?? 0
    },
    /** Every sealed value with the place it is bound to, every organization's: proving a key opens them (db/env-key.ts). */
    async allSealed(): Promise<Array<{ appId: string; name: string; ciphertext: string }>> {
      return db.select({ appId: envVars.appId, name: envVars.name, ciphertext: envVars.ciphertext }).from(envVars)
    },
    /** Deletes every value of every organization (`service-mcp env-key reset`, once their key is lost); returns how many. */
    async deleteAll(): Promise<number> {
      return (await db.delete(envVars).returning({ id: envVars.id })).length
    },
    async unset(organizationId: string, appId: string, name: string): Promise<boolean> {
      const deleted = await db.delete(envVars)
        .where(and(eq(envVars.organizationId, organizationId), eq(envVars.appId, appId), eq(envVars.name, name))).returning({ id: envVars.id })
      return deleted.length === 1
    },
  }
}

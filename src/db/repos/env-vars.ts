import { and, asc, count, eq } from 'drizzle-orm'
import { newId } from '../../lib/crypto.js'
import type { Db } from '../client.js'
import { envVars } from '../schema.js'
import type { EnvVar } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { EnvVar }

/** The associated data every env var ciphertext is sealed with: a value copied onto another app or name won't open. */
export function envVarAad(appId: string, name: string): string {
  return `${appId}\u0000${name}`
}

/** Env vars of an app. Values arrive and leave as ciphertext: encryption is the caller's (lib/secret-box.ts). */
export function envVarsRepo(db: Db) {
  return {
    /** Names and times, never values. */
    list(organizationId: string, appId: string): Array<{ name: string; createdAt: number; updatedAt: number }> {
      return db.select({ name: envVars.name, createdAt: envVars.createdAt, updatedAt: envVars.updatedAt }).from(envVars)
        .where(and(eq(envVars.organizationId, organizationId), eq(envVars.appId, appId))).orderBy(asc(envVars.name)).all()
    },
    /** Everything, for the pipeline's environment only. */
    ciphertexts(organizationId: string, appId: string): Array<{ name: string; ciphertext: string }> {
      return db.select({ name: envVars.name, ciphertext: envVars.ciphertext }).from(envVars)
        .where(and(eq(envVars.organizationId, organizationId), eq(envVars.appId, appId))).orderBy(asc(envVars.name)).all()
    },
    /** Creates or replaces; returns whether the variable existed before. */
    set(input: { organizationId: string; appId: string; name: string; ciphertext: string; userId: string | null }): { created: boolean } {
      const now = Date.now()
      const existing = db.select({ id: envVars.id }).from(envVars)
        .where(and(eq(envVars.appId, input.appId), eq(envVars.name, input.name))).get()
      if (existing) {
        db.update(envVars).set({ ciphertext: input.ciphertext, updatedAt: now, updatedBy: input.userId }).where(eq(envVars.id, existing.id)).run()
        return { created: false }
      }
      db.insert(envVars).values({ id: newId('env'), organizationId: input.organizationId, appId: input.appId, name: input.name, ciphertext: input.ciphertext, createdAt: now, updatedAt: now, updatedBy: input.userId }).run()
      return { created: true }
    },
    exists(organizationId: string, appId: string, name: string): boolean {
      return db.select({ id: envVars.id }).from(envVars)
        .where(and(eq(envVars.organizationId, organizationId), eq(envVars.appId, appId), eq(envVars.name, name))).get() !== undefined
    },
    /** How many values are sealed in the database, every organization's (the env-key check, db/env-key.ts). */
    count(): number {
      return db.select({ n: count() }).from(envVars).get()?.n ?? 0
    },
    /** Every sealed value with the place it is bound to, every organization's: proving a key opens them (db/env-key.ts). */
    allSealed(): Array<{ appId: string; name: string; ciphertext: string }> {
      return db.select({ appId: envVars.appId, name: envVars.name, ciphertext: envVars.ciphertext }).from(envVars).all()
    },
    /** Deletes every value of every organization (`service-mcp env-key reset`, once their key is lost); returns how many. */
    deleteAll(): number {
      return db.delete(envVars).run().changes
    },
    unset(organizationId: string, appId: string, name: string): boolean {
      return db.delete(envVars).where(and(eq(envVars.organizationId, organizationId), eq(envVars.appId, appId), eq(envVars.name, name))).run().changes === 1
    },
  }
}

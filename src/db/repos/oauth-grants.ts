import { and, desc, eq, gt, inArray, isNull, lte, or } from 'drizzle-orm'
import type { Store } from '../store.js'
import { auditRepo, CREDENTIAL_AUDIT_ACTIONS, credentialAuditEntry, type CredentialActor } from './audit.js'
import type { CredentialChanges } from './credential-changes.js'
import { accessTokenStateQuery } from './queries.js'
import type { AccessTokenState, OAuthClient, OAuthGrant, RefreshToken, Activity } from '../types.js'

// The row types live in db/types.ts, free of Drizzle types (the public declarations reach them).
export type { AccessTokenState, OAuthGrant, RefreshToken }

export interface AuthorizedClient {
  clientId: string
  clientName: string
  /** How the client identifies itself: registered, or by its metadata document (whose host the pages show). */
  clientSource: OAuthClient['source']
  organizationName: string
  scopes: string
  authorizedAt: number
  lastUsedAt: number | null
}

/**
 * Grants (one per consent), their refresh-token family and their access tokens. Every revocation path returns the
 * `jti`s it revoked, so the caller can end the sessions bound to them, and tells the credential cache.
 */
export function oauthGrantsRepo(store: Store, changes: CredentialChanges) {
  const { db, fastPaths, t: { accessTokens, oauthClients, oauthGrants, organizations, refreshTokens } } = store

  /** Revokes the grant's live access tokens on `on` (the transaction's connection); returns their jtis. */
  async function revokeGrantTokens(on: Store['db'], grantId: string, at: number): Promise<string[]> {
    const revoked = await on.update(accessTokens).set({ revokedAt: at })
      .where(and(eq(accessTokens.grantId, grantId), isNull(accessTokens.revokedAt)))
      .returning({ jti: accessTokens.jti })
    return revoked.map((r) => r.jti)
  }

  /**
   * touchByJti where the dialect writes activity its own way (FastPaths.writeActivity): each grant once, at the latest
   * use of any of its tokens; the jtis of grants left out.
   */
  async function touchGrantsByActivity(writeActivity: NonNullable<typeof fastPaths.writeActivity>, entries: Activity): Promise<string[]> {
    if (entries.length === 0) return []
    const tokens = await db.select({ jti: accessTokens.jti, grantId: accessTokens.grantId }).from(accessTokens)
      .where(inArray(accessTokens.jti, entries.map(([jti]) => jti)))
    const grantOf = new Map(tokens.map((row) => [row.jti, row.grantId]))
    const latest = new Map<string, number>()
    for (const [jti, at] of entries) {
      const grant = grantOf.get(jti)
      if (grant !== undefined) latest.set(grant, Math.max(at, latest.get(grant) ?? 0))
    }
    const skipped = new Set(await writeActivity('oauthGrants', [...latest]))
    return entries.filter(([jti]) => skipped.has(grantOf.get(jti)!)).map(([jti]) => jti)
  }

  return {
    async createGrant(row: Omit<OAuthGrant, 'lastUsedAt' | 'revokedAt' | 'revokedReason'>): Promise<OAuthGrant> {
      const grant: OAuthGrant = { ...row, lastUsedAt: null, revokedAt: null, revokedReason: null }
      await db.insert(oauthGrants).values(grant)
      return grant
    },
    async grant(id: string): Promise<OAuthGrant | undefined> {
      return (await db.select().from(oauthGrants).where(eq(oauthGrants.id, id)))[0]
    },
    async touchGrant(id: string, at: number): Promise<void> {
      await db.update(oauthGrants).set({ lastUsedAt: at }).where(eq(oauthGrants.id, id))
    },
    /** Records when grants were last used, from the jti of their access tokens (write-behind from memory). */
    /**
     * Records when grants were last used, by the jti of the access token used (write-behind from memory); returns the
     * jtis it could not write now, for the next flush. On PostgreSQL the grants are written by one statement that never
     * waits for a row lock (FastPaths.writeActivity): processes never deadlock here.
     */
    async touchByJti(entries: Activity): Promise<string[]> {
      if (fastPaths.writeActivity) return touchGrantsByActivity(fastPaths.writeActivity, entries)
      for (const [jti, at] of entries) {
        await db.update(oauthGrants).set({ lastUsedAt: at })
          .where(eq(oauthGrants.id, db.select({ id: accessTokens.grantId }).from(accessTokens).where(eq(accessTokens.jti, jti))))
      }
      return []
    },
    async addRefreshToken(row: Omit<RefreshToken, 'usedAt'>): Promise<void> {
      await db.insert(refreshTokens).values({ ...row, usedAt: null })
    },
    async refreshToken(hash: string): Promise<RefreshToken | undefined> {
      return (await db.select().from(refreshTokens).where(eq(refreshTokens.hash, hash)))[0]
    },
    /** Rotation's compare-and-set: true only for the first use of the token. */
    async useRefreshToken(hash: string, at: number): Promise<boolean> {
      const used = await db.update(refreshTokens).set({ usedAt: at })
        .where(and(eq(refreshTokens.hash, hash), isNull(refreshTokens.usedAt)))
        .returning({ hash: refreshTokens.hash })
      return used.length === 1
    },
    async addAccessToken(row: { jti: string; grantId: string; createdAt: number; expiresAt: number }): Promise<void> {
      await db.insert(accessTokens).values({ ...row, revokedAt: null })
    },
    accessTokenState(jti: string): Promise<AccessTokenState | undefined> {
      if (fastPaths.accessTokenState) return fastPaths.accessTokenState(jti)
      return accessTokenStateQuery(store, jti).then((rows) => rows[0])
    },
    /** Revokes one access token; returns whether it was live. */
    async revokeAccessToken(jti: string, at: number): Promise<boolean> {
      const revoked = await db.update(accessTokens).set({ revokedAt: at })
        .where(and(eq(accessTokens.jti, jti), isNull(accessTokens.revokedAt)))
        .returning({ jti: accessTokens.jti })
      await changes.bump()
      return revoked.length === 1
    },
    /** Revokes a grant, its refresh tokens (by the grant's revocation) and its access tokens; returns their jtis. */
    async revokeGrant(grantId: string, reason: string, at: number): Promise<string[]> {
      const jtis = await store.transaction(async (tx) => {
        await tx.db.update(oauthGrants).set({ revokedAt: at, revokedReason: reason })
          .where(and(eq(oauthGrants.id, grantId), isNull(oauthGrants.revokedAt)))
        return revokeGrantTokens(tx.db, grantId, at)
      })
      await changes.bump()
      return jtis
    },
    /**
     * The member withdraws a client: every live grant of theirs for it is revoked. Returns the revoked jtis. With `by`,
     * each grant's revocation is audited in its own organization, in the same transaction.
     */
    async revokeClientForUser(userId: string, clientId: string, at: number, by?: CredentialActor): Promise<{ grants: number; jtis: string[] }> {
      const result = await store.transaction(async (tx) => {
        const audit = auditRepo(tx)
        const revoked = await tx.db.update(oauthGrants).set({ revokedAt: at, revokedReason: 'revoked by the user' })
          .where(and(eq(oauthGrants.userId, userId), eq(oauthGrants.clientId, clientId), isNull(oauthGrants.revokedAt)))
          .returning({ id: oauthGrants.id, organizationId: oauthGrants.organizationId, membershipId: oauthGrants.membershipId, scope: oauthGrants.scope })
        const jtis: string[] = []
        for (const grant of revoked) {
          const tokens = await revokeGrantTokens(tx.db, grant.id, at)
          jtis.push(...tokens)
          if (!by) continue
          await audit.add(credentialAuditEntry(by, {
            organizationId: grant.organizationId,
            membershipId: grant.membershipId,
            action: CREDENTIAL_AUDIT_ACTIONS.grantRevoked,
            targetType: 'oauth_grant',
            targetId: grant.id,
            details: { client_id: clientId, scope: grant.scope, membership_id: grant.membershipId, access_tokens_revoked: tokens.length },
          }))
        }
        return { grants: revoked.length, jtis }
      })
      await changes.bump()
      return result
    },
    /** The membership this user last authorized this client for (newest grant, even if since revoked), if any. */
    async lastChosenMembership(userId: string, clientId: string): Promise<string | undefined> {
      return (await db.select({ membershipId: oauthGrants.membershipId }).from(oauthGrants)
        .where(and(eq(oauthGrants.userId, userId), eq(oauthGrants.clientId, clientId)))
        .orderBy(desc(oauthGrants.createdAt), desc(oauthGrants.id)).limit(1))[0]?.membershipId
    },
    /** Live grants of a user, one line per client and organization, for the account page. */
    async authorizedClients(userId: string, now: number): Promise<AuthorizedClient[]> {
      const rows = await db.select({
        clientId: oauthGrants.clientId,
        clientName: oauthClients.name,
        clientSource: oauthClients.source,
        organizationName: organizations.name,
        scopes: oauthGrants.scope,
        authorizedAt: oauthGrants.createdAt,
        lastUsedAt: oauthGrants.lastUsedAt,
      }).from(oauthGrants)
        .innerJoin(oauthClients, eq(oauthClients.id, oauthGrants.clientId))
        .innerJoin(organizations, eq(organizations.id, oauthGrants.organizationId))
        .where(and(eq(oauthGrants.userId, userId), isNull(oauthGrants.revokedAt), gt(oauthGrants.expiresAt, now)))
        .orderBy(desc(oauthGrants.createdAt))
      const seen = new Set<string>()
      return rows.filter((r) => {
        const key = `${r.clientId}\u0000${r.organizationName}`
        if (seen.has(key)) return false
        seen.add(key)
        return true
      })
    },
    /** Drops access-token rows past their expiry and grants that ended (revoked or past their absolute expiry). */
    async purge(now: number): Promise<number> {
      const tokens = await db.delete(accessTokens).where(lte(accessTokens.expiresAt, now)).returning({ jti: accessTokens.jti })
      const grants = await db.delete(oauthGrants).where(or(lte(oauthGrants.expiresAt, now), lte(oauthGrants.revokedAt, now - 86_400_000)))
        .returning({ id: oauthGrants.id })
      return tokens.length + grants.length
    },
  }
}

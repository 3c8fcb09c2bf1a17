import { and, desc, eq, gt, isNull, lte, or, sql } from 'drizzle-orm'
import type { Db } from '../client.js'
import { accessTokens, memberships, oauthClients, oauthGrants, organizations, refreshTokens, users } from '../schema.js'
import { auditRepo, CREDENTIAL_AUDIT_ACTIONS, credentialAuditEntry, type CredentialActor } from './audit.js'
import type { CredentialChanges } from './credential-changes.js'
import type { OAuthGrant, RefreshToken, Role } from '../types.js'

// The row type lives in db/types.ts, free of Drizzle types (the public declarations reach it).
export type { OAuthGrant, RefreshToken }

/** What /mcp needs to know about an access token once its signature checked out. */
export interface AccessTokenState {
  jti: string
  revokedAt: number | null
  grantRevokedAt: number | null
  grantId: string
  clientId: string
  membershipId: string
  userId: string
  organizationId: string
  role: Role | null
  userDisabledAt: number | null
}

export interface AuthorizedClient {
  clientId: string
  clientName: string
  organizationName: string
  scopes: string
  authorizedAt: number
  lastUsedAt: number | null
}

/**
 * Grants (one per consent), their refresh-token family and their access tokens. Every revocation path returns the
 * `jti`s it revoked, so the caller can end the sessions bound to them, and tells the credential cache.
 */
export function oauthGrantsRepo(db: Db, changes: CredentialChanges) {
  const audit = auditRepo(db)
  // Cache-miss path of every OAuth-authenticated request: prepared once.
  const tokenState = db.select({
    jti: accessTokens.jti,
    revokedAt: accessTokens.revokedAt,
    grantRevokedAt: oauthGrants.revokedAt,
    grantId: oauthGrants.id,
    clientId: oauthGrants.clientId,
    membershipId: oauthGrants.membershipId,
    userId: oauthGrants.userId,
    organizationId: oauthGrants.organizationId,
    role: memberships.role,
    userDisabledAt: users.disabledAt,
  }).from(accessTokens)
    .innerJoin(oauthGrants, eq(oauthGrants.id, accessTokens.grantId))
    .innerJoin(users, eq(users.id, oauthGrants.userId))
    .leftJoin(memberships, and(eq(memberships.id, oauthGrants.membershipId), eq(memberships.userId, oauthGrants.userId)))
    .where(eq(accessTokens.jti, sql.placeholder('jti')))
    .prepare()

  function revokeGrantTokens(grantId: string, at: number): string[] {
    return db.update(accessTokens).set({ revokedAt: at })
      .where(and(eq(accessTokens.grantId, grantId), isNull(accessTokens.revokedAt)))
      .returning({ jti: accessTokens.jti }).all().map((r) => r.jti)
  }

  return {
    createGrant(row: Omit<OAuthGrant, 'lastUsedAt' | 'revokedAt' | 'revokedReason'>): OAuthGrant {
      const grant: OAuthGrant = { ...row, lastUsedAt: null, revokedAt: null, revokedReason: null }
      db.insert(oauthGrants).values(grant).run()
      return grant
    },
    grant(id: string): OAuthGrant | undefined {
      return db.select().from(oauthGrants).where(eq(oauthGrants.id, id)).get()
    },
    touchGrant(id: string, at: number): void {
      db.update(oauthGrants).set({ lastUsedAt: at }).where(eq(oauthGrants.id, id)).run()
    },
    /** Records when grants were last used, from the jti of their access tokens (write-behind from memory). */
    touchByJti(entries: ReadonlyArray<[string, number]>): void {
      for (const [jti, at] of entries) {
        db.update(oauthGrants).set({ lastUsedAt: at })
          .where(eq(oauthGrants.id, db.select({ id: accessTokens.grantId }).from(accessTokens).where(eq(accessTokens.jti, jti)))).run()
      }
    },
    addRefreshToken(row: Omit<RefreshToken, 'usedAt'>): void {
      db.insert(refreshTokens).values({ ...row, usedAt: null }).run()
    },
    refreshToken(hash: string): RefreshToken | undefined {
      return db.select().from(refreshTokens).where(eq(refreshTokens.hash, hash)).get()
    },
    /** Rotation's compare-and-set: true only for the first use of the token. */
    useRefreshToken(hash: string, at: number): boolean {
      return db.update(refreshTokens).set({ usedAt: at })
        .where(and(eq(refreshTokens.hash, hash), isNull(refreshTokens.usedAt))).run().changes === 1
    },
    addAccessToken(row: { jti: string; grantId: string; createdAt: number; expiresAt: number }): void {
      db.insert(accessTokens).values({ ...row, revokedAt: null }).run()
    },
    accessTokenState(jti: string): AccessTokenState | undefined {
      return tokenState.get({ jti })
    },
    /** Revokes one access token; returns whether it was live. */
    revokeAccessToken(jti: string, at: number): boolean {
      const done = db.update(accessTokens).set({ revokedAt: at })
        .where(and(eq(accessTokens.jti, jti), isNull(accessTokens.revokedAt))).run().changes === 1
      changes.bump()
      return done
    },
    /** Revokes a grant, its refresh tokens (by the grant's revocation) and its access tokens; returns their jtis. */
    revokeGrant(grantId: string, reason: string, at: number): string[] {
      const jtis = db.transaction(() => {
        db.update(oauthGrants).set({ revokedAt: at, revokedReason: reason })
          .where(and(eq(oauthGrants.id, grantId), isNull(oauthGrants.revokedAt))).run()
        return revokeGrantTokens(grantId, at)
      })
      changes.bump()
      return jtis
    },
    /**
     * The member withdraws a client: every live grant of theirs for it is revoked. Returns the revoked jtis. With `by`,
     * each grant's revocation is audited in its own organization, in the same transaction.
     */
    revokeClientForUser(userId: string, clientId: string, at: number, by?: CredentialActor): { grants: number; jtis: string[] } {
      const result = db.transaction(() => {
        const revoked = db.update(oauthGrants).set({ revokedAt: at, revokedReason: 'revoked by the user' })
          .where(and(eq(oauthGrants.userId, userId), eq(oauthGrants.clientId, clientId), isNull(oauthGrants.revokedAt)))
          .returning({ id: oauthGrants.id, organizationId: oauthGrants.organizationId, membershipId: oauthGrants.membershipId, scope: oauthGrants.scope }).all()
        const jtis: string[] = []
        for (const grant of revoked) {
          const tokens = revokeGrantTokens(grant.id, at)
          jtis.push(...tokens)
          if (!by) continue
          audit.add(credentialAuditEntry(by, {
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
      changes.bump()
      return result
    },
    /** The membership this user last authorized this client for (newest grant, even if since revoked), if any. */
    lastChosenMembership(userId: string, clientId: string): string | undefined {
      return db.select({ membershipId: oauthGrants.membershipId }).from(oauthGrants)
        .where(and(eq(oauthGrants.userId, userId), eq(oauthGrants.clientId, clientId)))
        .orderBy(desc(oauthGrants.createdAt), desc(oauthGrants.id)).limit(1).get()?.membershipId
    },
    /** Live grants of a user, one line per client and organization, for the account page. */
    authorizedClients(userId: string, now: number): AuthorizedClient[] {
      const rows = db.select({
        clientId: oauthGrants.clientId,
        clientName: oauthClients.name,
        organizationName: organizations.name,
        scopes: oauthGrants.scope,
        authorizedAt: oauthGrants.createdAt,
        lastUsedAt: oauthGrants.lastUsedAt,
      }).from(oauthGrants)
        .innerJoin(oauthClients, eq(oauthClients.id, oauthGrants.clientId))
        .innerJoin(organizations, eq(organizations.id, oauthGrants.organizationId))
        .where(and(eq(oauthGrants.userId, userId), isNull(oauthGrants.revokedAt), gt(oauthGrants.expiresAt, now)))
        .orderBy(desc(oauthGrants.createdAt)).all()
      const seen = new Set<string>()
      return rows.filter((r) => {
        const key = `${r.clientId}\u0000${r.organizationName}`
        if (seen.has(key)) return false
        seen.add(key)
        return true
      })
    },
    /** Drops access-token rows past their expiry and grants that ended (revoked or past their absolute expiry). */
    purge(now: number): number {
      const tokens = db.delete(accessTokens).where(lte(accessTokens.expiresAt, now)).run().changes
      const grants = db.delete(oauthGrants).where(or(lte(oauthGrants.expiresAt, now), lte(oauthGrants.revokedAt, now - 86_400_000))).run().changes
      return tokens + grants
    },
  }
}
